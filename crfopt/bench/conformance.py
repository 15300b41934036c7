"""Conformance suite: the promises every optimizer plugin keeps.

See docs/plugins.md "Check your plugin".

Every registered variant — built-in or third-party — is checked on tiny seeded problems.
Checks are chosen by the variant's declared capabilities, never by its name.

*Contract* checks must pass for every plugin: reproducibility, counting (docs/algorithms.md
§2, E10), all inference counted, no mutation of the problem, parameter validation, no
global RNG, a block of k iterations equal to k single steps, a primal that decreases, a
feasible dual state, clean behaviour at the end of a budget.

*Regularizer* checks follow the declared ``regularizers``: a variant that declares ℓ1
must keep a valid, non-negative duality gap on an elastic-net problem (contract) and
converge to its certified optimum (quality); one that does not must refuse such a
problem with the reason (contract).

*Quality* checks (convergence on a tiny problem) may be declared expected failures by a
plugin author, each with a written reason; in strict mode an unexpected pass fails, so
stale exemptions go.

Use from pytest::

    from crfopt.bench.conformance import parametrize_with_checks

    @parametrize_with_checks(["my-sgd"], plugin_dirs=["my_plugins"])
    def test_my_plugin(optimizer_name, check):
        check()

or without pytest: ``crfopt.testing.check_optimizer("my-sgd")`` returns one row per
check with its outcome.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from crfopt.bench.check_subject import ConformanceError, NonFiniteError, Subject
from crfopt.bench.checks import checks_for

__all__ = [
    "CheckResults",
    "ConformanceError",
    "NonFiniteError",
    "Subject",
    "check_optimizer",
    "checks_for",
    "parametrize_with_checks",
]
from crfopt.optim.contract import (
    OptimizerSpec,
)
from crfopt.optim.registry import Registry, get_registry


def _registry(plugin_dirs: Sequence[str]) -> Registry:
    return get_registry(plugin_dirs)


def _check_expected(name: str, spec: OptimizerSpec, expected: Mapping[str, str]) -> dict[str, str]:
    """Validate one variant's exemptions: known, applicable quality checks only.

    A misspelled key would otherwise exempt nothing and go unnoticed (a strict xfail
    only fires for a check that exists).
    """
    categories = {c.__name__: cat for cat, c in checks_for(spec)}
    unknown = sorted(set(expected) - set(categories))
    if unknown:
        raise ValueError(
            f"{name}: expected_failed_checks names no check of this variant: "
            f"{', '.join(unknown)}; its checks are {', '.join(categories)}"
        )
    contract = sorted(k for k in expected if categories[k] != "quality")
    if contract:
        raise ValueError(
            f"{name}: {', '.join(contract)} is a contract check and cannot be exempted "
            f"(only quality checks can: "
            f"{', '.join(k for k, v in categories.items() if v == 'quality')})"
        )
    return dict(expected)


class CheckResults(list):
    """The rows of :func:`check_optimizer`, with a count of what ran.

    A plain list of dicts (``check``, ``category``, ``outcome``, ``message``) plus
    :attr:`summary`, so that a green result cannot hide a check that never ran.
    """

    def __init__(self, name: str, rows: Iterable[dict[str, Any]]) -> None:
        super().__init__(rows)
        self.name = name

    @property
    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for row in self:
            out[row["outcome"]] = out.get(row["outcome"], 0) + 1
        return out

    @property
    def failed(self) -> list[dict[str, Any]]:
        """Rows that fail a run: ``failed`` and (strict exemptions) ``xpass``."""
        return [r for r in self if r["outcome"] in ("failed", "xpass")]

    @property
    def summary(self) -> str:
        """``sdca-gap: 15 checks: 14 passed, 1 xfail``."""
        order = ("passed", "failed", "xfail", "xpass")
        parts = [f"{self.counts[k]} {k}" for k in order if k in self.counts]
        return f"{self.name}: {len(self)} checks: {', '.join(parts)}"


def check_optimizer(
    name: str,
    *,
    plugin_dirs: Sequence[str] = (),
    expected_failed_checks: Mapping[str, str] | None = None,
    verbose: bool = True,
) -> CheckResults:
    """Run every applicable check on one variant without pytest.

    Returns rows ``{"check", "category", "outcome", "message"}`` with outcome ``passed``,
    ``failed``, ``xfail`` (an expected failure, with its reason) or ``xpass``, in a
    :class:`CheckResults` list whose ``summary`` counts them; with ``verbose`` the
    summary and every failure are printed.

    A check that raises anything, not only a broken promise, is a ``failed`` row whose
    message names the exception type. Non-finite weights, primal or dual fail even in
    an exempted check. ``expected_failed_checks`` keys must name quality checks of this
    variant (:class:`ValueError` otherwise).
    """
    spec = _registry(plugin_dirs).optimizer(name)
    subject = Subject(name, spec)
    expected = _check_expected(name, spec, expected_failed_checks or {})
    rows = []
    for category, check in checks_for(spec):
        exempt = check.__name__ in expected
        try:
            check(subject)
        except NonFiniteError as exc:
            outcome, message = "failed", str(exc)
        except AssertionError as exc:
            outcome = "xfail" if exempt else "failed"
            message = str(exc)
            if exempt:
                message = f"{message} (expected: {expected[check.__name__]})"
        except Exception as exc:  # a crash is a failure, whatever its type
            outcome = "failed"
            message = f"{name}: {check.__name__} raised {type(exc).__name__}: {exc}"
        else:
            outcome = "xpass" if exempt else "passed"
            message = expected.get(check.__name__, "")
        rows.append(
            {"check": check.__name__, "category": category, "outcome": outcome, "message": message}
        )
    results = CheckResults(name, rows)
    if verbose:
        print(results.summary)
        for row in results.failed:
            print(f"  {row['outcome']}: {row['check']}: {row['message']}")
    return results


def _exempted(check: Callable[[], None]) -> Callable[[], None]:
    """An exempted quality check whose non-finite failures still fail the test.

    ``xfail(raises=AssertionError)`` would swallow a :class:`NonFiniteError`, so it is
    turned into ``pytest.fail`` (not an AssertionError), which the mark does not accept.
    """
    import pytest

    @functools.wraps(check)
    def wrapper() -> None:
        try:
            check()
        except NonFiniteError as exc:
            pytest.fail(f"{exc} (non-finite values cannot be exempted)", pytrace=False)

    return wrapper


def parametrize_with_checks(
    names: Iterable[str] | None = None,
    *,
    plugin_dirs: Sequence[str] = (),
    expected_failed_checks: Mapping[str, Mapping[str, str]] | None = None,
) -> Callable[[Any], Any]:
    """A pytest ``parametrize`` decorator over (variant, check) pairs.

    The decorated test receives ``optimizer_name`` and ``check``; call ``check()``.
    Test ids read ``sdca-gap-check_counts_per_iteration``. The decorated function gets
    an attribute ``conformance_counts``, {variant: number of checks}, so that a test
    can show and assert how many checks each variant runs.

    Parameters
    ----------
    names : iterable of str, optional
        Variants to check; default: every registered optimizer.
    plugin_dirs : sequence of paths
        Where to find third-party plugin files.
    expected_failed_checks : {variant: {check name: reason}}
        Quality checks a variant is known to fail, each with its reason; contract
        checks cannot be exempted, and a variant or check name that does not exist is a
        :class:`ValueError`. Expected failures are strict: if one passes, the test
        fails so that the exemption is removed. Non-finite weights, primal or dual fail
        even an exempted check.
    """
    import pytest

    reg = _registry(plugin_dirs)
    selected = sorted(reg.optimizers) if names is None else list(names)
    raw = {k: dict(v) for k, v in (expected_failed_checks or {}).items()}
    unknown = sorted(set(raw) - set(reg.optimizers))
    if unknown:
        raise ValueError(
            f"expected_failed_checks names unknown optimizer(s) {', '.join(unknown)}; "
            f"registered: {', '.join(sorted(reg.optimizers))}"
        )
    params = []
    counts: dict[str, int] = {}
    for name in selected:
        spec = reg.optimizer(name)
        subject = Subject(name, spec)
        expected = _check_expected(name, spec, raw.get(name, {}))
        checks = checks_for(spec)
        counts[name] = len(checks)
        for _category, check in checks:
            marks = []
            bound: Callable[[], None] = functools.partial(check, subject)
            reason = expected.get(check.__name__)
            if reason is not None:
                marks.append(pytest.mark.xfail(reason=reason, strict=True, raises=AssertionError))
                bound = _exempted(bound)
            params.append(pytest.param(name, bound, id=f"{name}-{check.__name__}", marks=marks))
    mark = pytest.mark.parametrize(("optimizer_name", "check"), params)

    def decorate(test: Any) -> Any:
        test = mark(test)
        test.conformance_counts = dict(counts)
        return test

    return decorate
