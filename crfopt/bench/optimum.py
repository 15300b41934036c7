"""The reference optimum P* (docs/algorithms.md §3.9, docs/algorithms.md §3.9).

Sub-optimality P(w) - P* is only comparable across runs and sessions if P* is one
certified number per problem. It is computed once by L-BFGS on the primal, certified by
the primal gap gap_P(w) = ‖∇P(w)‖² / (2λ) ≥ P(w) - P* (LPL18 eqs. 7–8), and cached on disk
under the problem's fingerprint (sha256 of the featurized data of every split, K, the
attribute count, the bias flag and λ: everything the objective depends on, so a change
of data file, template, option or λ is a different problem). Dual runs can only
tighten the interval: P* ∈ [best dual value seen, P(w_ref)] (G4).

Where P* comes from, in order (:func:`reference_optimum`):

1. the user cache (``<cache>/optima/<name>-<fingerprint>.json`` with ``w_ref`` beside it),
   trusted only after verification: finite fields, matching fingerprint, and P(w_ref)
   and gap_P(w_ref) re-evaluated (one oracle pass) equal to the stored values; a best
   dual value above P(w_ref) (impossible by weak duality) is dropped;
2. the table shipped with the package (``optima.json``, built-in problems at their
   default parameters), used when the fingerprint matches exactly, with finite values
   and 0 ≤ P* ≤ P(0);
3. otherwise it is computed, with progress (iterations, certified gap) reported to the
   caller, under a file lock so two processes do not compute it twice.

With an ℓ1 weight σ > 0 (the elastic net, docs/algorithms.md §1.9) the certificate is
the same primal gap P(w) − D(ν(w)) (``crfopt.core.duality.gap_from_gradient``), the
computation runs L-BFGS-B on the split form w = u − v, u, v ≥ 0 (smooth, with bounds), and
the fingerprint includes σ; the shipped table holds σ = 0 entries only.

A rejected entry is reported with a warning that names the file and the reason, and
recomputed. ``python -m crfopt.bench.optimum NAME ...`` prints shipped-table entries.
"""

from __future__ import annotations

import json
import math
import time
import warnings
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np

from crfopt.bench.evaluator import Evaluator
from crfopt.core.duality import gap_from_gradient
from crfopt.core.problem import CRFProblem
from crfopt.data.fileio import atomic_write
from crfopt.data.paths import cache_dir

#: The table of P* values shipped with the package (built-in problems, default parameters).
SHIPPED_TABLE = Path(__file__).with_name("optima.json")
#: Seconds between two progress reports while P* is computed (OCR takes minutes).
PROGRESS_INTERVAL = 5.0


class OptimumRejected(ValueError):
    """A stored P* failed verification (the reason is the message)."""


