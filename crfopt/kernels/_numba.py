"""Numba oracle kernels (docs/algorithms.md §1, §5): the hot loop of every optimizer.

Forward–backward is *scaled* (linear space, one normalizer per position, the transition
factor exp(W_T) computed once per sequence and pulled out of the summed pairwise
marginals), which costs K² multiply-adds and no transcendental function per token.
Log-marginals are formed as sums of logs of the scaled messages, so they keep full
relative precision where the linear marginals would underflow. When a score table spans
more than ``LOG_SPAN_LIMIT`` nats the scaled messages could underflow; that sequence then
runs the max-shifted log-space recursion instead (§5.1), so scores of ±1e4 stay finite.

Every function here has a twin with the same signature in :mod:`crfopt.kernels._numpy`;
tests hold the two to 1e-10. Counted entry points increment ``counters`` and the split's
audit cell; the ``batch_*`` evaluation kernels are uncounted and only bump the audit cell.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from crfopt.kernels.counters import FORWARD_CALLS, ORACLE_CALLS
from crfopt.kernels.prefetch import prefetch_read
from crfopt.kernels.vmath import exp_scalar, vexp

# Beyond this span (max - min) of a unary row or of the transition table, scaled messages
# may fall below the smallest double (e^-745) after a few products; use log space.
LOG_SPAN_LIMIT = 300.0

# How many features ahead ``unary_scores`` prefetches w's emission rows (sparse problems).
PREFETCH_FEATURES = 8

# ``_chain_marginals`` without a base table (see :func:`_exp_edges_bonus`)
_NO_BASE = np.empty((0, 0))
_NO_TRUTH = np.empty(0, dtype=np.int64)
# the scaled passes without per-position tables and row replacements (_scaled_forward)
_NO_SLOT = np.empty(0, dtype=np.int64)
_NO_REP = np.empty((0, 2, 1))
_NO_REP_IDX = np.empty((0, 2), dtype=np.int64)

# NumPy's error model: a division by zero gives inf/NaN (which divergence checks catch)
# instead of a Python exception, and no per-division branch blocks vectorization.
_NJIT = {"cache": True, "nogil": True, "error_model": "numpy"}
# Contraction and reassociation let LLVM fuse and vectorize the label loops; the flags
# that assume no NaN/inf are left out so divergence still shows up as NaN.
_FAST = {**_NJIT, "fastmath": {"contract", "reassoc", "nsz", "arcp"}}


# --------------------------------------------------------------------------------------
# scores
# --------------------------------------------------------------------------------------


@numba.njit(**_NJIT)
def support_bounds(data, i):
    """Range of sequence ``i``'s distinct attributes in ``data.support``."""
    if data.dense:
        return 0, data.n_attributes
    return data.support_ptr[i], data.support_ptr[i + 1]


@numba.njit(**_NJIT)
def emission_matrix(data, w):
    """The emission+bias block of ``w`` as an (n_attributes × K) view."""
    K = data.n_labels
    return w[: data.n_attributes * K].reshape((data.n_attributes, K))


@numba.njit(**_NJIT)
def transition_matrix(data, w):
    """The transition block of ``w`` as a K × K view (row: label at t, column: at t+1)."""
    K = data.n_labels
    A = data.n_attributes
    return w[A * K : A * K + K * K].reshape((K, K))


@numba.njit(inline="always", **_NJIT)
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


@numba.njit(**_NJIT)
def unary_scores(data, i, w, out):
    """θ_{i,t}(k) = ⟨W_E[k], φ_{i,t}⟩ + bias terms into ``out[:T]``; returns T (§1.1).

    Not an oracle call: the scores are a linear map of ``w``.
    """
    return _token_scores(data, i, emission_matrix(data, w), data.indices, out, PREFETCH_FEATURES)


@numba.njit(**_NJIT)
def local_scores(data, i, E_loc, out):
    """Unary scores of a direction given on sequence ``i``'s support (|S_i| × K)."""
    return _token_scores(data, i, E_loc, data.local, out, 0)


@numba.njit(**_NJIT)
def truth_score(data, i, unary, trans):
    """s_w(x_i, y_i) = Σ_t θ_t(y_t) + Σ_t W_T[y_t, y_{t+1}]."""
    s = data.offsets[i]
    T = data.offsets[i + 1] - s
    total = 0.0
    for t in range(T):
        total += unary[t, data.y[s + t]]
    for t in range(T - 1):
        total += trans[data.y[s + t], data.y[s + t + 1]]
    return total


# --------------------------------------------------------------------------------------
# forward-backward on one chain
# --------------------------------------------------------------------------------------


@numba.njit(**_NJIT)
def _span(unary, T, K):
    span = 0.0
    for t in range(T):
        mx = unary[t, 0]
        mn = mx
        for k in range(1, K):
            v = unary[t, k]
            if v > mx:
                mx = v
            if v < mn:
                mn = v
        if mx - mn > span:
            span = mx - mn
    return span


@numba.njit(**_NJIT)
def _trans_span(trans, K):
    """(max, max - min) of a K × K table (:func:`_trans_extrema`)."""
    mx, mn = _trans_extrema(trans, K)
    return mx, mx - mn


@numba.njit(**_NJIT)
def _trans_extrema(trans, K):
    """(max, min) of a K × K table.

    Four running extrema instead of one: a single max/min chain is a loop-carried
    dependency that LLVM will not vectorize without ``nnan``, and every oracle call pays
    it on K² entries (0.66 µs of a 4.5 µs forward pass at K = 26; four lanes: 0.20 µs).
    Max and min are exact, so the lanes change no result.
    """
    mx0 = trans[0, 0]
    mx1 = mx2 = mx3 = mn0 = mn1 = mn2 = mn3 = mx0
    for k in range(K):
        row = trans[k]
        l = 0
        while l + 4 <= K:
            v0 = row[l]
            v1 = row[l + 1]
            v2 = row[l + 2]
            v3 = row[l + 3]
            mx0 = v0 if v0 > mx0 else mx0
            mn0 = v0 if v0 < mn0 else mn0
            mx1 = v1 if v1 > mx1 else mx1
            mn1 = v1 if v1 < mn1 else mn1
            mx2 = v2 if v2 > mx2 else mx2
            mn2 = v2 if v2 < mn2 else mn2
            mx3 = v3 if v3 > mx3 else mx3
            mn3 = v3 if v3 < mn3 else mn3
            l += 4
        while l < K:
            v0 = row[l]
            mx0 = v0 if v0 > mx0 else mx0
            mn0 = v0 if v0 < mn0 else mn0
            l += 1
    mx = max(max(mx0, mx1), max(mx2, mx3))
    mn = min(min(mn0, mn1), min(mn2, mn3))
    return mx, mn


