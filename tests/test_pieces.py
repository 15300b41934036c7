"""crfopt.pieces (crfopt/optim/pieces.py) against independent truths.

Lazy weights against the eager dense recursion, the Lipschitz backtracking against a
brute-force scan of L₀·2^j with the public forward oracle, the local gradient against
finite differences of ℓ_i, max_support against a direct count.
"""

from __future__ import annotations

import itertools
from types import SimpleNamespace

import numpy as np
import pytest

import crfopt
from crfopt import kernels, pieces
from crfopt.kernels.jit import JIT_ENABLED


@pytest.fixture(scope="module", params=["sparse", "dense"])
def problem(request):
    if request.param == "dense":
        return crfopt.make_synthetic(
            n=12, labels=3, attributes=6, length=5, dense=True, density=0.5, seed=41, lam=0.01
        )
    return crfopt.make_synthetic(
        n=12, labels=4, attributes=40, length=6, density=0.1, seed=42, lam=0.01
    )


def _random_w(problem, seed, scale=0.5):
    return scale * np.random.default_rng(seed).standard_normal(problem.dim)


def test_lazy_weights_refuses_a_row_count_without_the_bias_rows():
    """The deprecated (dim, n_rows) form is checked: problem.n_attributes (A) where the
    kernel rows (A + 3 with the bias) are meant used to give a silently short ``last``."""
    p = crfopt.make_synthetic(n=4, labels=3, attributes=7, length=3, seed=0)
    assert p.n_kernel_attributes == p.n_attributes + 3
    with pytest.warns(DeprecationWarning, match="lazy_weights"):
        lw = pieces.lazy_weights(p.dim, p.n_kernel_attributes)
    assert lw.last.shape == pieces.lazy_weights(p.data).last.shape == (p.n_kernel_attributes + 1,)
    with pytest.warns(DeprecationWarning), pytest.raises(ValueError, match="n_kernel_attributes"):
        pieces.lazy_weights(p.dim, p.n_attributes)


def test_lazy_catch_up_equals_the_eager_update_loop():
    """w ← c·w − (α/m)·d with sparse changes of d, eager vs lazy incl. renormalizations."""
    rng = np.random.default_rng(0)
    A, K = 9, 3
    dim = A * K + K * K
    lw = pieces.lazy_weights(SimpleNamespace(n_labels=K, n_kernel_attributes=A))
    assert lw.u.shape == (dim,) and lw.last.shape == (A + 1,)
    lw.u[:] = rng.standard_normal(dim)
    w = lw.u.copy()  # the eager truth
    renormalized = 0
    for step in range(600):
        # change d on a few rows (and sometimes the transitions), catching them up first
        rows = rng.choice(A, size=rng.integers(0, 4), replace=False)
        S = lw.scale[1]
        for a in rows:
            pieces.catch_up_row(lw.u, lw.d, lw.last, a, K, S)
            lw.d[a * K : (a + 1) * K] += rng.standard_normal(K)
        if rng.random() < 0.3:
            pieces.catch_up_transitions(lw.u, lw.d, lw.last, A, K, S)
            lw.d[A * K :] += rng.standard_normal(K * K)
        # a shrink that sometimes collapses the scale, forcing renormalizations
        c = 1e-40 if step % 97 == 50 else rng.uniform(0.5, 1.0)
        alpha, count = rng.uniform(0.01, 0.5), rng.integers(1, 20)
        pieces.lazy_step(lw, c, alpha, count)
        w = c * w - (alpha / count) * lw.d
        if lw.scale[0] < pieces.RENORMALIZE_BELOW:
            pieces.renormalize(lw, A, K)
            renormalized += 1
            assert lw.scale[0] == 1.0 and lw.scale[1] == 0.0 and not lw.last.any()
        if step % 50 == 0:
            np.testing.assert_allclose(pieces.materialize(lw, A, K), w, rtol=1e-9, atol=1e-12)
    assert renormalized >= 3
    np.testing.assert_allclose(pieces.materialize(lw, A, K), w, rtol=1e-9, atol=1e-12)


def test_catch_up_support_touches_exactly_the_rows_of_the_sequence(problem):
    kd = problem.data
    A, K = problem.n_kernel_attributes, problem.n_labels
    rng = np.random.default_rng(1)
    u, d = rng.standard_normal(problem.dim), rng.standard_normal(problem.dim)
    last = np.zeros(A + 1)
    i = 3
    pieces.catch_up_support(kd, u_new := u.copy(), d, last, i, 0.7)
    lo, hi = kernels.support_bounds(kd, i)
    rows = set(np.asarray(kd.support[lo:hi]).tolist()) | {A}
    for a in range(A + 1):
        sl = slice(a * K, (a + 1) * K) if a < A else slice(A * K, None)
        expect = u[sl] - 0.7 * d[sl] if a in rows else u[sl]
        np.testing.assert_allclose(u_new[sl], expect, rtol=1e-14, atol=1e-15)
        assert last[a] == (0.7 if a in rows else 0.0)


