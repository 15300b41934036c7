"""Pure-NumPy kernels: the same functions and signatures as :mod:`crfopt.kernels._numba`.

Used when ``CRFOPT_DISABLE_JIT=1`` and by the tests as an independent computation: this
module runs forward–backward in log space throughout (vectorized over labels), whereas
the compiled kernels use scaled linear-space messages. The two agree to 1e-10.
"""

from __future__ import annotations

import numpy as np

from crfopt.kernels.counters import FORWARD_CALLS, ORACLE_CALLS


def _lse(x: np.ndarray, axis: int) -> np.ndarray:
    mx = np.max(x, axis=axis, keepdims=True)
    safe = np.where(np.isfinite(mx), mx, 0.0)
    with np.errstate(divide="ignore"):
        out = np.log(np.sum(np.exp(x - safe), axis=axis, keepdims=True)) + safe
    return np.squeeze(out, axis=axis)


def support_bounds(data, i):
    if data.dense:
        return 0, int(data.n_kernel_attributes)
    return int(data.support_ptr[i]), int(data.support_ptr[i + 1])


def emission_matrix(data, w):
    K = int(data.n_labels)
    A = int(data.n_kernel_attributes)
    return w[: A * K].reshape(A, K)


def transition_matrix(data, w):
    K = int(data.n_labels)
    A = int(data.n_kernel_attributes)
    return w[A * K : A * K + K * K].reshape(K, K)


def _token_rows(data, s, e):
    """(row index within the sequence, attribute id, value, local id) of every entry."""
    lo, hi = data.indptr[s], data.indptr[e]
    counts = np.diff(data.indptr[s : e + 1])
    rows = np.repeat(np.arange(e - s), counts)
    return rows, data.indices[lo:hi], data.values[lo:hi], data.local[lo:hi]


def _token_scores(data, i, M, by_support, out):
    """out[t] = φ_{i,t} · M, returns T: M has one row per attribute, or per support entry
    of sequence i (``by_support``)."""
    s, e = int(data.offsets[i]), int(data.offsets[i + 1])
    T = e - s
    if data.dense:
        out[:T] = data.X[s:e] @ M
    else:
        rows, idx, val, loc = _token_rows(data, s, e)
        res = np.zeros((T, M.shape[1]))
        np.add.at(res, rows, val[:, None] * M[loc if by_support else idx])
        out[:T] = res
    return T


def unary_scores(data, i, w, out):
    return _token_scores(data, i, emission_matrix(data, w), False, out)


def local_scores(data, i, E_loc, out):
    return _token_scores(data, i, E_loc, True, out)


def truth_score(data, i, unary, transition):
    s, e = int(data.offsets[i]), int(data.offsets[i + 1])
    y = data.y[s:e]
    T = e - s
    return float(unary[np.arange(T), y].sum() + transition[y[:-1], y[1:]].sum())


def _log_messages(unary, pairwise, shared, T):
    """Normalized log messages (lse of each forward row is 0) and their normalizers."""
    K = unary.shape[1]
    la = np.empty((T, K))
    lb = np.empty((T, K))
    logc = np.empty(T)
    logc[0] = _lse(unary[0], axis=0)
    la[0] = unary[0] - logc[0]
    for t in range(1, T):
        Et = pairwise[0] if shared else pairwise[t - 1]
        row = unary[t] + _lse(la[t - 1][:, None] + Et, axis=0)
        logc[t] = _lse(row, axis=0)
        la[t] = row - logc[t]
    lb[T - 1] = 0.0
    for t in range(T - 2, -1, -1):
        Et = pairwise[0] if shared else pairwise[t]
        lb[t] = _lse(Et + (unary[t + 1] + lb[t + 1])[None, :], axis=1) - logc[t + 1]
    return la, lb, logc


def _log_edge_tables(unary, pairwise, shared, T, la, lb, logc):
    Es = np.broadcast_to(pairwise[0], (T - 1, *pairwise.shape[1:])) if shared else pairwise[: T - 1]
    return la[: T - 1, :, None] + Es + (unary[1:T] + lb[1:T] - logc[1:T, None])[:, None, :]


def chain_log_marginals(unary, pairwise, shared, T, K, log_nodes, log_edges):
    la, lb, logc = _log_messages(unary[:T], pairwise, shared, T)
    log_nodes[:T] = np.minimum(la + lb, 0.0)
    if T > 1:
        log_edges[: T - 1] = np.minimum(
            _log_edge_tables(unary[:T], pairwise, shared, T, la, lb, logc), 0.0
        )
    return float(logc.sum())