@numba.njit(**_FAST)
def _exp_transitions_at(trans, K, mT, E, ET):
    """E = exp(W - mT) and its transpose, for mT = max W already known (the caller's span
    test found it; a second scan of the K² entries cost as much as their exponentials).

    Per-sequence oracles redo this for every call (w changes between calls), so the K²
    exponentials go through the vectorized exp.
    """
    shifted = np.empty(K * K)
    for k in range(K):
        for l in range(K):
            shifted[k * K + l] = trans[k, l] - mT
    vexp(shifted, E.reshape(K * K), K * K)
    for k in range(K):
        for l in range(K):
            ET[l, k] = E[k, l]


@numba.njit(**_FAST)
def _exp_edges(edges, T, K, E, ET, mT):
    """Per-position E_t = exp(θ_t - max θ_t) and transposes for (T-1, K, K) edge tables,
    with the maxima already in ``mT`` (:func:`_edge_maxima`)."""
    P = T - 1
    shifted = np.empty(max(P, 1) * K * K)
    for t in range(P):
        mx = mT[t]
        for k in range(K):
            for l in range(K):
                shifted[(t * K + k) * K + l] = edges[t, k, l] - mx
    vexp(shifted, E.reshape(E.shape[0] * K * K), P * K * K)
    for t in range(P):
        for k in range(K):
            for l in range(K):
                ET[t, l, k] = E[t, k, l]


@numba.njit(**_FAST)
def _exp_edges_bonus(edges, base, mB, truth, T, K, E, ET, mT, slot, rep, rep_idx):
    """:func:`_exp_edges` for tables equal to ``base`` but at the truth pair
    (``truth[t]``, ``truth[t + 1]``) of each position (:func:`oracle_scores_bonus`).

    exp(base - mB) (mB = max base) and its transpose go into E[0], ET[0], once: they serve every
    position whose maximum is base's (``slot[t] = 0``), with the one row that holds the
    truth entry replaced (``rep[t]``, ``rep_idx[t]``: the row of E and of ET), and only
    that entry exponentiated. A position whose truth entry is its maximum gets its own
    table, as in :func:`_exp_edges`. Bit for bit :func:`_exp_edges`: each entry is the
    same difference, exponentiated by the same arithmetic (``exp_scalar`` where
    ``vexp`` takes it, libm where ``vexp`` does).
    """
    shares = 0
    for t in range(T - 1):
        shares += 1 if mT[t] == mB else 0
    if shares:  # else every truth entry is its table's maximum (OEG's first visits)
        _exp_transitions_at(base, K, mB, E[0], ET[0])
    Eb = E[0]
    EbT = ET[0]
    shifted = np.empty(K * K)
    own = 0
    for t in range(T - 1):
        mx = mT[t]
        if mx == mB:
            k = truth[t]
            l = truth[t + 1]
            x = edges[t, k, l] - mx
            v = exp_scalar(x) if (x >= -708.0 and x < 709.0) else math.exp(x)
            slot[t] = 0
            rep_idx[t, 0] = k
            rep_idx[t, 1] = l
            for j in range(K):
                rep[t, 0, j] = Eb[k, j]
                rep[t, 1, j] = EbT[l, j]
            rep[t, 0, l] = v
            rep[t, 1, k] = v
            continue
        own += 1
        slot[t] = own
        rep_idx[t, 0] = -1
        rep_idx[t, 1] = -1
        for k in range(K):
            for l in range(K):
                shifted[k * K + l] = edges[t, k, l] - mx
        vexp(shifted, E[own].reshape(K * K), K * K)
        for k in range(K):
            for l in range(K):
                ET[own, l, k] = E[own, k, l]


@numba.njit(**_NJIT, inline="always")
def _table(shared, slot, t):
    """Index into E3/ET3 of position t's edge table (see :func:`_scaled_forward`)."""
    if shared:
        return 0
    return slot[t] if slot.shape[0] else t


@numba.njit(**_FAST)
def _scaled_forward(unary, E3, mT3, shared, T, K, u, m, alpha, c, slot, rep, rep_idx):
    """Scaled forward pass: u = exp(θ - m_t), normalized α̂ (rows sum to 1), normalizers c.

    ``E3`` holds exp(θ_edge - max) for one shared table (shape (1, K, K), ``shared``) or
    one per position ((T-1, K, K)), ``mT3`` the subtracted maxima. Returns
    log Z = Σ_t (log c_t + m_t) + Σ_t max θ_edge,t. A non-empty ``slot`` maps position t
    to its table E3[slot[t]], whose row ``rep_idx[t, 0]`` (if ≥ 0) is ``rep[t, 0]``
    instead (:func:`_exp_edges_bonus`).
    """
    shifted = np.empty(T * K)
    for t in range(T):
        mx = unary[t, 0]
        for k in range(1, K):
            if unary[t, k] > mx:
                mx = unary[t, k]
        m[t] = mx
        for k in range(K):
            shifted[t * K + k] = unary[t, k] - mx
    vexp(shifted, u.reshape(u.shape[0] * K), T * K)
    total = 0.0
    for k in range(K):
        alpha[0, k] = u[0, k]
        total += u[0, k]
    c[0] = total
    inv = 1.0 / total
    for k in range(K):
        alpha[0, k] *= inv
    logZ = math.log(total) + m[0]
    for t in range(1, T):
        row = alpha[t]
        prev = alpha[t - 1]
        for l in range(K):
            row[l] = 0.0
        E = E3[_table(shared, slot, t - 1)]
        mT = mT3[0] if shared else mT3[t - 1]
        r = rep_idx[t - 1, 0] if slot.shape[0] else -1
        # axpy form (contiguous in l) so the inner loop vectorizes; a replaced row is
        # added in its turn (the same order of sums), by a loop of its own. Written out
        # here and in _scaled_backward: an inlined helper for these loops made every
        # shared-table oracle 5-7 % slower (oracle_marginals on OCR, 12.3 -> 13.1 µs).
        for k in range(r if r >= 0 else K):
            a = prev[k]
            Ek = E[k]
            for l in range(K):
                row[l] += a * Ek[l]
        if r >= 0:
            a = prev[r]
            Ek = rep[t - 1, 0]
            for l in range(K):
                row[l] += a * Ek[l]
            for k in range(r + 1, K):
                a = prev[k]
                Ek = E[k]
                for l in range(K):
                    row[l] += a * Ek[l]
        total = 0.0
        for l in range(K):
            row[l] *= u[t, l]
            total += row[l]
        c[t] = total
        inv = 1.0 / total
        for l in range(K):
            row[l] *= inv
        logZ += math.log(total) + m[t] + mT
    return logZ


