"""Seconds per SDCA epoch (n iterations) against one full oracle pass, same run.

The target of the SDCA issue is an epoch ≤ 1.5 full passes. Measured single-threaded
(numba and BLAS at 1 thread), after one untimed epoch (JIT warm-up, first visits).
"""

from __future__ import annotations

import numba
import numpy as np
import pytest

import crfopt
from crfopt import kernels

from conftest import bench_problem, record_epochs, threads, time_full_pass

# sub_precision=0.5: a single Newton step, i.e. one line-search evaluation per iteration,
# so the difference to sdca-gap is the price of the extra ~1.6 evaluations
VARIANTS = ["sdca", "sdca-gap", "sdca-gap[start=half]", "sdca-gap[sub_precision=0.5]"]


@numba.njit(cache=False)
def _oracle_sweep(data, counters, w, K, L):
    """n counted oracles with log and linear marginals: the floor of an SDCA epoch."""
    log_nodes = np.empty((L, K))
    log_edges = np.empty((max(L - 1, 1), K, K))
    nodes = np.empty((L, K))
    edges = np.empty((max(L - 1, 1), K, K))
    total = 0.0
    for i in range(data.offsets.shape[0] - 1):
        total += kernels.oracle_marginals(data, counters, i, w, log_nodes, log_edges, nodes, edges)[
            0
        ]
    return total


@pytest.mark.parametrize("name", ["ocr", "conll2000"])
def test_sdca_epoch(name, recorder):
    problem, label = bench_problem(name)
    group = f"SDCA epoch vs full oracle pass, {label} (n={problem.n}, N={problem.n_tokens})"
    with threads(1):
        recorder(group, "full oracle pass (value+gradient)", time_full_pass(problem))
        if crfopt.JIT_ENABLED:
            recorder(group, "n oracles with marginals (no update)", _time_sweep(problem))
        record_epochs(recorder, group, problem, VARIANTS)


def _time_sweep(problem, repeats: int = 3) -> float:
    import time

    q = problem.with_lam(problem.lam)
    w = np.random.default_rng(0).normal(scale=0.01, size=q.dim)
    L = int(np.diff(q.data.offsets).max())
    args = (q.data, q.counters.array, w, q.n_labels, L)
    _oracle_sweep(*args)
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        _oracle_sweep(*args)
        best = min(best, time.perf_counter() - t0)
    return best
