"""Oracle kernels against brute-force enumeration of every labeling (docs/algorithms.md §5.9).

Both implementations are checked: the compiled kernels (scaled forward–backward) and the
pure-NumPy twin (log space), on dense and sparse tiny problems with T ≤ 5, K ≤ 4.
"""

from __future__ import annotations

import numpy as np
import pytest

from crfopt.kernels import _numpy as _kernels_numpy
from crfopt.kernels.jit import JIT_ENABLED

from conftest import enumerate_sequence, feature_vector, tiny_problem

IMPLS = [pytest.param(_kernels_numpy, id="numpy")]
if JIT_ENABLED:
    from crfopt.kernels import _numba as _kernels_jit

    IMPLS.insert(0, pytest.param(_kernels_jit, id="jit"))

CASES = [
    (seed, dense, K, bias)
    for seed, (dense, K, bias) in enumerate(
        [
            (False, 3, True),
            (True, 3, True),
            (False, 4, True),
            (True, 2, False),
            (False, 4, False),
            (True, 4, True),
        ]
    )
]


def _buffers(T, K):
    return np.empty((T, K)), np.empty((max(T - 1, 0), K, K))


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize(("seed", "dense", "K", "bias"), CASES)
def test_oracle_matches_enumeration(impl, seed, dense, K, bias):
    problem, X = tiny_problem(seed, dense=dense, K=K, bias=bias, lengths=[1, 2, 3, 4, 5])
    rng = np.random.default_rng(100 + seed)
    w = rng.normal(scale=1.5, size=problem.dim)
    counters = np.zeros(7, dtype=np.int64)
    for i in range(problem.n):
        log_z, nodes, edges, _expected_F, ys, p, scores = enumerate_sequence(problem, X, i, w)
        T = len(nodes)
        ln, le = _buffers(T, K)
        got_z, got_nll = impl.oracle(problem.data, counters, i, w, ln, le)
        s = int(problem.data.offsets[i])
        y_true = problem.labels[s : s + T]
        truth_score = feature_vector(problem, X[s : s + T], y_true) @ w
        assert got_z == pytest.approx(log_z, abs=1e-10, rel=1e-12)
        assert got_nll == pytest.approx(log_z - truth_score, abs=1e-10)
        np.testing.assert_allclose(np.exp(ln), nodes, atol=1e-10, rtol=0)
        np.testing.assert_allclose(np.exp(le), edges, atol=1e-10, rtol=0)
        # log-marginals themselves, not only their exponentials
        np.testing.assert_allclose(ln, np.log(nodes), atol=1e-9, rtol=1e-10)

        nodes2 = np.empty((T, K))
        esum = np.empty((K, K))
        z2, nll2 = impl.oracle_sums(problem.data, counters, i, w, nodes2, esum)
        assert z2 == pytest.approx(log_z, abs=1e-10)
        assert nll2 == pytest.approx(got_nll, abs=1e-10)
        np.testing.assert_allclose(nodes2, nodes, atol=1e-10)
        np.testing.assert_allclose(esum, edges.sum(axis=0), atol=1e-10)

        z3, _nll3 = impl.forward(problem.data, counters, i, w)
        assert z3 == pytest.approx(log_z, abs=1e-10)

        # entropy of the Gibbs joint, and KL to another Gibbs joint (eqs. 18–19)
        H = impl.chain_entropy(ln, le, T, K)
        assert pytest.approx(-(p * np.log(p)).sum(), abs=1e-10) == H
        w2 = w + rng.normal(scale=0.7, size=problem.dim)
        _log_z2, *_, p2, _ = enumerate_sequence(problem, X, i, w2)
        ln2, le2 = _buffers(T, K)
        impl.oracle(problem.data, counters, i, w2, ln2, le2)
        kl = impl.chain_kl(ln, le, ln2, le2, T, K)
        assert kl == pytest.approx((p * (np.log(p) - np.log(p2))).sum(), abs=1e-10)

        # Viterbi = the most probable labeling
        out = np.empty(T, dtype=np.int64)
        best = impl.chain_viterbi(
            _unary(impl, problem, i, w), impl.transition_matrix(problem.data, w), T, K, out
        )
        np.testing.assert_array_equal(out, ys[np.argmax(scores)])
        assert best == pytest.approx(scores.max(), abs=1e-10)


