"""SDCA (plugins/sdca.py) against independent truths.

Line-search derivatives against finite differences of the block objective; the dual
never decreases; the incremental dual value equals D(μ); every variant converges to the
L-BFGS optimum (true duality gap ≤ 1e-8); counting per docs/algorithms.md §2 (E10).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy.optimize import brentq

import crfopt
import crfopt_plugins.sdca as S
from crfopt.bench.evaluator import Evaluator
from crfopt.optim.dual import blocks, initial_dual, search

from conftest import scipy_optimum

VARIANTS = [
    "sdca",
    "sdca-perm",
    "sdca-cyclic",
    "sdca-importance",
    "sdca-gap",
    "sdca-gapimp",
    "sdca-max",
    "sdca-edelta",
]


@pytest.fixture(scope="module")
def small():
    return crfopt.make_synthetic(n=30, labels=4, attributes=20, length=5, seed=21, lam=0.05)


@pytest.fixture(scope="module")
def small_dense():
    return crfopt.make_synthetic(
        n=25, labels=3, attributes=10, length=4, dense=True, density=0.4, seed=22, lam=0.05
    )


@pytest.fixture(scope="module")
def w_star(small):
    return scipy_optimum(small)


def _block_state(problem, i):
    """A real line-search state on sequence i: μ = gibbs(c=2), w = ŵ(μ), ν = ν_i(w),
    with a = ‖v‖² and b = ⟨w, v⟩ for v = (E_μF - E_νF)/(λn) computed from the features."""
    mu = initial_dual(problem, "gibbs", c=2.0)
    w = problem.conjugate_weights(mu)
    K = problem.n_labels
    data = problem.data
    T = int(data.offsets[i + 1] - data.offsets[i])
    sc = blocks.make_scratch(int(data.max_len), K)
    s = int(data.offsets[i])
    blocks.load(mu.log_nodes, mu.log_edges, s, s - i, T, K, sc)
    counters = np.zeros(7, dtype=np.int64)
    crfopt.kernels.oracle_marginals(data, counters, i, w, sc.lnun, sc.lnue, sc.nun, sc.nue)
    sc.dn_f[: T * K] = sc.nun_f[: T * K] - sc.mn_f[: T * K]
    E = (T - 1) * K * K
    sc.de_f[:E] = sc.nue_f[:E] - sc.me_f[:E]
    lam_n = problem.lam * problem.n
    v = problem.zeros()
    lo, hi = crfopt.kernels.support_bounds(data, i)
    E_loc = np.empty((hi - lo, K))
    crfopt.kernels.expected_emission(data, i, np.exp(mu.sequence(i)[0]) - sc.nun[:T], E_loc)
    trans = (np.exp(mu.sequence(i)[1]) - sc.nue[: T - 1]).sum(axis=0)
    crfopt.kernels.add_local(data, i, v, 1.0 / lam_n, E_loc, trans)
    return sc, T, K, float(v @ v), float(w @ v), lam_n


@pytest.mark.parametrize("i", [0, 3, 7, 11])
def test_line_search_derivatives_match_finite_differences(small, i):
    sc, T, K, a, b, lam_n = _block_state(small, i)

    def f(g):
        return search.block_value(g, a, b, lam_n, sc, T, K)

    h = 1e-5
    for g in (0.05, 0.3, 0.5, 0.9):
        d1, d2 = search.derivatives(g, sc, T, K, lam_n * a)
        fd1 = (f(g + h) - f(g - h)) / (2 * h)
        fd2 = (f(g + h) - 2 * f(g) + f(g - h)) / h**2
        assert d1 == pytest.approx(fd1, rel=1e-6, abs=1e-8)
        assert d2 == pytest.approx(fd2, rel=1e-4, abs=1e-5)
        assert d2 < 0


@pytest.mark.parametrize("i", [1, 5])
def test_newton_step_maximizes_the_block_objective(small, i):
    sc, T, K, a, b, lam_n = _block_state(small, i)
    d0 = search.derivatives(0.0, sc, T, K, lam_n * a)[0]
    gamma, evals, capped = search.newton_line_search(0.5, 1e-8, 100, d0, lam_n * a, sc, T, K)
    grid = np.linspace(0.0, 1.0, 4001)
    best = grid[int(np.argmax([search.block_value(g, a, b, lam_n, sc, T, K) for g in grid]))]
    assert abs(gamma - best) <= 2.5e-4
    assert 1 <= evals < 20 and not capped


def _one_node_block(mu, nu):
    """Scratch tables of a one-token block (T = 1): μ, δ = ν - μ and log ν."""
    K = len(mu)
    sc = blocks.make_scratch(1, K)
    sc.mn_f[:K] = mu
    sc.dn_f[:K] = np.subtract(nu, mu)
    sc.lnun_f[:K] = np.log(nu)
    return sc, K


def test_first_newton_evaluation_narrows_the_bracket():
    """docs/algorithms.md §3.2, §7.14: a first Newton step that leaves (0, 1) is followed by
    a bisection of the half that holds the root, without evaluating 0.5 again (REF and
    rtsafe evaluate it twice)."""
    sc, K = _one_node_block([0.5, 0.5], [0.99, 0.01])
    lna = 0.01

    def slope(g):  # f'(γ) of the one-token block, independently in NumPy
        mu_g = sc.mn_f[:K] + g * sc.dn_f[:K]
        return float(sc.dn_f[:K] @ (sc.lnun_f[:K] - np.log(mu_g))) - lna * g

    d1, d2 = search.derivatives(0.5, sc, 1, K, lna)
    assert d1 == pytest.approx(slope(0.5)) and 0.5 - d1 / d2 > 1.0  # the step leaves (0, 1)
    # with sub-precision 0.5 the search stops at its first accepted step: here the
    # bisection point of [0.5, 1], after the one evaluation at 0.5
    assert search.newton_line_search(0.5, 0.5, 100, slope(0.0), lna, sc, 1, K) == (0.75, 1, False)
    gamma, evals, capped = search.newton_line_search(0.5, 1e-10, 100, slope(0.0), lna, sc, 1, K)
    root = brentq(slope, 0.0, 1.0, xtol=1e-14)
    assert gamma == pytest.approx(root, abs=1e-9) and 2 <= evals < 20 and not capped


def _tables_derivatives(sc, T, K, gamma, lna):
    """f', f'' from the materialized tables x = μ + γδ and log x, by NumPy (the truth the
    fused one-pass kernel must reproduce to rounding)."""
    xn = sc.mn[:T] + gamma * sc.dn[:T]
    xe = sc.me[: T - 1] + gamma * sc.de[: T - 1]
    dn, de = sc.dn[:T], sc.de[: T - 1]
    d1 = -lna * gamma + np.sum(de * (sc.lnue[: T - 1] - np.log(xe)))
    d1 -= np.sum(dn[1 : T - 1] * (sc.lnun[1 : T - 1] - np.log(xn[1 : T - 1])))
    ratio = dn[: T - 1] / xn[: T - 1]
    d2 = -lna - np.sum(dn[0] ** 2 / xn[0]) - np.sum((de - ratio[:, :, None] * xe) ** 2 / xe)
    return d1, d2


@pytest.mark.parametrize("i", [0, 3, 7])
def test_fused_kernels_equal_the_tables(small_dense, i):
    """The one-pass kernels (mix, log and sums fused) against NumPy on the tables: δ and
    both block KLs, f' and f'', the committed logs and the entropy."""
    sc, T, K = _block_state(small_dense, i)[:3]
    nodes, edges = T * K, (T - 1) * K * K
    dn, de = sc.dn_f.copy(), sc.de_f.copy()
    rm, rn = np.empty(edges), np.empty(edges)
    g, r = blocks._delta_kls(
        T, K, sc.mn_f, sc.lmn_f, sc.nun_f, sc.lnun_f, sc.dn_f, sc.me_f, sc.lme_f, sc.nue_f,
        sc.lnue_f, sc.de_f, rm, rn,
    )  # fmt: skip
    np.testing.assert_array_equal(sc.dn_f[:nodes], dn[:nodes])
    np.testing.assert_array_equal(sc.de_f[:edges], de[:edges])
    kl = crfopt.kernels.chain_kl_linlog
    assert g == pytest.approx(kl(sc.mn, sc.me, sc.lmn, sc.lme, sc.lnun, sc.lnue, T, K), rel=1e-12)
    assert r == pytest.approx(kl(sc.nun, sc.nue, sc.lnun, sc.lnue, sc.lmn, sc.lme, T, K), rel=1e-12)
    # λna = 0: the entropy terms alone (λna can dwarf the curvature and hide its errors)
    for gamma in (0.0, 0.2, 0.5, 0.9, 1.0):
        got = search.derivatives(gamma, sc, T, K, 0.0)
        want = _tables_derivatives(sc, T, K, gamma, 0.0)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)  # f'(0) can be ~0
    mu_n = np.zeros((T + 2, K))
    mu_e = np.zeros((T + 1, K, K))
    H, bad = blocks._store_fused(
        0.3, T, K, sc.mn_f, sc.dn_f, sc.me_f, sc.de_f, sc.xn_f, sc.lxn_f, rm, mu_n, mu_e, 2, 2
    )
    xn = sc.mn[:T] + 0.3 * sc.dn[:T]
    xe = sc.me[: T - 1] + 0.3 * sc.de[: T - 1]
    assert bad == 0
    np.testing.assert_allclose(mu_n[2:], np.minimum(np.log(xn), 0.0), rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(mu_e[2:], np.minimum(np.log(xe), 0.0), rtol=1e-14, atol=1e-15)
    assert not mu_n[:2].any() and not mu_e[:2].any()  # nothing written outside the sequence
    H_true = -np.sum(xn[0] * np.log(xn[0])) - np.sum(xe * (np.log(xe) - np.log(xn[:-1, :, None])))
    assert pytest.approx(H_true, rel=1e-12) == H


def test_tiny_mixtures_take_the_log_space_path(small_dense):
    """An entry of μ_γ below TINY makes the fused kernels report it; derivatives then
    uses the tables with the log-space mixture, which stays finite where log(x) is not."""
    sc, T, K, a, _, lam_n = _block_state(small_dense, 2)
    sc.me_f[1], sc.lme_f[1] = 0.0, -800.0  # μ = e^-800 underflows; ν keeps the entry alive
    sc.de_f[1] = sc.nue_f[1]
    ratio = np.empty((T - 1) * K * K)
    for gamma in (0.0, 1e-300):
        with warnings.catch_warnings():  # the uncompiled path divided by the zero entry
            warnings.simplefilter("error", RuntimeWarning)
            fused = search._derivatives_fused(
                gamma, lam_n * a, T, K, sc.mn_f, sc.dn_f, sc.lnun_f, sc.xn_f, sc.me_f,
                sc.de_f, sc.lnue_f, ratio,
            )  # fmt: skip
        assert fused[2] >= 1
        d1, d2 = search.derivatives(gamma, sc, T, K, lam_n * a)
        assert (d1, d2) == search._derivatives_tables(gamma, sc, T, K, lam_n * a)
        assert np.isfinite(d1)


@pytest.mark.parametrize("name", ["sdca", "sdca-gap"])
def test_dual_never_decreases_and_incremental_value_is_exact(small, name):
    p = small.with_lam(small.lam)
    spec = crfopt.get_registry().optimizer(name)
    with p.initialization():
        opt = spec.create(p, seed=4)
    prev = p.dual(opt.dual_state())
    for _ in range(3 * p.n):
        opt.step()
        d = p.dual(opt.dual_state())
        assert d >= prev - 1e-12 * max(1.0, abs(prev))
        prev = d
    assert opt.dual_value() == pytest.approx(d, rel=1e-9, abs=1e-12)
    np.testing.assert_allclose(opt.w, p.conjugate_weights(opt.dual_state()), atol=1e-10)


@pytest.mark.parametrize("name", VARIANTS)
def test_every_variant_reaches_the_optimum(small, w_star, name):
    p = small.with_lam(small.lam)
    res = crfopt.run(
        p,
        name,
        seed=1,
        params={"tolerance": 1e-14},
        budget=crfopt.Budget(passes=300, target_gap=1e-9),
        checkpoints="every:5",
    )
    assert res.status == "converged", res.meta.get("error")
    gap = res.trace["duality_gap"].iloc[-1]
    assert 0 <= gap <= 1e-8
    assert res.trace["primal"].iloc[-1] == pytest.approx(Evaluator(p).primal(w_star), abs=1e-8)


def test_same_w_as_lbfgs(small, w_star):
    p = small.with_lam(small.lam)
    spec = crfopt.get_registry().optimizer("sdca-gap")
    with p.initialization():
        opt = spec.create(p, seed=0)
    while p.duality_gap(mu=opt.dual_state()) > 1e-12:
        opt.run_block(p.n)
    bound = np.sqrt(2 * 1e-12 / p.lam)
    assert np.linalg.norm(opt.w - w_star) <= bound + 1e-7


def test_counting_e10(small):
    p = small.with_lam(small.lam)
    res = crfopt.run(p, "sdca-gap", budget=crfopt.Budget(passes=3))
    t = res.trace
    assert (t["oracle_calls"] == t["iterations"]).all() and (t["updates"] == t["iterations"]).all()
    assert res.meta["final_counters"]["init_oracle_calls"] == p.n  # gibbs init
    assert t["forward_calls"].eq(0).all()
    ls = res.meta["final_counters"]["ls_evals"] / res.meta["final_counters"]["iterations"]
    assert 1.0 <= ls <= 4.0


def test_gap_estimate_is_the_mean_stale_gap(small):
    p = small.with_lam(small.lam)
    spec = crfopt.get_registry().optimizer("sdca")
    with p.initialization():
        opt = spec.create(p, seed=0, overrides={"initial_gap": 100.0})
    assert opt.gap_estimate() == pytest.approx(100.0)
    opt.run_block(5)
    visited = np.count_nonzero(opt._state.gaps != 100.0)
    assert opt.gap_estimate() >= 100.0 * (p.n - visited) / p.n


@pytest.mark.parametrize(
    "overrides",
    [
        {"line_search": "golden"},
        {"line_search": "fixed", "fixed_step": 0.2},
        {"line_search": "theory"},
        {"start": "previous"},
        {"start": "half"},
        {"init": "mixture"},
        {"dtype": "float32"},
        {"sub_precision": 0.5},
    ],
)
def test_options_converge(small, overrides):
    p = small.with_lam(small.lam)
    budget = crfopt.Budget(passes=40 if overrides.get("line_search") != "theory" else 5)
    res = crfopt.run(p, "sdca", params=overrides, budget=budget, checkpoints="every:5")
    gaps = res.trace["duality_gap"].astype(float).to_numpy()
    assert res.status in ("budget", "converged")
    assert gaps[-1] < gaps[0]
    if overrides.get("line_search") not in ("theory", "fixed"):
        assert gaps[-1] < 1e-4


def test_refresh_period_charges_n_oracle_calls(small):
    p = small.with_lam(small.lam)
    spec = crfopt.get_registry().optimizer("sdca-gap")
    with p.initialization():
        opt = spec.create(p, seed=0, overrides={"refresh_period": 1})
    opt.run_block(2 * p.n + 1)  # refreshes at the start of epochs 2 and 3
    assert p.counters.oracle_calls == (2 * p.n + 1) + 2 * p.n
    assert p.counters.iterations == 2 * p.n + 1


def test_dense_problem(small_dense):
    p = small_dense.with_lam(small_dense.lam)
    res = crfopt.run(p, "sdca-gap", budget=crfopt.Budget(passes=60), checkpoints="every:10")
    assert res.trace["duality_gap"].iloc[-1] < 1e-6


_COMMON = {
    "sampler",
    "initial_gap",
    "sub_precision",
    "line_search",
    "fixed_step",
    "start",
    "max_line_search",
    "init",
    "init_score",
    "init_epsilon",
    "tolerance",
    "refresh_period",
    "dtype",
}
# ρ mixes a non-uniform part into the draw (crfopt.samplers): meaningless for the uniform
# family; only the empirical-Δ sampler has a tree refresh policy.
_PER_VARIANT = {
    "sdca": _COMMON,
    "sdca-perm": _COMMON,
    "sdca-cyclic": _COMMON,
    "sdca-importance": _COMMON | {"non_uniformity"},
    "sdca-gap": _COMMON | {"non_uniformity"},
    "sdca-gapimp": _COMMON | {"non_uniformity"},
    "sdca-max": _COMMON | {"non_uniformity"},
    "sdca-edelta": _COMMON | {"non_uniformity", "edelta_refresh"},
}


@pytest.mark.parametrize("name", VARIANTS)
def test_each_variant_declares_only_parameters_that_act_on_it(small, name):
    spec = crfopt.get_registry().optimizer(name)
    assert set(spec.parameters()) == _PER_VARIANT[name]
    for extra in sorted({"non_uniformity", "edelta_refresh"} - _PER_VARIANT[name]):
        with pytest.raises(crfopt.ParameterError, match=rf"'{extra}'.*valid parameters: ") as e:
            spec.resolve({extra: 0.5 if extra == "non_uniformity" else "immediate"})
        assert "initial_gap" in str(e.value)  # the message lists the valid ones


def test_a_variant_keeps_its_sampler_family():
    reg = crfopt.get_registry()
    assert reg.optimizer("sdca-gap").resolve({"sampler": "gapimp"})["sampler"] == "gapimp"
    with pytest.raises(crfopt.ParameterError, match="uniform, permutation, cyclic"):
        reg.optimizer("sdca").resolve({"sampler": "gap"})


def test_string_options_are_the_enum_members():
    assert S.LINE_SEARCHES == ("newton", "golden", "fixed", "theory")
    assert [S.StepRule[x.upper()].name.lower() for x in S.LINE_SEARCHES] == list(S.LINE_SEARCHES)
    assert len(set(S.StepRule)) == 4  # theory is a rule of its own, not a code shared with fixed
    assert S.STARTS == ("half", "previous", "chord")


def test_theory_rule_takes_the_step_of_the_convergence_theorem(small):
    """γ = (1 + R/(λn))⁻¹ with R = max_i R_i (LPL18 App. F Thm. 1, SSZ13), the radii of
    §1.7 (checked against their definition in the problem's own tests)."""
    p = small.with_lam(small.lam)
    R = p.radii()
    gamma = 1.0 / (1.0 + R.max() / (p.lam * p.n))
    spec = crfopt.get_registry().optimizer("sdca")
    with p.initialization():
        opt = spec.create(p, seed=0, overrides={"line_search": "theory"})
    w0 = opt.w.copy()
    opt.run_block(7)
    visited = opt._state.last_step != 0.5
    assert visited.any() and np.all(opt._state.last_step[visited] == gamma)
    assert 0.0 < gamma < 0.5
    assert not np.array_equal(opt.w, w0)
    # the dual stays consistent with w = ŵ(μ) under the fixed theory step
    np.testing.assert_allclose(opt.w, p.conjugate_weights(opt.dual_state()), atol=1e-10)


def test_fixed_step_only_with_the_fixed_rule(small):
    p = small.with_lam(small.lam)
    spec = crfopt.get_registry().optimizer("sdca")
    for rule in ("newton", "golden", "theory"):
        with (
            pytest.raises(crfopt.ParameterError, match=r"fixed_step.*line_search='fixed'"),
            p.initialization(),
        ):
            spec.create(p, seed=0, overrides={"line_search": rule, "fixed_step": 0.3})
    with p.initialization():
        opt = spec.create(p, seed=0, overrides={"line_search": "fixed"})
    opt.run_block(3)
    assert np.all(opt._state.last_step == 0.5)  # unset fixed_step means 0.5
    with p.initialization():
        opt = spec.create(p, seed=0, overrides={"line_search": "fixed", "fixed_step": 0.25})
    opt.run_block(3)
    assert (
        np.all(np.isin(opt._state.last_step, [0.25, 0.5]))
        and (opt._state.last_step == 0.25).sum() >= 1
    )
