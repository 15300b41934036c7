"""SG-NUS (plugins/sg.py, docs/algorithms.md §3.11) against independent truths.

* a textbook dense implementation through the public oracle API, drawing from the same
  seeded stream, gives the same iterates (sampling mixture, L_i rules, the 1/(n p_i) step);
* on a problem whose second half has features 4× larger (so Lipschitz constants ~16×
  larger), the draws land on that half as often as the mixture ½/n + ½ L_i/Σ L says.
"""

from __future__ import annotations

import numpy as np
import pytest

import crfopt

N = 40


@pytest.fixture(scope="module")
def small():
    return crfopt.make_synthetic(
        n=N, labels=4, attributes=30, length=5, density=0.1, seed=31, lam=0.02
    )


def _naive_sg_nus(
    problem, seed, iterations, eta0=0.1, rho=0.5, first=0.5, revisit=0.9, L0=1.0, skipping=False
):
    """SG with SBA15's NUS, written from docs/algorithms.md §3.11 on dense vectors."""
    n, lam = problem.n, problem.lam
    rng = np.random.Generator(np.random.PCG64(seed))
    u = rng.random((iterations, 2))  # the Sampler's stream: (branch, index) per draw
    w = problem.zeros()
    L = np.full(n, L0)
    seen = np.zeros(n, dtype=bool)
    good = np.zeros(n, dtype=int)  # searches in a row without doubling (SBA15 §5.2)
    skip = np.zeros(n, dtype=int)  # visits left without a search
    forward = 0
    for t in range(iterations):
        q = np.where(seen, L, 0.0)
        total = q.sum()
        if u[t, 0] >= rho or total == 0.0:
            i = min(int(u[t, 1] * n), n - 1)
        else:  # inverse CDF of q (the sum tree's descent, leaves in index order)
            i = int(np.searchsorted(np.cumsum(q), u[t, 1] * total, side="right"))
        p_i = (1 - rho) / n + rho * q[i] / total if total > 0 else 1.0 / n
        res = problem.oracle(i, w, gradient=True)
        g = res.gradient.to_dense(problem)
        gn2 = g @ g
        search = True
        if not seen[i]:
            Li = first * (L[seen].mean() if seen.any() else L0)
        elif skipping and skip[i] > 0:
            skip[i] -= 1
            Li, search = L[i], False
        else:
            Li = revisit * L[i]
        if search and gn2 > 1e-8:
            doubled = False
            while True:
                forward += 1
                if problem.forward(i, w - g / Li).nll <= res.nll - gn2 / (2 * Li):
                    break
                Li *= 2
                doubled = True
            if skipping:
                good[i] = 0 if doubled else good[i] + 1
                skip[i] = 0 if doubled else 2 ** (good[i] - 1)
        L[i] = Li
        seen[i] = True
        eta = eta0 / (1 + lam * eta0 * t)
        w = (1 - eta * lam) * w - eta / (n * p_i) * g
    return w, forward


@pytest.mark.parametrize("skipping", [False, True])
def test_matches_a_naive_dense_implementation(small, skipping):
    p = small.with_lam(small.lam)
    spec = crfopt.get_registry().optimizer("sg-nus")
    with p.initialization():
        opt = spec.create(p, 9, {"skipping": skipping})
    k = 5 * p.n
    opt.run_block(k)
    q = small.with_lam(small.lam)
    w_naive, forward = _naive_sg_nus(q, 9, k, skipping=skipping)
    np.testing.assert_allclose(opt.w, w_naive, rtol=1e-9, atol=1e-11)
    assert p.counters.snapshot().forward_calls == forward
    assert p.counters.oracle_calls == k
    if skipping:  # searches were skipped: fewer forward calls than the same run without
        assert forward < _naive_sg_nus(small.with_lam(small.lam), 9, k)[1]


def _half_scaled(problem, factor):
    """The same problem with every feature value of the second half of the sequences
    multiplied by ``factor`` (their gradients' Lipschitz constants grow ~factor²)."""
    arrays, meta = problem.to_arrays()
    arrays = dict(arrays)
    offsets, indptr = arrays["train.offsets"], arrays["train.indptr"]
    first_token = int(offsets[problem.n // 2])
    values = np.array(arrays["train.values"], dtype=float)
    values[int(indptr[first_token]) :] *= factor
    arrays["train.values"] = values
    return crfopt.CRFProblem.from_arrays(arrays, meta)


def test_draws_follow_the_lipschitz_estimates(small):
    p = _half_scaled(small, 4.0)
    spec = crfopt.get_registry().optimizer("sg-nus")
    with p.initialization():
        opt = spec.create(p, 3)
    opt.run_block(50 * p.n)  # warm-up: every L_i estimated, w near its final region
    visits0 = opt._nus.visits.copy()
    opt.run_block(200 * p.n)
    visits = opt._nus.visits - visits0
    L = opt._nus.Li
    half = p.n // 2
    # the scaled half's share of the draws: ½ of the uniform branch, its share of Σ L_i
    # of the weighted one; L_i fluctuate by their revisit/doubling rule, hence 0.04
    expected = 0.5 * 0.5 + 0.5 * L[half:].sum() / L.sum()
    share = visits[half:].sum() / visits.sum()
    assert L[half:].mean() > 4 * L[:half].mean()  # the constants do differ (~16×)
    assert expected > 0.65
    assert share == pytest.approx(expected, abs=0.04)


def test_biased_variant_and_parameters(small):
    """``unbiased=false`` drops the 1/(n p_i) weight: a different run; a non-positive L₀
    is refused by name."""
    runs = []
    for unbiased in (True, False):
        p = small.with_lam(small.lam)
        res = crfopt.run(p, "sg-nus", passes=3, seed=1, unbiased=unbiased)
        runs.append(res.w)
    assert not np.allclose(runs[0], runs[1])
    q = small.with_lam(small.lam)
    spec = crfopt.get_registry().optimizer("sg-nus")
    with pytest.raises(crfopt.ParameterError, match="initial_lipschitz"), q.initialization():
        spec.create(q, 0, {"initial_lipschitz": 0.0})
