"""Every registered optimizer — built-in or the docs' third-party example — keeps the
contract (crfopt.testing). The registry is read at collection time, so a new variant is
checked the day it is registered."""

from __future__ import annotations

import inspect
import random
import tempfile
from pathlib import Path

import numpy as np
import pytest
from docs_examples import write_sgd_plugin

import crfopt
from crfopt.bench.checks import check_initialization_cost, check_no_global_rng
from crfopt.bench.conformance import (
    ConformanceError,
    Subject,
    check_optimizer,
    checks_for,
    parametrize_with_checks,
)
from crfopt.optim import hookspecs

_EXAMPLE_DIR = Path(tempfile.mkdtemp(prefix="crfopt-docs-plugin-"))
write_sgd_plugin(_EXAMPLE_DIR)
# The shared test double registers one variant per defect (tests/doubles/scripted.py).
BROKEN = str(Path(__file__).resolve().parent / "doubles")

_SUBLINEAR = (
    "stochastic gradient with a decaying (or AdaGrad) step converges sublinearly: 200 passes "
    "reach about 1e-3 relative sub-optimality, not 1e-6; SBA15 §6 plots them as baselines"
)
EXPECTED_FAILURES = {
    "my-sgd": {
        "check_converges_on_tiny_problem": "a constant step converges to a neighbourhood of "
        "w*, not to 1e-6 relative sub-optimality (SBA15 §6)"
    },
    "sg": {"check_converges_on_tiny_problem": _SUBLINEAR},
    "asg": {"check_converges_on_tiny_problem": _SUBLINEAR},
    "adagrad": {"check_converges_on_tiny_problem": _SUBLINEAR},
    "sg-nus": {"check_converges_on_tiny_problem": _SUBLINEAR},
}


@parametrize_with_checks(plugin_dirs=[str(_EXAMPLE_DIR)], expected_failed_checks=EXPECTED_FAILURES)
def test_conformance(optimizer_name, check):
    check()


# Written out by hand, apart from crfopt.testing's tables: what every variant must run.
_EVERY_VARIANT = {
    "check_finite",
    "check_initialization_cost",
    "check_reproducible",
    "check_block_equals_steps",
    "check_counts_per_iteration",
    "check_inference_is_counted",
    "check_problem_unchanged",
    "check_rejects_unknown_parameter",
    "check_no_global_rng",
    "check_primal_decreases",
    "check_budget_end",
    "check_converges_on_tiny_problem",
}
_PER_CAPABILITY = {
    "stochastic": {"check_different_seeds_differ"},
    "has_dual": {"check_dual_state"},
    "gap_estimate": {"check_gap_estimate"},
    "line_search": set(),
}
# By the declared regularizers (docs/plugins.md "Regularizers"): ℓ1 declarers are held to
# the elastic-net checks, every other variant to refusing an ℓ1 problem.
_L1 = {"check_l1_gap_valid", "check_converges_l1"}
_NOT_L1 = {"check_refuses_l1"}


def test_checks_are_counted_per_variant():
    """Each variant runs exactly the checks its capabilities call for, and the
    parametrized test above collected all of them (a green run must not hide a
    skipped check). The counts are printed (pytest -rP shows them)."""
    reg = crfopt.get_registry([str(_EXAMPLE_DIR)])
    counts = test_conformance.conformance_counts
    assert set(counts) == set(reg.optimizers)
    assert "lbfgs" in counts and "my-sgd" in counts
    for name, spec in sorted(reg.optimizers.items()):
        want = set(_EVERY_VARIANT)
        for cap in spec.capabilities:
            want |= _PER_CAPABILITY[cap]
        want |= _L1 if "l1" in spec.regularizers else _NOT_L1
        got = [c.__name__ for _, c in checks_for(spec)]
        assert sorted(got) == sorted(want), name
        assert counts[name] == len(want), name
        print(f"{name}: {counts[name]} conformance checks")


def _rows(name: str, **kwargs):
    return {r["check"]: r for r in check_optimizer(name, plugin_dirs=[BROKEN], **kwargs)}


def test_nan_after_80_steps_is_a_contract_failure_that_says_so():
    """Weights that turn NaN at step 81 used to pass every contract check."""
    rows = _rows("broken-nan-late")
    finite = rows["check_finite"]
    assert finite["category"] == "contract" and finite["outcome"] == "failed"
    msg = finite["message"]
    assert "non-finite" in msg and "NaN" in msg and "weights" in msg
    assert "after 81 iterations" in msg  # NaN at step 81, seen at the next inspection
    for row in rows.values():  # every other failure names the NaN too, none misleads
        if row["outcome"] == "failed":
            assert "non-finite" in row["message"], row


def test_nan_after_5_steps_gives_no_misleading_message():
    """NaN != NaN used to read as 'results depend on the global seed' and the like."""
    rows = _rows("broken-nan-early")
    assert "after 6 iterations" in rows["check_finite"]["message"]
    failed = [r for r in rows.values() if r["outcome"] == "failed"]
    assert rows["check_no_global_rng"] in failed and len(failed) >= 10
    for row in failed:
        assert "non-finite" in row["message"] and "global seed" not in row["message"], row