@numba.njit(**_FAST)
def _scaled_backward(T, K, u, ET3, shared, c, beta, V, slot, rep, rep_idx):
    """Scaled backward pass with the forward normalizers, so μ_t = α̂_t β̂_t.

    Also leaves V[t] = u_t β̂_t / c_t (t ≥ 1): the pairwise marginal of (t-1, t) is
    α̂_{t-1}(k) E(k, l) V[t](l). ``slot``, ``rep``, ``rep_idx`` as in
    :func:`_scaled_forward`, for the transposed tables (``rep[t, 1]``, ``rep_idx[t, 1]``).
    """
    for k in range(K):
        beta[T - 1, k] = 1.0
    for t in range(T - 2, -1, -1):
        inv = 1.0 / c[t + 1]
        vrow = V[t + 1]
        for l in range(K):
            vrow[l] = u[t + 1, l] * beta[t + 1, l] * inv
        row = beta[t]
        ET = ET3[_table(shared, slot, t)]
        r = rep_idx[t, 1] if slot.shape[0] else -1
        for k in range(K):
            row[k] = 0.0
        for l in range(r if r >= 0 else K):  # a replaced row in its turn, as above
            vl = vrow[l]
            ETl = ET[l]
            for k in range(K):
                row[k] += vl * ETl[k]
        if r >= 0:
            vl = vrow[r]
            ETl = rep[t, 1]
            for k in range(K):
                row[k] += vl * ETl[k]
            for l in range(r + 1, K):
                vl = vrow[l]
                ETl = ET[l]
                for k in range(K):
                    row[k] += vl * ETl[k]


# inlined: a call would count references to its arrays; no fastmath, as the products
# below were computed inside _chain_marginals
@numba.njit(**_NJIT, inline="always")
def _linear_marginals(alpha, beta, V, E3, shared, slot, rep, rep_idx, T, K, nodes, lin_edges):
    """The linear marginals as products of the scaled messages: α̂_t β̂_t for the nodes,
    α̂_t(k) E(k,l) V_{t+1}(l) for the edges (tables as in :func:`_scaled_forward`)."""
    for t in range(T):
        for k in range(K):
            nodes[t, k] = alpha[t, k] * beta[t, k]
    for t in range(T - 1):
        E = E3[_table(shared, slot, t)]
        r = rep_idx[t, 0] if slot.shape[0] else -1
        for k in range(K):
            a = alpha[t, k]
            Ek = rep[t, 0] if k == r else E[k]
            for l in range(K):
                lin_edges[t, k, l] = a * Ek[l] * V[t + 1, l]


@numba.njit(**_NJIT)
def _lse_row(x, K):
    mx = x[0]
    for k in range(1, K):
        if x[k] > mx:
            mx = x[k]
    if mx == -np.inf:
        return mx
    s = 0.0
    for k in range(K):
        s += math.exp(x[k] - mx)
    return mx + math.log(s)


@numba.njit(**_NJIT)
def _log_forward(unary, edges, shared, T, K, la, logc):
    """Normalized log-space forward messages: lse_k la[t, k] = 0, log Z = Σ_t logc[t].

    Normalizing at every position keeps the messages at the size of one position's
    scores, instead of growing with t, so long chains of huge scores lose no precision.
    ``edges`` is (1, K, K) if shared else (T-1, K, K).
    """
    tmp = np.empty(K)
    z = _lse_row(unary[0], K)
    logc[0] = z
    for k in range(K):
        la[0, k] = unary[0, k] - z
    total = z
    for t in range(1, T):
        Et = edges[0] if shared else edges[t - 1]
        for l in range(K):
            for k in range(K):
                tmp[k] = la[t - 1, k] + Et[k, l]
            la[t, l] = unary[t, l] + _lse_row(tmp, K)
        z = _lse_row(la[t], K)
        logc[t] = z
        for l in range(K):
            la[t, l] -= z
        total += z
    return total


@numba.njit(**_NJIT)
def _log_backward(unary, edges, shared, T, K, logc, lb):
    """Backward messages normalized by the forward normalizers: μ_t = exp(la_t + lb_t)."""
    tmp = np.empty(K)
    for k in range(K):
        lb[T - 1, k] = 0.0
    for t in range(T - 2, -1, -1):
        Et = edges[0] if shared else edges[t]
        for k in range(K):
            for l in range(K):
                tmp[l] = Et[k, l] + unary[t + 1, l] + lb[t + 1, l]
            lb[t, k] = _lse_row(tmp, K) - logc[t + 1]


@numba.njit(**_NJIT)
def _edge_maxima(edges, shared, T, K, mT):
    """Largest max - min over the edge tables that a chain of length T uses; each
    table's max into ``mT`` (one entry when ``shared``), for the exponentials after."""
    if shared:
        mT[0], span = _trans_span(edges[0], K)
        return span
    span = 0.0
    for t in range(T - 1):
        mT[t], s = _trans_span(edges[t], K)
        if s > span:
            span = s
    return span


@numba.njit(**_NJIT)
def _bonus_edge_maxima(edges, base, truth, T, K, mT):
    """(:func:`_edge_maxima`, max base) for tables equal to ``base`` but at the truth pair
    (:func:`_exp_edges_bonus`): one scan of ``base`` instead of T - 1 scans of K².

    Where a position's truth entry e is at least base's v there, and v is above
    min base, the table's min is min base; its max is e if e > max base, else max base
    unless e equals it (then the two scans could keep zeros of different sign). Such a
    position takes both from base's scan: the same values, bit for bit, since entries
    that cannot be an extremum do not change which entry each of the scan's lanes keeps.
    Any other position (a negative or NaN bonus, a truth entry at base's minimum or
    equal to its maximum) is scanned as :func:`_edge_maxima` does.
    """
    mB, nB = _trans_extrema(base, K)
    span = 0.0
    for t in range(T - 1):
        k = truth[t]
        l = truth[t + 1]
        v = base[k, l]
        e = edges[t, k, l]
        if e >= v and v > nB and e != mB:  # False with any NaN
            mx = e if e > mB else mB
            s = mx - nB
        else:
            mx, s = _trans_span(edges[t], K)
        mT[t] = mx
        if s > span:
            span = s
    return span, mB


@numba.njit(**_NJIT)
def _clip0(x):
    return x if x < 0.0 else 0.0


