"""Prox-SDCA: SDCA on the elastic net (docs/algorithms.md §3.14, issue 20 item 3).

With σ > 0 every SDCA variant keeps u = z(μ)/λ and w = S_τ(u), τ = σ/λ. The truths
here are independent of plugins/sdca.py: the core's dual D(μ) (checked against
brute-force enumeration in tests/test_l1.py) for the piecewise block objective, its
finite differences for the line search's derivatives, the certified elastic-net optimum
(crfopt.bench.optimum) and scipy's split-form solution for the limit and its zeros.
"""

from __future__ import annotations

import numpy as np
import pytest
from test_l1 import _l1_problem, _split_optimum

import crfopt
from crfopt.bench.evaluator import Evaluator
from crfopt.bench.runner import Budget, run
from crfopt.core import duality
from crfopt.optim.dual import blocks, initial_dual, prox, search

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
def synth():
    """Sparse synthetic problem whose ŵ(μ) at the line-search state below is about half
    zeros, with kinks of the block objective inside (0, 1)."""
    p = crfopt.make_synthetic(n=30, labels=4, attributes=20, length=5, seed=21, lam=0.05)
    return p.with_regularization(l1=0.01)


def _mixed(mu, problem, i, sc, T, K, gamma):
    """A copy of μ with sequence i's marginals replaced by μ_i + γδ_i (logs)."""
    out = mu.copy()
    s = int(problem.data.offsets[i])
    out.log_nodes[s : s + T] = np.log(sc.mn[:T] + gamma * sc.dn[:T])
    out.log_edges[s - i : s - i + T - 1] = np.log(sc.me[: T - 1] + gamma * sc.de[: T - 1])
    return out


def _prox_block_state(problem, i):
    """The state of one prox-SDCA step on sequence i from μ = gibbs(c=2): u = z(μ)/λ,
    w = S_τ(u), ν = ν_i(w), δ = ν - μ, v = (E_μF - E_νF)/(λn) and the packed segment."""
    mu = initial_dual(problem, "gibbs", c=2.0)
    lam, tau = problem.lam, problem.l1 / problem.lam
    u = duality.dual_direction(problem, mu) / lam
    w = duality.soft_threshold(u, tau)
    K, data = problem.n_labels, problem.data
    T = int(data.offsets[i + 1] - data.offsets[i])
    sc = blocks.make_scratch(int(data.max_len), K)
    s = int(data.offsets[i])
    blocks.load(mu.log_nodes, mu.log_edges, s, s - i, T, K, sc)
    counters = np.zeros(7, dtype=np.int64)
    crfopt.kernels.oracle_marginals(data, counters, i, w, sc.lnun, sc.lnue, sc.nun, sc.nue)
    g_i, r_i = blocks._delta_kls(
        T, K, sc.mn_f, sc.lmn_f, sc.nun_f, sc.lnun_f, sc.dn_f,
        sc.me_f, sc.lme_f, sc.nue_f, sc.lnue_f, sc.de_f, sc.xe_f, sc.lxe_f,
    )  # fmt: skip
    lam_n = lam * problem.n
    lo, hi = crfopt.kernels.support_bounds(data, i)
    E_loc = np.empty((hi - lo, K))
    crfopt.kernels.expected_emission(data, i, np.exp(mu.sequence(i)[0]) - sc.nun[:T], E_loc)
    E_loc /= lam_n
    trans = (np.exp(mu.sequence(i)[1]) - sc.nue[: T - 1]).sum(axis=0) / lam_n
    seg = np.zeros((3, (hi - lo) * K + K * K))
    m = prox.pack_segment(data, i, u, tau, E_loc, trans, seg)
    v = problem.zeros()
    crfopt.kernels.add_local(data, i, v, 1.0, E_loc, trans)
    return mu, u, v, sc, T, K, lam_n, seg, m, tau, g_i + r_i


def _kinks(u, v, tau):
    """γ ∈ (0, 1) where some u_j + γv_j crosses ±τ (the jumps of f'')."""
    with np.errstate(divide="ignore", invalid="ignore"):
        g = np.concatenate([(tau - u) / v, (-tau - u) / v])
    return np.sort(g[np.isfinite(g) & (g > 0) & (g < 1)])


