"""Forward–backward on one chain (docs/algorithms.md §1, §5.1): the hot loop of every optimizer.

Forward–backward is *scaled* (linear space, one normalizer per position, the transition
factor exp(W_T) computed once per sequence and pulled out of the summed pairwise
marginals), which costs K² multiply-adds and no transcendental function per token.
Log-marginals are formed as sums of logs of the scaled messages, so they keep full
relative precision where the linear marginals would underflow. When a score table spans
more than ``LOG_SPAN_LIMIT`` nats the scaled messages could underflow; that sequence then
runs the max-shifted log-space recursion instead (§5.1), so scores of ±1e4 stay finite.

Entry points: :func:`chain_marginals` (log and, on request, linear marginals, on a
shared transition table, one table per position, or OEG's tables that equal one base
table but at the ground-truth pair), :func:`chain_log_marginals`,
:func:`chain_marginal_sums` (the gradient form) and :func:`chain_log_partition`.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from crfopt.kernels._numba.flags import FAST, NJIT
from crfopt.kernels._numba.tables import (
    bonus_table_maxima,
    clip0,
    exp_table,
    exp_tables,
    exp_tables_bonus,
    fill_zero,
    lse_row,
    row_span,
    table_maxima,
    table_span,
)
from crfopt.kernels.vmath import vexp

# Beyond this span (max - min) of a unary row or of the transition table, scaled messages
# may fall below the smallest double (e^-745) after a few products; use log space.
LOG_SPAN_LIMIT = 300.0

# ``chain_marginals`` without a base table (see :func:`exp_tables_bonus`)
NO_BASE = np.empty((0, 0))
NO_TRUTH = np.empty(0, dtype=np.int64)
# the scaled passes without per-position tables and row replacements (scaled_forward)
NO_SLOT = np.empty(0, dtype=np.int64)
NO_REP = np.empty((0, 2, 1))
NO_REP_IDX = np.empty((0, 2), dtype=np.int64)


@numba.njit(**NJIT, inline="always")
def _table(shared, slot, t):
    """Index into E3/ET3 of position t's edge table (see :func:`scaled_forward`)."""
    if shared:
        return 0
    return slot[t] if slot.shape[0] else t


@numba.njit(**FAST)
def scaled_forward(unary, E3, mT3, shared, T, K, u, m, alpha, c, slot, rep, rep_idx):
    """Scaled forward pass: u = exp(θ - m_t), normalized α̂ (rows sum to 1), normalizers c.

    ``E3`` holds exp(θ_edge - max) for one shared table (shape (1, K, K), ``shared``) or
    one per position ((T-1, K, K)), ``mT3`` the subtracted maxima. Returns
    log Z = Σ_t (log c_t + m_t) + Σ_t max θ_edge,t. A non-empty ``slot`` maps position t
    to its table E3[slot[t]], whose row ``rep_idx[t, 0]`` (if ≥ 0) is ``rep[t, 0]``
    instead (:func:`exp_tables_bonus`).
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
        # here and in scaled_backward: an inlined helper for these loops made every
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


@numba.njit(**FAST)
def scaled_backward(T, K, u, ET3, shared, c, beta, V, slot, rep, rep_idx):
    """Scaled backward pass with the forward normalizers, so μ_t = α̂_t β̂_t.

    Also leaves V[t] = u_t β̂_t / c_t (t ≥ 1): the pairwise marginal of (t-1, t) is
    α̂_{t-1}(k) E(k, l) V[t](l). ``slot``, ``rep``, ``rep_idx`` as in
    :func:`scaled_forward`, for the transposed tables (``rep[t, 1]``, ``rep_idx[t, 1]``).
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
# below were computed inside chain_marginals
@numba.njit(**NJIT, inline="always")
def _linear_marginals(alpha, beta, V, E3, shared, slot, rep, rep_idx, T, K, nodes, edges):
    """The linear marginals as products of the scaled messages: α̂_t β̂_t for the nodes,
    α̂_t(k) E(k,l) V_{t+1}(l) for the edges (tables as in :func:`scaled_forward`)."""
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
                edges[t, k, l] = a * Ek[l] * V[t + 1, l]


@numba.njit(**NJIT)
def _log_forward(unary, pairwise, shared, T, K, la, logc):
    """Normalized log-space forward messages: lse_k la[t, k] = 0, log Z = Σ_t logc[t].

    Normalizing at every position keeps the messages at the size of one position's
    scores, instead of growing with t, so long chains of huge scores lose no precision.
    ``pairwise`` is (1, K, K) if shared else (T-1, K, K).
    """
    tmp = np.empty(K)
    z = lse_row(unary[0], K)
    logc[0] = z
    for k in range(K):
        la[0, k] = unary[0, k] - z
    total = z
    for t in range(1, T):
        Et = pairwise[0] if shared else pairwise[t - 1]
        for l in range(K):
            for k in range(K):
                tmp[k] = la[t - 1, k] + Et[k, l]
            la[t, l] = unary[t, l] + lse_row(tmp, K)
        z = lse_row(la[t], K)
        logc[t] = z
        for l in range(K):
            la[t, l] -= z
        total += z
    return total


