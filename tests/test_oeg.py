"""OEG and the SG baselines against independent truths."""

from __future__ import annotations

import numpy as np
import pytest

import crfopt
from crfopt.bench.evaluator import Evaluator

from conftest import scipy_optimum


@pytest.fixture(scope="module")
def small():
    return crfopt.make_synthetic(n=30, labels=4, attributes=20, length=5, seed=41, lam=0.05)


@pytest.fixture(scope="module")
def w_star(small):
    return scipy_optimum(small)


def _make(problem, name, seed=0, **overrides):
    spec = crfopt.get_registry().optimizer(name)
    with problem.initialization():
        return spec.create(problem, seed, overrides)


@pytest.mark.parametrize("name", ["oeg", "oeg-norp"])
def test_oeg_reaches_a_tiny_duality_gap(small, w_star, name):
    p = small.with_lam(small.lam)
    res = crfopt.run(
        p, name, budget=crfopt.Budget(passes=800, target_gap=1e-6), checkpoints="every:10"
    )
    assert res.status == "converged", res.trace["duality_gap"].iloc[-1]
    assert res.trace["duality_gap"].iloc[-1] <= 1e-6
    assert np.linalg.norm(res.w - w_star) <= np.sqrt(2 * 1e-6 / p.lam)


def test_oeg_accepts_only_dual_ascent(small):
    """Every accepted trial raises D(μ) (evaluated from scratch); rejected ones change nothing."""
    p = small.with_lam(small.lam)
    opt = _make(p, "oeg")
    prev = p.dual(opt.dual_state())
    for _ in range(4 * p.n):
        before_updates = p.counters.updates
        w_before = opt.w.copy()
        opt.step()
        d = p.dual(opt.dual_state())
        if p.counters.updates == before_updates:
            assert d == pytest.approx(prev, abs=1e-13)
            np.testing.assert_array_equal(opt.w, w_before)
        else:
            assert d >= prev - 1e-12
        prev = d
        assert opt.dual_value() == pytest.approx(d, abs=1e-10)
    np.testing.assert_allclose(opt.w, p.conjugate_weights(opt.dual_state()), atol=1e-10)


def test_oeg_counting_e10(small):
    p = small.with_lam(small.lam)
    res = crfopt.run(p, "oeg", budget=crfopt.Budget(passes=10))
    t = res.trace
    assert (t["oracle_calls"] >= t["iterations"]).all()
    assert (t["updates"] <= t["iterations"]).all()
    assert res.meta["final_counters"]["init_oracle_calls"] == p.n


def test_oeg_first_pass_is_a_permutation(small):
    """After one epoch every example has been visited (its η moved) — not so without it."""
    p = small.with_lam(small.lam)
    opt = _make(p, "oeg", seed=3)
    opt.run_block(p.n)
    assert np.all(opt._state.eta != 0.5)
    q = small.with_lam(small.lam)
    norp = _make(q, "oeg-norp", seed=3)
    norp.run_block(q.n)
    assert np.any(norp._state.eta == 0.5)  # sampling with replacement misses some (p ≈ 1)


def test_oeg_c0_starts_uniform(small):
    p = small.with_lam(small.lam)
    opt = _make(p, "oeg-c0")
    mu = opt.dual_state()
    np.testing.assert_allclose(np.exp(mu.log_nodes), 1.0 / p.n_labels, rtol=1e-12)


# ------------------------------------------------------------------------ SG family


def _naive(problem, variant, seed, iterations, eta0=0.1, eps=1e-8):
    """Textbook SG / ASG / AdaGrad with dense vectors and the public oracle."""
    n, lam = problem.n, problem.lam
    rng = np.random.Generator(np.random.PCG64(seed))
    u = rng.random((iterations, 2))
    w = problem.zeros()
    avg = problem.zeros()
    G = problem.zeros()
    for t in range(iterations):
        i = min(int(u[t, 1] * n), n - 1)
        g = problem.oracle(i, w, gradient=True).gradient.to_dense(problem)
        if variant == "adagrad":
            G += g * g
            step = eta0 / (eps + np.sqrt(G))
            w = (w - step * g) / (1 + lam * step)
        else:
            eta = eta0 / (1 + lam * eta0 * t)
            w = w - eta * (g + lam * w)
            avg += w
    return avg / iterations if variant == "asg" else w