def chain_marginal_sums(unary, transition, T, K, nodes, edge_sum, work=None):
    pairwise = transition.reshape(1, K, K)
    la, lb, logc = _log_messages(unary[:T], pairwise, True, T)
    nodes[:T] = np.exp(np.minimum(la + lb, 0.0))
    if T > 1:
        tables = _log_edge_tables(unary[:T], pairwise, True, T, la, lb, logc)
        edge_sum += np.exp(np.minimum(tables, 0.0)).sum(axis=0)
    return float(logc.sum())


def chain_log_partition(unary, pairwise, shared, T, K, work=None):
    total = float(_lse(unary[0], axis=0))
    la = unary[0] - total
    for t in range(1, T):
        Et = pairwise[0] if shared else pairwise[t - 1]
        row = unary[t] + _lse(la[:, None] + Et, axis=0)
        z = float(_lse(row, axis=0))
        la = row - z
        total += z
    return total


def chain_viterbi(unary, transition, T, K, out):
    delta = unary[0].copy()
    back = np.zeros((T, K), dtype=np.int64)
    for t in range(1, T):
        cand = delta[:, None] + transition
        back[t] = np.argmax(cand, axis=0)  # first maximum: smallest label on ties
        delta = cand[back[t], np.arange(K)] + unary[t]
    arg = int(np.argmax(delta))
    best = float(delta[arg])
    out[T - 1] = arg
    for t in range(T - 1, 0, -1):
        arg = int(back[t, arg])
        out[t - 1] = arg
    return best


def _counted(data, counters, i, slot):
    """Charge one call to counter ``slot`` and one chain execution to the audit cell;
    returns (T_i, K) (the compiled oracles' helper of the same name)."""
    counters[slot] += 1
    data.audit[0] += 1
    return int(data.offsets[i + 1] - data.offsets[i]), int(data.n_labels)


def _unary(data, i, w):
    K = int(data.n_labels)
    T = int(data.offsets[i + 1] - data.offsets[i])
    unary = np.empty((T, K))
    unary_scores(data, i, w, unary)
    return unary, T, K


def oracle(data, counters, i, w, log_nodes, log_edges):
    _counted(data, counters, i, ORACLE_CALLS)
    unary, T, K = _unary(data, i, w)
    transition = transition_matrix(data, w)
    logZ = chain_log_marginals(unary, transition.reshape(1, K, K), True, T, K, log_nodes, log_edges)
    return logZ, logZ - truth_score(data, i, unary, transition)


def oracle_marginals(data, counters, i, w, log_nodes, log_edges, nodes, edges):
    log_z, nll = oracle(data, counters, i, w, log_nodes, log_edges)
    T = int(data.offsets[i + 1] - data.offsets[i])
    nodes[:T] = np.exp(log_nodes[:T])
    if T > 1:
        edges[: T - 1] = np.exp(log_edges[: T - 1])
    return log_z, nll


def oracle_sums(data, counters, i, w, nodes, edge_sum):
    _counted(data, counters, i, ORACLE_CALLS)
    unary, T, K = _unary(data, i, w)
    transition = transition_matrix(data, w)
    edge_sum[:, :] = 0.0
    logZ = chain_marginal_sums(unary, transition, T, K, nodes, edge_sum)
    return logZ, logZ - truth_score(data, i, unary, transition)


def oracle_sums_scores(data, counters, i, unary, transition, nodes, edge_sum, work=None):
    T, K = _counted(data, counters, i, ORACLE_CALLS)
    edge_sum[:, :] = 0.0
    logZ = chain_marginal_sums(unary, transition, T, K, nodes, edge_sum)
    return logZ, logZ - truth_score(data, i, unary[:T], transition)


def forward(data, counters, i, w):
    _counted(data, counters, i, FORWARD_CALLS)
    unary, T, K = _unary(data, i, w)
    transition = transition_matrix(data, w)
    logZ = chain_log_partition(unary, transition.reshape(1, K, K), True, T, K)
    return logZ, logZ - truth_score(data, i, unary, transition)


