"""Does a change of an optimizer's defaults keep its convergence per pass? Measured.

A speed change may move the iterates within the method's own tolerance (SDCA's
``sub_precision``, OEG's accept rounding) provided the convergence *per effective pass*
stays as it was: over the same seeds, the median relative sub-optimality
(P(w) − P*)/P(0) of the new defaults after each of a few pass counts must lie within
the old defaults' min–max over those seeds. :func:`per_pass_check` runs both and says
so per pass count; ``tests/test_convergence_check.py`` runs it on a synthetic problem,
``benchmarks/convergence_check.py`` on OCR, CoNLL-2000 and NER-nl.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from crfopt.bench.optimum import reference_optimum
from crfopt.bench.runner import Budget, run
from crfopt.core.problem import CRFProblem

__all__ = ["PASSES", "SEEDS", "per_pass_check", "relative_suboptimality_at"]

#: the pass counts and seeds the check uses unless told otherwise
PASSES = (5, 10, 20)
SEEDS = (0, 1, 2)


def relative_suboptimality_at(
    problem: CRFProblem,
    optimizer: str,
    params: Mapping[str, Any],
    seed: int,
    passes: Sequence[float],
    p_star: float,
) -> list[float]:
    """(P(w) − P*)/P(0) at the first checkpoint at or past each of ``passes``."""
    result = run(
        problem,
        optimizer,
        seed=seed,
        params=dict(params),
        budget=Budget(passes=float(max(passes))),
        checkpoints=[float(x) for x in passes],
        p_star=p_star,
    )
    trace = result.trace
    p0 = problem.primal_at_zero()
    out = []
    for x in passes:
        reached = trace[trace["effective_passes"] >= x - 1e-9]
        if reached.empty:  # converged (or stopped) before x: its last value holds
            reached = trace.tail(1)
        out.append(float(reached["suboptimality"].iloc[0]) / p0)
    return out


def per_pass_check(
    problem: CRFProblem,
    optimizer: str,
    old: Mapping[str, Any],
    new: Mapping[str, Any],
    *,
    seeds: Sequence[int] = SEEDS,
    passes: Sequence[float] = PASSES,
    p_star: float | None = None,
) -> pd.DataFrame:
    """One row per pass count: the old defaults' min, median and max relative
    sub-optimality over ``seeds``, the new defaults' median (and min, max), ``within``
    (the new median lies in the old min–max) and ``not_worse`` (it is at most the old
    max: outside the range only on the faster side). ``old``/``new``: parameter overrides of
    ``optimizer`` (``{}`` is its registered defaults)."""
    if p_star is None:
        p_star = reference_optimum(problem).p_star
    runs = {
        label: np.array(
            [
                relative_suboptimality_at(problem, optimizer, params, s, passes, p_star)
                for s in seeds
            ]
        )
        for label, params in (("old", old), ("new", new))
    }
    rows = []
    for j, x in enumerate(passes):
        o, n = runs["old"][:, j], runs["new"][:, j]
        rows.append(
            {
                "passes": x,
                "old_min": float(o.min()),
                "old_median": float(np.median(o)),
                "old_max": float(o.max()),
                "new_median": float(np.median(n)),
                "new_min": float(n.min()),
                "new_max": float(n.max()),
                "within": bool(o.min() <= np.median(n) <= o.max()),
                # the direction when outside: a change that converges faster per pass is
                # reported as such, not as a regression
                "not_worse": bool(np.median(n) <= o.max()),
            }
        )
    return pd.DataFrame(rows)
