"""Decoding with a trained model's weights: Viterbi labels and node marginals.

The tagger's path (``crfopt tag``, :meth:`crfopt.CRF.predict`,
:meth:`crfopt.CRF.predict_marginals`): sequences arrive as a CSR over their tokens
(attribute ids and values of the model's dictionary) and the weights as the model holds
them, so no problem, weight vector or kernel data is built around them. Each function
computes the unary scores θ_t(k) = Σ_p v_p W_E[k, a_p] + bias terms (docs/algorithms.md
§1.1) of one chunk of sequences at a time and decodes every sequence of the chunk with the
chain kernels the evaluation uses (``chain_viterbi``, ``chain_marginal_sums``), the chunks
in parallel.

The scores are summed in the order of the problem's own kernels (attributes in the order
given, then the bias block's count, first and last rows), so a model decodes here exactly
as :meth:`crfopt.CRFProblem.predict` decodes it.

Arguments shared by both functions: ``offsets`` (n+1 token offsets of the sequences),
``indptr`` / ``indices`` / ``values`` (the tokens' CSR), ``emission`` (A × K, one row per
attribute: the transpose of :attr:`crfopt.Model.emission`), ``bias`` (K × 3: count,
first, last; K × 0 for a model without the bias block) and ``transition`` (K × K, row:
label at t, column: at t+1).

Every function exists twice, compiled (numba: on numba's threads over chunks of about
equal tokens for batches of ``PARALLEL_FROM`` tokens or more, on the calling thread below)
and in NumPy (``*_numpy``, used when ``CRFOPT_DISABLE_JIT=1``); ``viterbi`` and
``node_marginals`` are the ones the JIT switch selects. tests/test_kernels_agree.py holds
the two to each other.
"""

from __future__ import annotations

import numpy as np

from crfopt.kernels import _numpy as _chain_numpy
from crfopt.kernels.jit import JIT_ENABLED

#: Chunks of about equal tokens a batch is cut into (enough for a dynamic schedule to
#: even out two threads; each chunk allocates its own score table).
CHUNKS = 32
#: Batches of fewer tokens are decoded on the calling thread: waking numba's threads
#: cost more than decoding a sentence (a per-sentence predict loop on 2 threads took
#: 16 ms a sentence on the loaded 2-core machine, 2 ms on one).
PARALLEL_FROM = 4096


def _unary_numpy(offsets, indptr, indices, values, emission, bias):
    N = len(indptr) - 1
    K = emission.shape[1]
    theta = np.zeros((N, K))
    rows = np.repeat(np.arange(N), np.diff(indptr))
    np.add.at(theta, rows, values[:, None] * emission[indices])
    if bias.shape[1]:
        theta += bias[:, 0]
        starts, ends = offsets[:-1], offsets[1:]
        nonempty = ends > starts
        theta[starts[nonempty]] += bias[:, 1]
        theta[ends[nonempty] - 1] += bias[:, 2]
    return theta


def viterbi_numpy(offsets, indptr, indices, values, emission, bias, transition, out):
    """Viterbi labels of every token into ``out`` (NumPy twin of :func:`viterbi`)."""
    K = emission.shape[1]
    theta = _unary_numpy(offsets, indptr, indices, values, emission, bias)
    for i in range(len(offsets) - 1):
        s, e = int(offsets[i]), int(offsets[i + 1])
        if e > s:
            _chain_numpy.chain_viterbi(theta[s:e], transition, e - s, K, out[s:e])


def node_marginals_numpy(offsets, indptr, indices, values, emission, bias, transition, nodes):
    """P(y_t = k | x) of every token into ``nodes`` (N × K) (NumPy twin of
    :func:`node_marginals`)."""
    K = emission.shape[1]
    theta = _unary_numpy(offsets, indptr, indices, values, emission, bias)
    edge_sum = np.zeros((K, K))
    for i in range(len(offsets) - 1):
        s, e = int(offsets[i]), int(offsets[i + 1])
        if e > s:
            _chain_numpy.chain_marginal_sums(theta[s:e], transition, e - s, K, nodes[s:e], edge_sum)


if JIT_ENABLED:
    import numba

    from crfopt.kernels import _numba as _chain

    _NJIT = {"cache": True, "nogil": True, "error_model": "numpy"}

    @numba.njit(**_NJIT)
    def _chunk_unary(offsets, indptr, indices, values, emission, bias, i_lo, i_hi, theta):
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
                    # the problem's kernels read the bias block as attributes A..A+2,
                    # after every other attribute of the token: the same additions
                    for k in range(K):
                        row[k] += bias[k, 0]
                    if r == s:
                        for k in range(K):
                            row[k] += bias[k, 1]
                    if r == e - 1:
                        for k in range(K):
                            row[k] += bias[k, 2]

    @numba.njit(**_NJIT)
    def _decode_chunk(
        offsets, indptr, indices, values, emission, bias, transition, labels, nodes, i_lo, i_hi
    ):
        """Sequences i_lo..i_hi-1: their Viterbi labels into ``labels``, or, when
        ``labels`` is empty, their node marginals into ``nodes``."""
        K = emission.shape[1]
        r0 = offsets[i_lo]
        theta = np.empty((offsets[i_hi] - r0, K))
        edge_sum = np.zeros((K, K))  # the pairwise sums come along; not needed here
        _chunk_unary(offsets, indptr, indices, values, emission, bias, i_lo, i_hi, theta)
        for i in range(i_lo, i_hi):
            s, e = offsets[i], offsets[i + 1]
            if e == s:
                continue
            th = theta[s - r0 : e - r0]
            if labels.shape[0] > 0:
                _chain.chain_viterbi(th, transition, e - s, K, labels[s:e])
            else:
                _chain.chain_marginal_sums(th, transition, e - s, K, nodes[s:e], edge_sum)

    @numba.njit(parallel=True, **_NJIT)
    def _decode_parallel(
        offsets, indptr, indices, values, emission, bias, transition, labels, nodes
    ):
        bounds = _chain._chunk_bounds(offsets, CHUNKS)  # of about equal tokens
        for ch in numba.prange(bounds.shape[0] - 1):
            _decode_chunk(
                offsets, indptr, indices, values, emission, bias, transition, labels, nodes,
                bounds[ch], bounds[ch + 1],
            )  # fmt: skip

    def _decode(offsets, *args):
        if offsets[-1] < PARALLEL_FROM:
            _decode_chunk(offsets, *args, 0, len(offsets) - 1)
        else:
            _decode_parallel(offsets, *args)

    def viterbi(offsets, indptr, indices, values, emission, bias, transition, out):
        """Viterbi labels (ties: the smallest label) of every token into ``out``."""
        nodes = np.empty((0, emission.shape[1]))
        _decode(offsets, indptr, indices, values, emission, bias, transition, out, nodes)

    def node_marginals(offsets, indptr, indices, values, emission, bias, transition, nodes):
        """P(y_t = k | x) of every token into ``nodes`` (N × K), by scaled forward–backward
        (log space for a sequence whose scores span too much, as the oracle)."""
        labels = np.empty(0, dtype=np.int64)
        _decode(offsets, indptr, indices, values, emission, bias, transition, labels, nodes)

else:
    viterbi = viterbi_numpy
    node_marginals = node_marginals_numpy
