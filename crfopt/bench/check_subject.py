"""What the conformance checks work with: the variant under test, tiny seeded problems
and their certified optima, runs guarded against non-finite weights.

The checks are in crfopt/bench/checks.py, the suite that runs them in
crfopt/bench/conformance.py (public as ``crfopt.testing``).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from crfopt.bench.evaluator import Evaluator
from crfopt.bench.optimum import compute_optimum
from crfopt.bench.runner import run
from crfopt.core.problem import CRFProblem
from crfopt.core.synthetic import make_synthetic
from crfopt.optim.contract import (
    Optimizer,
    OptimizerSpec,
)


class ConformanceError(AssertionError):
    """A broken promise; the message starts with the variant name."""


class NonFiniteError(ConformanceError):
    """Weights, primal or dual became NaN or infinite: always a contract failure.

    Raised by :func:`check_finite` and by the guards of every other check, so that a
    diverging optimizer is reported as such instead of as, say, a seed dependence
    (NaN ≠ NaN); it cannot be exempted, not even inside a quality check.
    """


@dataclass(frozen=True)
class Subject:
    """The variant under test and a factory for fresh instances."""

    name: str
    spec: OptimizerSpec

    def make(self, problem: CRFProblem, seed: int = 0, **overrides: Any) -> Optimizer:
        with problem.initialization():
            return self.spec.create(problem, seed, overrides)

    @property
    def capabilities(self) -> frozenset[str]:
        return self.spec.capabilities

    def fail(self, promise: str, detail: str) -> ConformanceError:
        return ConformanceError(f"{self.name}: {promise}: {detail}")

    def non_finite(self, what: str, detail: str) -> NonFiniteError:
        return NonFiniteError(f"{self.name}: {what} stay finite: {detail}")


def describe_nonfinite(x: np.ndarray) -> str:
    nan = int(np.isnan(x).sum())
    inf = int(np.isinf(x).sum())
    return f"{nan} NaN and {inf} inf of {x.size} entries"


def advance(s: Subject, opt: Optimizer, k: int) -> int:
    """``opt.run_block(k)``, then the non-finite guard on the weights.

    Every check advances optimizers through here, so that NaN weights are reported as
    non-finite rather than as whatever comparison they happen to break first.
    """
    done = opt.run_block(k)
    guard_weights(s, opt)
    return done


def guard_weights(s: Subject, opt: Optimizer) -> None:
    w = np.asarray(opt.w, dtype=float)
    if not np.all(np.isfinite(w)):
        raise s.non_finite(
            "weights",
            f"non-finite weights ({describe_nonfinite(w)}) after "
            f"{opt.problem.counters.iterations} iterations",
        )


def run_subject(s: Subject, p: CRFProblem, **kwargs: Any) -> Any:
    """:func:`crfopt.run` with the failure and non-finite guards of every check."""
    res = run(p, s.spec, **kwargs)
    if res.status == "skipped":  # no limits are set here, so declining is a contract break
        raise s.fail("declines only under user limits (Optimizer.decline)", res.meta["skip_reason"])
    if res.status == "failed":
        raise s.fail("runs without error", res.meta.get("error_summary") or res.meta["error"])
    t = res.trace
    its = int(t["iterations"].iloc[-1])
    if res.status == "diverged":
        w = res.w
        if w is not None and not np.all(np.isfinite(w)):
            detail = (
                f"non-finite weights ({describe_nonfinite(w)}) at the checkpoint "
                f"after {its} iterations"
            )
            raise s.non_finite("weights", detail)
        raise s.non_finite(
            "primal", f"non-finite primal P(w) at the checkpoint after {its} iterations"
        )
    if "dual" in t.columns:
        dual = t["dual"].astype(float).to_numpy()
        primal = t["primal"].astype(float).to_numpy()
        bad = np.flatnonzero(np.isfinite(primal) & ~np.isfinite(dual))
        if "has_dual" in s.capabilities and bad.size:
            it = int(t["iterations"].iloc[bad[0]])
            raise s.non_finite(
                "dual", f"non-finite dual D(μ) = {dual[bad[0]]} after {it} iterations"
            )
    return res


# ------------------------------------------------------------------------ tiny problems


@functools.cache
def _tiny(kind: str) -> CRFProblem:
    if kind == "sparse":
        return make_synthetic(n=12, labels=3, attributes=10, length=4, density=0.3, seed=11)
    if kind == "dense":
        return make_synthetic(
            n=10, labels=3, attributes=6, length=3, density=0.4, dense=True, seed=12
        )
    if kind == "convex":  # strongly convex enough to converge quickly
        return make_synthetic(
            n=16, labels=3, attributes=8, length=4, density=0.3, seed=13, lam=0.05
        )
    raise KeyError(kind)


def fresh(kind: str) -> CRFProblem:
    """A fresh copy (own counters) of a tiny test problem."""
    p = _tiny(kind)
    return p.with_lam(p.lam)


#: σ of the elastic-net twin of the "convex" problem: large enough that about a third
#: of the optimum's weights are exactly zero, so the ℓ1 checks see the kinks.
L1_SIGMA = 0.02


def fresh_l1() -> CRFProblem:
    """The "convex" tiny problem with ℓ1 weight :data:`L1_SIGMA` (fresh counters)."""
    return _tiny("convex").with_regularization(l1=L1_SIGMA)


@functools.cache
def optimum_l1() -> float:
    """The certified P* of :func:`fresh_l1` (gap certificate ≤ 1e-12 P*)."""
    ref, _ = compute_optimum(fresh_l1(), tol=1e-12)
    return ref.p_star


@functools.cache
def optimum_of(kind: str) -> float:
    import scipy.optimize

    p = _tiny(kind)
    res = scipy.optimize.minimize(
        Evaluator(p).value_and_gradient,
        p.zeros(),
        jac=True,
        method="L-BFGS-B",
        options={"maxiter": 10000, "ftol": 0.0, "gtol": 1e-12, "maxcor": 30},
    )
    return float(Evaluator(p).primal(res.x))


def counts_of(p: CRFProblem) -> dict[str, int]:
    s = p.counters.snapshot()
    return {
        "oracle": s.oracle_calls,
        "forward": s.forward_calls,
        "updates": s.updates,
        "iterations": s.iterations,
        "init_oracle": s.init_oracle_calls,
        "init_forward": s.init_forward_calls,
    }


def trace_signature(frame: Any) -> list[tuple[Any, ...]]:
    cols = [c for c in frame.columns if c not in ("time_s", "init_time_s")]  # wall clock
    return [
        tuple(None if _isna(v) else v for v in row) for row in frame[cols].itertuples(index=False)
    ]


def _isna(v: Any) -> bool:
    try:
        return bool(v is None or (isinstance(v, float) and math.isnan(v)) or v is _na())
    except TypeError:
        return False


def _na() -> Any:
    import pandas as pd

    return pd.NA


# ------------------------------------------------------------------------ contract checks
