"""Viterbi decoding (docs/algorithms.md §1.6): one chain, and every sequence of a split."""

from __future__ import annotations

import numba
import numpy as np

from crfopt.kernels._numba.batch import all_unary
from crfopt.kernels._numba.flags import NJIT
from crfopt.kernels._numba.scores import transition_matrix


@numba.njit(**NJIT)
def chain_viterbi(unary, transition, T, K, out):
    """Max-product decoding; ties go to the smallest label index (§1.6)."""
    delta = np.empty((T, K))
    back = np.zeros((T, K), dtype=np.int64)
    for k in range(K):
        delta[0, k] = unary[0, k]
    for t in range(1, T):
        for l in range(K):
            best = delta[t - 1, 0] + transition[0, l]
            arg = 0
            for k in range(1, K):
                v = delta[t - 1, k] + transition[k, l]
                if v > best:
                    best = v
                    arg = k
            delta[t, l] = best + unary[t, l]
            back[t, l] = arg
    best = delta[T - 1, 0]
    arg = 0
    for k in range(1, K):
        if delta[T - 1, k] > best:
            best = delta[T - 1, k]
            arg = k
    out[T - 1] = arg
    for t in range(T - 1, 0, -1):
        arg = back[t, arg]
        out[t - 1] = arg
    return best


@numba.njit(parallel=True, **NJIT)
def _batch_viterbi_impl(data, theta, transition, out):
    n = data.offsets.shape[0] - 1
    K = data.n_labels
    for i in numba.prange(n):
        s = data.offsets[i]
        e = data.offsets[i + 1]
        chain_viterbi(theta[s:e], transition, e - s, K, out[s:e])


@numba.njit(**NJIT)
def batch_viterbi(data, w, out):
    """Viterbi labels of every token (uncounted)."""
    theta = all_unary(data, w)
    _batch_viterbi_impl(data, theta, transition_matrix(data, w), out)
