"""Features and directions on one sequence (uncounted: linear algebra, no inference).

A direction on sequence ``i`` is a pair (``E_loc`` of shape |S_i| × K on the sequence's
distinct attributes ``data.support[lo:hi]``, ``trans_loc`` K × K); every stochastic
method forms its step as one (docs/algorithms.md §1.5), moves w along it and takes its
norm and inner product with w at the cost of the support, not of d.
"""

from __future__ import annotations

import numba
import numpy as np

from crfopt.kernels._numba.flags import NJIT
from crfopt.kernels._numba.scores import emission_matrix, support_bounds, transition_matrix


@numba.njit(**NJIT)
def expected_emission(data, i, node_weights, out_loc):
    """out_loc[j, k] = Σ_t node_weights[t, k] · φ_{i,t}[S_i[j]] (emission+bias block of
    E[F] on the sequence's support; with signed weights, of a difference of marginals)."""
    K = data.n_labels
    s = data.offsets[i]
    e = data.offsets[i + 1]
    T = e - s
    if data.dense:
        np.dot(data.X[s:e].T, node_weights[:T], out_loc)
        return
    lo, hi = support_bounds(data, i)
    for j in range(hi - lo):
        for k in range(K):
            out_loc[j, k] = 0.0
    for t in range(T):
        for p in range(data.indptr[s + t], data.indptr[s + t + 1]):
            j = data.local[p]
            v = data.values[p]
            for k in range(K):
                out_loc[j, k] += v * node_weights[t, k]


@numba.njit(**NJIT)
def truth_transitions(data, i, out):
    """Transition counts of the ground truth of sequence ``i`` into ``out`` (K × K)."""
    s = data.offsets[i]
    T = data.offsets[i + 1] - s
    out[:, :] = 0.0
    for t in range(T - 1):
        out[data.y[s + t], data.y[s + t + 1]] += 1.0


@numba.njit(inline="always", **NJIT)
def node_residual(data, i, nodes, out):
    """out[:T] = ν_i's node marginals ``nodes[:T]`` minus the one-hot ground truth: D, with
    ∇ℓ_i's emission block X_iᵀD (§1.5). Returns T."""
    K = data.n_labels
    s0 = data.offsets[i]
    T = data.offsets[i + 1] - s0
    y = data.y
    for t in range(T):
        for k in range(K):
            out[t, k] = nodes[t, k]
        out[t, y[s0 + t]] -= 1.0
    return T


@numba.njit(inline="always", **NJIT)
def difference_direction(data, i, node_diff, P, Q, div, E_loc, trans_loc):
    """The direction of a difference of marginals, E_p F − E_q F, on sequence i's support.

    ``node_diff[:T]`` = p_t − q_t of the node marginals (formed by the caller, who may
    have scaled it) gives the emission+bias part ``E_loc`` = X_iᵀ node_diff; the summed
    pairwise marginals P = Σ_t p_t, Q = Σ_t q_t give ``trans_loc`` = (P − Q)/``div``
    (div = 1 is exact). The ground truth is the marginal of its one-hot chain, so ∇ℓ_i,
    SAG's gradient change, SDCA's and OEG's dual directions are all this (§1.5, §3).
    """
    K = data.n_labels
    expected_emission(data, i, node_diff, E_loc)
    for k in range(K):
        for l in range(K):
            trans_loc[k, l] = (P[k, l] - Q[k, l]) / div


@numba.njit(inline="always", **NJIT)
def local_gradient(data, i, nodes, edge_sum, work, truth, E_loc, trans_loc):
    """∇ℓ_i = E_ν F − F(x_i, y_i) on sequence i's support; returns ‖∇ℓ_i‖² (§1.5, §3.4).

    ``nodes[:T]`` / ``edge_sum`` are ν_i's node marginals and summed pairwise marginals
    (as from ``oracle_sums``); the emission+bias part goes to ``E_loc`` (|S_i|×K, rows
    ``data.support[lo:hi]``), the transition part to ``trans_loc`` (K×K). ``work``
    (≥ T×K) and ``truth`` (K×K) are scratch; ``nodes`` is left unchanged. Inlined into
    the caller's loop (it runs once per stochastic step).
    """
    node_residual(data, i, nodes, work)
    truth_transitions(data, i, truth)
    difference_direction(data, i, work, edge_sum, truth, 1.0, E_loc, trans_loc)
    return norm2_local(data, i, E_loc, trans_loc)


@numba.njit(inline="always", **NJIT)
def norm2_local(data, i, E_loc, trans_loc):
    """‖d‖² of a direction given on sequence i's support and the transition block."""
    lo, hi = support_bounds(data, i)
    K = data.n_labels
    e = _lane_sums(E_loc, None, 0, E_loc, hi - lo, K, 0.0, 0.0, 0.0, 0.0)
    t = _lane_sums(trans_loc, None, 0, trans_loc, K, K, 0.0, 0.0, 0.0, 0.0)
    return ((e[0] + e[1]) + (e[2] + e[3])) + ((t[0] + t[1]) + (t[2] + t[3]))


@numba.njit(inline="always", **NJIT)
def _lane_sums(X, x_rows, x_lo, Y, n, K, a0, a1, a2, a3):
    """Add Σ_{j<n} X[r_j] · Y[j] to four running sums, one per column class k mod 4 (the
    last K mod 4 columns join the first); r_j = x_rows[x_lo + j], or j if x_rows is None.

    One running sum waits for each addition to finish before the next: on OCR's
    3,400-entry support, SAG's gradient beyond its matrix product took 4.0 µs with one
    sum, 2.2 µs with four. The order is fixed in the source, so the result does not
    depend on how LLVM vectorizes it (2-D indexing throughout: a row view per row would
    take and release a reference each time).
    """
    K4 = K - K % 4
    for j in range(n):
        r = j if x_rows is None else x_rows[x_lo + j]
        for k in range(0, K4, 4):
            a0 += X[r, k] * Y[j, k]
            a1 += X[r, k + 1] * Y[j, k + 1]
            a2 += X[r, k + 2] * Y[j, k + 2]
            a3 += X[r, k + 3] * Y[j, k + 3]
        for k in range(K4, K):
            a0 += X[r, k] * Y[j, k]
    return a0, a1, a2, a3


@numba.njit(**NJIT)
def add_local(data, i, w, scale, E_loc, trans_loc):
    """w += scale · (E_loc on S_i, trans_loc on the transition block)."""
    K = data.n_labels
    U = emission_matrix(data, w)
    lo, hi = support_bounds(data, i)
    for j in range(hi - lo):
        a = data.support[lo + j]
        for k in range(K):
            U[a, k] += scale * E_loc[j, k]
    W = transition_matrix(data, w)
    for k in range(K):
        for l in range(K):
            W[k, l] += scale * trans_loc[k, l]


@numba.njit(**NJIT)
def dot_local(data, i, w, E_loc, trans_loc):
    """⟨w, d⟩ for a direction d given on S_i and the transition block (the support's rows,
    then the transition block's, in one set of :func:`_lane_sums`)."""
    K = data.n_labels
    U = emission_matrix(data, w)
    W = transition_matrix(data, w)
    lo, hi = support_bounds(data, i)
    a0, a1, a2, a3 = _lane_sums(U, data.support, lo, E_loc, hi - lo, K, 0.0, 0.0, 0.0, 0.0)
    a0, a1, a2, a3 = _lane_sums(W, None, 0, trans_loc, K, K, a0, a1, a2, a3)
    return (a0 + a1) + (a2 + a3)