@numba.njit(**_NJIT)
def _chain_marginals(
    unary, edges, shared, T, K, log_nodes, log_edges, want_linear, nodes, lin_edges, base, truth
):
    """log Z, log node/edge marginals and, with ``want_linear``, linear ones too.

    On the scaled path the linear marginals are products of the messages
    (α̂_t(k) E(k,l) V_{t+1}(l)), so having both costs no transcendental function.
    A K × K ``base`` (else shape (0, 0)) says that every position's table in ``edges``
    is ``base`` but at (``truth[t]``, ``truth[t + 1]``): see :func:`_exp_edges_bonus`.
    """
    P = 1 if shared else max(T - 1, 1)
    mT3 = np.zeros(P)
    bonus = not shared and base.shape[0] > 0
    if bonus:
        edge_span, mB = _bonus_edge_maxima(edges, base, truth, T, K, mT3)
    else:
        edge_span, mB = _edge_maxima(edges, shared, T, K, mT3), 0.0
    if edge_span <= LOG_SPAN_LIMIT and _span(unary, T, K) <= LOG_SPAN_LIMIT:
        u = np.empty((T, K))
        m = np.empty(T)
        alpha = np.empty((T, K))
        beta = np.empty((T, K))
        V = np.empty((T, K))
        c = np.empty(T)
        if bonus:
            E3 = np.empty((P + 1, K, K))
            ET3 = np.empty((P + 1, K, K))
            slot = np.empty(P, dtype=np.int64)
            rep = np.empty((P, 2, K))
            rep_idx = np.empty((P, 2), dtype=np.int64)
            _exp_edges_bonus(edges, base, mB, truth, T, K, E3, ET3, mT3, slot, rep, rep_idx)
            logZ = _scaled_forward(unary, E3, mT3, shared, T, K, u, m, alpha, c, slot, rep, rep_idx)
            _scaled_backward(T, K, u, ET3, shared, c, beta, V, slot, rep, rep_idx)
            if want_linear:
                _linear_marginals(
                    alpha, beta, V, E3, shared, slot, rep, rep_idx, T, K, nodes, lin_edges
                )
        else:
            # the constant empty maps: no allocation on the path every other oracle takes
            slot_, rep_, idx_ = _NO_SLOT, _NO_REP, _NO_REP_IDX
            E3 = np.empty((P, K, K))
            ET3 = np.empty((P, K, K))
            if shared:
                _exp_transitions_at(edges[0], K, mT3[0], E3[0], ET3[0])
            else:
                _exp_edges(edges, T, K, E3, ET3, mT3)
            logZ = _scaled_forward(unary, E3, mT3, shared, T, K, u, m, alpha, c, slot_, rep_, idx_)
            _scaled_backward(T, K, u, ET3, shared, c, beta, V, slot_, rep_, idx_)
            if want_linear:
                _linear_marginals(
                    alpha, beta, V, E3, shared, slot_, rep_, idx_, T, K, nodes, lin_edges
                )
        for t in range(T):
            for k in range(K):
                alpha[t, k] = math.log(alpha[t, k])
                beta[t, k] = math.log(beta[t, k])
                log_nodes[t, k] = _clip0(alpha[t, k] + beta[t, k])
        lv = np.empty(K)
        for t in range(T - 1):
            Et = edges[0] if shared else edges[t]
            mT = mT3[0] if shared else mT3[t]
            shift = math.log(c[t + 1]) + m[t + 1] + mT
            for l in range(K):
                lv[l] = unary[t + 1, l] + beta[t + 1, l] - shift
            for k in range(K):
                la = alpha[t, k]
                for l in range(K):
                    log_edges[t, k, l] = _clip0(la + Et[k, l] + lv[l])
        return logZ
    la = np.empty((T, K))
    lb = np.empty((T, K))
    logc = np.empty(T)
    logZ = _log_forward(unary, edges, shared, T, K, la, logc)
    _log_backward(unary, edges, shared, T, K, logc, lb)
    for t in range(T):
        for k in range(K):
            log_nodes[t, k] = _clip0(la[t, k] + lb[t, k])
            if want_linear:
                nodes[t, k] = math.exp(log_nodes[t, k])
    for t in range(T - 1):
        Et = edges[0] if shared else edges[t]
        for k in range(K):
            for l in range(K):
                log_edges[t, k, l] = _clip0(
                    la[t, k] + Et[k, l] + unary[t + 1, l] + lb[t + 1, l] - logc[t + 1]
                )
                if want_linear:
                    lin_edges[t, k, l] = math.exp(log_edges[t, k, l])
    return logZ


@numba.njit(**_NJIT)
def chain_log_marginals(unary, edges, shared, T, K, log_nodes, log_edges):
    """log Z and log node / edge marginals of one chain (§5.1); outputs clipped to ≤ 0.

    ``edges`` is (1, K, K) for shared transitions, or (T-1, K, K) position-dependent.
    """
    return _chain_marginals(
        unary,
        edges,
        shared,
        T,
        K,
        log_nodes,
        log_edges,
        False,
        np.empty((1, 1)),
        np.empty((1, 1, 1)),
        _NO_BASE,
        _NO_TRUTH,
    )


@numba.njit(**_FAST)
def _accumulate_outer(alpha, V, T, K, S):
    """S += Σ_{t<T-1} α̂_t ⊗ V_{t+1} (the transition factor E is applied afterwards)."""
    for t in range(T - 1):
        vrow = V[t + 1]
        for k in range(K):
            a = alpha[t, k]
            Sk = S[k]
            for l in range(K):
                Sk[l] += a * vrow[l]


@numba.njit(inline="always", **_NJIT)
def _pass_tables(work, T, K):
    """The scaled pass's tables u, m, E, Eᵀ, c and [max W_T]: views into ``work`` (a
    ChainWork) or, when it is None, new arrays."""
    if work is None:
        return (
            np.empty((T, K)), np.empty(T), np.empty((K, K)), np.empty((K, K)), np.empty(T),
            np.empty(1),
        )  # fmt: skip
    return work.u[:T], work.m[:T], work.E, work.ET, work.c[:T], work.mT


@numba.njit(**_NJIT)
def chain_marginal_sums(unary, trans, T, K, nodes, edge_sum, work=None):
    """log Z, linear node marginals (T × K) and Σ_t pairwise marginals (K × K, added to).

    The gradient form of the oracle: what SAG, SG and the full-batch gradient need.
    ``work`` (a ChainWork) holds the scaled pass's tables; None allocates them.
    """
    mT, tspan = _trans_span(trans, K)
    if tspan <= LOG_SPAN_LIMIT and _span(unary, T, K) <= LOG_SPAN_LIMIT:
        u, m, E, ET, c, mT3 = _pass_tables(work, T, K)
        if work is None:
            beta, V, S = np.empty((T, K)), np.empty((T, K)), np.empty((K, K))
        else:
            beta, V, S = work.beta[:T], work.V[:T], work.S
        _zero(S)
        _exp_transitions_at(trans, K, mT, E, ET)
        mT3[0] = mT
        E3, ET3 = E.reshape((1, K, K)), ET.reshape((1, K, K))
        logZ = _scaled_forward(
            unary, E3, mT3, True, T, K, u, m, nodes, c, _NO_SLOT, _NO_REP, _NO_REP_IDX
        )
        _scaled_backward(T, K, u, ET3, True, c, beta, V, _NO_SLOT, _NO_REP, _NO_REP_IDX)
        _accumulate_outer(nodes, V, T, K, S)
        for t in range(T):
            for k in range(K):
                nodes[t, k] *= beta[t, k]
        for k in range(K):
            for l in range(K):
                edge_sum[k, l] += E[k, l] * S[k, l]
        return logZ
    edges = trans.reshape((1, K, K))
    la = np.empty((T, K))
    lb = np.empty((T, K))
    logc = np.empty(T)
    logZ = _log_forward(unary, edges, True, T, K, la, logc)
    _log_backward(unary, edges, True, T, K, logc, lb)
    for t in range(T):
        for k in range(K):
            nodes[t, k] = math.exp(_clip0(la[t, k] + lb[t, k]))
    for t in range(T - 1):
        for k in range(K):
            for l in range(K):
                edge_sum[k, l] += math.exp(
                    _clip0(la[t, k] + trans[k, l] + unary[t + 1, l] + lb[t + 1, l] - logc[t + 1])
                )
    return logZ