@dataclass(frozen=True)
class ReferenceOptimum:
    """P* with its certificate.

    Attributes
    ----------
    p_star : float
        P(w_ref), the value sub-optimalities are measured against.
    certificate : float
        gap_P(w_ref) = P(w_ref) − D(ν(w_ref)) (‖∇P(w_ref)‖²/(2λ) when σ = 0), an upper
        bound on P(w_ref) - P*.
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
    source : str
        Where this value came from: "computed", "cache" (the user cache, verified) or
        "shipped" (the package's table).
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
    source: str = "computed"
    l1: float = 0.0

    @property
    def lower_bound(self) -> float:
        return max(self.p_star - self.certificate, self.best_dual or -np.inf)


def _cache_file(problem: CRFProblem) -> Path:
    return cache_dir("optima") / f"{problem.name}-{problem.fingerprint[:24]}.json"


def _atomic_write_json(path: Path, data: dict[str, Any]) -> None:
    with atomic_write(path, mode="w", suffix=".json") as f:
        json.dump(data, f, indent=2, sort_keys=True)


def _finite(name: str, value: Any, *, nonnegative: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise OptimumRejected(f"{name} is {value!r}, not a number")
    if not math.isfinite(value):
        raise OptimumRejected(f"{name} is {value!r}, not finite")
    if nonnegative and value < 0:
        raise OptimumRejected(f"{name} is {value!r} < 0")
    return float(value)


def _checked(data: Any, problem: CRFProblem, source: str) -> ReferenceOptimum:
    """A ReferenceOptimum from stored fields, or OptimumRejected saying what is wrong.

    Checks what needs no oracle call: the fingerprint (so a different data file, template,
    option or λ never reuses a value), finite P*, a finite non-negative certificate, the
    relative certificate consistent with them, and a best dual value (a lower bound on P*
    by weak duality) not above P(w_ref) — else it is dropped with a warning.
    """
    if not isinstance(data, dict):
        raise OptimumRejected("not a JSON object")
    if data.get("fingerprint") != problem.fingerprint:
        raise OptimumRejected(
            f"fingerprint {str(data.get('fingerprint'))[:16]}… is not the problem's "
            f"{problem.fingerprint[:16]}… (data, template, options or λ differ)"
        )
    p_star = _finite("P*", data.get("p_star"))
    cert = _finite("certificate", data.get("certificate"), nonnegative=True)
    rel = _finite("relative certificate", data.get("relative_certificate"), nonnegative=True)
    if not math.isclose(rel, cert / max(abs(p_star), 1e-300), rel_tol=1e-6, abs_tol=1e-300):
        raise OptimumRejected(f"relative certificate {rel:g} is not certificate / |P*|")
    if p_star < 0:
        raise OptimumRejected(f"P* = {p_star!r} < 0, but P is a log-loss plus a square")
    lam = _finite("λ", data.get("lam"))
    if lam != problem.lam:
        raise OptimumRejected(f"λ = {lam!r} is not the problem's {problem.lam!r}")
    l1 = _finite("σ (l1)", data.get("l1", 0.0), nonnegative=True)  # entries before ℓ1: 0
    if l1 != problem.l1:
        raise OptimumRejected(f"σ = l1 = {l1!r} is not the problem's {problem.l1!r}")
    best_dual = data.get("best_dual")
    if best_dual is not None:
        try:
            best_dual = _finite("best dual value", best_dual)
            if best_dual > p_star + 1e-12 * max(1.0, abs(p_star)):
                raise OptimumRejected(
                    f"best dual value {best_dual!r} exceeds P(w_ref) = {p_star!r}, which weak "
                    "duality forbids"
                )
        except OptimumRejected as exc:
            warnings.warn(f"{source}: {exc}; the dual bound is dropped", RuntimeWarning, 3)
            best_dual = None
    known = {f.name for f in fields(ReferenceOptimum)}
    values = {k: v for k, v in data.items() if k in known}
    try:
        return ReferenceOptimum(
            **{
                **values,
                "p_star": p_star,
                "certificate": cert,
                "relative_certificate": rel,
                "best_dual": best_dual,
                "iterations": int(values.get("iterations", 0)),
                "evaluations": int(values.get("evaluations", 0)),
                "seconds": float(values.get("seconds", 0.0)),
                "problem": str(values.get("problem", problem.name)),
                "lam": lam,
                "l1": l1,
                "source": source,
            }
        )
    except (TypeError, ValueError) as exc:
        raise OptimumRejected(f"malformed entry ({exc})") from None


def _verify_weights(ref: ReferenceOptimum, problem: CRFProblem, w: np.ndarray) -> None:
    """Re-evaluate P and gap_P at the stored w_ref: both must be the stored values.

    One oracle pass. It catches an edited P* (every later sub-optimality would shift) or
    certificate; the gap is compared within a factor 2, since a gradient near the
    optimum is a difference of large terms and its last digits vary with thread count.
    """
    if w.shape != (problem.dim,) or not np.all(np.isfinite(w)):
        raise OptimumRejected(f"w_ref has shape {w.shape} or non-finite entries")
    value, grad = Evaluator(problem).value_and_gradient(w)
    cert = gap_from_gradient(problem, w, grad)
    if not math.isclose(value, ref.p_star, rel_tol=1e-9, abs_tol=1e-12):
        raise OptimumRejected(f"P(w_ref) = {value!r}, but the stored P* is {ref.p_star!r}")
    slack = 1e-14 * max(1.0, abs(value))
    if not (ref.certificate / 2 - slack <= cert <= 2 * ref.certificate + slack):
        raise OptimumRejected(
            f"gap_P(w_ref) = {cert:.3g}, but the stored certificate is {ref.certificate:.3g}"
        )


def cached_optimum(problem: CRFProblem, *, verify: bool = True) -> ReferenceOptimum | None:
    """The user-cache optimum of ``problem`` if present and verified, else None.

    A present entry that fails verification is reported (RuntimeWarning naming the file
    and the reason) and treated as absent, so the caller recomputes and overwrites it.
    ``verify=False`` skips the oracle pass (field checks are always done).
    """
    path = _cache_file(problem)
    if not path.exists():
        return None
    try:
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise OptimumRejected(f"unreadable ({exc})") from None
        ref = _checked(data, problem, "cache")
        if verify:
            w_path = path.with_suffix(".w.npy")
            try:
                w = np.load(w_path, allow_pickle=False)
            except (OSError, ValueError) as exc:
                raise OptimumRejected(f"w_ref {w_path.name} unreadable ({exc})") from None
            _verify_weights(ref, problem, w)
    except OptimumRejected as exc:
        warnings.warn(
            f"cached reference optimum {path} rejected: {exc}; it will be recomputed",
            RuntimeWarning,
            stacklevel=2,
        )
        return None
    return ref


def _shipped_entries() -> list[dict[str, Any]]:
    try:
        table = json.loads(SHIPPED_TABLE.read_text())
    except FileNotFoundError:
        return []
    return list(table.get("optima", []))


def shipped_optimum(problem: CRFProblem) -> ReferenceOptimum | None:
    """P* from the package's table, if an entry has exactly this problem's fingerprint.

    An entry that matches but fails its checks (non-finite, negative, above P(0)) is
    reported and ignored; a problem whose data, template, options or λ differ from the
    table's has another fingerprint and is computed instead. The table holds pure-ℓ2
    optima only: a problem with σ > 0 is never looked up (its fingerprint differs too).
    """
    if problem.l1:
        return None
    for entry in _shipped_entries():
        if entry.get("fingerprint") != problem.fingerprint:
            continue
        where = f"{SHIPPED_TABLE.name} entry {entry.get('problem')!r}"
        try:
            ref = _checked(entry, problem, "shipped")
            # at w = 0 every score is 0, so ℓ_i(0) = T_i log K and P(0) = (N/n) log K: a
            # closed form, so checking the shipped value compiles and runs no kernel
            # before the first run (a cold first compare would otherwise compile the
            # oracle here, a minute before anything is optimized)
            p0 = problem.n_tokens / problem.n * math.log(problem.n_labels)
            if ref.p_star > p0 * (1 + 1e-12):
                raise OptimumRejected(f"P* = {ref.p_star!r} exceeds P(0) = {p0!r}")
        except OptimumRejected as exc:
            warnings.warn(f"{where} rejected: {exc}; computing P*", RuntimeWarning, 2)
            return None
        return ref
    return None


def table_entry(problem: CRFProblem, ref: ReferenceOptimum, params: dict[str, Any]) -> dict:
    """The shipped-table entry of a computed optimum: the value, its certificate and what
    identifies the problem (fingerprint; for people: name, parameters, data files, λ)."""
    meta = problem.metadata or {}
    files = {f["file"]: f["sha256"] for f in meta.get("files", []) if isinstance(f, dict)}
    return {
        "problem": problem.name,
        "params": params,
        "lam": problem.lam,
        "files": files,
        "fingerprint": problem.fingerprint,
        "p_star": ref.p_star,
        "certificate": ref.certificate,
        "relative_certificate": ref.relative_certificate,
        "iterations": ref.iterations,
        "evaluations": ref.evaluations,
        "seconds": round(ref.seconds, 1),
    }


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
    With σ > 0, P is not differentiable: scipy minimizes the smooth split form
    P(u − v) over u, v ≥ 0 (σ‖u − v‖₁ replaced by σΣ(u + v), equal at the solution,
    where no coordinate has both u_j and v_j positive), and the certificate is the
    elastic-net gap of w = u − v. Returns the optimum and w_ref.
    """
    import scipy.optimize  # here, not at import: 0.45 s that loading a run does not need

    t0 = time.perf_counter()
    d = problem.dim
    split = problem.l1 > 0
    w = np.zeros(2 * d) if split else problem.zeros()  # scipy's variable: w or (u, v)
    ev = Evaluator(problem)

    def weights(x: np.ndarray) -> np.ndarray:
        return x[:d] - x[d:] if split else x

    def evaluate(x: np.ndarray) -> tuple[float, np.ndarray, float]:
        """scipy's (value, gradient) at x and the certificate of weights(x)."""
        wx = weights(x)
        value, grad = ev.value_and_gradient(wx)
        cert = gap_from_gradient(problem, wx, grad)
        if split:
            sigma = problem.l1
            value += sigma * float(x.sum() - np.abs(wx).sum())  # σΣ(u+v) for σ‖u−v‖₁
            grad = np.concatenate([grad + sigma, sigma - grad])
        return value, grad, cert

    evaluations = 0
    iterations = 0

    last: dict[str, Any] = {
        "x": None,
        "value": np.nan,
        "cert": np.inf,
        "shown": -np.inf,
        "reported": -1,
    }

    def fun(x: np.ndarray) -> tuple[float, np.ndarray]:
        nonlocal evaluations
        evaluations += 1
        value, grad, cert = evaluate(x)
        last.update(x=x.copy(), value=value, cert=cert)
        return value, grad

    def step(xk: np.ndarray) -> None:
        # The accepted iterate is the last point evaluated by the line search, so its
        # gap is known without another oracle call; reports are throttled by time.
        nonlocal iterations
        iterations += 1
        now = time.perf_counter()
        due = progress is not None and now - last["shown"] >= PROGRESS_INTERVAL
        if due and last["x"] is not None and np.array_equal(last["x"], xk):
            last["shown"], last["reported"] = now, iterations
            progress(iterations, last["value"], last["cert"])

    best_cert = np.inf
    for _ in range(restarts + 1):
        start = iterations
        res = scipy.optimize.minimize(
            fun,
            w,
            jac=True,
            method="L-BFGS-B",
            callback=step,
            bounds=[(0.0, None)] * (2 * d) if split else None,
            options={
                "maxcor": memory,
                "maxiter": maxiter - iterations,
                "ftol": 0.0,
                "gtol": 0.0,
                "maxls": 50,
            },
        )
        iterations = start + int(res.nit)
        value, _, cert = evaluate(res.x)
        if progress is not None and iterations != last["reported"]:
            last["reported"] = iterations
            progress(iterations, value, cert)
        improved = cert < 0.9 * best_cert
        if cert < best_cert:
            w, best_cert = res.x, cert
        if best_cert <= tol * abs(value) or iterations >= maxiter or not improved:
            break
    w = weights(w)
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
        l1=problem.l1,
    )
    return ref, w


