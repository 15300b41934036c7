"""The reference optimum P* (ALGORITHMS.md §3.9, DESIGN.md "Reference optimum").

Sub-optimality P(w) - P* is only comparable across runs and sessions if P* is one
certified number per problem. It is computed once by L-BFGS on the primal, certified by
the primal gap gap_P(w) = ‖∇P(w)‖² / (2λ) ≥ P(w) - P* (LPL18 eqs. 7–8), and cached on disk
under the problem's fingerprint (data, feature map, template, λ). Dual runs can only
tighten the interval: P* ∈ [best dual value seen, P(w_ref)] (G4).
"""

from __future__ import annotations

import json
import time
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import scipy.optimize

from crfopt.bench.evaluator import Evaluator
from crfopt.core.problem import CRFProblem
from crfopt.data.fileio import atomic_write
from crfopt.data.paths import cache_dir


@dataclass(frozen=True)
class ReferenceOptimum:
    """P* with its certificate.

    Attributes
    ----------
    p_star : float
        P(w_ref), the value sub-optimalities are measured against.
    certificate : float
        gap_P(w_ref) = ‖∇P(w_ref)‖²/(2λ), an upper bound on P(w_ref) - P*.
    relative_certificate : float
        certificate / P(w_ref).
    best_dual : float or None
        The largest dual value any dual run has reported (a lower bound on P*).
    iterations, evaluations : int
        L-BFGS work spent.
    seconds : float
        Wall time of the computation.
    fingerprint : str
        The problem fingerprint it belongs to.
    """

    p_star: float
    certificate: float
    relative_certificate: float
    best_dual: float | None
    iterations: int
    evaluations: int
    seconds: float
    fingerprint: str
    problem: str
    lam: float

    @property
    def lower_bound(self) -> float:
        return max(self.p_star - self.certificate, self.best_dual or -np.inf)


def _cache_file(problem: CRFProblem) -> Path:
    return cache_dir("optima") / f"{problem.name}-{problem.fingerprint[:24]}.json"


def _atomic_write_json(path: Path, data: dict[str, Any]) -> None:
    with atomic_write(path, mode="w", suffix=".json") as f:
        json.dump(data, f, indent=2, sort_keys=True)


def cached_optimum(problem: CRFProblem) -> ReferenceOptimum | None:
    """The cached optimum of ``problem``, or None."""
    path = _cache_file(problem)
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text())
        ref = ReferenceOptimum(**data)
    except (OSError, ValueError, TypeError):
        return None
    return ref if ref.fingerprint == problem.fingerprint else None


def compute_optimum(
    problem: CRFProblem,
    *,
    tol: float = 1e-10,
    maxiter: int = 20000,
    memory: int = 20,
    restarts: int = 20,
    progress: Any = None,
) -> tuple[ReferenceOptimum, np.ndarray]:
    """L-BFGS-B on P from w = 0 until gap_P(w) ≤ tol · P(w) or no more progress.

    scipy stops when its line search can no longer decrease P in floating point; the
    search is then restarted from the current point (fresh memory) as long as the
    certificate keeps improving. Evaluations are uncounted (this is not a benchmark).
    Returns the optimum and w_ref.
    """
    t0 = time.perf_counter()
    w = problem.zeros()
    ev = Evaluator(problem)
    evaluations = 0
    iterations = 0

    def fun(x: np.ndarray) -> tuple[float, np.ndarray]:
        nonlocal evaluations
        evaluations += 1
        return ev.value_and_gradient(x)

    best_cert = np.inf
    for _ in range(restarts + 1):
        res = scipy.optimize.minimize(
            fun,
            w,
            jac=True,
            method="L-BFGS-B",
            options={
                "maxcor": memory,
                "maxiter": maxiter - iterations,
                "ftol": 0.0,
                "gtol": 0.0,
                "maxls": 50,
            },
        )
        iterations += int(res.nit)
        value, grad = ev.value_and_gradient(res.x)
        cert = float(grad @ grad) / (2.0 * problem.lam)
        if progress is not None:
            progress(iterations, value, cert)
        improved = cert < 0.9 * best_cert
        if cert < best_cert:
            w, best_cert = res.x, cert
        if best_cert <= tol * abs(value) or iterations >= maxiter or not improved:
            break
    value = ev.primal(w)
    if best_cert > tol * abs(value):
        warnings.warn(
            f"reference optimum of {problem.name!r}: certificate {best_cert:.3g} "
            f"({best_cert / abs(value):.3g} relative) did not reach {tol:g}; "
            "sub-optimalities below it are unreliable",
            RuntimeWarning,
            stacklevel=2,
        )
    ref = ReferenceOptimum(
        p_star=float(value),
        certificate=float(best_cert),
        relative_certificate=float(best_cert / abs(value)),
        best_dual=None,
        iterations=iterations,
        evaluations=evaluations,
        seconds=time.perf_counter() - t0,
        fingerprint=problem.fingerprint,
        problem=problem.name,
        lam=problem.lam,
    )
    return ref, w


def reference_optimum(
    problem: CRFProblem, *, recompute: bool = False, tol: float = 1e-10, progress: Any = None
) -> ReferenceOptimum:
    """The cached certified P* of ``problem``, computing and caching it if needed."""
    if not recompute:
        ref = cached_optimum(problem)
        if ref is not None:
            return ref
    ref, w = compute_optimum(problem, tol=tol, progress=progress)
    old = cached_optimum(problem)
    if old is not None and old.best_dual is not None:
        ref = ReferenceOptimum(**{**asdict(ref), "best_dual": old.best_dual})
    path = _cache_file(problem)
    _atomic_write_json(path, asdict(ref))
    np.save(path.with_suffix(".w.npy"), w)
    return ref


def record_dual(problem: CRFProblem, dual_value: float) -> None:
    """Tighten the cached lower bound with a dual value reached by a dual run (G4)."""
    ref = cached_optimum(problem)
    if ref is None or not np.isfinite(dual_value):
        return
    if ref.best_dual is None or dual_value > ref.best_dual:
        _atomic_write_json(_cache_file(problem), {**asdict(ref), "best_dual": float(dual_value)})


def reference_weights(problem: CRFProblem) -> np.ndarray | None:
    """w_ref of the cached optimum, if stored."""
    path = _cache_file(problem).with_suffix(".w.npy")
    return np.load(path) if path.exists() else None
