"""The SAG family (plugins/sag.py) against independent truths."""

from __future__ import annotations

import numpy as np
import pytest

import crfopt
from crfopt.bench.evaluator import Evaluator

from conftest import scipy_optimum

VARIANTS = ["sag", "sag-nus", "sag-nus-star", "saga-nus"]


@pytest.fixture(scope="module")
def small():
    return crfopt.make_synthetic(
        n=40, labels=4, attributes=30, length=5, density=0.1, seed=31, lam=0.02
    )


@pytest.fixture(scope="module")
def p_star(small):
    return Evaluator(small).primal(scipy_optimum(small))


@pytest.mark.parametrize("name", VARIANTS)
def test_reaches_the_optimum(small, p_star, name):
    p = small.with_lam(small.lam)
    res = crfopt.run(
        p,
        name,
        seed=2,
        p_star=p_star,
        budget=crfopt.Budget(passes=600, target_suboptimality=1e-8 * p_star),
        checkpoints="every:10",
    )
    assert res.status == "converged", (res.status, res.trace["suboptimality"].iloc[-1])
    assert res.trace["suboptimality"].iloc[-1] <= 1e-8 * p_star


@pytest.fixture(scope="module")
def dense_small():
    return crfopt.make_synthetic(
        n=30, labels=4, attributes=12, length=5, dense=True, density=0.4, seed=33, lam=0.02
    )


@pytest.mark.parametrize("embeddings", ["sparse", "dense"])
@pytest.mark.parametrize("name", VARIANTS)
def test_lazy_updates_equal_eager_updates(small, dense_small, name, embeddings):
    """On dense embeddings the eager SAG step is one sweep over d and w, on sparse ones a
    sweep of the support then one of w (and SAGA's step its own): each against the lazy
    w = s·u."""
    problem = dense_small if embeddings == "dense" else small
    ws = []
    for lazy in (True, False):
        p = problem.with_lam(problem.lam)
        spec = crfopt.get_registry().optimizer(name)
        with p.initialization():
            opt = spec.create(p, 5, {"lazy": lazy})
        opt.run_block(7 * p.n)
        ws.append(np.array(opt.w))
    np.testing.assert_allclose(ws[0], ws[1], rtol=1e-10, atol=1e-12)


def test_sag_is_lazy_on_sparse_and_eager_on_dense_embeddings_by_default():
    """Dense embeddings make every row part of every sequence's support, so the default
    ``lazy=None`` updates them eagerly; the two settings' iterates agree (test_sag.py)."""
    for dense in (False, True):
        p = crfopt.make_synthetic(n=6, labels=3, attributes=5, length=3, dense=dense, seed=1)
        opt = crfopt.get_registry().optimizer("sag-nus-star").create(p, 0)
        assert opt.params["lazy"] is None and opt._opts.lazy is not dense


def _naive_sag(problem, seed, iterations, L0=1.0):
    """Textbook SAG (docs/algorithms.md §3.4) with dense stored gradients and the public API."""
    n, lam = problem.n, problem.lam
    rng = np.random.Generator(np.random.PCG64(seed))
    u = rng.random((iterations, 2))  # the Sampler's stream: (branch, index) per draw
    w = problem.zeros()
    stored = np.zeros((n, problem.dim))
    d = problem.zeros()
    seen = np.zeros(n, dtype=bool)
    L = L0
    for t in range(iterations):
        i = min(int(u[t, 1] * n), n - 1)
        res = problem.oracle(i, w, gradient=True)
        g = res.gradient.to_dense(problem)
        seen[i] = True
        m = seen.sum()
        d += g - stored[i]
        stored[i] = g
        gn2 = g @ g
        if gn2 > 1e-8:
            while problem.forward(i, w - g / L).nll > res.nll - gn2 / (2 * L):
                L *= 2
        alpha = 1 / (L + lam)
        w = (1 - alpha * lam) * w - (alpha / m) * d
        L *= 2 ** (-1 / n)
    return w


@pytest.mark.parametrize("embeddings", ["sparse", "dense"])
def test_matches_a_naive_dense_implementation(small, dense_small, embeddings):
    problem = dense_small if embeddings == "dense" else small
    p = problem.with_lam(problem.lam)
    spec = crfopt.get_registry().optimizer("sag")
    with p.initialization():
        opt = spec.create(p, 9)
    k = 3 * p.n
    opt.run_block(k)
    q = problem.with_lam(problem.lam)
    w_naive = _naive_sag(q, 9, k)
    np.testing.assert_allclose(opt.w, w_naive, rtol=1e-9, atol=1e-11)
    assert p.counters.snapshot().forward_calls == q.counters.snapshot().forward_calls
    assert p.counters.oracle_calls == q.counters.oracle_calls == k


def test_counting_e10(small):
    p = small.with_lam(small.lam)
    res = crfopt.run(p, "sag-nus-star", budget=crfopt.Budget(passes=40), checkpoints="every:5")
    t = res.trace.iloc[1:]
    assert (t["oracle_calls"] == t["iterations"]).all() and (t["updates"] == t["iterations"]).all()
    ratio = t["forward_calls"].diff().iloc[1:] / t["iterations"].diff().iloc[1:]
    assert ratio.iloc[-1] < 0.5 * ratio.iloc[0]  # line searches get skipped


def test_dense_problem():
    p = crfopt.make_synthetic(
        n=30, labels=3, attributes=10, length=4, dense=True, density=0.4, seed=32, lam=0.05
    )
    res = crfopt.run(p, "sag-nus-star", budget=crfopt.Budget(passes=60), checkpoints="every:20")
    assert res.trace["duality_gap"].iloc[-1] < 1e-6


@pytest.mark.parametrize(
    ("name", "foreign", "valid"),
    [
        ("sag", "non_uniformity", "initial_lipschitz"),
        ("sag", "first_visit", "max_doublings"),
        ("sag-nus", "skipping", "lazy"),
        ("sg", "epsilon", "schedule"),
        ("adagrad", "schedule", "epsilon"),
    ],
)
def test_parameters_of_other_variants_are_rejected(name, foreign, valid):
    """A parameter the variant does not use raises, naming the ones it has."""
    spec = crfopt.get_registry().optimizer(name)
    with pytest.raises(crfopt.ParameterError, match=foreign) as exc:
        spec.resolve({foreign: 0.9 if foreign != "skipping" else False})
    assert valid in str(exc.value)


@pytest.mark.parametrize("name", ["sag-nus-star", "saga-nus"])
def test_nus_star_rules_take_their_parameters(name):
    spec = crfopt.get_registry().optimizer(name)
    params = spec.resolve({"non_uniformity": 0.9, "first_visit": 0.3, "skipping": False})
    assert params["non_uniformity"] == 0.9 and params["first_visit"] == 0.3