def reference_optimum(
    problem: CRFProblem,
    *,
    recompute: bool = False,
    tol: float = 1e-10,
    progress: Any = None,
    shipped: bool = True,
) -> ReferenceOptimum:
    """The certified P* of ``problem``: verified user cache, else the shipped table,
    else computed (and cached).

    ``progress(iterations, P, gap_P)`` is called every ``PROGRESS_INTERVAL`` seconds
    while computing.
    ``recompute`` ignores both stored sources; ``shipped=False`` ignores the table.
    """
    if not recompute:
        ref = cached_optimum(problem)
        if ref is None and shipped:
            ref = shipped_optimum(problem)
        if ref is not None:
            return ref
    path = _cache_file(problem)
    with _lock(path):
        if not recompute:
            # Another process may have computed it while this one waited for the lock.
            ref = cached_optimum(problem)
            if ref is not None:
                return ref
        ref, w = compute_optimum(problem, tol=tol, progress=progress)
        old = cached_optimum(problem, verify=False)
        if old is not None and old.best_dual is not None and old.best_dual <= ref.p_star:
            ref = ReferenceOptimum(**{**asdict(ref), "best_dual": old.best_dual})
        # w_ref first: a JSON entry is never on disk without the weights that verify it.
        with atomic_write(path.with_suffix(".w.npy"), mode="wb", suffix=".npy") as f:
            np.save(f, w)
        _atomic_write_json(path, asdict(ref))
    return ref