def _unary(impl, problem, i, w):
    T = int(problem.data.offsets[i + 1] - problem.data.offsets[i])
    out = np.empty((T, problem.n_labels))
    impl.unary_scores(problem.data, i, w, out)
    return out


def _local_gradient(impl, problem, i, w):
    """∇ℓ_i(w) assembled from one implementation's kernels only (no problem.oracle)."""
    K = problem.n_labels
    s, e = (int(v) for v in problem.data.offsets[i : i + 2])
    T = e - s
    counters = np.zeros(7, dtype=np.int64)
    nodes, esum = np.empty((T, K)), np.empty((K, K))
    impl.oracle_sums(problem.data, counters, i, w, nodes, esum)
    weights = nodes.copy()
    weights[np.arange(T), problem.labels[s:e]] -= 1.0
    lo, hi = impl.support_bounds(problem.data, i)
    E_loc = np.empty((hi - lo, K))
    impl.expected_emission(problem.data, i, weights, E_loc)
    truth = np.empty((K, K))
    impl.truth_transitions(problem.data, i, truth)
    g = np.zeros(problem.dim)
    E = g[: problem.n_kernel_attributes * K].reshape(-1, K)
    E[np.asarray(problem.data.support[lo:hi])] = E_loc
    g[problem.n_kernel_attributes * K :] = (esum - truth).ravel()
    return g


def _gradients_by_enumeration(dense):
    """(problem, w, [(i, E_ν F − F(x_i, y_i))]) with the gradients from enumerating every
    labelling of each sequence: the truth both gradient entry points are checked against."""
    problem, X = tiny_problem(7, dense=dense, K=3, lengths=[1, 3, 4])
    w = np.random.default_rng(1).normal(size=problem.dim)
    expected = []
    for i in range(problem.n):
        _, _, _, expected_F, *_ = enumerate_sequence(problem, X, i, w)
        s, e = (int(v) for v in problem.data.offsets[i : i + 2])
        expected.append((i, expected_F - feature_vector(problem, X[s:e], problem.labels[s:e])))
    return problem, w, expected


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("dense", [False, True])
def test_local_gradient_matches_enumeration(impl, dense):
    problem, w, expected = _gradients_by_enumeration(dense)
    for i, truth in expected:
        np.testing.assert_allclose(_local_gradient(impl, problem, i, w), truth, atol=1e-10)


@pytest.mark.parametrize("dense", [False, True])
def test_problem_oracle_gradient_matches_enumeration(dense):
    """The counted entry point (whichever kernels are active) assembles the same gradient."""
    problem, w, expected = _gradients_by_enumeration(dense)
    for i, truth in expected:
        res = problem.oracle(i, w, gradient=True)
        np.testing.assert_allclose(res.gradient.to_dense(problem), truth, atol=1e-10)


