"""The numba and the pure-NumPy kernels agree along every optimizer's path.

To 1e-10, as docs/algorithms.md §5.1 asks.

Every registered optimizer runs 100 iterations on a sparse and a dense problem on the
NumPy path while every kernel call is recorded; each call is then replayed through the
compiled twin with the same inputs, and its outputs must agree to 1e-10. Optimizers
that never branch on a computed value must in addition reach the same weights on both
paths (kernel_replay.TRAJECTORY_METHODS says which, and why the others cannot).

The NumPy path needs ``CRFOPT_DISABLE_JIT`` at import time, so one side always runs in a
subprocess: the recording when this suite runs compiled, the replay when it runs on the
NumPy path.
"""

from __future__ import annotations

import importlib.util
import os
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import kernel_replay as kr
import numpy as np
import pytest

import crfopt
from crfopt.kernels.jit import JIT_ENABLED

SCRIPT = Path(__file__).with_name("kernel_replay.py")
KINDS = ("sparse", "dense")


def _subprocess(args: list[str], jit: bool) -> None:
    env = {k: v for k, v in os.environ.items() if k != "CRFOPT_DISABLE_JIT"}
    if not jit:
        env["CRFOPT_DISABLE_JIT"] = "1"
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), *args], env=env, timeout=900, capture_output=True, text=True
    )
    if proc.returncode != 0:
        raise AssertionError(f"{SCRIPT.name} {args[0]} failed:\n{proc.stderr[-4000:]}")


@pytest.fixture(scope="module")
def both_paths(tmp_path_factory) -> tuple[dict[str, Any], dict[str, Any]]:
    """(NumPy side: runs and recorded kernel calls, JIT side: replay report and runs)."""
    if importlib.util.find_spec("numba") is None:
        pytest.skip("numba is not installed: there is no compiled twin to compare with")
    tmp = tmp_path_factory.mktemp("replay")
    rec_path, jit_path = tmp / "recording.pkl", tmp / "jit.pkl"
    if JIT_ENABLED:
        _subprocess(["record", str(rec_path)], jit=False)
        with open(rec_path, "rb") as f:
            recording = pickle.load(f)
        jit_side = kr.jit_side(recording)
    else:
        recording = kr.record(sorted(crfopt.get_registry().optimizers))
        with open(rec_path, "wb") as f:
            pickle.dump(recording, f, protocol=pickle.HIGHEST_PROTOCOL)
        _subprocess(["jit-side", str(rec_path), str(jit_path)], jit=True)
        with open(jit_path, "rb") as f:
            jit_side = pickle.load(f)
    return recording, jit_side


def test_every_optimizer_is_classified():
    """Each registered optimizer is compared one way or the other, by a written-down rule.

    A new optimizer fails here until it is added to kernel_replay.TRAJECTORY_METHODS (no
    branch on computed values) or REPLAY_METHODS.
    """
    assert not kr.TRAJECTORY_METHODS & kr.REPLAY_METHODS
    assert set(crfopt.get_registry().optimizers) == kr.TRAJECTORY_METHODS | kr.REPLAY_METHODS


def test_every_run_finished(both_paths):
    recording, jit_side = both_paths
    expected = {f"{m}/{k}" for m in kr.TRAJECTORY_METHODS | kr.REPLAY_METHODS for k in KINDS}
    assert set(recording["runs"]) == expected
    assert set(jit_side["runs"]) == {f"{m}/{k}" for m in kr.TRAJECTORY_METHODS for k in KINDS}
    for side, runs in (("NumPy", recording["runs"]), ("JIT", jit_side["runs"])):
        for key, r in runs.items():
            assert r["status"] not in kr.BAD_STATUSES, (side, key, r["status"], r["error"])
            assert r["iterations"] > 0, (side, key)
            assert np.all(np.isfinite(r["w"])), (side, key)


def test_recording_saw_every_kernel_call(both_paths):
    recording, _ = both_paths
    # An inference kernel reached some other way than the wrapped module attributes
    # would move the data's audit cell between two recorded calls.
    assert not recording["audit_gaps"], recording["audit_gaps"][:5]
    inference = {
        "oracle",
        "oracle_marginals",
        "oracle_sums",
        "oracle_sums_scores",
        "oracle_scores",
        "oracle_scores_bonus",
        "forward",
        "forward_scores",
        "batch_value_grad",
    }
    for key in recording["runs"]:
        names = {c[0] for c in recording["calls"].get(key, [])}
        assert names & inference, f"{key}: no inference kernel call recorded ({sorted(names)})"


def test_jit_replays_numpy_kernel_calls_to_1e10(both_paths):
    """The compiled twin, given each recorded call's inputs, returns the NumPy outputs."""
    recording, jit_side = both_paths
    rep = jit_side["replay"]
    assert rep["per_run"] == {k: len(v) for k, v in recording["calls"].items()}
    assert rep["mismatched_calls"] == 0, (
        f"{rep['mismatched_calls']} of {sum(rep['per_run'].values())} replayed kernel calls "
        "differ between the twins:\n" + "\n".join(rep["mismatches"])
    )


@pytest.mark.parametrize("method", sorted(kr.TRAJECTORY_METHODS))
@pytest.mark.parametrize("kind", KINDS)
def test_branch_free_trajectories_agree_to_1e10(both_paths, method, kind):
    recording, jit_side = both_paths
    key = f"{method}/{kind}"
    npy, jit = recording["runs"][key], jit_side["runs"][key]
    assert npy["iterations"] == jit["iterations"] == kr.ITERATIONS
    w = npy["w"]
    err = np.max(np.abs(jit["w"] - w)) / max(1.0, np.max(np.abs(w)))
    assert err <= 1e-10, f"{key}: weights differ by {err:.3g} (relative) after 100 iterations"