def _lock(path: Path) -> Any:
    """An inter-process lock for computing one P* (``<entry>.lock``)."""
    from crfopt.data.fileio import file_lock

    return file_lock(path.with_suffix(".lock"))


def record_dual(problem: CRFProblem, dual_value: float) -> None:
    """Tighten the cached lower bound with a dual value reached by a dual run (G4).

    Ignored when no verified entry is in the user cache, or when the value is not finite
    or exceeds P(w_ref) (impossible by weak duality: a faulty optimizer's report).
    """
    if not np.isfinite(dual_value):
        return
    path = _cache_file(problem)
    with _lock(path):
        ref = cached_optimum(problem, verify=False)
        if ref is None or dual_value > ref.p_star:
            return
        if ref.best_dual is None or dual_value > ref.best_dual:
            data = {**asdict(ref), "best_dual": float(dual_value), "source": "computed"}
            _atomic_write_json(path, data)


def reference_weights(problem: CRFProblem) -> np.ndarray | None:
    """w_ref of the cached optimum, if stored."""
    path = _cache_file(problem).with_suffix(".w.npy")
    return np.load(path, allow_pickle=False) if path.exists() else None


def _main(argv: list[str]) -> None:
    """``python -m crfopt.bench.optimum [--write] NAME ...``: the shipped-table entries of
    built-in problems at their default parameters (P* from the verified user cache, else
    computed), printed as JSON; ``--write`` merges them into the package's table."""
    from crfopt.bench.problems import load_problem
    from crfopt.optim.registry import get_registry

    write = "--write" in argv
    names = [a for a in argv if a != "--write"]
    reg = get_registry()
    entries = {e["fingerprint"]: e for e in _shipped_entries()}
    for name in names:
        problem = load_problem(name)
        ref = reference_optimum(problem, shipped=False)
        params = {k: v for k, v in reg.problems[name].defaults.items() if k != "lam"}
        entry = table_entry(problem, ref, params)
        print(json.dumps(entry, indent=2))
        entries[entry["fingerprint"]] = entry
    if write:
        table = {
            "format": 1,
            "about": "Certified reference optima P* of the built-in problems at their default "
            "parameters; used when a problem's fingerprint matches (crfopt.bench.optimum).",
            "optima": sorted(entries.values(), key=lambda e: e["problem"]),
        }
        with atomic_write(SHIPPED_TABLE, mode="w", suffix=".json") as f:
            json.dump(table, f, indent=2)
            f.write("\n")


if __name__ == "__main__":
    import sys

    _main(sys.argv[1:])