@pytest.mark.parametrize("impl", IMPLS)
def test_oracle_scores_with_position_dependent_edges(impl):
    problem, _ = tiny_problem(11, dense=False, K=3, lengths=[4, 1])
    rng = np.random.default_rng(5)
    counters = np.zeros(7, dtype=np.int64)
    K = 3
    for i, T in enumerate([4, 1]):
        unary = rng.normal(size=(T, K))
        edges = rng.normal(size=(max(T - 1, 0), K, K))
        import itertools

        ys = np.array(list(itertools.product(range(K), repeat=T)))
        sc = np.array(
            [
                unary[np.arange(T), y].sum() + sum(edges[t, y[t], y[t + 1]] for t in range(T - 1))
                for y in ys
            ]
        )
        log_z = np.log(np.exp(sc).sum())
        p = np.exp(sc - log_z)
        ln, le = _buffers(T, K)
        got = impl.oracle_scores(problem.data, counters, i, unary, edges, ln, le)
        assert got == pytest.approx(log_z, abs=1e-10)
        nodes = np.zeros((T, K))
        for y, py in zip(ys, p):
            nodes[np.arange(T), y] += py
        np.testing.assert_allclose(np.exp(ln), nodes, atol=1e-10)
        if T > 1:
            # shared transitions: forward_scores on the first edge table repeated
            shared = edges[0]
            sc2 = np.array(
                [
                    unary[np.arange(T), y].sum() + sum(shared[y[t], y[t + 1]] for t in range(T - 1))
                    for y in ys
                ]
            )
            z2 = impl.forward_scores(problem.data, counters, i, unary, shared)
            assert z2 == pytest.approx(np.log(np.exp(sc2).sum()), abs=1e-10)
    assert counters[0] == 2 and counters[1] == 1


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("T", [1, 2, 1000])
@pytest.mark.parametrize("magnitude", [1.0, 1e4])
def test_extreme_lengths_and_scores_stay_finite(impl, T, magnitude):
    rng = np.random.default_rng(T)
    K = 4
    unary = rng.uniform(-magnitude, magnitude, size=(T, K))
    trans = rng.uniform(-magnitude, magnitude, size=(K, K))
    ln, le = _buffers(T, K)
    z = impl.chain_log_marginals(unary, trans.reshape(1, K, K), True, T, K, ln, le)
    assert np.isfinite(z)
    assert np.all(np.isfinite(ln)) and np.all(ln <= 0)
    assert np.all(np.isfinite(le)) and np.all(le <= 0)
    np.testing.assert_allclose(np.exp(ln).sum(axis=1), 1.0, atol=1e-9)
    nodes = np.empty((T, K))
    esum = np.zeros((K, K))
    z2 = impl.chain_marginal_sums(unary, trans, T, K, nodes, esum)
    assert z2 == pytest.approx(z, rel=1e-12)
    assert np.all(np.isfinite(nodes)) and np.isfinite(esum).all()
    assert esum.sum() == pytest.approx(T - 1, abs=1e-6)
    assert impl.chain_log_partition(unary, trans.reshape(1, K, K), True, T, K) == pytest.approx(
        z, rel=1e-12
    )


@pytest.mark.parametrize("impl", IMPLS)
def test_huge_scores_match_exact_log_partition(impl):
    """At ±1e4 the answer is dominated by the best path: log Z = Viterbi score + O(e^-Δ)."""
    rng = np.random.default_rng(0)
    T, K = 6, 3
    unary = rng.uniform(-1e4, 1e4, size=(T, K))
    trans = rng.uniform(-1e4, 1e4, size=(K, K))
    out = np.empty(T, dtype=np.int64)
    best = impl.chain_viterbi(unary, trans, T, K, out)
    z = impl.chain_log_partition(unary, trans.reshape(1, K, K), True, T, K)
    assert z == pytest.approx(best, abs=1e-6)


@pytest.mark.parametrize("impl", IMPLS)
def test_single_token_is_multiclass_logistic_regression(impl):
    """T = 1 reduces to multiclass LR (LP17 §1): log Z = lse(θ), marginals = softmax."""
    theta = np.array([[0.3, -1.2, 2.0, 0.0]])
    ln, le = _buffers(1, 4)
    z = impl.chain_log_marginals(theta, np.zeros((1, 4, 4)), True, 1, 4, ln, le)
    ref = np.log(np.exp(theta).sum())
    assert z == pytest.approx(ref, abs=1e-14)
    np.testing.assert_allclose(np.exp(ln[0]), np.exp(theta[0] - ref), atol=1e-15)


# ------------------------------------------------------------------ the parallel batch pass
needs_jit = pytest.mark.skipif(not JIT_ENABLED, reason="the compiled batch kernels")


def _batch(impl, problem, w):
    g = np.empty(problem.dim)
    v = impl.batch_value_grad(problem.data, problem.transpose, w, True, g)
    return v, g


