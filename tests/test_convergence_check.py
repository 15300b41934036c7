"""The per-pass convergence check of changed defaults (crfopt.bench.convergence).

The speed work may move SDCA's iterates within its own tolerance (``sub_precision``) only
if the convergence per effective pass stays within the old defaults' seed spread: here
on a synthetic problem, over 3 seeds, after 5, 10 and 20 passes (the real problems are
checked by ``benchmarks/performance.py --only convergence``). The check itself must be
able to fail: a step rule that is known to be slow per pass (a tiny fixed step) fails it.
"""

from __future__ import annotations

import pytest

import crfopt
from crfopt.bench.convergence import PASSES, per_pass_check

#: SDCA's defaults before issue 47: the Newton search started at γ = 0.5
OLD_SDCA = {"start": "half"}


@pytest.fixture(scope="module")
def problem():
    # not solved to rounding within 20 passes: the sub-optimalities compared are real
    return crfopt.make_synthetic(n=120, labels=5, attributes=60, length=6, seed=7, lam=1e-3)


@pytest.fixture(scope="module")
def p_star(problem):
    return crfopt.reference_optimum(problem).p_star


@pytest.mark.parametrize("name", ["sdca-gap", "sdca"])
def test_new_sdca_defaults_converge_per_pass_as_the_old(problem, p_star, name):
    table = per_pass_check(problem, name, OLD_SDCA, {}, p_star=p_star)
    assert list(table["passes"]) == list(PASSES)
    assert (table["old_min"] > 0).all()  # not converged to rounding: a real comparison
    assert table["within"].all(), table.to_string()


def test_the_check_fails_a_slower_method(problem, p_star):
    slow = {"line_search": "fixed", "fixed_step": 0.05}
    table = per_pass_check(problem, "sdca", {}, slow, p_star=p_star)
    assert not table["within"].any(), table.to_string()
    assert (table["new_median"] > table["old_max"]).all()