@numba.njit(**_NJIT)
def chain_log_partition(unary, edges, shared, T, K, work=None):
    """log Z of one chain by the forward recursion only (``work``: a ChainWork or None)."""
    if shared:
        mT, tspan = _trans_span(edges[0], K)
        if tspan <= LOG_SPAN_LIMIT and _span(unary, T, K) <= LOG_SPAN_LIMIT:
            u, m, E, ET, c, mT3 = _pass_tables(work, T, K)
            alpha = np.empty((T, K)) if work is None else work.alpha[:T]
            _exp_transitions_at(edges[0], K, mT, E, ET)
            mT3[0] = mT
            E3 = E.reshape((1, K, K))
            return _scaled_forward(
                unary, E3, mT3, True, T, K, u, m, alpha, c, _NO_SLOT, _NO_REP, _NO_REP_IDX
            )
    la = np.empty((T, K))
    logc = np.empty(T)
    return _log_forward(unary, edges, shared, T, K, la, logc)


@numba.njit(**_NJIT)
def chain_viterbi(unary, trans, T, K, out):
    """Max-product decoding; ties go to the smallest label index (§1.6)."""
    delta = np.empty((T, K))
    back = np.zeros((T, K), dtype=np.int64)
    for k in range(K):
        delta[0, k] = unary[0, k]
    for t in range(1, T):
        for l in range(K):
            best = delta[t - 1, 0] + trans[0, l]
            arg = 0
            for k in range(1, K):
                v = delta[t - 1, k] + trans[k, l]
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


# --------------------------------------------------------------------------------------
# counted oracles (docs/algorithms.md §1.5, §2)
# --------------------------------------------------------------------------------------


@numba.njit(**_NJIT)
def oracle(data, counters, i, w, log_nodes, log_edges):
    """Counted oracle: (log Z_i, ℓ_i(w)); log-marginals of ν_i(w) into the outputs.

    ``log_nodes`` needs ≥ T_i rows of K, ``log_edges`` ≥ T_i - 1 tables of K × K.
    """
    counters[ORACLE_CALLS] += 1
    data.audit[0] += 1
    K = data.n_labels
    unary = np.empty((data.offsets[i + 1] - data.offsets[i], K))
    T = unary_scores(data, i, w, unary)
    trans = transition_matrix(data, w)
    logZ = chain_log_marginals(unary, trans.reshape((1, K, K)), True, T, K, log_nodes, log_edges)
    return logZ, logZ - truth_score(data, i, unary, trans)


@numba.njit(**_NJIT)
def oracle_marginals(data, counters, i, w, log_nodes, log_edges, nodes, edges):
    """Counted oracle with both forms of ν_i(w): log-marginals and linear marginals.

    What dual methods need (SDCA's line search mixes linear marginals and takes their
    logs); costs the same as :func:`oracle` on the scaled path.
    """
    counters[ORACLE_CALLS] += 1
    data.audit[0] += 1
    K = data.n_labels
    unary = np.empty((data.offsets[i + 1] - data.offsets[i], K))
    T = unary_scores(data, i, w, unary)
    trans = transition_matrix(data, w)
    one = trans.reshape((1, K, K))
    logZ = _chain_marginals(
        unary, one, True, T, K, log_nodes, log_edges, True, nodes, edges, _NO_BASE, _NO_TRUTH
    )
    return logZ, logZ - truth_score(data, i, unary, trans)


@numba.njit(**_NJIT)
def oracle_sums(data, counters, i, w, nodes, edge_sum):
    """Counted oracle in gradient form: (log Z_i, ℓ_i); linear node marginals into
    ``nodes[:T]`` and Σ_t pairwise marginals into ``edge_sum`` (overwritten)."""
    counters[ORACLE_CALLS] += 1
    data.audit[0] += 1
    K = data.n_labels
    unary = np.empty((data.offsets[i + 1] - data.offsets[i], K))
    T = unary_scores(data, i, w, unary)
    trans = transition_matrix(data, w)
    edge_sum[:, :] = 0.0
    logZ = chain_marginal_sums(unary, trans, T, K, nodes, edge_sum)
    return logZ, logZ - truth_score(data, i, unary, trans)


@numba.njit(**_NJIT)
def oracle_sums_scores(data, counters, i, unary, trans, nodes, edge_sum, work=None):
    """Counted oracle in gradient form on score tables with shared transitions.

    For methods that keep w implicitly (w = s·u): (log Z, ℓ_i) of the chain with these
    scores; linear node marginals into ``nodes`` and Σ_t pairwise marginals into
    ``edge_sum`` (overwritten). ``nll`` uses the sequence's ground truth. ``work``, a
    ChainWork (``pieces.chain_work``), spares the call its allocations.
    """
    counters[ORACLE_CALLS] += 1
    data.audit[0] += 1
    K = data.n_labels
    T = data.offsets[i + 1] - data.offsets[i]
    edge_sum[:, :] = 0.0
    logZ = chain_marginal_sums(unary, trans, T, K, nodes, edge_sum, work)
    return logZ, logZ - truth_score(data, i, unary, trans)


@numba.njit(**_NJIT)
def forward(data, counters, i, w):
    """Counted forward-only call: (log Z_i, ℓ_i(w))."""
    counters[FORWARD_CALLS] += 1
    data.audit[0] += 1
    K = data.n_labels
    unary = np.empty((data.offsets[i + 1] - data.offsets[i], K))
    T = unary_scores(data, i, w, unary)
    trans = transition_matrix(data, w)
    logZ = chain_log_partition(unary, trans.reshape((1, K, K)), True, T, K)
    return logZ, logZ - truth_score(data, i, unary, trans)