def oracle_scores(data, counters, i, unary, pairwise, log_nodes, log_edges):
    T, K = _counted(data, counters, i, ORACLE_CALLS)
    if T == 1:
        return chain_log_marginals(unary, np.zeros((1, K, K)), True, T, K, log_nodes, log_edges)
    return chain_log_marginals(unary, pairwise, False, T, K, log_nodes, log_edges)


def oracle_scores_marginals(data, counters, i, unary, pairwise, log_nodes, log_edges, nodes, edges):
    log_z = oracle_scores(data, counters, i, unary, pairwise, log_nodes, log_edges)
    T = int(data.offsets[i + 1] - data.offsets[i])
    nodes[:T] = np.exp(log_nodes[:T])
    if T > 1:
        edges[: T - 1] = np.exp(log_edges[: T - 1])
    return log_z


def oracle_scores_bonus(
    data,
    counters,
    i,
    unary,
    transition,
    bonus,
    pairwise,
    log_nodes,
    log_edges,
    nodes,
    edges,
    linear,
    logs=True,
):
    # logs=False leaves the log arrays unspecified; here they are written as always
    s = int(data.offsets[i])
    T = int(data.offsets[i + 1]) - s
    if T > 1:
        y = data.y[s : s + T]
        pairwise[: T - 1] = transition
        pairwise[np.arange(T - 1), y[:-1], y[1:]] = transition[y[:-1], y[1:]] + bonus
    tables = pairwise[: max(T - 1, 0)]
    if linear:
        return oracle_scores_marginals(
            data, counters, i, unary, tables, log_nodes, log_edges, nodes, edges
        )
    return oracle_scores(data, counters, i, unary, tables, log_nodes, log_edges)


def forward_scores(data, counters, i, unary, transition, work=None):
    T, K = _counted(data, counters, i, FORWARD_CALLS)
    return chain_log_partition(unary, transition.reshape(1, K, K), True, T, K)


def expected_emission(data, i, node_weights, out_loc):
    s, e = int(data.offsets[i]), int(data.offsets[i + 1])
    T = e - s
    if data.dense:
        out_loc[:] = data.X[s:e].T @ node_weights[:T]
        return
    rows, _, val, loc = _token_rows(data, s, e)
    lo, hi = support_bounds(data, i)
    res = np.zeros((hi - lo, node_weights.shape[1]))
    np.add.at(res, loc, val[:, None] * node_weights[rows])
    out_loc[: hi - lo] = res


def truth_transitions(data, i, out):
    s, e = int(data.offsets[i]), int(data.offsets[i + 1])
    y = data.y[s:e]
    out[:, :] = 0.0
    np.add.at(out, (y[:-1], y[1:]), 1.0)


def node_residual(data, i, nodes, out):
    s = int(data.offsets[i])
    T = int(data.offsets[i + 1]) - s
    out[:T] = nodes[:T]
    out[np.arange(T), data.y[s : s + T]] -= 1.0
    return T


def difference_direction(data, i, node_diff, P, Q, div, E_loc, trans_loc):
    expected_emission(data, i, node_diff, E_loc)
    trans_loc[:, :] = (P - Q) / div


def local_gradient(data, i, nodes, edge_sum, work, truth, E_loc, trans_loc):
    node_residual(data, i, nodes, work)
    truth_transitions(data, i, truth)
    difference_direction(data, i, work, edge_sum, truth, 1.0, E_loc, trans_loc)
    return norm2_local(data, i, E_loc, trans_loc)


def _lanes(P: np.ndarray) -> float:
    """Σ P[:rows, :K] in the compiled kernels' order: four running sums over the columns
    k mod 4 (the last K mod 4 columns join the first), each added row by row, left to
    right (cumsum), then (s0 + s1) + (s2 + s3). Optimizers branch on these sums (SAG's
    line search on ‖∇ℓ_i‖²), so both backends must agree to the last bit."""
    K = P.shape[1]
    K4 = K - K % 4
    lanes = [list(range(0, K4, 4)) + list(range(K4, K))] + [
        list(range(c, K4, 4)) for c in (1, 2, 3)
    ]
    s = [float(np.cumsum(P[:, c].ravel())[-1]) if P[:, c].size else 0.0 for c in lanes]
    return (s[0] + s[1]) + (s[2] + s[3])


def norm2_local(data, i, E_loc, trans_loc):
    lo, hi = support_bounds(data, i)
    return _lanes(E_loc[: hi - lo] ** 2) + _lanes(trans_loc**2)


