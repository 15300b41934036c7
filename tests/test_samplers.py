"""Samplers and the sum tree (docs/algorithms.md §3.3, §4)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from crfopt.optim.samplers import (
    KINDS,
    Sampler,
    leaves_for,
    maxtree_argmax,
    maxtree_build,
    maxtree_update,
    sampler_draw,
    tree_build,
    tree_sample,
    tree_update,
)


def rng(seed=0):
    return np.random.Generator(np.random.PCG64(seed))


def test_tree_is_exact_after_many_updates():
    n = 37
    P = leaves_for(n)
    assert P == 64
    tree = np.zeros(2 * P)
    q = rng().random(n)
    tree_build(tree, P, q)
    r = rng(1)
    for _ in range(5000):
        i = int(r.integers(n))
        q[i] = r.random() * 10 ** r.uniform(-8, 8)
        tree_update(tree, P, i, q[i])
    # parents are recomputed, never incremented: the root is the exact sum of the leaves
    assert tree[1] == pytest.approx(q.sum(), rel=1e-14)
    for j in range(1, P):
        assert tree[j] == tree[2 * j] + tree[2 * j + 1]


def test_tree_never_returns_zero_weight_leaves():
    P = leaves_for(5)
    tree = np.zeros(2 * P)
    q = np.array([0.0, 1.0, 0.0, 0.0, 2.0])
    tree_build(tree, P, q)
    draws = {tree_sample(tree, P, u) for u in np.linspace(0, 1, 2001)[:-1]}
    assert draws == {1, 4}
    assert tree_sample(tree, P, 1 - 1e-16) == 4  # rounding at the top end lands on a leaf


def test_max_tree():
    P = leaves_for(6)
    tree = np.zeros(2 * P)
    maxtree_build(tree, P, np.array([3.0, 7.0, 7.0, 1.0, 0.0, 2.0]))
    assert maxtree_argmax(tree, P) == 1  # ties to the smallest index
    maxtree_update(tree, P, 1, 0.5)
    assert maxtree_argmax(tree, P) == 2
    maxtree_update(tree, P, 5, 9.0)
    assert maxtree_argmax(tree, P) == 5


def _chi2_pvalue(sampler, draws):
    counts = np.bincount([sampler.sample() for _ in range(draws)], minlength=sampler.n)
    expected = sampler.probabilities() * draws
    return stats.chisquare(counts, expected).pvalue


@pytest.mark.parametrize("kind", ["gap", "gapimp", "importance", "weighted"])
def test_frequencies_match_probabilities_after_updates(kind):
    n = 12
    r = rng(3)
    imp = r.uniform(0.5, 3.0, size=n)
    s = Sampler(kind, n, r, non_uniformity=0.8, importance=imp)
    upd = rng(4)
    for i in range(n):  # feedback changes the weights
        if kind == "weighted":
            s.set_weight(i, upd.uniform(0, 5))
        else:
            s.update(i, gap=upd.uniform(0, 5))
    # freeze the state: probabilities only change with feedback, which we stop sending
    p = s.probabilities()
    assert p.sum() == pytest.approx(1.0)
    assert np.all(p >= 0.2 / n - 1e-15)  # the uniform part
    assert _chi2_pvalue(s, 40000) > 1e-3


def test_gap_sampler_formula():
    s = Sampler("gap", 4, rng(), non_uniformity=0.8, initial_gap=100.0)
    np.testing.assert_allclose(s.probabilities(), 0.25)
    s.update(0, gap=300.0)
    s.update(1, gap=-1e-12)  # rounding noise is clipped to 0
    q = np.array([300.0, 0.0, 100.0, 100.0])
    np.testing.assert_allclose(s.probabilities(), 0.2 / 4 + 0.8 * q / q.sum())


def test_all_zero_tree_falls_back_to_uniform():
    s = Sampler("edelta", 5, rng(), non_uniformity=0.5)
    assert s.probability(2) == pytest.approx(0.2)
    assert _chi2_pvalue(s, 5000) > 1e-3


def test_permutation_and_cyclic():
    s = Sampler("permutation", 7, rng(5))
    epochs = [sorted(s.sample() for _ in range(7)) for _ in range(3)]
    assert all(e == list(range(7)) for e in epochs)
    s1 = Sampler("permutation", 7, rng(5))
    s2 = Sampler("permutation", 7, rng(5))
    a = [s1.sample() for _ in range(7)]
    b = [s2.sample() for _ in range(7)]
    assert a == b
    c = Sampler("cyclic", 5, rng(6))
    first = [c.sample() for _ in range(5)]
    assert sorted(first) == list(range(5))
    assert [c.sample() for _ in range(10)] == first * 2


def test_edelta_snapshot_per_epoch():
    s = Sampler("edelta", 4, rng(), non_uniformity=1.0)
    for _ in range(4):  # first epoch: all A_i = 0 -> uniform
        s.sample()
    s.update(2, delta=8.0)  # A_2 = 4, takes effect at the next epoch start
    assert s.probability(2) == pytest.approx(0.25)
    s.sample()  # epoch boundary: snapshot
    assert s.probability(2) == pytest.approx(1.0)
    imm = Sampler("edelta", 4, rng(), non_uniformity=1.0, refresh="immediate")
    imm.update(1, delta=2.0)
    assert imm.probability(1) == pytest.approx(1.0)


def test_max_sampler_uses_updates():
    """Unlike the reference code (docs/algorithms.md §7.1), the max tree follows the gaps."""
    s = Sampler("max", 5, rng(), non_uniformity=1.0, initial_gap=100.0)
    assert s.sample() == 0
    s.update(0, gap=1.0)
    assert s.sample() == 1
    s.update(1, gap=1.0)
    s.update(3, gap=500.0)
    assert s.sample() == 3


@pytest.mark.parametrize("kind", [k for k in KINDS])
def test_a_block_uses_the_same_random_numbers_as_single_draws(kind):
    n = 6
    imp = np.arange(1.0, n + 1)
    a = Sampler(kind, n, rng(9), importance=imp)
    b = Sampler(kind, n, rng(9), importance=imp)
    singles = []
    for t in range(20):
        singles.append(a.sample())
        a.update(singles[-1], gap=float(t % 5), delta=1.0)
    u = b.prepare(20)
    block = []
    for t in range(20):
        block.append(int(sampler_draw(b.state, u[t, 0], u[t, 1])))
        b.update(block[-1], gap=float(t % 5), delta=1.0)
    assert singles == block


def test_bad_arguments():
    with pytest.raises(ValueError, match="unknown sampler"):
        Sampler("gaps", 3, rng())
    with pytest.raises(ValueError, match="needs importance"):
        Sampler("importance", 3, rng())
    with pytest.raises(ValueError, match="non_uniformity"):
        Sampler("gap", 3, rng(), non_uniformity=1.5)


def test_nus_sampler_is_slrb13_three_way_mixture():
    """``nus`` (SAG-NUS, docs/algorithms.md §3.5): unseen w.p. (n-m)/n, else among the seen
    uniform w.p. 1-ρ and ∝ q_i w.p. ρ; checked against the mixture written out here and
    against draw frequencies."""
    n, rho = 10, 0.3
    s = Sampler("nus", n, rng(11), non_uniformity=rho)
    np.testing.assert_allclose(s.probabilities(), 1.0 / n)  # nothing seen: uniform
    assert _chi2_pvalue(s, 4000) > 1e-3
    q = {2: 5.0, 7: 0.5, 4: 2.0, 3: 0.0}
    for i, qi in q.items():
        s.set_weight(i, qi)
    s.set_weight(2, 1.0)  # a revisit changes q_i, not m
    q[2] = 1.0
    m, total = len(q), sum(q.values())
    expected = np.full(n, ((n - m) / n) / (n - m))
    for i, qi in q.items():
        expected[i] = (m / n) * ((1 - rho) / m + rho * qi / total)
    np.testing.assert_allclose(s.probabilities(), expected, rtol=1e-14)
    assert s.probabilities().sum() == pytest.approx(1.0)
    assert _chi2_pvalue(s, 40000) > 1e-3
    for i in range(n):  # all seen: no unseen branch left
        s.set_weight(i, q.get(i, 1.0))
    assert s.probability(3) == pytest.approx((1 - rho) / n)
    assert _chi2_pvalue(s, 40000) > 1e-3


def test_set_weight_needs_a_weighted_kind():
    with pytest.raises(ValueError, match="takes no weights"):
        Sampler("gap", 3, rng()).set_weight(0, 1.0)