@numba.njit(**_NJIT)
def oracle_scores(data, counters, i, unary, edges, log_nodes, log_edges):
    """Counted oracle on arbitrary score tables: unary (T × K), edges (T-1 × K × K).

    Returns log Z(θ); log-marginals into the outputs. Serves OEG and dual initialization.
    """
    counters[ORACLE_CALLS] += 1
    data.audit[0] += 1
    T = data.offsets[i + 1] - data.offsets[i]
    K = data.n_labels
    if T == 1:
        return chain_log_marginals(unary, np.zeros((1, K, K)), True, T, K, log_nodes, log_edges)
    return chain_log_marginals(unary, edges, False, T, K, log_nodes, log_edges)


@numba.njit(**_NJIT)
def _one_token(unary, K, log_nodes, log_edges, linear, nodes, lin_edges):
    """A chain of one token: no edge table, the shared path on a zero one."""
    one = np.zeros((1, K, K))
    return _chain_marginals(
        unary, one, True, 1, K, log_nodes, log_edges, linear, nodes, lin_edges, _NO_BASE, _NO_TRUTH
    )


@numba.njit(**_NJIT)
def oracle_scores_marginals(
    data, counters, i, unary, edges, log_nodes, log_edges, nodes, lin_edges
):
    """:func:`oracle_scores` with the linear marginals too: nodes into ``nodes[:T]``, edges
    into ``lin_edges[:T-1]`` (on the scaled path products of the messages, no exp; OEG's
    trials need both forms and took an exp of every edge entry otherwise)."""
    counters[ORACLE_CALLS] += 1
    data.audit[0] += 1
    T = data.offsets[i + 1] - data.offsets[i]
    K = data.n_labels
    if T == 1:
        return _one_token(unary, K, log_nodes, log_edges, True, nodes, lin_edges)
    return _chain_marginals(
        unary, edges, False, T, K, log_nodes, log_edges, True, nodes, lin_edges, _NO_BASE, _NO_TRUTH
    )


@numba.njit(**_NJIT)
def oracle_scores_bonus(
    data, counters, i, unary, trans, bonus, edges, log_nodes, log_edges, nodes, lin_edges, linear
):
    """Counted oracle on unary scores and edge tables θ_t = ``trans`` + ``bonus`` at the
    ground-truth pair (y_t, y_{t+1}): the form of OEG's trial scores (§3.8), whose edge
    part is one K × K table plus ρ_i·c on the truth.

    Writes θ_t into ``edges[:T-1]`` (``trans[y_t, y_{t+1}] + bonus`` at the pair) and
    returns log Z; the log-marginals go into ``log_nodes``/``log_edges`` and, with
    ``linear``, the linear ones into ``nodes``/``lin_edges``. Bit for bit
    :func:`oracle_scores` (``linear``: :func:`oracle_scores_marginals`) on the tables it
    writes, but ``trans`` is scanned for its extremes and exponentiated once instead of
    once per position (:func:`_bonus_edge_maxima`, :func:`_exp_edges_bonus`).
    """
    counters[ORACLE_CALLS] += 1
    data.audit[0] += 1
    s = data.offsets[i]
    T = data.offsets[i + 1] - s
    K = data.n_labels
    y = data.y
    for t in range(T - 1):
        for k in range(K):
            for l in range(K):
                edges[t, k, l] = trans[k, l]
        k = y[s + t]
        l = y[s + t + 1]
        edges[t, k, l] = trans[k, l] + bonus
    if T == 1:
        return _one_token(unary, K, log_nodes, log_edges, linear, nodes, lin_edges)
    return _chain_marginals(
        unary,
        edges[: T - 1],
        False,
        T,
        K,
        log_nodes,
        log_edges,
        linear,
        nodes,
        lin_edges,
        trans,
        y[s : s + T],
    )


@numba.njit(**_NJIT)
def forward_scores(data, counters, i, unary, trans, work=None):
    """Counted forward-only call on score tables with shared transitions: log Z(θ).
    ``work``, a ChainWork (``pieces.chain_work``), spares the call its allocations."""
    counters[FORWARD_CALLS] += 1
    data.audit[0] += 1
    T = data.offsets[i + 1] - data.offsets[i]
    K = data.n_labels
    return chain_log_partition(unary, trans.reshape((1, K, K)), True, T, K, work)


# --------------------------------------------------------------------------------------
# features and directions on one sequence (uncounted: linear algebra, no inference)
# --------------------------------------------------------------------------------------


@numba.njit(**_NJIT)
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


@numba.njit(**_NJIT)
def truth_transitions(data, i, out):
    """Transition counts of the ground truth of sequence ``i`` into ``out`` (K × K)."""
    s = data.offsets[i]
    T = data.offsets[i + 1] - s
    out[:, :] = 0.0
    for t in range(T - 1):
        out[data.y[s + t], data.y[s + t + 1]] += 1.0


@numba.njit(inline="always", **_NJIT)
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


@numba.njit(inline="always", **_NJIT)
def local_gradient(data, i, nodes, edge_sum, work, truth, E_loc, trans_loc):
    """∇ℓ_i = E_ν F − F(x_i, y_i) on sequence i's support; returns ‖∇ℓ_i‖² (§1.5, §3.4).

    ``nodes[:T]`` / ``edge_sum`` are ν_i's node marginals and summed pairwise marginals
    (as from ``oracle_sums``); the emission+bias part goes to ``E_loc`` (|S_i|×K, rows
    ``data.support[lo:hi]``), the transition part to ``trans_loc`` (K×K). ``work``
    (≥ T×K) and ``truth`` (K×K) are scratch; ``nodes`` is left unchanged. Inlined into
    the caller's loop (it runs once per stochastic step).
    """
    K = data.n_labels
    node_residual(data, i, nodes, work)
    expected_emission(data, i, work, E_loc)
    truth_transitions(data, i, truth)
    for k in range(K):
        for l in range(K):
            trans_loc[k, l] = edge_sum[k, l] - truth[k, l]
    return norm2_local(data, i, E_loc, trans_loc)


@numba.njit(inline="always", **_NJIT)
def norm2_local(data, i, E_loc, trans_dir):
    """‖d‖² of a direction given on sequence i's support and the transition block."""
    lo, hi = support_bounds(data, i)
    K = data.n_labels
    e = _lane_sums(E_loc, None, 0, E_loc, hi - lo, K, 0.0, 0.0, 0.0, 0.0)
    t = _lane_sums(trans_dir, None, 0, trans_dir, K, K, 0.0, 0.0, 0.0, 0.0)
    return ((e[0] + e[1]) + (e[2] + e[3])) + ((t[0] + t[1]) + (t[2] + t[3]))


@numba.njit(inline="always", **_NJIT)
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