def add_local(data, i, w, scale, E_loc, trans_loc):
    U = emission_matrix(data, w)
    lo, hi = support_bounds(data, i)
    U[data.support[lo:hi]] += scale * E_loc[: hi - lo]
    transition_matrix(data, w)[:, :] += scale * trans_loc


def dot_local(data, i, w, E_loc, trans_loc):
    U = emission_matrix(data, w)
    lo, hi = support_bounds(data, i)
    products = np.concatenate(
        [U[data.support[lo:hi]] * E_loc[: hi - lo], transition_matrix(data, w) * trans_loc]
    )
    return _lanes(products)


def _xlogy_ratio(lp: np.ndarray, lq: np.ndarray) -> np.ndarray:
    """exp(lp) * (lp - lq) with 0 log 0 = 0."""
    with np.errstate(invalid="ignore"):
        return np.where(np.isneginf(lp), 0.0, np.exp(lp) * (lp - lq))


def chain_entropy(log_nodes, log_edges, T, K):
    # Buffers may be larger than T × K (reused across sequences): read only [:T, :K].
    if T == 1:
        return float(-_xlogy_ratio(log_nodes[0, :K], 0.0).sum())
    tabs = log_edges[: T - 1, :K, :K]
    rows = _lse(tabs, axis=2)  # (T-1, K): log μ_t as row sums of the edge tables
    H = -_xlogy_ratio(rows[0], 0.0).sum()
    H -= _xlogy_ratio(tabs, rows[:, :, None]).sum()
    return float(H)


def chain_kl(mu_nodes, mu_edges, nu_nodes, nu_edges, T, K):
    if T == 1:
        return float(_xlogy_ratio(mu_nodes[0, :K], nu_nodes[0, :K]).sum())
    tm = mu_edges[: T - 1, :K, :K]
    tn = nu_edges[: T - 1, :K, :K]
    rm = _lse(tm, axis=2)
    rn = _lse(tn, axis=2)
    D = _xlogy_ratio(rm[0], rn[0]).sum()
    with np.errstate(invalid="ignore"):
        cond = np.where(
            np.isneginf(tm), 0.0, np.exp(tm) * ((tm - rm[:, :, None]) - (tn - rn[:, :, None]))
        )
    return float(D + cond.sum())


def chain_kl_linlog(p_nodes, p_edges, lp_nodes, lp_edges, lq_nodes, lq_edges, T, K):
    p0 = p_nodes[0, :K]
    with np.errstate(invalid="ignore"):
        D = np.where(p0 > 0.0, p0 * (lp_nodes[0, :K] - lq_nodes[0, :K]), 0.0).sum()
        if T > 1:
            pe = p_edges[: T - 1, :K, :K]
            cp = lp_edges[: T - 1, :K, :K] - lp_nodes[: T - 1, :K, None]
            cq = lq_edges[: T - 1, :K, :K] - lq_nodes[: T - 1, :K, None]
            D += np.where(pe > 0.0, pe * (cp - cq), 0.0).sum()
    return float(D)


def chain_entropy_linlog(nodes, edges, log_nodes, log_edges, T, K):
    p0 = nodes[0, :K]
    with np.errstate(invalid="ignore"):
        H = -np.where(p0 > 0.0, p0 * log_nodes[0, :K], 0.0).sum()
        if T > 1:
            pe = edges[: T - 1, :K, :K]
            cond = log_edges[: T - 1, :K, :K] - log_nodes[: T - 1, :K, None]
            H -= np.where(pe > 0.0, pe * cond, 0.0).sum()
    return float(H)


def all_unary(data, w):
    U = emission_matrix(data, w)
    if data.dense:
        return data.X @ U
    N = len(data.y)
    rows = np.repeat(np.arange(N), np.diff(data.indptr))
    theta = np.zeros((N, U.shape[1]))
    np.add.at(theta, rows, data.values[:, None] * U[data.indices])
    return theta


def batch_expected_emission(data, tr, weights, out_emission):
    if data.dense:
        out_emission[:] = data.X.T @ weights
        return
    N = len(data.y)
    rows = np.repeat(np.arange(N), np.diff(data.indptr))
    res = np.zeros_like(out_emission)
    np.add.at(res, data.indices, data.values[:, None] * weights[rows])
    out_emission[:] = res