@pytest.mark.parametrize("i", [0, 4, 9, 17])
def test_block_objective_and_derivatives_are_the_piecewise_dual(synth, i):
    """f(γ) - f(0) = n (D(μ_γ) - D(μ)) with the core's D; f' against its central
    differences; f'' against differences of f' away from the kinks, where it jumps."""
    mu, u, v, sc, T, K, lam_n, seg, m, tau, d0 = _prox_block_state(synth, i)
    n = synth.n
    kinks = _kinks(u, v, tau)
    assert kinks.size > 0  # the segment crosses the threshold: the piecewise case is tested
    w = duality.soft_threshold(u, tau)
    assert 0 < np.count_nonzero(w) < w.size

    def dual_n(g):
        return n * synth.dual(_mixed(mu, synth, i, sc, T, K, g))

    D0 = dual_n(0.0)

    def f(g):
        return search.prox_block_value(g, lam_n, sc, T, K, seg, m, tau)

    f0 = f(0.0)
    h = 1e-6
    grid = np.concatenate([np.linspace(0.02, 0.98, 13), kinks])
    for g in grid:
        assert f(g) - f0 == pytest.approx(dual_n(g) - D0, rel=1e-9, abs=1e-10)
        d1, d2 = search.prox_derivatives(g, sc, T, K, lam_n, seg, m, tau)
        fd1 = (dual_n(g + h) - dual_n(g - h)) / (2 * h)
        assert d1 == pytest.approx(fd1, rel=1e-5, abs=1e-6)
        assert d2 < 0
        if np.min(np.abs(kinks - g)) > 1e-4:
            e = 1e-6
            a1 = search.prox_derivatives(g + e, sc, T, K, lam_n, seg, m, tau)[0]
            b1 = search.prox_derivatives(g - e, sc, T, K, lam_n, seg, m, tau)[0]
            assert d2 == pytest.approx((a1 - b1) / (2 * e), rel=1e-4, abs=1e-5)
    # f'(0) = g_i + r_i (the pre-step gaps), as in the ℓ2 case
    assert search.prox_derivatives(0.0, sc, T, K, lam_n, seg, m, tau)[0] == pytest.approx(
        d0, rel=1e-9
    )


@pytest.mark.parametrize("i", [0, 4, 9, 17])
def test_prox_newton_maximizes_the_piecewise_dual(synth, i):
    mu, _, _, sc, T, K, lam_n, seg, m, tau, d0 = _prox_block_state(synth, i)
    gamma, evals, capped = search.prox_line_search(0.5, 1e-9, 100, d0, lam_n, sc, T, K, seg, m, tau)
    grid = np.linspace(0.0, 1.0, 2001)
    values = [synth.dual(_mixed(mu, synth, i, sc, T, K, g)) for g in grid]
    best = grid[int(np.argmax(values))]
    assert abs(gamma - best) <= 1e-3
    assert not capped and 1 <= evals < 40
    # line_search="golden" on the same piecewise objective
    golden, _ = search.golden_line_search(1e-9, 0.0, 0.0, lam_n, sc, T, K, seg, m, tau)
    assert abs(golden - best) <= 1e-3


def _steps(name, problem, k, **params):
    opt = crfopt.get_registry().optimizer(name).create(problem, seed=3, **params)
    for _ in range(k):
        before = (opt.dual_state().copy(), np.array(opt.w), np.array(opt._state.gaps))
        opt.step()
        yield opt, before


@pytest.mark.parametrize("name", ["sdca", "sdca-gap"])
@pytest.mark.parametrize("dense", [False, True])
def test_every_step_ascends_the_core_dual_and_keeps_w_sparse(name, dense):
    """After every step: the O(1) dual value is the core's D(μ) (the thresholded one),
    D never decreases, w = ŵ(μ) = S_σ(z(μ))/λ with the same exact zeros, and the stored
    pre-step block gap is KL(μ_i ‖ ν_i(w)) (the gap sampler's input)."""
    problem, _ = _l1_problem(11, dense=dense, lam=0.02, l1=0.02)
    n = problem.n
    previous = -np.inf
    seen_zero = False
    for opt, (mu_before, w_before, gaps_before) in _steps(name, problem, 6 * n):
        mu = opt.dual_state()
        D = problem.dual(mu)
        assert opt.dual_value() == pytest.approx(D, rel=1e-10, abs=1e-12)
        assert D - previous >= -1e-12 * abs(D)  # ascent, to rounding
        previous = D
        w_hat = problem.conjugate_weights(mu)
        np.testing.assert_allclose(opt.w, w_hat, rtol=0, atol=1e-12)
        np.testing.assert_array_equal(opt.w == 0, w_hat == 0)
        seen_zero |= bool(np.any(opt.w == 0))
        # the blocks stepped on stored KL(μ_i ‖ ν_i(w)) at the pre-step μ and thresholded w
        changed = np.flatnonzero(opt._state.gaps != gaps_before)
        truth = duality.example_gaps(problem, mu_before, w_before)
        for j in changed:
            assert opt._state.gaps[j] == pytest.approx(truth[j], rel=1e-8, abs=1e-12)
    assert seen_zero


def test_block_gaps_sum_to_the_duality_gap():
    """Fenchel–Young for g at w = ∇g*(z): (1/n) Σ KL(μ_i ‖ ν_i(ŵ(μ))) = P(ŵ(μ)) - D(μ)."""
    problem, _ = _l1_problem(12, lam=0.02, l1=0.02)
    opt = crfopt.get_registry().optimizer("sdca").create(problem, seed=0)
    opt.run_block(2 * problem.n)
    mu, w = opt.dual_state(), np.array(opt.w)
    assert np.any(w == 0)
    ev = Evaluator(problem)
    kl = duality.example_gaps(problem, mu, w).mean()
    assert kl == pytest.approx(ev.primal(w) - ev.dual(mu), rel=1e-9)