def test_scaled_scores_are_the_scores_of_s_times_u(problem):
    kd = problem.data
    K = problem.n_labels
    u = _random_w(problem, 2)
    s = 0.37
    unary, trans = np.empty((kd.max_len, K)), np.empty((K, K))
    for i in range(problem.n):
        T = pieces.scaled_scores(kd, i, u, s, unary, trans)
        np.testing.assert_allclose(unary[:T], problem.unary_scores(i, s * u), rtol=1e-12)
        np.testing.assert_allclose(trans, problem.unpack(s * u).transition, rtol=1e-14)


def _local_gradient(problem, i, w):
    kd = problem.data
    K = problem.n_labels
    nodes, esum = np.empty((kd.max_len, K)), np.empty((K, K))
    kernels.oracle_sums(kd, problem.counters.array, i, w, nodes, esum)
    E_loc = np.empty((pieces.max_support(kd), K))
    trans = np.empty((K, K))
    before = nodes.copy()
    gn2 = pieces.local_gradient(
        kd, i, nodes, esum, np.empty((kd.max_len, K)), np.empty((K, K)), E_loc, trans
    )
    np.testing.assert_array_equal(nodes, before)  # the marginals are left alone
    lo, hi = kernels.support_bounds(kd, i)
    return E_loc[: hi - lo], trans, gn2


def _dense(problem, i, E_loc, trans):
    kd = problem.data
    K = problem.n_labels
    lo, hi = kernels.support_bounds(kd, i)
    g = problem.zeros()
    for j, a in enumerate(np.asarray(kd.support[lo:hi])):
        g[a * K : (a + 1) * K] = E_loc[j]
    g[problem.n_kernel_attributes * K :] = trans.ravel()
    return g


def test_local_gradient_matches_finite_differences(problem):
    w = _random_w(problem, 3)
    rng = np.random.default_rng(4)
    h = 1e-5
    for i in (0, 5, problem.n - 1):
        E_loc, trans, gn2 = _local_gradient(problem, i, w)
        g = _dense(problem, i, E_loc, trans)
        assert gn2 == pytest.approx(g @ g, rel=1e-12)
        for _ in range(3):
            v = rng.standard_normal(problem.dim)
            fd = (problem.forward(i, w + h * v).nll - problem.forward(i, w - h * v).nll) / (2 * h)
            assert g @ v == pytest.approx(fd, rel=1e-6, abs=1e-8)


def _backtrack(problem, i, w, L0, max_doublings=60):
    kd = problem.data
    K = problem.n_labels
    E_loc, trans_g, gn2 = _local_gradient(problem, i, w)
    unary, trans = np.empty((kd.max_len, K)), np.empty((K, K))
    pieces.scaled_scores(kd, i, w, 1.0, unary, trans)
    g_unary = np.empty((kd.max_len, K))
    kernels.local_scores(kd, i, E_loc, g_unary)
    f = problem.forward(i, w).nll
    before = problem.counters.snapshot().forward_calls
    L, doublings = pieces.lipschitz_backtrack(
        kd, problem.counters.array, i, f, gn2, L0, unary, trans, g_unary, trans_g,
        np.empty((kd.max_len, K)), np.empty((K, K)), max_doublings,
    )  # fmt: skip
    calls = problem.counters.snapshot().forward_calls - before
    return L, doublings, calls, f, gn2, _dense(problem, i, E_loc, trans_g)


@pytest.mark.parametrize("L0", [1e-3, 0.3, 50.0])
def test_lipschitz_backtrack_equals_a_brute_force_scan(problem, L0):
    w = _random_w(problem, 5)
    for i in (1, 7):
        L, doublings, calls, f, gn2, g = _backtrack(problem, i, w, L0)
        trials = L0 * 2.0 ** np.arange(61)
        ok = [problem.forward(i, w - g / Lt).nll <= f - gn2 / (2 * Lt) for Lt in trials]
        j = ok.index(True)
        assert doublings == j and trials[j] == L
        assert calls == doublings + 1  # each trial is one counted forward call
        if L0 == 1e-3:
            assert doublings > 0  # the scan really backtracked


def test_lipschitz_backtrack_gives_up_after_max_doublings(problem):
    with pytest.raises(FloatingPointError, match="no sufficient decrease"):
        _backtrack(problem, 1, _random_w(problem, 5), 1e-6, max_doublings=2)


