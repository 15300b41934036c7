"""CRFProblem: objectives, gradients, duality, counting and immutability.

Independent truths: central finite differences of P; scipy L-BFGS-B on P with primal =
dual at its solution; the per-block gap identity; closed forms (P(0), R_i).
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import scipy.optimize

import crfopt
from crfopt import Sequences
from crfopt.bench.evaluator import Evaluator
from crfopt.core import duality

from conftest import enumerate_sequence, feature_vector, tiny_problem


@pytest.mark.parametrize("dense", [False, True])
def test_sizes_and_layout(dense):
    problem, _ = tiny_problem(0, dense=dense, K=3, A=5)
    assert problem.dim == 3 * (5 + 3 + 3)
    w = np.arange(problem.dim, dtype=float)
    blocks = problem.unpack(w)
    assert blocks.emission.shape == (3, 5)
    assert blocks.bias.shape == (3, 3)
    assert blocks.transition.shape == (3, 3)
    np.testing.assert_array_equal(problem.pack(blocks.emission, blocks.bias, blocks.transition), w)
    nobias, _ = tiny_problem(0, dense=dense, K=3, A=5, bias=False)
    assert nobias.dim == 3 * (5 + 3)
    assert nobias.unpack(nobias.zeros()).bias is None


@pytest.mark.parametrize("dense", [False, True])
def test_primal_matches_enumeration_and_p0(dense):
    problem, X = tiny_problem(1, dense=dense, K=3)
    rng = np.random.default_rng(0)
    w = rng.normal(size=problem.dim)
    nll = 0.0
    for i in range(problem.n):
        log_z, *_ = enumerate_sequence(problem, X, i, w)
        s, e = (int(v) for v in problem.data.offsets[i : i + 2])
        nll += log_z - feature_vector(problem, X[s:e], problem.labels[s:e]) @ w
    expected = 0.5 * problem.lam * w @ w + nll / problem.n
    assert Evaluator(problem).primal(w) == pytest.approx(expected, rel=1e-12)
    assert Evaluator(problem).primal(problem.zeros()) == pytest.approx(
        problem.n_tokens / problem.n * np.log(problem.n_labels), rel=1e-13
    )
    assert problem.primal_at_zero() == pytest.approx(Evaluator(problem).primal(problem.zeros()))


@pytest.mark.parametrize("dense", [False, True])
def test_gradient_equals_central_finite_differences(dense):
    problem, _ = tiny_problem(2, dense=dense, K=4)
    rng = np.random.default_rng(1)
    w = rng.normal(scale=0.5, size=problem.dim)
    g = Evaluator(problem).gradient(w)
    h = 1e-5
    fd = np.empty(problem.dim)
    for j in range(problem.dim):
        e = np.zeros(problem.dim)
        e[j] = h
        fd[j] = (Evaluator(problem).primal(w + e) - Evaluator(problem).primal(w - e)) / (2 * h)
    np.testing.assert_allclose(g, fd, atol=1e-7, rtol=1e-6)


def test_gradient_on_synthetic_sparse_problem(small_sparse):
    p = small_sparse
    rng = np.random.default_rng(2)
    w = rng.normal(scale=0.3, size=p.dim)
    g = Evaluator(p).gradient(w)
    for j in rng.choice(p.dim, size=25, replace=False):
        e = np.zeros(p.dim)
        e[j] = 1e-5
        fd = (Evaluator(p).primal(w + e) - Evaluator(p).primal(w - e)) / 2e-5
        assert g[j] == pytest.approx(fd, abs=1e-7)


def _lbfgs_optimum(problem, tol=1e-13):
    res = scipy.optimize.minimize(
        Evaluator(problem).value_and_gradient,
        problem.zeros(),
        jac=True,
        method="L-BFGS-B",
        options={"maxiter": 5000, "ftol": 0, "gtol": tol, "maxcor": 20},
    )
    return res.x


@pytest.mark.parametrize("dense", [False, True])
def test_strong_duality_at_scipy_optimum(dense):
    problem, _ = tiny_problem(3, dense=dense, K=3, lam=0.05)
    w_star = _lbfgs_optimum(problem)
    p_star = Evaluator(problem).primal(w_star)
    gap_p = Evaluator(problem).primal_gap(w_star)
    assert gap_p < 1e-12
    mu, _ = Evaluator(problem).model_marginals(w_star)
    d = problem.dual(mu)
    assert d <= p_star + 1e-12
    assert p_star - d == pytest.approx(gap_p, abs=1e-11)
    # ŵ(ν(w*)) = w* (eq. 16 at the optimum, G1)
    np.testing.assert_allclose(problem.conjugate_weights(mu), w_star, atol=1e-6)
    assert Evaluator(problem).duality_gap(mu=mu) == pytest.approx(0.0, abs=1e-10)


@pytest.mark.parametrize("dense", [False, True])
def test_gap_identities_and_nonnegativity(dense):
    """G1–G3 at arbitrary points: gaps ≥ 0; P(ŵ(μ)) - D(μ) = mean block KL; per-block form."""
    problem, _ = tiny_problem(4, dense=dense, K=3, lam=0.1)
    rng = np.random.default_rng(4)
    for _ in range(3):
        w = rng.normal(size=problem.dim)
        # G1: ∇P(w) = λ (w - ŵ(ν(w)))
        nu, _log_z = Evaluator(problem).model_marginals(w)
        np.testing.assert_allclose(
            Evaluator(problem).gradient(w),
            problem.lam * (w - problem.conjugate_weights(nu)),
            atol=1e-10,
        )
        # G2: P(w) - D(ν(w)) = ‖∇P‖²/(2λ) ≥ 0
        g2 = Evaluator(problem).primal(w) - problem.dual(nu)
        assert g2 == pytest.approx(Evaluator(problem).primal_gap(w), rel=1e-9, abs=1e-12)
        assert g2 >= 0
        # G3 with an arbitrary feasible μ: a Gibbs distribution of other weights
        mu, _ = Evaluator(problem).model_marginals(rng.normal(size=problem.dim))
        w_hat = problem.conjugate_weights(mu)
        gaps = Evaluator(problem).example_gaps(mu)
        assert np.all(gaps >= 0)
        total = Evaluator(problem).duality_gap(mu=mu)
        assert total == pytest.approx(gaps.mean(), rel=1e-9)
        # per-block form g_i = log Z_i(w) - H̃(μ_i) - ⟨w, E_{μ_i} F⟩
        H = duality.entropies(problem, mu)
        _nu_hat, log_z_hat = Evaluator(problem).model_marginals(w_hat)
        for i in range(problem.n):
            EF = _block_expected_features(problem, i, *mu.sequence(i))
            gi = log_z_hat[i] - H[i] - w_hat @ EF
            assert gi == pytest.approx(gaps[i], abs=1e-9)


def _block_expected_features(problem, i, log_nodes, log_edges):
    K = problem.n_labels
    nodes = np.exp(log_nodes)
    lo, hi = crfopt.kernels.support_bounds(problem.data, i)
    E_loc = np.empty((hi - lo, K))
    crfopt.kernels.expected_emission(problem.data, i, nodes, E_loc)
    d = np.zeros(problem.dim)
    edge_sum = np.exp(log_edges).sum(axis=0) if len(log_edges) else np.zeros((K, K))
    crfopt.kernels.add_local(problem.data, i, d, 1.0, E_loc, edge_sum)
    return d


def test_dual_at_uniform_marginals_and_entropy_bound(small_sparse):
    p = small_sparse
    mu, _ = Evaluator(p).model_marginals(p.zeros())  # uniform: every labeling equally likely
    H = duality.entropies(p, mu)
    np.testing.assert_allclose(H, p.lengths * np.log(p.n_labels), rtol=1e-12)


def test_counting_rules(small_sparse):
    p = small_sparse.with_lam(small_sparse.lam)  # fresh counters
    w = np.random.default_rng(0).normal(scale=0.1, size=p.dim)
    for i in range(p.n):
        p.oracle(i, w)
    snap = p.counters.snapshot()
    assert snap.oracle_calls == p.n
    assert (snap.forward_calls, snap.updates, snap.iterations, snap.ls_evals) == (0, 0, 0, 0)
    assert snap.effective_passes == pytest.approx(1.0)
    # evaluation adds nothing
    before = p.counters.snapshot()
    ev = Evaluator(p)
    ev.primal(w)
    ev.gradient(w)
    mu, _ = ev.model_marginals(w)
    ev.dual(mu)
    gap_mu = ev.duality_gap(mu=mu)
    gap_w = ev.duality_gap(w)
    err = ev.error(w, "test")
    ev.example_gaps(mu)
    assert p.counters.snapshot() == before
    # no inference, nothing to count: the dual and the conjugate map on the problem
    assert p.dual(mu) == ev.dual(mu)
    np.testing.assert_array_equal(p.conjugate_weights(mu), duality.conjugate_weights(p, mu))
    assert p.counters.snapshot() == before
    # the problem's gaps and error are the evaluator's numbers, charged like the passes
    # they make: P(ŵ(μ)) n forward calls, ∇P(w) n oracle calls, Viterbi one forward call
    # per decoded sequence (of whichever split)
    assert p.duality_gap(mu=mu) == gap_mu
    assert (p.counters.forward_calls, p.counters.oracle_calls) == (p.n, p.n)
    assert p.duality_gap(w) == gap_w
    assert (p.counters.forward_calls, p.counters.oracle_calls) == (p.n, 2 * p.n)
    n_test = len(p.split_data("test").offsets) - 1
    assert p.error(w, "test") == err
    assert p.counters.forward_calls == p.n + n_test
    np.testing.assert_array_equal(p.predict(w, "train"), ev.predict(w, "train"))
    assert p.counters.forward_calls == 2 * p.n + n_test
    # counted full-batch entry points
    p.counters.reset()
    p.primal(w)
    assert p.counters.forward_calls == p.n and p.counters.oracle_calls == 0
    p.gradient(w)
    p.value_and_gradient(w)
    assert p.counters.oracle_calls == 2 * p.n
    p.forward(0, w)
    assert p.counters.forward_calls == p.n + 1
    # initialization work goes to its own counters
    p.counters.reset()
    with p.initialization():
        p.oracle(0, w)
        p.forward(1, w)
    s = p.counters.snapshot()
    assert (s.oracle_calls, s.forward_calls, s.init_oracle_calls, s.init_forward_calls) == (
        0,
        0,
        1,
        1,
    )


def test_immutability(small_sparse):
    p = small_sparse
    with pytest.raises(AttributeError):
        p.lam = 3.0
    with pytest.raises(ValueError):
        p.data.y[0] = 1
    with pytest.raises(ValueError):
        p.truth_features[0] = 1.0
    q = pickle.loads(pickle.dumps(p))
    assert q.fingerprint == p.fingerprint
    with pytest.raises(ValueError):
        q.data.indices[0] = 0
    w = np.random.default_rng(0).normal(size=p.dim)
    assert Evaluator(q).primal(w) == pytest.approx(Evaluator(p).primal(w), rel=1e-14)
    assert p.with_lam(0.5).fingerprint != p.fingerprint


def test_radii_closed_form_when_label_is_absent(hand_problem):
    """§1.7: with z ∉ y_i, R_i = ‖F(x,y)‖² + ‖Σ_t φ_t‖² + T² + 2 + (T-1)²."""
    p = hand_problem
    R = p.radii()
    # rebuild the raw embeddings from the kernel data (drop the bias columns)
    kd = p.data
    X = np.zeros((p.n_tokens, p.n_kernel_attributes))
    for r in range(p.n_tokens):
        for q in range(kd.indptr[r], kd.indptr[r + 1]):
            X[r, kd.indices[q]] += kd.values[q]
    X = X[:, : p.n_attributes]
    for i in range(p.n):
        s, e = (int(v) for v in kd.offsets[i : i + 2])
        y = p.labels[s:e]
        T = e - s
        if len(set(y.tolist())) == p.n_labels:
            continue
        F = feature_vector(p, X[s:e], y)
        phi = X[s:e].sum(axis=0)
        expected = F @ F + phi @ phi + T**2 + 2 + (T - 1) ** 2
        assert R[i] == pytest.approx(expected)


def test_hand_problem_duplicate_ids_are_multiplicity(hand_problem):
    p = hand_problem
    w = p.zeros()
    p.unpack(w).emission[2, 3] = 1.0  # label ADJ, attribute suffix=é
    scores = p.unary_scores(1, w)
    assert scores[0, 2] == pytest.approx(2.0)  # listed twice in the token
    assert p.attribute_names[1] == "word=café"


def test_errors_and_prediction(small_dense):
    p = small_dense
    w0 = p.zeros()
    # at w = 0 every score ties, Viterbi returns label 0 everywhere (smallest index)
    assert np.all(Evaluator(p).predict(w0, "test") == 0)
    errs = Evaluator(p).errors(w0, "test")
    assert errs["token"] == pytest.approx(np.mean(p.split_data("test").y != 0))
    with pytest.raises(KeyError, match="splits: train, test"):
        p.error(w0, "dev")


def test_bad_input_is_a_clear_error():
    with pytest.raises(ValueError, match="at least one token"):
        crfopt.CRFProblem(
            Sequences(lengths=np.array([2, 0]), labels=np.zeros(2), dense=np.zeros((2, 3))),
            n_labels=2,
            n_attributes=3,
        )
    with pytest.raises(ValueError, match="labels must lie"):
        crfopt.CRFProblem(
            Sequences(lengths=np.array([2]), labels=np.array([0, 5]), dense=np.zeros((2, 3))),
            n_labels=2,
            n_attributes=3,
        )
    with pytest.raises(ValueError, match="attribute ids"):
        crfopt.CRFProblem(
            Sequences(
                lengths=np.array([1]),
                labels=np.array([0]),
                indptr=np.array([0, 1]),
                indices=np.array([7]),
            ),
            n_labels=2,
            n_attributes=3,
        )
    with pytest.raises(ValueError, match="lam"):
        crfopt.make_synthetic(n=5, lam=-1.0)
    p = crfopt.make_synthetic(n=5)
    with pytest.raises(ValueError, match="length d="):
        p.primal(np.zeros(3))
    with pytest.raises(IndexError):
        p.oracle(5, p.zeros())


@pytest.mark.parametrize("init", ["gibbs", "mixture", "uniform"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_initial_duals_are_consistent_marginals(init, dtype, small_sparse):
    from crfopt.optim.dual import initial_dual

    p = small_sparse.with_lam(small_sparse.lam)
    mu = initial_dual(p, init, dtype=dtype)
    assert mu.log_nodes.dtype == dtype
    nodes = np.exp(mu.log_nodes.astype(float))
    np.testing.assert_allclose(nodes.sum(axis=1), 1.0, atol=1e-6 if dtype == np.float32 else 1e-12)
    for i in (0, 3, 7):
        ln, le = mu.sequence(i)
        e = np.exp(le.astype(float))
        for t in range(len(le)):
            np.testing.assert_allclose(e[t].sum(axis=1), np.exp(ln[t].astype(float)), atol=1e-6)
    # gibbs costs one oracle call per sequence; the others none
    assert p.counters.oracle_calls == (p.n if init == "gibbs" else 0)
    if init == "gibbs":  # close to the truth: off-truth node mass ~ (K-1) e^-20 or less
        truth_mass = nodes[np.arange(p.n_tokens), p.labels]
        assert truth_mass.min() > 1 - (p.n_labels - 1) * np.exp(-9)
    gap = Evaluator(p).duality_gap(mu=mu)  # evaluation works on float32 without a float64 copy
    assert np.isfinite(gap) and gap >= -1e-6


def test_log_mix_is_exact_at_the_ends():
    from crfopt.optim.dual import log_mix

    a = np.log(np.array([0.2, 0.8]))
    b = np.log(np.array([0.6, 0.4]))
    out = np.empty(2)
    log_mix(a, b, 0.0, out)
    assert np.array_equal(out, a)
    log_mix(a, b, 1.0, out)
    assert np.array_equal(out, b)
    log_mix(a, b, 0.25, out)
    np.testing.assert_allclose(np.exp(out), 0.75 * np.exp(a) + 0.25 * np.exp(b), rtol=1e-15)
    tiny = np.array([-800.0, 0.0])
    log_mix(tiny, tiny - 1.0, 0.5, out)  # no underflow to -inf
    np.testing.assert_allclose(out, np.log(0.5 + 0.5 * np.exp(-1.0)) + tiny)


def test_arrays_roundtrip(small_sparse, small_dense):
    for p in (small_sparse, small_dense):
        arrays, meta = p.to_arrays()
        import json

        meta = json.loads(json.dumps(meta))  # what the cache stores
        q = crfopt.CRFProblem.from_arrays(arrays, meta)
        assert q.fingerprint == p.fingerprint
        w = np.random.default_rng(0).normal(size=p.dim)
        assert Evaluator(q).primal(w) == pytest.approx(Evaluator(p).primal(w), rel=1e-14)
        assert q.error(w) == p.error(w)
        r = crfopt.CRFProblem.from_arrays(arrays, meta, lam=0.5)
        assert r.lam == 0.5 and r.n == p.n
        with pytest.raises(AttributeError):
            q.lam = 1.0