@needs_jit
@pytest.mark.parametrize(
    ("dense", "attributes"),
    [(False, 40), (True, 6), (True, 400)],
    ids=["sparse", "dense-chunk-partials", "dense-one-product"],
)
def test_batch_pass_agrees_with_numpy_twin(dense, attributes):
    """Every path of the chunked pass: sparse scatter; dense with per-chunk emission
    partials (32·A ≤ N) and dense through one product over all nodes (32·A > N)."""
    import crfopt
    from crfopt.kernels import _numba as JT
    from crfopt.kernels._numba import batch

    p = crfopt.make_synthetic(
        n=90, labels=4, attributes=attributes, length=5, dense=dense, density=0.3, seed=2
    )
    if dense:  # the case runs the path its id names
        fits = batch._dense_parts_fit(p.n_tokens, p.data.n_kernel_attributes, JT.BATCH_CHUNKS)
        assert fits == (attributes < 10)
    w = np.random.default_rng(4).normal(scale=0.7, size=p.dim)
    v_jit, g_jit = _batch(JT, p, w)
    v_np, g_np = _batch(_kernels_numpy, p, w)
    assert v_jit == pytest.approx(v_np, rel=1e-12)
    np.testing.assert_allclose(g_jit, g_np, rtol=1e-10, atol=1e-10)


@needs_jit
@pytest.mark.parametrize("dense", [False, True])
def test_batch_pass_same_bits_on_one_and_two_threads(dense):
    """The chunks and the order their partial sums are added in do not depend on the
    thread count or on which thread ran which chunk, so neither do the results."""
    import numba

    import crfopt

    p = crfopt.make_synthetic(n=200, labels=5, attributes=8, length=6, dense=dense, seed=3)
    w = np.random.default_rng(5).normal(scale=0.5, size=p.dim)
    old = numba.get_num_threads()
    try:
        out = []
        for k in (1, min(2, numba.config.NUMBA_NUM_THREADS), 1):
            numba.set_num_threads(k)
            out.append(p.value_and_gradient(w))
    finally:
        numba.set_num_threads(old)
    for v, g in out[1:]:
        assert v == out[0][0]
        np.testing.assert_array_equal(g, out[0][1])


@pytest.mark.parametrize("impl", IMPLS)
def test_finish_gradient_same_bits_as_numpy_ops(impl):
    """(grad - truth)/n + λw in place: the same roundings as the three NumPy operations
    CRFProblem.value_and_gradient used before, so golden traces keep their bits."""
    rng = np.random.default_rng(6)
    d = 1001
    grad, truth, w = rng.normal(size=(3, d)) * np.array([[3.0], [1e-3], [7.0]])
    want = grad.copy()
    want -= truth
    want /= 37
    want += 1e-3 * w
    got = grad.copy()
    impl.finish_gradient(got, truth, w, 1e-3, 37)
    np.testing.assert_array_equal(got, want)


