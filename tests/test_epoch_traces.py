"""The speed work on the optimizers' epochs leaves what they compute unchanged.

tests/golden/traces.json holds, for every registered optimizer, the trace (counted work,
primal, dual, duality gap at fixed checkpoints) and the final weights of a seeded run on
two small synthetic problems, written by tests/golden/make_traces.py from the commit
before that work (the file records which). Each run here must reproduce them to 1e-9:
an optimization that changes an iterate beyond rounding fails, whatever it gains.

Issue 47's one exception: a change that moves an optimizer's iterates within the
method's own tolerance, once the per-pass convergence check has admitted it, re-records
that optimizer's entries once (``make_traces.py --rerecord``); the file's ``rerecorded``
list gives each such commit and its reason.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

import crfopt

from conftest import one_kernel_thread

GOLDEN = Path(__file__).with_name("golden")
sys.path.insert(0, str(GOLDEN))
import make_traces  # noqa: E402

DATA = json.loads((GOLDEN / "traces.json").read_text())
RTOL = 1e-9


@pytest.fixture(scope="module")
def problems():
    return make_traces.problems()


@pytest.fixture(scope="module", autouse=True)
def _one_thread():
    """The golden runs used one kernel thread; the batch reductions' order follows it."""
    with one_kernel_thread():
        yield


def test_every_optimizer_has_a_golden_trace():
    """A new optimizer is added with ``make_traces.py --add NAME`` (existing entries kept)."""
    names = {key.split("/")[0] for key in DATA["runs"]}
    assert set(crfopt.get_registry().optimizers) <= names


@pytest.mark.parametrize("key", sorted(DATA["runs"]))
def test_trace_unchanged(problems, key):
    name, kind = key.split("/")
    if name not in crfopt.get_registry().optimizers:
        pytest.skip(f"{name} is no longer registered")
    want = DATA["runs"][key]
    got = make_traces.trace_of(problems[kind], name)
    assert got["status"] == want["status"]
    for column, values in want["columns"].items():
        a = np.array([np.nan if v is None else v for v in got["columns"][column]], float)
        b = np.array([np.nan if v is None else v for v in values], float)
        np.testing.assert_allclose(a, b, rtol=RTOL, atol=RTOL, equal_nan=True, err_msg=column)
    np.testing.assert_allclose(got["w"], want["w"], rtol=RTOL, atol=RTOL, err_msg="weights")
