"""reports/line_search_evals.py: the per-iteration evaluation counts add up to what the
runner counts for the same seed (the same iterates, counted by the core either way)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

import crfopt
from crfopt.kernels.jit import JIT_ENABLED

ROOT = Path(__file__).resolve().parents[1]


def _module(monkeypatch, name: str = "line_search_evals"):
    """reports/<name>.py as a module."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "reports" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, name, mod)
    spec.loader.exec_module(mod)
    return mod


def test_counts_match_the_runners_total_for_the_same_seed(monkeypatch):
    mod = _module(monkeypatch)
    problem = crfopt.load_problem("synthetic", n=40, seed=3)
    name = "sdca-gap[sub_precision=0.01]"
    evals, where = mod.evaluations_per_iteration(problem, name, passes=3, seed=5)
    assert len(evals) == 3 * problem.n and set(np.unique(where)) == {0, 1, 2}
    assert evals.min() >= 0 and evals.max() >= 2  # searches that took several steps

    result = crfopt.run(
        crfopt.load_problem("synthetic", n=40, seed=3),
        "sdca-gap",
        seed=5,
        passes=3,
        sub_precision=0.01,
    )
    counters = result.meta["final_counters"]
    assert counters["iterations"] == len(evals)
    assert counters["ls_evals"] == int(evals.sum())

    rows = mod.table(evals, where)
    assert rows[-1].startswith(f"| all | {len(evals)} | ")
    assert rows[-1].endswith(f" | {evals.mean():.2f} |")
    shares = [float(c.strip().rstrip("%")) for c in rows[-1].split("|")[3:8]]
    assert abs(sum(shares) - 100) < 0.5


def test_first_step_count_leaves_the_run_as_it_was(monkeypatch):
    """reports/first_newton_step.py (docs/algorithms.md §7.14) wraps the NumPy path's
    search: the run it counts makes the same evaluations as one without it,
    and every search it sees is one of the run's iterations."""
    mod = _module(monkeypatch, "first_newton_step")
    problem = crfopt.load_problem("synthetic", n=40, seed=3)
    if JIT_ENABLED:
        with pytest.raises(RuntimeError, match="CRFOPT_DISABLE_JIT=1"):
            mod.count(problem, "sdca-gap", 10, 10)
        return
    blocks = mod.count(problem, "sdca-gap[sub_precision=0.1]", 100, 40, seed=5)
    assert [b["iterations"] for b in blocks] == [40, 40, 20]
    twin = crfopt.load_problem("synthetic", n=40, seed=3)
    with twin.initialization():
        opt = crfopt.get_registry().optimizer("sdca-gap").create(twin, 5, {"sub_precision": 0.1})
    opt.run_block(100)
    assert sum(b["ls_evals"] for b in blocks) == twin.counters.snapshot().ls_evals
    assert sum(b["searches"] for b in blocks) <= 100
    assert all(0 <= b["rejected"] <= b["searches"] for b in blocks)
    rows = mod.table(blocks)
    assert rows[-1].startswith(f"| all | {sum(b['searches'] for b in blocks)} | ")
