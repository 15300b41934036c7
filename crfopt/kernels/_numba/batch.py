"""Full-batch evaluation (uncounted; parallel over sequences): P, ∇P, ν(w), H̃, KL, E[F].

What the evaluator, the reference optimum and the counted full passes of the problem
(``CRFProblem.value_and_gradient``) run: every sequence at once, in a fixed number of
chunks whose partial sums are reduced in chunk order, so the result does not depend on
how many threads ran them. These kernels count nothing (the problem charges its full
passes itself) and bump only the split's audit cell.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from crfopt.kernels._numba.chain import (
    LOG_SPAN_LIMIT,
    NO_REP,
    NO_REP_IDX,
    NO_SLOT,
    chain_log_marginals,
    chain_log_partition,
    chain_marginal_sums,
    scaled_backward,
    scaled_forward,
)
from crfopt.kernels._numba.flags import NJIT
from crfopt.kernels._numba.functionals import chain_entropy, chain_kl
from crfopt.kernels._numba.scores import emission_matrix, transition_matrix, truth_score
from crfopt.kernels._numba.tables import exp_table, fill_zero, row_span, table_span

# Sequence chunks of a batch kernel: a fixed number, so the chunk partial sums (and hence
# the rounding of every reduction) do not depend on how many threads run them, and enough
# of them that a dynamic schedule can even out unequal chunks and a thread the loaded
# machine preempts (batch_value_grad has numba hand them out one at a time).
BATCH_CHUNKS = 32


@numba.njit(**NJIT)
def _mass_bounds(cum, n_chunks):
    """Cut ``0..len(cum)-1`` into ``n_chunks`` ranges of about equal mass, ``cum`` being
    the running total (CSR offsets or pointers)."""
    m = cum.shape[0] - 1
    total = cum[m]
    n_chunks = max(1, min(m, n_chunks))
    bounds = np.empty(n_chunks + 1, dtype=np.int64)
    bounds[0] = 0
    for c in range(1, n_chunks):
        b = np.searchsorted(cum, (total * c) // n_chunks)
        bounds[c] = min(max(b, bounds[c - 1]), m)
    bounds[n_chunks] = m
    return bounds


@numba.njit(**NJIT)
def _chunk_bounds(offsets, n_chunks):
    """Sequence indices cutting the batch into ``n_chunks`` runs of about equal tokens.

    Cutting by sequence count left one thread with the long sequences (CoNLL-2000's
    lengths vary 1–100+); by tokens, each chunk costs about the same forward–backward.
    """
    return _mass_bounds(offsets, n_chunks)


@numba.njit(**NJIT)
def _sparse_rows(data, U, lo, hi, theta):
    """θ[r - lo] = Σ_p v_p U[a_p] for tokens r in [lo, hi)."""
    K = data.n_labels
    for r in range(lo, hi):
        row = theta[r - lo]
        for k in range(K):
            row[k] = 0.0
        for p in range(data.indptr[r], data.indptr[r + 1]):
            a = data.indices[p]
            v = data.values[p]
            for k in range(K):
                row[k] += v * U[a, k]


@numba.njit(parallel=True, **NJIT)
def _all_unary_chunks(data, U, bounds, theta):
    # Dense rows go through BLAS one row block per chunk: the caller holds BLAS to one
    # thread (kernels/threads.py), so a single np.dot over all rows ran on one core.
    for ch in numba.prange(bounds.shape[0] - 1):
        lo = data.offsets[bounds[ch]]
        hi = data.offsets[bounds[ch + 1]]
        if hi > lo:
            if data.dense:
                np.dot(data.X[lo:hi], U, theta[lo:hi])
            else:
                _sparse_rows(data, U, lo, hi, theta[lo:hi])


@numba.njit(**NJIT)
def all_unary(data, w):
    """Unary scores of every token (N × K)."""
    N = data.y.shape[0]
    K = data.n_labels
    theta = np.empty((N, K))
    _all_unary_chunks(
        data, emission_matrix(data, w), _chunk_bounds(data.offsets, BATCH_CHUNKS), theta
    )
    return theta


@numba.njit(parallel=True, **NJIT)
def _batch_chunks(data, U, transition, bounds, nodes, G_parts, S_parts, edge_parts, logZ, nll):
    """Unary scores, scaled forward–backward and gradient partial sums of each chunk.

    One pass per chunk, everything in chunk-sized scratch: the unary rows (a BLAS row
    block for dense data), α̂ rows (zeroed on each sequence's last token) and V rows
    (zeroed on its first), so that the chunk's summed pairwise marginals are
    E ∘ (α̂[:-1]ᵀ V[1:]) — one small matrix product per chunk into ``S_parts[ch]``.
    Node marginals go to ``nodes`` (sparse data: the attribute-major scatter needs all of
    them) or, dense, straight into the chunk's emission partial X_chunkᵀ μ_chunk in
    ``G_parts[ch]``. Sequences that need the log-space path add their pairwise sums to
    ``edge_parts[ch]``. Nothing is shared between chunks but read-only inputs, and the
    caller reduces the partials in chunk order.
    """
    K = data.n_labels
    n_chunks = bounds.shape[0] - 1
    E = np.empty((K, K))
    ET = np.empty((K, K))
    mT, tspan = table_span(transition, K)
    exp_table(transition, K, mT, E, ET)
    E3 = E.reshape((1, K, K))
    ET3 = ET.reshape((1, K, K))
    mT3 = np.empty(1)
    mT3[0] = mT
    scaled_ok = tspan <= LOG_SPAN_LIMIT
    L = data.max_len
    fused_dense = G_parts.shape[0] == n_chunks
    for ch in numba.prange(n_chunks):
        i_lo = bounds[ch]
        i_hi = bounds[ch + 1]
        r_lo = data.offsets[i_lo]
        r_hi = data.offsets[i_hi]
        R = r_hi - r_lo
        u = np.empty((L, K))
        beta = np.empty((L, K))
        m = np.empty(L)
        c = np.empty(L)
        theta = np.empty((R, K))
        al_c = np.empty((R, K))
        V_c = np.empty((R, K))
        if fused_dense:
            nd_c = np.empty((R, K))
        else:
            nd_c = nodes[r_lo:r_hi]
        if R > 0:
            if data.dense:
                np.dot(data.X[r_lo:r_hi], U, theta)
            else:
                _sparse_rows(data, U, r_lo, r_hi, theta)
        for i in range(i_lo, i_hi):
            s = data.offsets[i] - r_lo
            e = data.offsets[i + 1] - r_lo
            T = e - s
            th = theta[s:e]
            al = al_c[s:e]
            Vs = V_c[s:e]
            if scaled_ok and row_span(th, T, K) <= LOG_SPAN_LIMIT:
                z = scaled_forward(
                    th, E3, mT3, True, T, K, u, m, al, c, NO_SLOT, NO_REP, NO_REP_IDX
                )
                scaled_backward(T, K, u, ET3, True, c, beta, Vs, NO_SLOT, NO_REP, NO_REP_IDX)
                nd = nd_c[s:e]
                for t in range(T):
                    for k in range(K):
                        nd[t, k] = al[t, k] * beta[t, k]
                for k in range(K):
                    al[T - 1, k] = 0.0
                    Vs[0, k] = 0.0
            else:
                z = chain_marginal_sums(th, transition, T, K, nd_c[s:e], edge_parts[ch])
                for t in range(T):
                    for k in range(K):
                        al[t, k] = 0.0
                        Vs[t, k] = 0.0
            logZ[i] = z
            nll[i] = z - truth_score(data, i, th, transition)
        if R > 1:
            np.dot(al_c[:-1].T, V_c[1:], S_parts[ch])
        else:
            fill_zero(S_parts[ch])
        if fused_dense:
            if R > 0:
                np.dot(data.X[r_lo:r_hi].T, nd_c, G_parts[ch])
            else:
                fill_zero(G_parts[ch])
    # Written as loops: in a parallel=True function an array expression (total += S[ch])
    # is a parfor of its own, and under the caller's parallel_chunksize(1) numba scheduled
    # each of its K² entries as a separate piece of work, per chunk: 6 of OCR's 52 ms per
    # pass, and more the more chunks. Same additions in the same (chunk) order.
    total = np.empty((K, K))
    for k in range(K):
        for l in range(K):
            acc = 0.0
            for ch in range(n_chunks):
                acc += S_parts[ch, k, l]
            acc *= E[k, l]
            for ch in range(n_chunks):
                acc += edge_parts[ch, k, l]
            total[k, l] = acc
    return total


@numba.njit(parallel=True, **NJIT)
def _batch_forward(data, theta, transition, bounds, logZ, nll):
    K = data.n_labels
    pairwise = transition.reshape((1, K, K))
    for ch in numba.prange(bounds.shape[0] - 1):
        for i in range(bounds[ch], bounds[ch + 1]):
            s = data.offsets[i]
            e = data.offsets[i + 1]
            z = chain_log_partition(theta[s:e], pairwise, True, e - s, K)
            logZ[i] = z
            nll[i] = z - truth_score(data, i, theta[s:e], transition)


@numba.njit(parallel=True, **NJIT)
def _scatter_emission_sparse(col_ptr, col_token, col_value, weights, G):
    # Attribute ranges of equal nnz, handed out dynamically: attribute ids follow first
    # occurrence, so the frequent attributes crowd the low ids and an even split of ids
    # left one thread most of the work.
    K = weights.shape[1]
    bounds = _mass_bounds(col_ptr, 4 * BATCH_CHUNKS)  # equal nnz
    for ch in numba.prange(bounds.shape[0] - 1):
        for a in range(bounds[ch], bounds[ch + 1]):
            for k in range(K):
                G[a, k] = 0.0
            for p in range(col_ptr[a], col_ptr[a + 1]):
                r = col_token[p]
                v = col_value[p]
                for k in range(K):
                    G[a, k] += v * weights[r, k]


@numba.njit(parallel=True, **NJIT)
def _dense_emission_parts(X, weights, bounds, G_parts):
    for ch in numba.prange(bounds.shape[0] - 1):
        lo = bounds[ch]
        hi = bounds[ch + 1]
        if hi > lo:
            np.dot(X[lo:hi].T, weights[lo:hi], G_parts[ch])
        else:
            fill_zero(G_parts[ch])


@numba.njit(**NJIT)
def _dense_parts_fit(N, A, n_chunks):
    # Per-chunk emission partials (n_chunks × A × K) are kept only while they take no
    # more memory than the N × K node array they replace.
    return n_chunks * A <= N


@numba.njit(**NJIT)
def batch_expected_emission(data, tr, weights, out_emission):
    """Σ_i Σ_t weights[t] ⊗ φ_{i,t} over all tokens into an (n_attributes × K) array."""
    if data.dense:
        N = data.y.shape[0]
        A = data.n_kernel_attributes
        K = weights.shape[1]
        if _dense_parts_fit(N, A, BATCH_CHUNKS):
            rb = data.offsets[_chunk_bounds(data.offsets, BATCH_CHUNKS)]
            G_parts = np.empty((rb.shape[0] - 1, A, K))
            _dense_emission_parts(data.X, weights, rb, G_parts)
            out_emission[:, :] = 0.0
            for ch in range(G_parts.shape[0]):
                out_emission += G_parts[ch]
        else:
            np.dot(data.X.T, weights, out_emission)
    else:
        _scatter_emission_sparse(tr.col_ptr, tr.col_token, tr.col_value, weights, out_emission)


@numba.njit(**NJIT)
def _batch_value_grad_impl(data, tr, w, want_grad, grad_out):
    n = data.offsets.shape[0] - 1
    N = data.y.shape[0]
    K = data.n_labels
    A = data.n_kernel_attributes
    U = emission_matrix(data, w)
    transition = transition_matrix(data, w)
    logZ = np.empty(n)
    nll = np.empty(n)
    bounds = _chunk_bounds(data.offsets, BATCH_CHUNKS)
    n_chunks = bounds.shape[0] - 1
    if not want_grad:
        theta = np.empty((N, K))
        _all_unary_chunks(data, U, bounds, theta)
        _batch_forward(data, theta, transition, bounds, logZ, nll)
        data.audit[0] += n
        return nll.sum()
    fused_dense = data.dense and _dense_parts_fit(N, A, n_chunks)
    if fused_dense:
        nodes = np.empty((0, K))
        G_parts = np.empty((n_chunks, A, K))
    else:
        nodes = np.empty((N, K))
        G_parts = np.empty((0, A, K))
    S_parts = np.empty((n_chunks, K, K))
    edge_parts = np.zeros((n_chunks, K, K))
    total = _batch_chunks(
        data, U, transition, bounds, nodes, G_parts, S_parts, edge_parts, logZ, nll
    )
    data.audit[0] += n
    G = grad_out[: A * K].reshape((A, K))
    if fused_dense:
        G[:, :] = 0.0
        for ch in range(n_chunks):
            G += G_parts[ch]
    else:
        batch_expected_emission(data, tr, nodes, G)
    GT = grad_out[A * K :].reshape((K, K))
    GT[:, :] = total
    return nll.sum()


def batch_value_grad(data, tr, w, want_grad, grad_out):
    """Σ_i ℓ_i(w) and, with ``want_grad``, Σ_i E_{ν_i(w)}[F] into ``grad_out``.

    The caller subtracts the ground-truth feature sum and adds the regularizer.
    """
    # Chunks handed out one at a time (set here: numba cannot cache a kernel that sets it).
    with numba.parallel_chunksize(1):
        return _batch_value_grad_impl(data, tr, w, want_grad, grad_out)


@numba.njit(parallel=True, **NJIT)
def finish_gradient(grad, truth, w, lam, n):
    """∇P = (grad - truth)/n + λw in place, from :func:`batch_value_grad`'s Σ_i E_ν F.

    The same three roundings per entry as NumPy's ``grad -= truth; grad /= n;
    grad += lam * w`` (no fastmath: no reciprocal, no fused multiply-add), so the same
    bits; done in parallel because on CoNLL-2000 (d = 7.4 M) those serial sweeps and the
    λw temporary were a tenth of a pass.
    """
    d = grad.shape[0]
    for c in numba.prange(BATCH_CHUNKS):
        for j in range((d * c) // BATCH_CHUNKS, (d * (c + 1)) // BATCH_CHUNKS):
            grad[j] = (grad[j] - truth[j]) / n + lam * w[j]


@numba.njit(parallel=True, **NJIT)
def _batch_log_marginals_impl(data, theta, transition, log_nodes, log_edges, logZ):
    n = data.offsets.shape[0] - 1
    K = data.n_labels
    pairwise = transition.reshape((1, K, K))
    for i in numba.prange(n):
        s = data.offsets[i]
        e = data.offsets[i + 1]
        es = s - i
        logZ[i] = chain_log_marginals(
            theta[s:e], pairwise, True, e - s, K, log_nodes[s:e], log_edges[es : e - i - 1]
        )


@numba.njit(**NJIT)
def batch_log_marginals(data, w, log_nodes, log_edges, logZ):
    """ν(w) for every sequence (log node and edge marginals) and log Z (uncounted)."""
    theta = all_unary(data, w)
    transition = transition_matrix(data, w)
    _batch_log_marginals_impl(data, theta, transition, log_nodes, log_edges, logZ)
    data.audit[0] += data.offsets.shape[0] - 1


@numba.njit(parallel=True, **NJIT)
def batch_entropy(data, log_nodes, log_edges, out):
    """H̃(μ_i) for every sequence."""
    n = data.offsets.shape[0] - 1
    K = data.n_labels
    for i in numba.prange(n):
        s = data.offsets[i]
        e = data.offsets[i + 1]
        out[i] = chain_entropy(log_nodes[s:e], log_edges[s - i : e - i - 1], e - s, K)


@numba.njit(parallel=True, **NJIT)
def batch_kl(data, mu_nodes, mu_edges, nu_nodes, nu_edges, out):
    """D̃(μ_i ‖ ν_i) for every sequence."""
    n = data.offsets.shape[0] - 1
    K = data.n_labels
    for i in numba.prange(n):
        s = data.offsets[i]
        e = data.offsets[i + 1]
        es = s - i
        ee = e - i - 1
        out[i] = chain_kl(mu_nodes[s:e], mu_edges[es:ee], nu_nodes[s:e], nu_edges[es:ee], e - s, K)


@numba.njit(parallel=True, **NJIT)
def _exp_parts(data, log_nodes, log_edges, nodes, parts):
    n = data.offsets.shape[0] - 1
    N = data.y.shape[0]
    K = data.n_labels
    n_chunks = parts.shape[0]
    for r in numba.prange(N):
        for k in range(K):
            nodes[r, k] = math.exp(log_nodes[r, k])
    for c in numba.prange(n_chunks):
        lo = (n * c) // n_chunks
        hi = (n * (c + 1)) // n_chunks
        for i in range(lo, hi):
            for q in range(data.offsets[i] - i, data.offsets[i + 1] - i - 1):
                for k in range(K):
                    for l in range(K):
                        parts[c, k, l] += math.exp(log_edges[q, k, l])


@numba.njit(**NJIT)
def _batch_expected_features_impl(data, tr, log_nodes, log_edges, n_chunks, out):
    N = data.y.shape[0]
    K = data.n_labels
    A = data.n_kernel_attributes
    nodes = np.empty((N, K))
    parts = np.zeros((n_chunks, K, K))
    _exp_parts(data, log_nodes, log_edges, nodes, parts)
    batch_expected_emission(data, tr, nodes, out[: A * K].reshape((A, K)))
    GT = out[A * K :].reshape((K, K))
    GT[:, :] = 0.0
    for c in range(n_chunks):
        GT += parts[c]


def batch_expected_features(data, tr, log_nodes, log_edges, out):
    """Σ_i E_{μ_i}[F] (a d-vector) from log-marginals of every sequence."""
    n = len(data.offsets) - 1
    _batch_expected_features_impl(data, tr, log_nodes, log_edges, max(1, min(n, BATCH_CHUNKS)), out)
