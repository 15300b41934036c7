"""prox-saga (plugins/prox_saga.py, docs/algorithms.md §3.15) against independent truths.

- A straightforward dense prox-SAGA written here (dense stored gradients from the
  problem's own oracle, the prox applied to every coordinate at every step, the same
  sampler stream and the same line search) must give the lazy plugin's iterates to
  1e-12, on problems where untouched coordinates cross zero and get absorbed at 0.
- On an elastic-net problem it must reach the certified P* (crfopt.bench.optimum), the
  gap must go to 0, and its exact zeros must be those of the split-form solution; at
  σ = 0 it is plain SAGA and reaches the ℓ2 optimum.
The conformance suite (tests/test_conformance.py) runs on it like on every variant,
with its ℓ1 checks since it declares ``regularizers = ("l2", "l1")``.
"""

from __future__ import annotations

import numpy as np
import pytest

import crfopt
from crfopt.bench.evaluator import Evaluator
from crfopt.bench.optimum import compute_optimum


def _sparse(l1: float, lam: float = 0.02) -> crfopt.CRFProblem:
    # rare attributes (density 0.06 over 40): rows stay untouched for many steps
    p = crfopt.make_synthetic(
        n=30, labels=3, attributes=40, length=4, density=0.06, seed=3, lam=lam
    )
    return p.with_regularization(l1=l1)


def _dense(l1: float) -> crfopt.CRFProblem:
    p = crfopt.make_synthetic(
        n=12, labels=3, attributes=6, length=3, density=0.4, dense=True, seed=12, lam=0.05
    )
    return p.with_regularization(l1=l1)


def _soft(v: np.ndarray, a: float) -> np.ndarray:
    return np.sign(v) * np.maximum(np.abs(v) - a, 0.0)


def dense_prox_saga(problem, seed, iterations, *, line_search=True, step_factor=1.0 / 3.0):
    """Textbook prox-SAGA (Defazio et al. 2014) with every coordinate updated at every step.

    Returns the final w and, per coordinate stretch without a visit by a sampled sequence
    (the steps the plugin applies lazily): counts of stretches of ≥ 2 steps that crossed
    zero and that ended absorbed at 0 from a non-zero start.
    """
    n, lam, sigma = problem.n, problem.lam, problem.l1
    K = problem.n_labels
    sampler = crfopt.Sampler("uniform", n, np.random.Generator(np.random.PCG64(seed)))
    w = problem.zeros()
    alpha = np.zeros((n, problem.dim))  # stored loss gradients, dense
    avg = np.zeros(problem.dim)
    L = 1.0 if line_search else float(problem.radii().max())
    start, length = w.copy(), np.zeros(problem.dim, dtype=int)
    crossed = absorbed = 0
    t_off = problem.layout.transition_offset
    for _ in range(iterations):
        i = sampler.sample()
        res = problem.oracle(i, w, gradient=True)
        g = res.gradient.to_dense(problem)
        touched = np.zeros(problem.dim, dtype=bool)
        for a in res.gradient.attributes:
            touched[a * K : (a + 1) * K] = True
        touched[t_off:] = True
        # the stretches that end here: what the lazy catch-up had to reproduce
        ending = touched & (length >= 2)
        crossed += int(np.sum(ending & (start * w < 0)))
        absorbed += int(np.sum(ending & (start != 0) & (w == 0)))
        if line_search:  # SAG's backtracking on ℓ_i along ∇ℓ_i (docs/algorithms.md §3.4)
            gn2 = float(g @ g)
            if gn2 > 1e-8:
                while problem.forward(i, w - g / L).nll > res.nll - gn2 / (2.0 * L):
                    L *= 2.0
        eta = step_factor / L
        v = w - eta * (g - alpha[i] + avg)
        avg += (g - alpha[i]) / n
        alpha[i] = g
        w = _soft(v, eta * sigma) / (1.0 + eta * lam)
        if line_search:
            L *= 2.0 ** (-1.0 / n)
        start[touched] = w[touched]
        length[touched] = 0
        length[~touched] += 1
    return w, crossed, absorbed


