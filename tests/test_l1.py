"""ℓ1 / elastic-net training (issue 20 item 3): P(w) = L(w) + λ/2‖w‖² + σ‖w‖₁.

The independent truths: brute-force enumeration of every label sequence of tiny
problems (tests/conftest.py) for P, ŵ(μ), D(μ) and the gap; scipy's L-BFGS-B on the
split form w = w⁺ − w⁻ (bounds ≥ 0, a smooth problem) for the optimum, where primal and
dual must meet.
"""

from __future__ import annotations

import math
import pickle

import numpy as np
import pytest
import scipy.optimize

import crfopt
from crfopt.bench.evaluator import Evaluator
from crfopt.core import duality

from conftest import enumerate_sequence, tiny_problem


# ------------------------------------------------------------------ brute-force truth
def _brute(problem, X, w):
    """(L(w), ∇L(w), per-sequence entropies of ν(w), Σ_i E_ν[F]) by enumeration."""
    n = problem.n
    loss, grad = 0.0, np.zeros(problem.dim)
    ent = np.empty(n)
    expected = np.zeros(problem.dim)
    offsets = problem.data.offsets
    for i in range(n):
        log_z, _, _, ef, ys, p, scores = enumerate_sequence(problem, X, i, w)
        y = problem.labels[offsets[i] : offsets[i + 1]]
        truth = int(np.flatnonzero((ys == y).all(axis=1))[0])
        loss += log_z - scores[truth]
        ent[i] = -float(p @ np.log(p))
        expected += ef
    grad = (expected - problem.truth_features) / n
    return loss / n, grad, ent, expected


def _soft(z, s):
    return np.sign(z) * np.maximum(np.abs(z) - s, 0.0)


def _l1_problem(seed=0, *, dense=False, lam=0.05, l1=0.02):
    problem, X = tiny_problem(seed, dense=dense, lam=lam)
    return problem.with_regularization(l1=l1), X