# parts of 2 sequences, so that the test's six run on two threads (the default needs 128)
@pytest.mark.parametrize(
    "name, params", [("sdca-gap", {}), ("sdca-passcode-wild", {"threads": 2, "min_partition": 2})]
)
def test_converges_to_the_certified_l1_optimum_and_its_zeros(name, params):
    """P(w) - D(μ) ≥ P(w) - P* ≥ 0 along the run, gap → 0, and w's exact zeros are
    where scipy's split-form solution vanishes."""
    from crfopt.bench.optimum import reference_optimum

    problem, _ = _l1_problem(7, dense=False, lam=0.1, l1=0.05)
    ref = reference_optimum(problem)
    assert ref.l1 == problem.l1 and ref.relative_certificate <= 1e-10
    p_star = ref.p_star
    # tolerance 0: run the whole budget (ĝ < 1e-7 would stop it first)
    res = run(problem, name, seed=0, passes=150, checkpoints="every:5", tolerance=0.0, **params)
    assert len(res.trace) > 10
    t = res.trace
    primal = t["primal"].astype(float).to_numpy()
    gap = t["duality_gap"].astype(float).to_numpy()
    slack = 1e-12 * p_star
    assert np.all(primal - p_star >= -slack)
    assert np.all(gap >= primal - p_star - slack)
    assert gap[-1] <= 1e-10 * p_star
    w = res.w
    ev = Evaluator(problem)
    assert ev.primal(w) - p_star <= 1e-10 * p_star
    w_split = _split_optimum(problem)
    np.testing.assert_array_equal(w == 0, np.abs(w_split) < 1e-6)
    assert 0 < np.count_nonzero(w) < problem.dim


def test_prox_path_at_vanishing_sigma_follows_sdca():
    """σ = 1e-300 runs the prox arithmetic (segment, φ, thresholded commit) on what is
    the ℓ2 problem: its iterates must follow the ℓ2 SDCA's to rounding."""
    problem, _ = _l1_problem(13, lam=0.05, l1=0.0)
    l2 = crfopt.get_registry().optimizer("sdca-gap").create(problem, seed=5)
    tiny = (
        crfopt.get_registry()
        .optimizer("sdca-gap")
        .create(problem.with_regularization(l1=1e-300), seed=5)
    )
    assert tiny._opts.tau > 0 and l2._opts.tau == 0
    for _ in range(5):
        l2.run_block(problem.n)
        tiny.run_block(problem.n)
        np.testing.assert_allclose(tiny.w, l2.w, rtol=1e-9, atol=1e-12)
        assert tiny.dual_value() == pytest.approx(l2.dual_value(), rel=1e-12)


def test_registry_declares_l1_for_the_sdca_family():
    reg = crfopt.get_registry()
    for name in VARIANTS:
        assert reg.optimizer(name).regularizers == ("l2", "l1"), name
    problem, _ = _l1_problem(10)
    res = run(problem, "sdca-gap", seed=0, budget=Budget(passes=2))
    assert res.status != "skipped"


def test_cli_lists_l1_and_compare_runs_prox_sdca(tmp_path, monkeypatch):
    """`crfopt list optimizers` marks the family as accepting ℓ1 and `compare --l1` runs
    sdca-gap (prox-SDCA) where an ℓ2-only variant is skipped with the reason."""
    import pandas as pd
    from click.testing import CliRunner

    from crfopt.apps.cli import main
    from crfopt.apps.cli import options as cli_options

    monkeypatch.setenv("CRFOPT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(cli_options.console, "width", 400)  # one table row per line
    runner = CliRunner()
    out = runner.invoke(
        main,
        ["list", "optimizers"],
    )
    assert out.exit_code == 0, out.output
    row = next(line for line in out.output.splitlines() if " sdca-gap " in line)
    assert "accepts ℓ1 (--l1)" in row
    one = runner.invoke(
        main,
        ["list", "optimizers", "sdca-passcode-wild"],
    )
    assert "regularizers: l2, l1" in one.output
    lbfgs = runner.invoke(
        main,
        ["list", "optimizers", "lbfgs"],
    )
    assert "regularizers: l2\n" in lbfgs.output
    res = runner.invoke(
        main,
        [
            "compare", "--problem", "synthetic", "--set", "synthetic.n=12", "--l1", "0.01",
            "--optimizers", "sdca-gap,lbfgs", "--passes", "3", "--no-optimum", "--quiet",
            "--allow-failures", "--out", str(tmp_path / "res"),
        ],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    df = pd.concat(pd.read_parquet(f) for f in (tmp_path / "res").rglob("*.parquet"))
    status = df.groupby("optimizer")["status"].last()
    assert status["sdca-gap"] in ("budget", "converged")
    assert status["lbfgs"] == "skipped"
    sdca = df[df["optimizer"] == "sdca-gap"]
    assert (sdca["duality_gap"].astype(float).dropna() >= 0).all()