def test_non_finite_cannot_be_exempted():
    """An exempted quality check that meets NaN weights still fails."""
    rows = _rows(
        "broken-nan-late",
        expected_failed_checks={"check_converges_on_tiny_problem": "sublinear"},
        verbose=False,
    )
    assert rows["check_converges_on_tiny_problem"]["outcome"] == "failed"


def test_a_check_that_raises_anything_is_a_failed_row(capsys):
    """A TypeError in step() is a failed row naming TypeError, not an exception."""
    results = check_optimizer("broken-raises", plugin_dirs=[BROKEN])
    never_step = {
        "check_initialization_cost",
        "check_rejects_unknown_parameter",
        "check_refuses_l1",  # refused before it is built
    }
    for r in results:
        if r["check"] in never_step:
            assert r["outcome"] == "passed", r
        else:
            assert r["outcome"] == "failed" and "TypeError" in r["message"], r
    # contract + stochastic + refusing ℓ1 + quality checks, counted and printed
    n = len(_EVERY_VARIANT) + len(_PER_CAPABILITY["stochastic"]) + len(_NOT_L1)
    assert len(results) == n
    assert results.summary == f"broken-raises: {n} checks: 3 passed, {n - 3} failed"
    out = capsys.readouterr().out
    assert out.startswith(results.summary + "\n")


def test_summary_counts_outcomes():
    results = crfopt.testing.CheckResults(
        "x",
        [{"outcome": "passed"}, {"outcome": "passed"}, {"outcome": "xfail"}],
    )
    assert results.summary == "x: 3 checks: 2 passed, 1 xfail"


def test_unknown_exemption_is_an_error():
    """A misspelled check name would silently exempt nothing."""
    with pytest.raises(ValueError, match=r"check_converge_on_tiny.*check_finite"):
        check_optimizer(
            "broken-raises",
            plugin_dirs=[BROKEN],
            expected_failed_checks={"check_converge_on_tiny": "typo"},
        )
    with pytest.raises(ValueError, match="check_dual_state"):  # not a check of SGD
        check_optimizer(
            "broken-raises", plugin_dirs=[BROKEN], expected_failed_checks={"check_dual_state": ""}
        )
    with pytest.raises(ValueError, match="contract check"):
        check_optimizer(
            "broken-raises", plugin_dirs=[BROKEN], expected_failed_checks={"check_finite": ""}
        )
    with pytest.raises(ValueError, match=r"check_converge_on_tiny.*check_finite"):
        parametrize_with_checks(
            ["sg"], expected_failed_checks={"sg": {"check_converge_on_tiny": ""}}
        )
    with pytest.raises(ValueError, match=r"no-such-variant.*lbfgs"):
        parametrize_with_checks(["sg"], expected_failed_checks={"no-such-variant": {}})


def test_no_global_rng_check_restores_the_global_state():
    """The check seeds the global generators; the caller's streams must go on as before."""
    # the legacy global RNG is what this test is about
    np.random.seed(7)  # noqa: NPY002
    random.seed(7)
    want = (np.random.random(), random.random())  # noqa: NPY002
    np.random.seed(7)  # noqa: NPY002
    random.seed(7)
    spec = crfopt.get_registry().optimizer("sg")
    check_no_global_rng(Subject("sg", spec))
    assert (np.random.random(), random.random()) == want  # noqa: NPY002


def test_undeclared_initialization_work_fails():
    """setup() running 20 passes of gradient descent while declaring none."""
    spec = crfopt.get_registry([BROKEN]).optimizer("broken-heavy-init")
    with pytest.raises(ConformanceError, match=r"20 effective passes.*init_passes = 0"):
        check_initialization_cost(Subject("broken-heavy-init", spec))


def test_hooks_and_registrations_are_documented():
    for name, fn in inspect.getmembers(hookspecs, inspect.isfunction):
        if name.startswith("crfopt_"):
            assert fn.__doc__ and len(fn.__doc__.strip()) > 50, name
    reg = crfopt.get_registry()
    for name, spec in reg.optimizers.items():
        assert spec.summary, f"{name} has no summary"
        assert spec.reference, f"{name} has no paper reference"
        assert spec.doc, f"{name}: its class has no docstring"
        for pname, param in spec.cls.parameters.items():
            assert param.help, f"{name}.{pname} has no help line"
    for name, spec in reg.problems.items():
        assert spec.summary, f"problem {name} has no summary"


def test_parametrized_exemption_does_not_hide_non_finite():
    """Under pytest, NaN in an exempted quality check fails instead of xfailing."""

    @parametrize_with_checks(
        ["broken-nan-late"],
        plugin_dirs=[BROKEN],
        expected_failed_checks={
            "broken-nan-late": {"check_converges_on_tiny_problem": "sublinear"}
        },
    )
    def probe(optimizer_name, check):  # pragma: no cover - never collected
        check()

    assert probe.conformance_counts == {"broken-nan-late": len(_EVERY_VARIANT) + 1 + len(_NOT_L1)}
    (params,) = [m.args[1] for m in probe.pytestmark if m.name == "parametrize"]
    (param,) = [p for p in params if p.id.endswith("check_converges_on_tiny_problem")]
    assert any(m.name == "xfail" for m in param.marks)
    # xfail(raises=AssertionError) accepts only AssertionError: pytest.fail is not one
    with pytest.raises(pytest.fail.Exception, match="non-finite") as info:
        param.values[1]()
    assert not isinstance(info.value, AssertionError)
