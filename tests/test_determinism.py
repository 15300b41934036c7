"""The numba and the pure-NumPy kernels drive every optimizer along the same path."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from determinism_runs import weights_after_first_iterations

from crfopt._jit import JIT_ENABLED


@pytest.fixture(scope="module")
def both_paths(tmp_path_factory):
    here = weights_after_first_iterations()
    out = tmp_path_factory.mktemp("det") / "other.npz"
    env = {k: v for k, v in os.environ.items() if k != "CRFOPT_DISABLE_JIT"}
    if JIT_ENABLED:
        env["CRFOPT_DISABLE_JIT"] = "1"
    script = Path(__file__).with_name("determinism_runs.py")
    subprocess.run([sys.executable, str(script), str(out)], check=True, env=env, timeout=900)
    with np.load(out) as z:
        other = {k: z[k] for k in z.files}
    return here, other


def test_every_optimizer_is_covered(both_paths):
    import crfopt

    here, other = both_paths
    names = {k.split("/")[0] for k in here}
    assert names == set(crfopt.get_registry().optimizers)
    assert set(here) == set(other)


def test_jit_and_numpy_iterates_agree_to_1e10(both_paths):
    here, other = both_paths
    worst = {}
    for key, w in here.items():
        if key.endswith("/iterations"):
            assert other[key][0] == w[0], key  # same number of iterations done
            continue
        worst[key] = np.max(np.abs(w - other[key])) / max(1.0, np.max(np.abs(w)))
    bad = {k: v for k, v in worst.items() if not v <= 1e-10}
    assert not bad, bad