def test_max_support_counts_distinct_attributes(problem):
    kd = problem.data
    if kd.dense:
        assert pieces.max_support(kd) == problem.n_kernel_attributes
        return
    counts = []
    for i in range(problem.n):
        s, e = kd.offsets[i], kd.offsets[i + 1]
        counts.append(len(set(np.asarray(kd.indices[kd.indptr[s] : kd.indptr[e]]).tolist())))
    assert pieces.max_support(kd) == max(counts)


def test_truth_memory_is_each_sequences_one_hot_labels_and_transition_counts():
    problem = crfopt.make_synthetic(n=60, labels=4, attributes=10, length=2.5, seed=3)
    kd = problem.data
    lengths = np.diff(np.asarray(kd.offsets))
    assert (lengths == 1).any() and (lengths > 3).any()  # none and several transitions
    U, P = pieces.truth_memory(kd)
    y = np.asarray(kd.y)
    K = problem.n_labels
    assert U.shape == (problem.n_tokens, K) and P.shape == (problem.n, K, K)
    np.testing.assert_array_equal(U, np.eye(K)[y])
    for i in range(problem.n):
        labels = y[kd.offsets[i] : kd.offsets[i + 1]].tolist()
        expected = np.zeros((K, K))
        for a, b in itertools.pairwise(labels):
            expected[a, b] += 1.0
        np.testing.assert_array_equal(P[i], expected)


@pytest.mark.parametrize("dense", [False, True])
def test_local_curvature_against_the_enumerated_hessian(dense):
    """∇²ℓ_i(w) = Cov_ν F by enumeration of all K^T labelings (independent of the chain
    code): the estimate never exceeds its λ_max, reaches it with enough power steps, stays
    far below the radius R_i, and costs 2 counted oracle calls per step."""
    from conftest import enumerate_sequence, feature_vector, tiny_problem

    problem, X = tiny_problem(5, dense=dense, K=3, A=5, lengths=[4, 5, 3, 5, 2], lam=0.1)
    offsets, y_all = problem.data.offsets, np.asarray(problem.data.y)
    rng = np.random.default_rng(3)
    for w in (problem.zeros(), rng.standard_normal(problem.dim)):
        for i in range(problem.n):
            _, _, _, mean, ys, p, _ = enumerate_sequence(problem, X, i, w)
            s, e = int(offsets[i]), int(offsets[i + 1])
            feats = np.array([feature_vector(problem, X[s:e], y) for y in ys])
            # the true worst-case radius max_y ‖F(y) − F(y_i)‖² bounds the curvature at any w
            radius = ((feats - feature_vector(problem, X[s:e], y_all[s:e])) ** 2).sum(1).max()
            centred = feats - mean
            hessian = centred.T @ (p[:, None] * centred)
            true = np.linalg.eigvalsh(hessian)[-1]
            before = problem.counters.oracle_calls
            few = pieces.curvature_at(problem, i, w, iterations=2)
            assert problem.counters.oracle_calls - before == 4
            assert few <= true * (1 + 1e-6) + 1e-12
            many = pieces.curvature_at(problem, i, w, iterations=300)
            assert many == pytest.approx(true, rel=1e-4, abs=1e-10)
            assert many <= radius * (1 + 1e-6)


def test_curvature_at_rejects_bad_input(problem):
    with pytest.raises(ValueError, match="iterations"):
        pieces.curvature_at(problem, 0, problem.zeros(), iterations=0)
    with pytest.raises(ValueError, match="shape"):
        pieces.curvature_at(problem, 0, np.zeros(3))


@pytest.mark.parametrize("span", [1.0, 800.0], ids=["scaled", "log-space"])
def test_chain_work_gives_the_same_bits_as_allocating(problem, span):
    """One ChainWork reused over every sequence (longest first, so stale rows of a longer
    chain lie beyond the next one's T) changes no bit of the oracle, the forward call or
    the line search; spans over LOG_SPAN_LIMIT take the log-space path, which ignores it."""
    data, K = problem.data, problem.n_labels
    rng = np.random.default_rng(7)
    work = pieces.chain_work(int(data.max_len), K)
    trans = span * rng.standard_normal((K, K)) / 4
    order = np.argsort(-np.diff(data.offsets), kind="stable")
    for i in order:
        T = int(data.offsets[i + 1] - data.offsets[i])
        unary = span * rng.standard_normal((T, K)) / 4
        outs = []
        for w in (None, work):
            c = np.zeros_like(problem.counters.array)
            nodes, esum = np.empty((T, K)), np.empty((K, K))
            r = kernels.oracle_sums_scores(data, c, i, unary, trans, nodes, esum, w)
            f = kernels.forward_scores(data, c, i, unary, trans, w)
            g_rng = np.random.default_rng(int(i))  # the same direction for both runs
            g_unary, g_trans = g_rng.standard_normal((T, K)), g_rng.standard_normal((K, K))
            gn2 = float((g_unary**2).sum() + (g_trans**2).sum())
            ls = pieces.lipschitz_backtrack(
                data, c, i, r[1], gn2, 1.0, unary, trans, g_unary, g_trans,
                np.empty((T, K)), np.empty((K, K)), 60, w,
            )  # fmt: skip
            outs.append((r, f, nodes.copy(), esum.copy(), ls, c.copy()))
        for a, b in zip(*outs, strict=True):
            np.testing.assert_array_equal(a, b)