@numba.njit(**NJIT)
def _log_backward(unary, pairwise, shared, T, K, logc, lb):
    """Backward messages normalized by the forward normalizers: μ_t = exp(la_t + lb_t)."""
    tmp = np.empty(K)
    for k in range(K):
        lb[T - 1, k] = 0.0
    for t in range(T - 2, -1, -1):
        Et = pairwise[0] if shared else pairwise[t]
        for k in range(K):
            for l in range(K):
                tmp[l] = Et[k, l] + unary[t + 1, l] + lb[t + 1, l]
            lb[t, k] = lse_row(tmp, K) - logc[t + 1]


@numba.njit(**NJIT)
def chain_marginals(
    unary,
    pairwise,
    shared,
    T,
    K,
    log_nodes,
    log_edges,
    want_linear,
    nodes,
    edges,
    base,
    truth,
    want_logs=True,
):
    """log Z, log node/edge marginals and, with ``want_linear``, linear ones too.

    ``want_logs=False`` (with ``want_linear``): the scaled path returns once the linear
    marginals are written, without the log-marginals (2TK logs and the (T−1)K² sums they
    cost); the log-space path, taken only for extreme score spans, still writes them.
    The log arrays are then work space, their contents unspecified.

    On the scaled path the linear marginals are products of the messages
    (α̂_t(k) E(k,l) V_{t+1}(l)), so having both costs no transcendental function.
    A K × K ``base`` (else shape (0, 0)) says that every position's table in ``pairwise``
    is ``base`` but at (``truth[t]``, ``truth[t + 1]``): see :func:`exp_tables_bonus`.
    """
    P = 1 if shared else max(T - 1, 1)
    mT3 = np.zeros(P)
    bonus = not shared and base.shape[0] > 0
    if bonus:
        edge_span, mB = bonus_table_maxima(pairwise, base, truth, T, K, mT3)
    else:
        edge_span, mB = table_maxima(pairwise, shared, T, K, mT3), 0.0
    if edge_span <= LOG_SPAN_LIMIT and row_span(unary, T, K) <= LOG_SPAN_LIMIT:
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
            exp_tables_bonus(pairwise, base, mB, truth, T, K, E3, ET3, mT3, slot, rep, rep_idx)
            logZ = scaled_forward(unary, E3, mT3, shared, T, K, u, m, alpha, c, slot, rep, rep_idx)
            scaled_backward(T, K, u, ET3, shared, c, beta, V, slot, rep, rep_idx)
            if want_linear:
                _linear_marginals(
                    alpha, beta, V, E3, shared, slot, rep, rep_idx, T, K, nodes, edges
                )
        else:
            # the constant empty maps: no allocation on the path every other oracle takes
            slot_, rep_, idx_ = NO_SLOT, NO_REP, NO_REP_IDX
            E3 = np.empty((P, K, K))
            ET3 = np.empty((P, K, K))
            if shared:
                exp_table(pairwise[0], K, mT3[0], E3[0], ET3[0])
            else:
                exp_tables(pairwise, T, K, E3, ET3, mT3)
            logZ = scaled_forward(unary, E3, mT3, shared, T, K, u, m, alpha, c, slot_, rep_, idx_)
            scaled_backward(T, K, u, ET3, shared, c, beta, V, slot_, rep_, idx_)
            if want_linear:
                _linear_marginals(alpha, beta, V, E3, shared, slot_, rep_, idx_, T, K, nodes, edges)
        if want_linear and not want_logs:
            return logZ
        for t in range(T):
            for k in range(K):
                alpha[t, k] = math.log(alpha[t, k])
                beta[t, k] = math.log(beta[t, k])
                log_nodes[t, k] = clip0(alpha[t, k] + beta[t, k])
        lv = np.empty(K)
        for t in range(T - 1):
            Et = pairwise[0] if shared else pairwise[t]
            mT = mT3[0] if shared else mT3[t]
            shift = math.log(c[t + 1]) + m[t + 1] + mT
            for l in range(K):
                lv[l] = unary[t + 1, l] + beta[t + 1, l] - shift
            for k in range(K):
                la = alpha[t, k]
                for l in range(K):
                    log_edges[t, k, l] = clip0(la + Et[k, l] + lv[l])
        return logZ
    la = np.empty((T, K))
    lb = np.empty((T, K))
    logc = np.empty(T)
    logZ = _log_forward(unary, pairwise, shared, T, K, la, logc)
    _log_backward(unary, pairwise, shared, T, K, logc, lb)
    for t in range(T):
        for k in range(K):
            log_nodes[t, k] = clip0(la[t, k] + lb[t, k])
            if want_linear:
                nodes[t, k] = math.exp(log_nodes[t, k])
    for t in range(T - 1):
        Et = pairwise[0] if shared else pairwise[t]
        for k in range(K):
            for l in range(K):
                log_edges[t, k, l] = clip0(
                    la[t, k] + Et[k, l] + unary[t + 1, l] + lb[t + 1, l] - logc[t + 1]
                )
                if want_linear:
                    edges[t, k, l] = math.exp(log_edges[t, k, l])
    return logZ