def batch_value_grad(data, tr, w, want_grad, grad_out):
    n = len(data.offsets) - 1
    K = int(data.n_labels)
    A = int(data.n_kernel_attributes)
    theta = all_unary(data, w)
    transition = transition_matrix(data, w)
    pairwise = transition.reshape(1, K, K)
    total = 0.0
    nodes = np.empty_like(theta) if want_grad else None
    GT = np.zeros((K, K))
    for i in range(n):
        s, e = int(data.offsets[i]), int(data.offsets[i + 1])
        if want_grad:
            z = chain_marginal_sums(theta[s:e], transition, e - s, K, nodes[s:e], GT)
        else:
            z = chain_log_partition(theta[s:e], pairwise, True, e - s, K)
        total += z - truth_score(data, i, theta[s:e], transition)
    data.audit[0] += n
    if want_grad:
        batch_expected_emission(data, tr, nodes, grad_out[: A * K].reshape(A, K))
        grad_out[A * K :] = GT.ravel()
    return total


def finish_gradient(grad, truth, w, lam, n):
    grad -= truth
    grad /= n
    grad += lam * w


def batch_log_marginals(data, w, log_nodes, log_edges, logZ):
    n = len(data.offsets) - 1
    K = int(data.n_labels)
    theta = all_unary(data, w)
    pairwise = transition_matrix(data, w).reshape(1, K, K)
    for i in range(n):
        s, e = int(data.offsets[i]), int(data.offsets[i + 1])
        logZ[i] = chain_log_marginals(
            theta[s:e], pairwise, True, e - s, K, log_nodes[s:e], log_edges[s - i : e - i - 1]
        )
    data.audit[0] += n


def batch_entropy(data, log_nodes, log_edges, out):
    K = int(data.n_labels)
    for i in range(len(data.offsets) - 1):
        s, e = int(data.offsets[i]), int(data.offsets[i + 1])
        out[i] = chain_entropy(log_nodes[s:e], log_edges[s - i : e - i - 1], e - s, K)


def batch_kl(data, mu_nodes, mu_edges, nu_nodes, nu_edges, out):
    K = int(data.n_labels)
    for i in range(len(data.offsets) - 1):
        s, e = int(data.offsets[i]), int(data.offsets[i + 1])
        es, ee = s - i, e - i - 1
        out[i] = chain_kl(mu_nodes[s:e], mu_edges[es:ee], nu_nodes[s:e], nu_edges[es:ee], e - s, K)


def batch_expected_features(data, tr, log_nodes, log_edges, out):
    K = int(data.n_labels)
    A = int(data.n_kernel_attributes)
    batch_expected_emission(data, tr, np.exp(log_nodes), out[: A * K].reshape(A, K))
    out[A * K :] = np.exp(log_edges).sum(axis=0).ravel() if len(log_edges) else 0.0


def batch_viterbi(data, w, out):
    K = int(data.n_labels)
    theta = all_unary(data, w)
    transition = transition_matrix(data, w)
    for i in range(len(data.offsets) - 1):
        s, e = int(data.offsets[i]), int(data.offsets[i + 1])
        chain_viterbi(theta[s:e], transition, e - s, K, out[s:e])


def _csr_unary(offsets, indptr, indices, values, emission, bias):
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


def csr_viterbi(offsets, indptr, indices, values, emission, bias, transition, out):
    """Viterbi labels of every token of CSR sequences (crfopt/kernels/_numba/decode.py)."""
    K = emission.shape[1]
    theta = _csr_unary(offsets, indptr, indices, values, emission, bias)
    for i in range(len(offsets) - 1):
        s, e = int(offsets[i]), int(offsets[i + 1])
        if e > s:
            chain_viterbi(theta[s:e], transition, e - s, K, out[s:e])


def csr_node_marginals(offsets, indptr, indices, values, emission, bias, transition, nodes):
    """P(y_t = k | x) of every token of CSR sequences into ``nodes`` (N × K)."""
    K = emission.shape[1]
    theta = _csr_unary(offsets, indptr, indices, values, emission, bias)
    edge_sum = np.zeros((K, K))
    for i in range(len(offsets) - 1):
        s, e = int(offsets[i]), int(offsets[i + 1])
        if e > s:
            chain_marginal_sums(theta[s:e], transition, e - s, K, nodes[s:e], edge_sum)