@pytest.mark.parametrize("dense", [False, True])
def test_primal_matches_brute_force_and_gradient_is_the_smooth_part(dense):
    problem, X = _l1_problem(1, dense=dense)
    rng = np.random.default_rng(5)
    w = rng.normal(size=problem.dim) * 0.5
    w[rng.random(problem.dim) < 0.3] = 0.0  # kinks of ‖·‖₁ included
    L, gL, _, _ = _brute(problem, X, w)
    lam, sigma = problem.lam, problem.l1
    P = L + 0.5 * lam * w @ w + sigma * np.abs(w).sum()
    value, grad = Evaluator(problem).value_and_gradient(w)
    assert value == pytest.approx(P, rel=1e-12, abs=1e-12)
    np.testing.assert_allclose(grad, gL + lam * w, rtol=1e-10, atol=1e-12)
    # the counted twins agree and count one pass each
    before = problem.counters.snapshot()
    assert problem.primal(w) == pytest.approx(P, rel=1e-12)
    v2, g2 = problem.value_and_gradient(w)
    after = problem.counters.snapshot()
    assert (
        after.forward_calls - before.forward_calls,
        after.oracle_calls - before.oracle_calls,
    ) == (
        problem.n,
        problem.n,
    )
    assert v2 == pytest.approx(P, rel=1e-12)
    np.testing.assert_allclose(g2, grad, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("dense", [False, True])
def test_conjugate_weights_dual_and_gap_match_brute_force(dense):
    problem, X = _l1_problem(2, dense=dense)
    lam, sigma, n = problem.lam, problem.l1, problem.n
    rng = np.random.default_rng(7)
    w_mu = rng.normal(size=problem.dim) * 0.7  # μ = ν(w_mu), an arbitrary feasible dual
    mu, _ = duality.model_marginals(problem, w_mu)
    _, _, ent, expected = _brute(problem, X, w_mu)
    z = (problem.truth_features - expected) / n
    w_hat = _soft(z, sigma) / lam
    assert np.count_nonzero(w_hat) < problem.dim  # the threshold bites on this problem
    np.testing.assert_allclose(problem.conjugate_weights(mu), w_hat, rtol=1e-9, atol=1e-12)
    D = ent.mean() - _soft(z, sigma) @ _soft(z, sigma) / (2 * lam)
    assert problem.dual(mu) == pytest.approx(D, rel=1e-10, abs=1e-12)
    # ŵ(μ) maximizes ⟨w, z⟩ − g(w): D is the Lagrangian's value at ŵ, below it anywhere else
    g = lambda v: 0.5 * lam * v @ v + sigma * np.abs(v).sum()  # noqa: E731
    best = ent.mean() - (w_hat @ z - g(w_hat))
    assert best == pytest.approx(D, rel=1e-10)
    for _ in range(20):
        v = w_hat + rng.normal(size=problem.dim) * 0.1
        assert ent.mean() - (v @ z - g(v)) >= D - 1e-12
    # the primal gap at w: P(w) − D(ν(w)), both by enumeration
    w = rng.normal(size=problem.dim) * 0.4
    w[:5] = 0.0
    L, _, ent_w, expected_w = _brute(problem, X, w)
    z_w = (problem.truth_features - expected_w) / n
    gap = (L + g(w)) - (ent_w.mean() - _soft(z_w, sigma) @ _soft(z_w, sigma) / (2 * lam))
    assert gap > 0
    ev = Evaluator(problem)
    assert ev.primal_gap(w) == pytest.approx(gap, rel=1e-9)
    assert ev.duality_gap(w) == pytest.approx(gap, rel=1e-9)
    assert problem.duality_gap(w) == pytest.approx(gap, rel=1e-9)
    # the μ gap: P(ŵ(μ)) − D(μ) ≥ 0 (weak duality)
    assert ev.duality_gap(mu=mu) >= 0


def test_gap_formula_reduces_to_the_l2_closed_form():
    """σ = 0: P(w) − D(ν(w)) = ‖∇P(w)‖²/(2λ); and the ℓ1 form at σ → 0 tends to it."""
    problem, _ = tiny_problem(3, dense=False, lam=0.1)
    w = np.random.default_rng(0).normal(size=problem.dim)
    g = Evaluator(problem).gradient(w)
    closed = g @ g / (2 * problem.lam)
    assert duality.primal_gap(problem, w) == closed
    tiny = problem.with_regularization(l1=1e-300)  # takes the ℓ1 code path
    assert duality.primal_gap(tiny, w) == pytest.approx(closed, rel=1e-12)


def _split_optimum(problem):
    """argmin P by scipy's L-BFGS-B on w = u − v, u, v ≥ 0 (smooth, bound-constrained)."""
    ev = Evaluator(problem)
    d, sigma = problem.dim, problem.l1

    def fun(x):
        u, v = x[:d], x[d:]
        value, grad = ev.value_and_gradient(u - v)  # value includes σ‖u − v‖₁
        value += sigma * (u.sum() + v.sum() - np.abs(u - v).sum())
        return value, np.concatenate([grad + sigma, -grad + sigma])

    res = scipy.optimize.minimize(
        fun,
        np.zeros(2 * d),
        jac=True,
        method="L-BFGS-B",
        bounds=[(0, None)] * (2 * d),
        options={"maxiter": 20000, "ftol": 0.0, "gtol": 1e-14, "maxcor": 30},
    )
    return res.x[:d] - res.x[d:]


@pytest.mark.parametrize("dense", [False, True])
def test_primal_equals_dual_at_the_optimum(dense):
    problem, _ = _l1_problem(4, dense=dense, lam=0.02, l1=0.03)
    w = _split_optimum(problem)
    ev = Evaluator(problem)
    assert 0 < np.count_nonzero(w) < problem.dim  # a sparse optimum: the test has teeth
    mu, _ = ev.model_marginals(w)
    P, D = ev.primal(w), ev.dual(mu)
    assert abs(P - D) <= 1e-9 * P
    assert ev.primal_gap(w) <= 1e-9 * P
    # the dual map sends ν(w*) back to w*
    np.testing.assert_allclose(problem.conjugate_weights(mu), w, atol=1e-6)
    # away from the optimum the gap is clearly positive and bounds P(w) − P*
    w_off = w + 0.05
    assert ev.primal_gap(w_off) >= ev.primal(w_off) - P > 1e-4


def test_l1_is_validated_fingerprinted_and_saved():
    problem, _ = tiny_problem(5, dense=False, lam=0.1)
    assert problem.l1 == 0.0 and problem.regularizers == ("l2",)
    for bad in (-1e-3, math.nan, math.inf, "0.1", True):
        with pytest.raises(ValueError, match="l1 must be a finite number ≥ 0"):
            problem.with_regularization(l1=bad)
    seqs = crfopt.Sequences(lengths=np.array([2]), labels=np.array([0, 1]), dense=np.ones((2, 1)))
    with pytest.raises(ValueError, match=r"l1 must be a finite number ≥ 0.*got None"):
        crfopt.CRFProblem(seqs, n_labels=2, n_attributes=1, l1=None)
    q = problem.with_regularization(l1=0.01)
    assert (q.l1, q.lam, q.regularizers) == (0.01, 0.1, ("l2", "l1"))
    assert q.fingerprint != problem.fingerprint
    assert q.with_regularization(l1=0.02).fingerprint != q.fingerprint
    # σ = 0 hashes as before ℓ1 existed (the shipped optima table keys on it)
    assert problem.with_regularization(l1=0.0).fingerprint == problem.fingerprint
    # with_lam keeps σ; with_regularization keeps what it is not given
    assert q.with_lam(0.2).l1 == 0.01
    assert q.with_regularization(lam=0.3).l1 == 0.01
    assert q.with_regularization(l1=0.05).lam == 0.1
    # saved metadata and pickling carry σ; metadata from before ℓ1 means σ = 0
    arrays, meta = q.to_arrays()
    assert meta["l1"] == 0.01
    assert crfopt.CRFProblem.from_arrays(arrays, meta).l1 == 0.01
    old_meta = {k: v for k, v in meta.items() if k != "l1"}
    assert crfopt.CRFProblem.from_arrays(arrays, old_meta).l1 == 0.0
    assert pickle.loads(pickle.dumps(q)).l1 == 0.01
    assert q.info()["l1"] == 0.01 and "l1=0.01" in repr(q)
    # a plugin forcing σ onto its copy is caught like a forced λ
    r = q.for_run()
    q.changed_data()
    object.__setattr__(r, "_l1", 0.5)
    assert r.changed_data() == ["σ (l1)"]


# ------------------------------------------------------------------ OWL-QN
def test_pseudo_gradient_is_the_steepest_one_sided_derivative():
    """◇P_j: the derivative of P along +e_j or −e_j that descends, 0 where neither does
    (checked against one-sided difference quotients of P itself, not the formula)."""
    from crfopt_plugins.owlqn import pseudo_gradient

    problem, _ = _l1_problem(6, lam=0.05, l1=0.05)
    ev = Evaluator(problem)
    rng = np.random.default_rng(1)
    w = rng.normal(size=problem.dim) * 0.3
    w[::3] = 0.0
    grad = ev.gradient(w)
    pg = pseudo_gradient(w, grad, problem.l1)
    h = 1e-7
    P0 = ev.primal(w)
    seen_zero = seen_kink = 0
    for j in range(problem.dim):
        e = np.zeros(problem.dim)
        e[j] = h
        right = (ev.primal(w + e) - P0) / h  # P'(w; +e_j)
        left = (P0 - ev.primal(w - e)) / h  # −P'(w; −e_j)
        if right < 0:
            want = right
        elif left > 0:
            want = left
        else:
            want = 0.0
            seen_zero += w[j] == 0
        seen_kink += w[j] == 0 and want != 0
        assert pg[j] == pytest.approx(want, abs=2e-6), j
    assert seen_zero and seen_kink  # both cases at w_j = 0 occur


def _owlqn(problem, passes=300):
    from crfopt.bench.runner import Budget, run

    return run(problem, "owlqn", seed=0, budget=Budget(passes=passes), checkpoints=[0.0])


def test_owlqn_reaches_the_certified_l1_optimum_and_its_zeros():
    from crfopt.bench.optimum import reference_optimum

    problem, _ = _l1_problem(7, dense=False, lam=0.02, l1=0.03)
    ref = reference_optimum(problem)
    assert ref.source == "computed" and ref.l1 == problem.l1
    assert ref.relative_certificate <= 1e-10
    w_split = _split_optimum(problem)  # an independent solver of the same problem
    ev = Evaluator(problem)
    assert ref.p_star == pytest.approx(ev.primal(w_split), rel=1e-9)
    res = _owlqn(problem)
    assert res.status in ("budget", "converged")
    w = res.w
    assert ev.primal(w) - ref.p_star <= 1e-9 * ref.p_star
    assert ev.primal_gap(w) <= 1e-8 * ref.p_star
    # the same sparsity pattern as the independent optimum (|w_j| > 1e-6 vs exact zeros)
    np.testing.assert_array_equal(w == 0, np.abs(w_split) < 1e-6)
    assert 0 < np.count_nonzero(w) < problem.dim


def test_owlqn_at_sigma_zero_is_l2_lbfgs():
    problem, _ = tiny_problem(8, dense=True, lam=0.05)
    from conftest import scipy_optimum

    ev = Evaluator(problem)
    p_star = ev.primal(scipy_optimum(problem))
    res = _owlqn(problem, passes=200)
    assert ev.primal(res.w) - p_star <= 1e-10 * p_star


def test_certified_optimum_is_cached_under_sigma():
    from crfopt.bench.optimum import cached_optimum, reference_optimum, shipped_optimum

    problem, _ = _l1_problem(9, lam=0.05, l1=0.01)
    first = reference_optimum(problem)
    again = reference_optimum(problem)  # the user cache, re-verified with the ℓ1 gap
    assert again.source == "cache" and again.p_star == first.p_star
    assert cached_optimum(problem.with_regularization(l1=0.02)) is None  # another σ
    assert cached_optimum(problem.with_regularization(l1=0.0)) is None
    assert shipped_optimum(problem) is None


def test_l2_only_optimizers_refuse_l1_problems():
    from crfopt.bench.runner import Budget, run
    from crfopt.optim.contract import UnsupportedProblemError

    problem, _ = _l1_problem(10)
    reg = crfopt.get_registry()
    assert reg.optimizer("owlqn").regularizers == ("l2", "l1")
    for name in ("lbfgs", "sag-nus-star", "oeg", "sg"):  # the SDCA family takes ℓ1 (§3.14)
        spec = reg.optimizer(name)
        assert spec.regularizers == ("l2",)
        with pytest.raises(UnsupportedProblemError, match=r"l2 penalty only.*σ = l1 = 0\.02"):
            spec.create(problem)
        res = run(problem, name, budget=Budget(passes=1))
        assert res.status == "skipped"
        assert res.meta["skip_reason"].startswith(f"{name} handles the l2 penalty only")


def test_registration_validates_regularizers():
    from crfopt_plugins.owlqn import OWLQN

    for bad in (("l1",), ("l2", "tv"), ["l2", "l1"]):
        cls = type("Bad", (OWLQN,), {"regularizers": bad})
        with pytest.raises(ValueError, match="regularizers must be a tuple containing 'l2'"):
            crfopt.OptimizerSpec("bad", cls)


def test_cli_l1_option_reaches_the_problem():
    from click.testing import CliRunner

    from crfopt.apps.cli import main

    res = CliRunner().invoke(
        main, ["optimum", "--problem", "synthetic", "--set", "synthetic.n=12", "--l1", "0.01"]
    )
    assert res.exit_code == 0, res.output
    assert "σ (l1)" in res.output and "0.01" in res.output
    bad = CliRunner().invoke(main, ["optimum", "--problem", "synthetic", "--l1", "-1"])
    assert bad.exit_code == 2 and "--l1" in bad.output


def test_estimator_c1_trains_a_sparse_elastic_net_model():
    """CRF(c1, c2) minimizes CRFsuite's (Σℓᵢ + c1‖w‖₁ + c2‖w‖²)/n with owlqn, to a sparse w."""
    from test_sklearn_api import _corpus

    X, y = _corpus(n=40)
    n = len(X)
    crf = crfopt.CRF(
        algorithm="lbfgs", c1=0.5, c2=0.1, max_iterations=500, epsilon=None, target_gap=None
    )
    crf.fit(X, y)
    info = crf.model_.training
    assert info["optimizer"] == "owlqn"
    assert info["l1"] == pytest.approx(0.5 / n) and info["lam"] == pytest.approx(0.2 / n)
    # the elastic-net gap certifies the optimum (it bounds P − P*, docs/algorithms.md §1.9)
    assert info["duality_gap"] <= 1e-8 * info["primal"]
    m = crf.model_
    weights = np.concatenate([np.ravel(m.emission), np.ravel(m.transition)])
    assert 0 < np.count_nonzero(weights) < 0.5 * weights.size
    # CRFsuite's view: the Counters hold exactly the non-zero weights
    assert len(crf.state_features_) + len(crf.transition_features_) <= np.count_nonzero(
        np.concatenate([weights, np.ravel(m.bias) if m.bias is not None else []])
    )