@numba.njit(**NJIT)
def chain_log_marginals(unary, pairwise, shared, T, K, log_nodes, log_edges):
    """log Z and log node / edge marginals of one chain (§5.1); outputs clipped to ≤ 0.

    ``pairwise`` is (1, K, K) for shared transitions, or (T-1, K, K) position-dependent.
    """
    return chain_marginals(
        unary,
        pairwise,
        shared,
        T,
        K,
        log_nodes,
        log_edges,
        False,
        np.empty((1, 1)),
        np.empty((1, 1, 1)),
        NO_BASE,
        NO_TRUTH,
    )


@numba.njit(**FAST)
def _accumulate_outer(alpha, V, T, K, S):
    """S += Σ_{t<T-1} α̂_t ⊗ V_{t+1} (the transition factor E is applied afterwards)."""
    for t in range(T - 1):
        vrow = V[t + 1]
        for k in range(K):
            a = alpha[t, k]
            Sk = S[k]
            for l in range(K):
                Sk[l] += a * vrow[l]


@numba.njit(inline="always", **NJIT)
def _pass_tables(work, T, K):
    """The scaled pass's tables u, m, E, Eᵀ, c and [max W_T]: views into ``work`` (a
    ChainWork) or, when it is None, new arrays."""
    if work is None:
        return (
            np.empty((T, K)), np.empty(T), np.empty((K, K)), np.empty((K, K)), np.empty(T),
            np.empty(1),
        )  # fmt: skip
    return work.u[:T], work.m[:T], work.E, work.ET, work.c[:T], work.mT


@numba.njit(**NJIT)
def chain_marginal_sums(unary, transition, T, K, nodes, edge_sum, work=None):
    """log Z, linear node marginals (T × K) and Σ_t pairwise marginals (K × K, added to).

    The gradient form of the oracle: what SAG, SG and the full-batch gradient need.
    ``work`` (a ChainWork) holds the scaled pass's tables; None allocates them.
    """
    mT, tspan = table_span(transition, K)
    if tspan <= LOG_SPAN_LIMIT and row_span(unary, T, K) <= LOG_SPAN_LIMIT:
        u, m, E, ET, c, mT3 = _pass_tables(work, T, K)
        if work is None:
            beta, V, S = np.empty((T, K)), np.empty((T, K)), np.empty((K, K))
        else:
            beta, V, S = work.beta[:T], work.V[:T], work.S
        fill_zero(S)
        exp_table(transition, K, mT, E, ET)
        mT3[0] = mT
        E3, ET3 = E.reshape((1, K, K)), ET.reshape((1, K, K))
        logZ = scaled_forward(
            unary, E3, mT3, True, T, K, u, m, nodes, c, NO_SLOT, NO_REP, NO_REP_IDX
        )
        scaled_backward(T, K, u, ET3, True, c, beta, V, NO_SLOT, NO_REP, NO_REP_IDX)
        _accumulate_outer(nodes, V, T, K, S)
        for t in range(T):
            for k in range(K):
                nodes[t, k] *= beta[t, k]
        for k in range(K):
            for l in range(K):
                edge_sum[k, l] += E[k, l] * S[k, l]
        return logZ
    pairwise = transition.reshape((1, K, K))
    la = np.empty((T, K))
    lb = np.empty((T, K))
    logc = np.empty(T)
    logZ = _log_forward(unary, pairwise, True, T, K, la, logc)
    _log_backward(unary, pairwise, True, T, K, logc, lb)
    for t in range(T):
        for k in range(K):
            nodes[t, k] = math.exp(clip0(la[t, k] + lb[t, k]))
    for t in range(T - 1):
        for k in range(K):
            for l in range(K):
                edge_sum[k, l] += math.exp(
                    clip0(
                        la[t, k] + transition[k, l] + unary[t + 1, l] + lb[t + 1, l] - logc[t + 1]
                    )
                )
    return logZ


@numba.njit(**NJIT)
def chain_log_partition(unary, pairwise, shared, T, K, work=None):
    """log Z of one chain by the forward recursion only (``work``: a ChainWork or None)."""
    if shared:
        mT, tspan = table_span(pairwise[0], K)
        if tspan <= LOG_SPAN_LIMIT and row_span(unary, T, K) <= LOG_SPAN_LIMIT:
            u, m, E, ET, c, mT3 = _pass_tables(work, T, K)
            alpha = np.empty((T, K)) if work is None else work.alpha[:T]
            exp_table(pairwise[0], K, mT, E, ET)
            mT3[0] = mT
            E3 = E.reshape((1, K, K))
            return scaled_forward(
                unary, E3, mT3, True, T, K, u, m, alpha, c, NO_SLOT, NO_REP, NO_REP_IDX
            )
    la = np.empty((T, K))
    logc = np.empty(T)
    return _log_forward(unary, pairwise, shared, T, K, la, logc)
