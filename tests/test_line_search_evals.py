"""reports/line_search_evals.py: the per-iteration evaluation counts add up to what the
runner counts for the same seed (the same iterates, counted by the core either way)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np

import crfopt

ROOT = Path(__file__).resolve().parents[1]


def _module(monkeypatch):
    spec = importlib.util.spec_from_file_location(
        "line_search_evals", ROOT / "reports" / "line_search_evals.py"
    )
    mod = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "line_search_evals", mod)
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