@needs_jit
@pytest.mark.parametrize("dense", [False, True])
def test_each_chunk_kernel_has_no_parfor_but_its_prange(dense):
    """batch_value_grad runs its kernels under parallel_chunksize(1), where numba hands out
    every piece of every parfor separately. An array expression in a parallel kernel is a
    parfor of its own: ``total += S_parts[ch]`` once cost OCR's pass 6 of 52 ms, its K²
    entries scheduled one by one for each chunk. Each chunk kernel, compiled afresh here
    for numba's parfor report, must have exactly one parfor: its loop over chunks."""
    import numba

    import crfopt
    from crfopt.kernels import _numba as JT
    from crfopt.kernels._numba import batch

    p = crfopt.make_synthetic(n=40, labels=3, attributes=5, length=4, dense=dense, seed=1)
    d, K, A, n, N = p.data, p.n_labels, p.data.n_kernel_attributes, p.n, p.n_tokens
    w = np.random.default_rng(2).normal(scale=0.3, size=p.dim)
    U, trans = JT.emission_matrix(d, w), JT.transition_matrix(d, w)
    bounds = batch._chunk_bounds(d.offsets, 4)
    nc = bounds.shape[0] - 1
    theta = np.empty((N, K))
    calls = {
        "_all_unary_chunks": (d, U, bounds, theta),
        "_batch_forward": (d, theta, trans, bounds, np.empty(n), np.empty(n)),
        "_batch_chunks": (
            d, U, trans, bounds,
            np.empty((0, K)) if dense else np.empty((N, K)),
            np.empty((nc, A, K)) if dense else np.empty((0, A, K)),
            np.empty((nc, K, K)), np.zeros((nc, K, K)), np.empty(n), np.empty(n),
        ),
    }  # fmt: skip
    if dense:
        rows = d.offsets[bounds]
        calls["_dense_emission_parts"] = (d.X, np.ones((N, K)), rows, np.empty((nc, A, K)))
    else:
        tr = p.transpose
        calls["_scatter_emission_sparse"] = (
            tr.col_ptr,
            tr.col_token,
            tr.col_value,
            np.ones((N, K)),
            np.empty((A, K)),
        )
    for name, args in calls.items():
        fresh = numba.njit(parallel=True)(getattr(batch, name).py_func)
        with numba.parallel_chunksize(1):
            fresh(*args)
        report = fresh.get_metadata(fresh.signatures[0])["parfor_diagnostics"]
        lines = sorted(pf.loc.line for pf in report.initial_parfors)
        assert len(lines) == 1, f"{name}: parfors at lines {lines}, only its prange expected"


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("bonus", [0.0, 0.3, 4.0, 500.0])
def test_oracle_scores_bonus_is_oracle_scores_bit_for_bit(impl, bonus):
    """The OEG-form oracle (one shared table, ``bonus`` on the truth pairs) returns what
    oracle_scores / oracle_scores_marginals return on the tables it writes, to the bit.

    The bonuses cover positions whose maximum is the shared table's (0, 0.3), whose
    truth entry is the maximum (4), and tables spanning more than LOG_SPAN_LIMIT, which
    take the log-space path (500).
    """
    K = 5
    problem, _ = tiny_problem(3, dense=False, K=K, lengths=[1, 2, 6, 9, 3])
    data = problem.data
    rng = np.random.default_rng(7)
    counters = np.zeros(7, dtype=np.int64)
    for i in range(problem.n):
        s, e = int(data.offsets[i]), int(data.offsets[i + 1])
        T, E = e - s, max(e - s - 1, 0)
        unary = rng.normal(size=(T, K))
        trans = rng.normal(size=(K, K))
        y = data.y[s:e]
        expected = np.repeat(trans[None], E, axis=0)
        for t in range(E):
            expected[t, y[t], y[t + 1]] = trans[y[t], y[t + 1]] + bonus
        for linear in (False, True):
            edges = np.full((E + 2, K, K), np.nan)  # longer than needed, as OEG's work array
            ln, le = _buffers(T, K)
            nodes, lin = np.empty((T, K)), np.empty((E, K, K))
            got = impl.oracle_scores_bonus(
                data, counters, i, unary, trans, bonus, edges, ln, le, nodes, lin, linear
            )
            assert np.array_equal(edges[:E], expected)
            ln2, le2 = _buffers(T, K)
            if linear:
                nodes2, lin2 = np.empty((T, K)), np.empty((E, K, K))
                want = impl.oracle_scores_marginals(
                    data, counters, i, unary, expected, ln2, le2, nodes2, lin2
                )
                assert np.array_equal(nodes, nodes2) and np.array_equal(lin, lin2)
            else:
                want = impl.oracle_scores(data, counters, i, unary, expected, ln2, le2)
            assert got == want
            assert np.array_equal(ln, ln2) and np.array_equal(le, le2)
            if linear:  # logs=False: log Z and the linear marginals to the bit
                n3, lin3 = np.empty((T, K)), np.empty((E, K, K))
                ln3, le3 = _buffers(T, K)
                got3 = impl.oracle_scores_bonus(
                    data, counters, i, unary, trans, bonus, edges, ln3, le3, n3, lin3, True, False
                )
                assert got3 == got and np.array_equal(n3, nodes) and np.array_equal(lin3, lin)
    assert counters[0] == 5 * problem.n  # each call is one counted oracle call