@numba.njit(**_NJIT)
def add_local(data, i, w, scale, E_loc, trans_dir):
    """w += scale · (E_loc on S_i, trans_dir on the transition block)."""
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
            W[k, l] += scale * trans_dir[k, l]


@numba.njit(**_NJIT)
def dot_local(data, i, w, E_loc, trans_dir):
    """⟨w, d⟩ for a direction d given on S_i and the transition block (the support's rows,
    then the transition block's, in one set of :func:`_lane_sums`)."""
    K = data.n_labels
    U = emission_matrix(data, w)
    W = transition_matrix(data, w)
    lo, hi = support_bounds(data, i)
    a0, a1, a2, a3 = _lane_sums(U, data.support, lo, E_loc, hi - lo, K, 0.0, 0.0, 0.0, 0.0)
    a0, a1, a2, a3 = _lane_sums(W, None, 0, trans_dir, K, K, a0, a1, a2, a3)
    return (a0 + a1) + (a2 + a3)


# --------------------------------------------------------------------------------------
# entropy and KL of chain marginals (§1.3, §5.3)
# --------------------------------------------------------------------------------------


@numba.njit(**_NJIT)
def _row_lse(table, k, K):
    mx = table[k, 0]
    for l in range(1, K):
        if table[k, l] > mx:
            mx = table[k, l]
    if mx == -np.inf:
        return mx
    s = 0.0
    for l in range(K):
        s += math.exp(table[k, l] - mx)
    return mx + math.log(s)


@numba.njit(**_NJIT)
def chain_entropy(log_nodes, log_edges, T, K):
    """H̃(μ) = H(μ_1) + Σ_t H(Y_{t+1} | Y_t), μ_t taken as row sums of the edge tables."""
    H = 0.0
    if T == 1:
        for k in range(K):
            lp = log_nodes[0, k]
            if lp > -np.inf:
                H -= math.exp(lp) * lp
        return H
    lr = np.empty(K)
    for k in range(K):
        lr[k] = _row_lse(log_edges[0], k, K)
        if lr[k] > -np.inf:
            H -= math.exp(lr[k]) * lr[k]
    for t in range(T - 1):
        tab = log_edges[t]
        for k in range(K):
            if t > 0:
                lr[k] = _row_lse(tab, k, K)
            for l in range(K):
                lp = tab[k, l]
                if lp > -np.inf:
                    H -= math.exp(lp) * (lp - lr[k])
    return H


@numba.njit(**_NJIT)
def chain_kl(mu_nodes, mu_edges, nu_nodes, nu_edges, T, K):
    """D̃(μ ‖ ν) as a sum of non-negative conditional KLs (§5.3); 0 log 0 = 0."""
    D = 0.0
    if T == 1:
        for k in range(K):
            lp = mu_nodes[0, k]
            if lp > -np.inf:
                D += math.exp(lp) * (lp - nu_nodes[0, k])
        return D
    lm = np.empty(K)
    ln = np.empty(K)
    for k in range(K):
        lm[k] = _row_lse(mu_edges[0], k, K)
        ln[k] = _row_lse(nu_edges[0], k, K)
        if lm[k] > -np.inf:
            D += math.exp(lm[k]) * (lm[k] - ln[k])
    for t in range(T - 1):
        tm = mu_edges[t]
        tn = nu_edges[t]
        for k in range(K):
            if t > 0:
                lm[k] = _row_lse(tm, k, K)
                ln[k] = _row_lse(tn, k, K)
            for l in range(K):
                lp = tm[k, l]
                if lp > -np.inf:
                    D += math.exp(lp) * ((lp - lm[k]) - (tn[k, l] - ln[k]))
    return D


@numba.njit(**_FAST)
def chain_kl_linlog(p_nodes, p_edges, lp_nodes, lp_edges, lq_nodes, lq_edges, T, K):
    """D̃(p ‖ q) in the chain-rule form (§5.3) from linear p and the logs of p and q.

    For loops that hold both forms of p already (SDCA): the node log-marginals give the
    conditionals, so no transcendental function is evaluated. Entries with p = 0 add
    nothing (0 log 0 = 0); p > 0 where q = 0 gives +inf.
    """
    total = 0.0
    for k in range(K):
        if p_nodes[0, k] > 0.0:
            total += p_nodes[0, k] * (lp_nodes[0, k] - lq_nodes[0, k])
    for t in range(T - 1):
        for k in range(K):
            rp = lp_nodes[t, k]
            rq = lq_nodes[t, k]
            for l in range(K):
                p = p_edges[t, k, l]
                if p > 0.0:
                    total += p * ((lp_edges[t, k, l] - rp) - (lq_edges[t, k, l] - rq))
    return total


@numba.njit(**_FAST)
def chain_entropy_linlog(nodes, edges, log_nodes, log_edges, T, K):
    """H̃(μ) in the chain-rule form (§1.3) from linear and log marginals, 0 log 0 = 0."""
    H = 0.0
    for k in range(K):
        if nodes[0, k] > 0.0:
            H -= nodes[0, k] * log_nodes[0, k]
    for t in range(T - 1):
        for k in range(K):
            r = log_nodes[t, k]
            for l in range(K):
                p = edges[t, k, l]
                if p > 0.0:
                    H -= p * (log_edges[t, k, l] - r)
    return H


# --------------------------------------------------------------------------------------
# full-batch evaluation (uncounted; parallel over sequences)
# --------------------------------------------------------------------------------------

# Sequence chunks of a batch kernel: a fixed number, so the chunk partial sums (and hence
# the rounding of every reduction) do not depend on how many threads run them, and enough
# of them that a dynamic schedule can even out unequal chunks and a thread the loaded
# machine preempts (batch_value_grad has numba hand them out one at a time).
BATCH_CHUNKS = 32


@numba.njit(**_NJIT)
def _zero(a):
    """a[:, :] = 0 as a loop. The chunk kernels below run under parallel_chunksize(1), and
    an array expression in a parallel=True function is a parfor of its own, scheduled one
    entry per piece of work (see _batch_chunks' reduction): each chunk kernel's only
    parfor is its prange (tests/test_oracle.py checks)."""
    for r in range(a.shape[0]):
        for k in range(a.shape[1]):
            a[r, k] = 0.0


@numba.njit(**_NJIT)
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


@numba.njit(**_NJIT)
def _chunk_bounds(offsets, n_chunks):
    """Sequence indices cutting the batch into ``n_chunks`` runs of about equal tokens.

    Cutting by sequence count left one thread with the long sequences (CoNLL-2000's
    lengths vary 1–100+); by tokens, each chunk costs about the same forward–backward.
    """
    return _mass_bounds(offsets, n_chunks)


@numba.njit(**_NJIT)
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


@numba.njit(parallel=True, **_NJIT)
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


