"""The synthetic generator: deterministic, well-formed, and learnable."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.optimize

import crfopt
from crfopt.bench.evaluator import Evaluator


def test_deterministic_for_a_seed():
    a = crfopt.make_synthetic(n=30, seed=5)
    b = crfopt.make_synthetic(n=30, seed=5)
    c = crfopt.make_synthetic(n=30, seed=6)
    assert a.fingerprint == b.fingerprint
    assert a.fingerprint != c.fingerprint


@pytest.mark.parametrize("dense", [False, True])
def test_shapes_and_defaults(dense):
    p = crfopt.make_synthetic(n=50, labels=5, attributes=20, length=4, dense=dense, seed=1)
    assert p.n == 50 and p.n_labels == 5 and p.n_attributes == 20
    assert p.lam == pytest.approx(1 / 50)
    assert p.dense == dense
    assert np.all(p.lengths >= 1)
    assert p.splits == ("train", "test")
    assert p.n_tokens == pytest.approx(50 * 4, rel=0.35)


@pytest.mark.parametrize("dense", [False, True])
def test_learning_beats_the_trivial_predictor(dense):
    """Training on the planted model's samples lowers test error well below chance."""
    p = crfopt.make_synthetic(
        n=300,
        labels=4,
        attributes=30,
        length=6,
        dense=dense,
        density=0.3 if dense else 0.1,
        seed=2,
        scale=2.0,
    )
    res = scipy.optimize.minimize(
        Evaluator(p).value_and_gradient,
        p.zeros(),
        jac=True,
        method="L-BFGS-B",
        options={"maxiter": 300},
    )
    test_labels = p.split_data("test").y
    majority = np.bincount(test_labels).max() / len(test_labels)
    assert p.error(res.x) < 0.8 * (1 - majority)


def test_load_problem_by_name():
    p = crfopt.load_problem("synthetic", n=12, seed=3)
    assert p.n == 12 and p.name == "synthetic"
    with pytest.raises(ValueError, match="valid parameters"):
        crfopt.load_problem("synthetic", bogus=1)
    with pytest.raises(KeyError, match="Did you mean synthetic"):
        crfopt.load_problem("synthetc")