@pytest.mark.parametrize("variant", ["sg", "asg", "adagrad"])
def test_sg_family_matches_naive_dense_updates(small, variant):
    p = small.with_lam(small.lam)
    opt = _make(p, variant, seed=7)
    k = 3 * p.n
    opt.run_block(k)
    q = small.with_lam(small.lam)
    np.testing.assert_allclose(opt.w, _naive(q, variant, 7, k), rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize("variant", ["sg", "asg", "adagrad"])
def test_sg_family_decreases_the_objective(small, w_star, variant):
    p = small.with_lam(small.lam)
    p_star = Evaluator(p).primal(w_star)
    res = crfopt.run(
        p, variant, budget=crfopt.Budget(passes=20), checkpoints="every:5", p_star=p_star
    )
    sub = res.trace["suboptimality"].astype(float).to_numpy()
    assert sub[-1] < 0.1 * sub[0]
    assert np.all(np.diff(sub[1:]) < 0.5 * sub[0])  # no blow-up along the way


def test_constant_step_must_be_stable(small):
    with pytest.raises(crfopt.ParameterError, match="step_size"):
        _make(small.with_lam(small.lam), "sg", schedule="constant", step_size=100.0)


# --------------------------------------------------------------------------------------
# issue 19: the opt-in linear_marginals path (equal to rounding, not to the bit)
# --------------------------------------------------------------------------------------


def _oeg_like_tables(rng, T, K, bonus):
    """Edge tables as OEG builds them: one K×K table, plus ``bonus`` on the truth entry."""
    A = rng.normal(size=(K, K))
    y = rng.integers(0, K, size=T)
    edges = np.repeat(A[None], T - 1, axis=0)
    for t in range(T - 1):
        edges[t, y[t], y[t + 1]] += bonus
    return edges


def test_oracle_scores_marginals_are_the_exp_of_the_log_marginals(small):
    """The opt-in OEG path's kernel: linear marginals equal exp of oracle_scores' log
    marginals (to rounding), it counts one oracle call, and log Z / logs are the same."""
    from crfopt import kernels

    p = small.with_lam(small.lam)
    data, counters = p.data, p.counters.array
    rng = np.random.default_rng(5)
    K = p.n_labels
    for i in (0, 3, 7):
        T = int(data.offsets[i + 1] - data.offsets[i])
        unary = rng.normal(size=(T, K))
        edges = _oeg_like_tables(rng, T, K, 10.0)
        ln, le = np.empty((T, K)), np.empty((max(T - 1, 1), K, K))
        log_z = kernels.oracle_scores(data, counters, i, unary, edges, ln, le)
        ln2, le2 = np.empty_like(ln), np.empty_like(le)
        nodes, lin = np.empty_like(ln), np.empty_like(le)
        before = int(counters[kernels.ORACLE_CALLS])
        log_z2 = kernels.oracle_scores_marginals(
            data, counters, i, unary, edges, ln2, le2, nodes, lin
        )
        assert int(counters[kernels.ORACLE_CALLS]) == before + 1
        assert log_z2 == pytest.approx(log_z, rel=1e-14)
        np.testing.assert_allclose(ln2, ln, rtol=0, atol=1e-13)
        np.testing.assert_allclose(nodes, np.exp(ln), rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(lin[: T - 1], np.exp(le[: T - 1]), rtol=1e-12, atol=1e-15)


def test_oeg_exp_marginals_option_converges(small, w_star):
    """The trial path before issue 47 (marginals as exp of the log-marginals; equal to
    rounding, different accept decisions at ties) still solves the problem: same
    duality-gap target as the default."""
    p = small.with_lam(small.lam)
    res = crfopt.run(
        p,
        "oeg",
        params={"linear_marginals": False},
        budget=crfopt.Budget(passes=800, target_gap=1e-6),
        checkpoints="every:10",
    )
    assert res.status == "converged", res.trace["duality_gap"].iloc[-1]
    assert np.linalg.norm(res.w - w_star) <= np.sqrt(2 * 1e-6 / p.lam)