@numba.njit(**_NJIT)
def all_unary(data, w):
    """Unary scores of every token (N × K)."""
    N = data.y.shape[0]
    K = data.n_labels
    theta = np.empty((N, K))
    _all_unary_chunks(
        data, emission_matrix(data, w), _chunk_bounds(data.offsets, BATCH_CHUNKS), theta
    )
    return theta


@numba.njit(parallel=True, **_NJIT)
def _batch_chunks(data, U, trans, bounds, nodes, G_parts, S_parts, edge_parts, logZ, nll):
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
    mT, tspan = _trans_span(trans, K)
    _exp_transitions_at(trans, K, mT, E, ET)
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
            if scaled_ok and _span(th, T, K) <= LOG_SPAN_LIMIT:
                z = _scaled_forward(
                    th, E3, mT3, True, T, K, u, m, al, c, _NO_SLOT, _NO_REP, _NO_REP_IDX
                )
                _scaled_backward(T, K, u, ET3, True, c, beta, Vs, _NO_SLOT, _NO_REP, _NO_REP_IDX)
                nd = nd_c[s:e]
                for t in range(T):
                    for k in range(K):
                        nd[t, k] = al[t, k] * beta[t, k]
                for k in range(K):
                    al[T - 1, k] = 0.0
                    Vs[0, k] = 0.0
            else:
                z = chain_marginal_sums(th, trans, T, K, nd_c[s:e], edge_parts[ch])
                for t in range(T):
                    for k in range(K):
                        al[t, k] = 0.0
                        Vs[t, k] = 0.0
            logZ[i] = z
            nll[i] = z - truth_score(data, i, th, trans)
        if R > 1:
            np.dot(al_c[:-1].T, V_c[1:], S_parts[ch])
        else:
            _zero(S_parts[ch])
        if fused_dense:
            if R > 0:
                np.dot(data.X[r_lo:r_hi].T, nd_c, G_parts[ch])
            else:
                _zero(G_parts[ch])
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


@numba.njit(parallel=True, **_NJIT)
def _batch_forward(data, theta, trans, bounds, logZ, nll):
    K = data.n_labels
    edges = trans.reshape((1, K, K))
    for ch in numba.prange(bounds.shape[0] - 1):
        for i in range(bounds[ch], bounds[ch + 1]):
            s = data.offsets[i]
            e = data.offsets[i + 1]
            z = chain_log_partition(theta[s:e], edges, True, e - s, K)
            logZ[i] = z
            nll[i] = z - truth_score(data, i, theta[s:e], trans)


@numba.njit(parallel=True, **_NJIT)
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


@numba.njit(parallel=True, **_NJIT)
def _dense_emission_parts(X, weights, bounds, G_parts):
    for ch in numba.prange(bounds.shape[0] - 1):
        lo = bounds[ch]
        hi = bounds[ch + 1]
        if hi > lo:
            np.dot(X[lo:hi].T, weights[lo:hi], G_parts[ch])
        else:
            _zero(G_parts[ch])


@numba.njit(**_NJIT)
def _dense_parts_fit(N, A, n_chunks):
    # Per-chunk emission partials (n_chunks × A × K) are kept only while they take no
    # more memory than the N × K node array they replace.
    return n_chunks * A <= N


@numba.njit(**_NJIT)
def batch_expected_emission(data, tr, weights, out_emission):
    """Σ_i Σ_t weights[t] ⊗ φ_{i,t} over all tokens into an (n_attributes × K) array."""
    if data.dense:
        N = data.y.shape[0]
        A = data.n_attributes
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


@numba.njit(**_NJIT)
def _batch_value_grad_impl(data, tr, w, want_grad, grad_out):
    n = data.offsets.shape[0] - 1
    N = data.y.shape[0]
    K = data.n_labels
    A = data.n_attributes
    U = emission_matrix(data, w)
    trans = transition_matrix(data, w)
    logZ = np.empty(n)
    nll = np.empty(n)
    bounds = _chunk_bounds(data.offsets, BATCH_CHUNKS)
    n_chunks = bounds.shape[0] - 1
    if not want_grad:
        theta = np.empty((N, K))
        _all_unary_chunks(data, U, bounds, theta)
        _batch_forward(data, theta, trans, bounds, logZ, nll)
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
    total = _batch_chunks(data, U, trans, bounds, nodes, G_parts, S_parts, edge_parts, logZ, nll)
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


@numba.njit(parallel=True, **_NJIT)
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


@numba.njit(parallel=True, **_NJIT)
def _batch_log_marginals_impl(data, theta, trans, log_nodes, log_edges, logZ):
    n = data.offsets.shape[0] - 1
    K = data.n_labels
    edges = trans.reshape((1, K, K))
    for i in numba.prange(n):
        s = data.offsets[i]
        e = data.offsets[i + 1]
        es = s - i
        logZ[i] = chain_log_marginals(
            theta[s:e], edges, True, e - s, K, log_nodes[s:e], log_edges[es : e - i - 1]
        )


@numba.njit(**_NJIT)
def batch_log_marginals(data, w, log_nodes, log_edges, logZ):
    """ν(w) for every sequence (log node and edge marginals) and log Z (uncounted)."""
    theta = all_unary(data, w)
    trans = transition_matrix(data, w)
    _batch_log_marginals_impl(data, theta, trans, log_nodes, log_edges, logZ)
    data.audit[0] += data.offsets.shape[0] - 1


@numba.njit(parallel=True, **_NJIT)
def batch_entropy(data, log_nodes, log_edges, out):
    """H̃(μ_i) for every sequence."""
    n = data.offsets.shape[0] - 1
    K = data.n_labels
    for i in numba.prange(n):
        s = data.offsets[i]
        e = data.offsets[i + 1]
        out[i] = chain_entropy(log_nodes[s:e], log_edges[s - i : e - i - 1], e - s, K)


@numba.njit(parallel=True, **_NJIT)
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


@numba.njit(parallel=True, **_NJIT)
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


@numba.njit(**_NJIT)
def _batch_expected_features_impl(data, tr, log_nodes, log_edges, n_chunks, out):
    N = data.y.shape[0]
    K = data.n_labels
    A = data.n_attributes
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


@numba.njit(parallel=True, **_NJIT)
def _batch_viterbi_impl(data, theta, trans, out):
    n = data.offsets.shape[0] - 1
    K = data.n_labels
    for i in numba.prange(n):
        s = data.offsets[i]
        e = data.offsets[i + 1]
        chain_viterbi(theta[s:e], trans, e - s, K, out[s:e])


@numba.njit(**_NJIT)
def batch_viterbi(data, w, out):
    """Viterbi labels of every token (uncounted)."""
    theta = all_unary(data, w)
    _batch_viterbi_impl(data, theta, transition_matrix(data, w), out)