def _lazy(problem, seed, iterations, **params):
    spec = crfopt.get_registry().optimizer("prox-saga")
    with problem.initialization():
        opt = spec.create(problem, seed, params)
    opt.run_block(iterations // 2)
    w_mid = opt.w  # a checkpoint's read, mid-epoch
    opt.run_block(iterations - iterations // 2)
    return opt.w, w_mid, opt


@pytest.mark.parametrize("line_search", [True, False])
@pytest.mark.parametrize(
    ("sigma", "crossings"),
    [(0.0, False), (0.003, True), (0.01, True), (0.03, False)],  # 0.03: zeros, no crossing
)
def test_lazy_iterates_equal_dense_prox_saga(sigma, crossings, line_search):
    p = _sparse(sigma)
    iterations = 25 * p.n  # many epochs: the prefix arrays restart every n steps
    w, _, _ = _lazy(p, 4, iterations, line_search=line_search)
    # the counters saw one oracle call per iteration (and the searches' forward calls)
    snap = p.counters.snapshot()
    assert snap.oracle_calls == snap.iterations == snap.updates == iterations
    assert (snap.forward_calls > 0) == line_search
    ref, crossed, absorbed = dense_prox_saga(p, 4, iterations, line_search=line_search)
    np.testing.assert_allclose(w, ref, rtol=0, atol=1e-12)
    if sigma > 0:
        # the cases the closed-form catch-up must get right all occur
        assert absorbed > 0 and (crossed > 0) == crossings, (crossed, absorbed)
        assert 0 < np.count_nonzero(w) < p.dim


def test_reading_w_leaves_the_iterates_bit_for_bit():
    """Evaluation catches up a copy: a run read mid-way ends exactly where an unread one does
    (catching up in place would split one closed-form composition into two, in rounding)."""
    p = _sparse(0.003)
    iterations = 7 * p.n + 5
    w_read, _, _ = _lazy(p, 2, iterations)
    spec = crfopt.get_registry().optimizer("prox-saga")
    with p.initialization():
        opt = spec.create(p, 2, {})
    opt.run_block(iterations)
    assert np.array_equal(w_read, opt.w)


def test_dense_embeddings_match_too():
    p = _dense(0.02)
    w, _, _ = _lazy(p, 1, 10 * p.n)
    ref, _, _ = dense_prox_saga(p, 1, 10 * p.n)
    np.testing.assert_allclose(w, ref, rtol=0, atol=1e-12)


@pytest.mark.parametrize("sigma", [0.0, 0.03])
def test_reaches_the_certified_optimum_with_its_zeros(sigma):
    p = _sparse(sigma, lam=0.05)
    ref, w_split = compute_optimum(p, tol=1e-12)  # scipy on the split form when σ > 0
    assert ref.relative_certificate <= 1e-12
    res = crfopt.run(
        p,
        "prox-saga",
        seed=0,
        p_star=ref.p_star,
        budget=crfopt.Budget(passes=400),
        checkpoints="every:50",
    )
    t = res.trace
    gap = t["duality_gap"].astype(float).to_numpy()
    sub = t["primal"].astype(float).to_numpy() - ref.p_star
    assert np.all(gap >= sub - 1e-12 * ref.p_star)  # the gap bounds P − P* along the run
    assert gap[-1] <= 1e-9 * ref.p_star and gap[-1] < 1e-6 * gap[0]
    assert sub[-1] <= 1e-10 * ref.p_star
    w = res.w
    if sigma > 0:
        # the same exact zeros as the independent solution (|w_j| > 1e-6 there vs 0 here)
        np.testing.assert_array_equal(w == 0, np.abs(w_split) < 1e-6)
        assert 0 < np.count_nonzero(w) < p.dim
    else:  # plain SAGA: nothing is thresholded
        assert np.count_nonzero(w) == np.count_nonzero(np.abs(w_split) > 1e-6)
    assert Evaluator(p).primal(w) == pytest.approx(ref.p_star, rel=1e-10)


@pytest.mark.parametrize("name", ["step_factor", "initial_lipschitz"])
def test_a_zero_step_or_lipschitz_estimate_is_refused_by_name(name):
    # η = step_factor / L: 0 would make no step, L₀ = 0 an infinite one
    spec = crfopt.get_registry().optimizer("prox-saga")
    with pytest.raises(crfopt.ParameterError, match=f"'{name}' must be > 0"):
        spec.create(_sparse(0.01), 0, {name: 0.0})
