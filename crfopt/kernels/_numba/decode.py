"""Viterbi decoding (docs/algorithms.md §1.6): one chain, every sequence of a split, and a
trained model's sequences given as a CSR over their tokens (``csr_viterbi``,
``csr_node_marginals``: the tagger's path, ``crfopt tag`` and :class:`crfopt.CRF`).

The CSR functions take the weights as a model holds them, so no problem, weight vector or
kernel data is built around new text: ``offsets`` (n+1 token offsets of the sequences),
``indptr`` / ``indices`` / ``values`` (the tokens' CSR), ``emission`` (A × K, one row per
attribute: the transpose of :attr:`crfopt.Model.emission`), ``bias`` (K × 3: count,
first, last; K × 0 for a model without the bias block) and ``transition`` (K × K, row:
label at t, column: at t+1). Each chunk of sequences gets its unary scores θ_t(k) =
Σ_p v_p W_E[k, a_p] + bias terms (§1.1), summed in the order of the problem's own kernels
(attributes in the order given, then the bias block's count, first and last rows), so a
model decodes here exactly as :meth:`crfopt.CRFProblem.predict` decodes it; then every
sequence of the chunk is decoded by the chain kernels the evaluation uses. Batches of
``PARALLEL_FROM`` tokens or more run on numba's threads over chunks of about equal
tokens, smaller ones on the calling thread.
"""

from __future__ import annotations

import numba
import numpy as np

from crfopt.kernels._numba.batch import _chunk_bounds, all_unary
from crfopt.kernels._numba.chain import chain_marginal_sums
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


#: Chunks of about equal tokens a CSR batch is cut into (enough for a dynamic schedule to
#: even out two threads; each chunk allocates its own score table).
CSR_CHUNKS = 32
#: CSR batches of fewer tokens are decoded on the calling thread: waking numba's threads
#: cost more than decoding a sentence (a per-sentence predict loop on 2 threads took
#: 16 ms a sentence on the loaded 2-core machine, 2 ms on one).
PARALLEL_FROM = 4096


@numba.njit(**NJIT)
def _csr_unary(offsets, indptr, indices, values, emission, bias, i_lo, i_hi, theta):
    """θ of the tokens of sequences i_lo..i_hi-1 into ``theta`` (row 0: their first)."""
    K = emission.shape[1]
    r0 = offsets[i_lo]
    has_bias = bias.shape[1] > 0
    for i in range(i_lo, i_hi):
        s = offsets[i]
        e = offsets[i + 1]
        for r in range(s, e):
            row = theta[r - r0]
            for k in range(K):
                row[k] = 0.0
            for p in range(indptr[r], indptr[r + 1]):
                a = indices[p]
                v = values[p]
                for k in range(K):
                    row[k] += v * emission[a, k]
            if has_bias:
                # the problem's kernels read the bias block as attributes A..A+2, after
                # every other attribute of the token: the same additions
                for k in range(K):
                    row[k] += bias[k, 0]
                if r == s:
                    for k in range(K):
                        row[k] += bias[k, 1]
                if r == e - 1:
                    for k in range(K):
                        row[k] += bias[k, 2]


@numba.njit(**NJIT)
def _csr_chunk(
    offsets, indptr, indices, values, emission, bias, transition, labels, nodes, i_lo, i_hi
):
    """Sequences i_lo..i_hi-1: their Viterbi labels into ``labels``, or, when ``labels``
    is empty, their node marginals into ``nodes``."""
    K = emission.shape[1]
    r0 = offsets[i_lo]
    theta = np.empty((offsets[i_hi] - r0, K))
    edge_sum = np.zeros((K, K))  # the pairwise sums come along; not needed here
    _csr_unary(offsets, indptr, indices, values, emission, bias, i_lo, i_hi, theta)
    for i in range(i_lo, i_hi):
        s, e = offsets[i], offsets[i + 1]
        if e == s:
            continue
        th = theta[s - r0 : e - r0]
        if labels.shape[0] > 0:
            chain_viterbi(th, transition, e - s, K, labels[s:e])
        else:
            chain_marginal_sums(th, transition, e - s, K, nodes[s:e], edge_sum)


@numba.njit(parallel=True, **NJIT)
def _csr_parallel(offsets, indptr, indices, values, emission, bias, transition, labels, nodes):
    bounds = _chunk_bounds(offsets, CSR_CHUNKS)  # of about equal tokens
    for ch in numba.prange(bounds.shape[0] - 1):
        _csr_chunk(
            offsets, indptr, indices, values, emission, bias, transition, labels, nodes,
            bounds[ch], bounds[ch + 1],
        )  # fmt: skip


def _csr(offsets, *args):
    if offsets[-1] < PARALLEL_FROM:
        _csr_chunk(offsets, *args, 0, len(offsets) - 1)
    else:
        _csr_parallel(offsets, *args)


def csr_viterbi(offsets, indptr, indices, values, emission, bias, transition, out):
    """Viterbi labels (ties: the smallest label) of every token of CSR sequences."""
    nodes = np.empty((0, emission.shape[1]))
    _csr(offsets, indptr, indices, values, emission, bias, transition, out, nodes)


def csr_node_marginals(offsets, indptr, indices, values, emission, bias, transition, nodes):
    """P(y_t = k | x) of every token of CSR sequences into ``nodes`` (N × K), by scaled
    forward–backward (log space for a sequence whose scores span too much, as the oracle)."""
    labels = np.empty(0, dtype=np.int64)
    _csr(offsets, indptr, indices, values, emission, bias, transition, labels, nodes)