def test_gradient_scores_equal_the_products_they_replace(problem):
    """‖∇ℓ_i‖² and θ(∇ℓ_i) through the Gram matrices X_i X_iᵀ agree with the gradient
    block formed by local_gradient and its scores X_i·E_g; where no Gram matrix was built
    the piece is that path, bit for bit. Gram matrices are checked against X_i X_iᵀ."""
    data, K = problem.data, problem.n_labels
    grams = pieces.sequence_grams(data)
    if not data.dense and not JIT_ENABLED:
        assert grams.ptr.shape[0] == 0  # the Python loops would cost more than they save
        grams = _compiled_grams_without_jit(data)
    X = _dense_X(data)
    built = 0
    T_max, S = int(data.max_len), pieces.max_support(data)
    w = _random_w(problem, 5)
    unary, trans = np.empty((T_max, K)), np.empty((K, K))
    for i in range(problem.n):
        T = pieces.scaled_scores(data, i, w, 1.0, unary, trans)
        nodes, esum = np.empty((T_max, K)), np.empty((K, K))
        c = np.zeros_like(problem.counters.array)
        kernels.oracle_sums_scores(data, c, i, unary[:T], trans, nodes[:T], esum)
        E_g, g_trans, th = np.empty((S, K)), np.empty((K, K)), np.empty((T_max, K))
        want = pieces.local_gradient(
            data, i, nodes, esum, np.empty((T_max, K)), np.empty((K, K)), E_g, g_trans
        )
        want_th = np.empty((T_max, K))
        kernels.local_scores(data, i, E_g, want_th)
        got_t = np.empty((K, K))
        got = pieces.gradient_scores(
            data, i, grams, nodes, esum, np.empty((T_max, K)), np.empty((K, K)),
            np.empty((S, K)), got_t, th,
        )  # fmt: skip
        np.testing.assert_array_equal(got_t, g_trans)
        if grams.ptr[i + 1] > grams.ptr[i]:
            built += 1
            Xi = X[data.offsets[i] : data.offsets[i + 1]]
            G = grams.values[grams.ptr[i] : grams.ptr[i + 1]].reshape(T, T)
            np.testing.assert_allclose(G, Xi @ Xi.T, rtol=1e-14, atol=1e-14)
            np.testing.assert_allclose(got, want, rtol=1e-12)
            np.testing.assert_allclose(th[:T], want_th[:T], rtol=1e-12, atol=1e-12)
        else:
            assert got == want
            np.testing.assert_array_equal(th[:T], want_th[:T])
    assert built > 0


def _dense_X(data):
    """The embedding rows as one dense array (an independent view of X for the tests)."""
    if data.dense:
        return np.asarray(data.X)
    N = int(data.offsets[-1])
    X = np.zeros((N, int(data.n_kernel_attributes)))
    for r in range(N):
        for p in range(int(data.indptr[r]), int(data.indptr[r + 1])):
            X[r, int(data.indices[p])] += float(data.values[p])
    return X


def _compiled_grams_without_jit(data):
    """What sequence_grams builds with the JIT, by its loop run as plain Python."""
    from crfopt.optim.pieces import _sparse_grams

    T = np.diff(np.asarray(data.offsets, dtype=np.int64))
    ptr = np.zeros(T.shape[0] + 1, dtype=np.int64)
    np.cumsum(T**2, out=ptr[1:])
    values = np.empty(int(ptr[-1]))
    _sparse_grams(data, ptr, values, np.zeros(int(data.n_kernel_attributes)))
    return pieces.SequenceGrams(ptr, values)


def test_sequence_grams_are_built_only_where_they_cost_less_than_the_products():
    """G_i exists exactly where T_i² ≤ 2·nnz_i: on a narrow dense embedding the short
    sequences get one and the long ones keep the product path."""
    narrow = crfopt.make_synthetic(
        n=6, labels=3, attributes=2, length=12, dense=True, density=1.0, seed=3, lam=0.1
    )
    T = np.diff(narrow.data.offsets)
    nnz = T * narrow.data.n_kernel_attributes
    pays = np.less_equal(T**2, pieces.GRAM_WORK_RATIO * nnz)
    assert pays.any() and not pays.all()
    grams = pieces.sequence_grams(narrow.data)
    np.testing.assert_array_equal(np.diff(grams.ptr) > 0, pays)
    np.testing.assert_array_equal(np.diff(grams.ptr)[pays], T[pays] ** 2)
