"""The initial dual marginals μ⁰ of the dual methods (SDCA, OEG; docs/algorithms.md §3.1
"Initialization", §5.5).

The dual variables are the log-marginals μ_i of every sequence, kept in a
:class:`crfopt.DualMarginals` (float64, or float32 for large label sets). Never start at
the ground truth δ_{y_i} (infinite curvature) nor at uniform marginals (huge ŵ,
LPL18 App. A.1): the default ``gibbs`` initialization puts score c on every
ground-truth part and takes the marginals of that chain, which costs one counted
``oracle_scores`` call per sequence (charged to ``init_oracle_calls`` by the runner).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from crfopt import kernels
from crfopt.core import duality
from crfopt.core.problem import CRFProblem, DualMarginals
from crfopt.kernels.jit import jit

INITIALIZATIONS = ("gibbs", "mixture", "uniform")


@jit
def gibbs_scores(data, i, c, unary, edges):
    """Score tables with +c on every ground-truth node and edge entry, 0 elsewhere."""
    s = data.offsets[i]
    T = data.offsets[i + 1] - s
    unary[:T] = 0.0
    edges[: max(T - 1, 0)] = 0.0
    for t in range(T):
        unary[t, data.y[s + t]] = c
    for t in range(T - 1):
        edges[t, data.y[s + t], data.y[s + t + 1]] = c


@jit
def _gibbs_all(data, counters, c, log_nodes, log_edges):
    n = data.offsets.shape[0] - 1
    K = data.n_labels
    L = data.max_len
    unary = np.empty((L, K))
    edges = np.empty((max(L - 1, 1), K, K))
    ln = np.empty((L, K))
    le = np.empty((max(L - 1, 1), K, K))
    for i in range(n):
        s = data.offsets[i]
        e = data.offsets[i + 1]
        T = e - s
        gibbs_scores(data, i, c, unary, edges)
        kernels.oracle_scores(data, counters, i, unary[:T], edges[: max(T - 1, 0)], ln, le)
        for t in range(T):
            for k in range(K):
                log_nodes[s + t, k] = ln[t, k]
        for t in range(T - 1):
            for k in range(K):
                for l in range(K):
                    log_edges[s - i + t, k, l] = le[t, k, l]


def initial_dual(
    problem: CRFProblem,
    init: str = "gibbs",
    *,
    c: float = 10.0,
    epsilon: float = 1e-6,
    dtype: Any = np.float64,
) -> DualMarginals:
    """Initial dual marginals μ⁰ of every sequence.

    Parameters
    ----------
    init : {"gibbs", "mixture", "uniform"}
        ``gibbs``: marginals of the chain with score ``c`` on the ground-truth parts
        (REF ``initializer.dirac``; SBA15's OEG-10 for c = 10), one counted
        ``oracle_scores`` call per sequence. ``mixture``: (1-ε) δ_{y_i} + ε uniform, node
        by node and edge by edge (LPL18 eq. 21), no oracle call. ``uniform``: every
        labeling equally likely (LP17 Alg. 2; for ablations), no oracle call.
    c : float
        Score of the ground-truth parts for ``gibbs`` (§3.1 default 10).
    epsilon : float
        Weight of the uniform part for ``mixture`` (§7.2 [choice] 1e-6).
    dtype : float64 or float32
        Storage type.
    """
    if init not in INITIALIZATIONS:
        raise ValueError(f"unknown initialization {init!r}; choose one of {INITIALIZATIONS}")
    mu = duality.new_dual(problem, dtype=dtype)
    K = problem.n_labels
    data = problem.data
    if init == "gibbs":
        # written in place, sequence by sequence: no full-size temporary (the edge
        # tables are the largest arrays of a dual method; float32 storage is converted
        # on assignment)
        _gibbs_all(data, problem.counters.array, float(c), mu.log_nodes, mu.log_edges)
        return mu
    if init == "uniform":
        mu.log_nodes[...] = -math.log(K)
        mu.log_edges[...] = -2.0 * math.log(K)
        return mu
    # mixture: (1-ε) on the truth plus ε spread uniformly, in log space
    y = np.asarray(data.y)
    off_node = math.log(epsilon / K)
    on_node = math.log(1.0 - epsilon + epsilon / K)
    mu.log_nodes[...] = off_node
    mu.log_nodes[np.arange(len(y)), y] = on_node
    off_edge = math.log(epsilon / K**2)
    on_edge = math.log(1.0 - epsilon + epsilon / K**2)
    mu.log_edges[...] = off_edge
    offs = np.asarray(data.offsets)
    not_last = np.ones(len(y), dtype=bool)
    not_last[offs[1:] - 1] = False
    tok = np.flatnonzero(not_last)
    seq = np.searchsorted(offs, tok, side="right") - 1
    mu.log_edges[tok - seq, y[tok], y[tok + 1]] = on_edge
    return mu
