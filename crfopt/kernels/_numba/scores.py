"""Score tables of one sequence: the weight blocks as views, unary and ground-truth scores.

Scores are linear maps of ``w`` (docs/algorithms.md §1.1): no inference, nothing counted.
Names used throughout the kernels: score tables are ``unary`` (T × K), ``pairwise``
((T-1) × K × K, one table per position) and ``transition`` (K × K, shared by every
position); marginals are ``nodes`` and ``edges`` (linear) or ``log_nodes`` and
``log_edges``.
"""

from __future__ import annotations

import numba
import numpy as np

from crfopt.kernels._numba.flags import NJIT
from crfopt.kernels.prefetch import prefetch_read

# How many features ahead ``unary_scores`` prefetches w's emission rows (sparse problems).
PREFETCH_FEATURES = 8


@numba.njit(**NJIT)
def support_bounds(data, i):
    """Range of sequence ``i``'s distinct attributes in ``data.support``."""
    if data.dense:
        return 0, data.n_kernel_attributes
    return data.support_ptr[i], data.support_ptr[i + 1]


@numba.njit(**NJIT)
def emission_matrix(data, w):
    """The emission+bias block of ``w`` as an (n_attributes × K) view."""
    K = data.n_labels
    return w[: data.n_kernel_attributes * K].reshape((data.n_kernel_attributes, K))


@numba.njit(**NJIT)
def transition_matrix(data, w):
    """The transition block of ``w`` as a K × K view (row: label at t, column: at t+1)."""
    K = data.n_labels
    A = data.n_kernel_attributes
    return w[A * K : A * K + K * K].reshape((K, K))


@numba.njit(inline="always", **NJIT)
def _token_scores(data, i, M, rows, out, ahead):
    """out[t] = φ_{i,t} · M into ``out[:T]``, returns T: M has one row per attribute
    (``rows`` = ``data.indices``) or per support entry (``rows`` = ``data.local``).
    Inlined into both callers, so each compiles to the loop it had before. With
    ``ahead`` > 0 the row ``ahead`` features on is prefetched (M = w's emission block,
    larger than the caches on sparse problems, read in no order the hardware guesses)."""
    K = data.n_labels
    s = data.offsets[i]
    e = data.offsets[i + 1]
    T = e - s
    if data.dense:
        np.dot(data.X[s:e], M, out[:T])
    else:
        stop = data.indptr[e] - ahead
        for t in range(T):
            for k in range(K):
                out[t, k] = 0.0
            for p in range(data.indptr[s + t], data.indptr[s + t + 1]):
                if ahead > 0 and p < stop:
                    prefetch_read(M, rows[p + ahead] * K, K)
                r = rows[p]
                v = data.values[p]
                for k in range(K):
                    out[t, k] += v * M[r, k]
    return T


@numba.njit(**NJIT)
def unary_scores(data, i, w, out):
    """θ_{i,t}(k) = ⟨W_E[k], φ_{i,t}⟩ + bias terms into ``out[:T]``; returns T (§1.1).

    Not an oracle call: the scores are a linear map of ``w``.
    """
    return _token_scores(data, i, emission_matrix(data, w), data.indices, out, PREFETCH_FEATURES)


@numba.njit(**NJIT)
def local_scores(data, i, E_loc, out):
    """Unary scores of a direction given on sequence ``i``'s support (|S_i| × K)."""
    return _token_scores(data, i, E_loc, data.local, out, 0)


@numba.njit(**NJIT)
def truth_score(data, i, unary, transition):
    """s_w(x_i, y_i) = Σ_t θ_t(y_t) + Σ_t W_T[y_t, y_{t+1}]."""
    s = data.offsets[i]
    T = data.offsets[i + 1] - s
    total = 0.0
    for t in range(T):
        total += unary[t, data.y[s + t]]
    for t in range(T - 1):
        total += transition[data.y[s + t], data.y[s + t + 1]]
    return total
