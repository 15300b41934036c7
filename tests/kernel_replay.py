"""Record every kernel call of optimizer runs on the NumPy path; replay them compiled.

The two kernel twins (:mod:`crfopt.kernels._numpy`, :mod:`crfopt.kernels._numba`) must give
the same outputs to 1e-10 for the same inputs (docs/algorithms.md §5.1). Comparing whole optimizer
trajectories only tests that for methods whose control flow never branches on a
rounding-level quantity (see :data:`TRAJECTORY_METHODS`); any other method turns a
1e-16 difference into a different branch sooner or later. So instead every optimizer
runs once on the NumPy path with each kernel entry point wrapped: the wrapper keeps a
copy of the inputs and the outputs (return value and every array argument afterwards),
and :func:`replay` later feeds the same inputs to the compiled twin and compares.

Kernels are reached through module attributes at call time on the NumPy path
(``kernels.oracle(...)`` in plugins, ``_kernels.…`` and ``_impl.batch_…`` in
:mod:`crfopt.core.problem`), so wrapping those attributes sees every call without a hook in
the library. :func:`record` checks that claim: every inference kernel bumps the data's
audit cell, so an unrecorded call shows up as a jump of the cell between recorded calls.

Run as a script so each side runs in a fresh process with ``CRFOPT_DISABLE_JIT`` set (or
not) before crfopt is imported::

    python kernel_replay.py record OUT.pkl        # NumPy path: runs + recorded calls
    python kernel_replay.py jit-side IN.pkl OUT.pkl  # JIT path: replay IN, trajectories
"""

from __future__ import annotations

import pickle
import sys
from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np

TOL = {"atol": 1e-10, "rtol": 1e-10}

# Optimizers compared by their whole trajectory (JIT run vs NumPy run, 1e-10). They never
# branch on a computed value: SG/ASG/AdaGrad draw examples uniformly from the seeded
# uniforms, their steps follow a fixed schedule, and their one branch (folding the scale
# s into u when s < 1e-100) depends on the schedule only. Their iterates are therefore
# smooth functions of the kernel outputs and must agree to 1e-10 after 100 iterations.
TRAJECTORY_METHODS = frozenset({"sg", "asg", "adagrad"})

# Optimizers whose control flow branches on computed values that can sit within rounding
# of the threshold, so their JIT and NumPy trajectories may split by luck; their kernel
# calls are replayed instead:
#   oeg*     accept a trial iff the dual gain >= 0 (a tie seen on the dense problem);
#   sag*     Lipschitz line search f(w - g/L) <= f - |g|²/(2L) and `|g|² > 1e-8`;
#            sag-nus*/saga-nus also skip searches after `doublings == 0` and sample ∝ L_i;
#   sg-nus   the same Lipschitz line search, and samples ∝ the L_i it finds;
#   sdca*    Newton line search on γ, the gap stopping test, and gap-driven sampling
#            (sdca-max takes an argmax of gaps);
#   lbfgs    scipy's line search compares function values that agree to 1e-16 once
#            the gradient is tiny;
#   owlqn    its backtracking search accepts on an Armijo comparison of function values
#            (the same tie once the pseudo-gradient is tiny).
#   prox-saga  the same Lipschitz line search, and the prox's soft-threshold tests.
REPLAY_METHODS = frozenset(
    {
        "lbfgs",
        "oeg",
        "oeg-c0",
        "oeg-norp",
        "owlqn",
        "prox-saga",
        "sag",
        "sag-nus",
        "sag-nus-star",
        "saga-nus",
        "sdca",
        "sdca-cyclic",
        "sdca-edelta",
        "sdca-gap",
        "sdca-gapimp",
        "sdca-importance",
        "sdca-max",
        "sdca-passcode-wild",
        "sdca-perm",
        "sg-nus",
    }
)

ITERATIONS = 100
# Statuses of a run that did not end normally (crfopt.bench.runner); its weights mean nothing.
BAD_STATUSES = ("failed", "diverged")


def problems() -> dict[str, Any]:
    """The two small problems every method runs on: sparse and dense embeddings."""
    import crfopt

    return {
        kind: crfopt.make_synthetic(
            n=15, labels=3, attributes=12, length=5, dense=dense, density=0.4, seed=3
        )
        for kind, dense in (("sparse", False), ("dense", True))
    }


def run_methods(names: list[str]) -> dict[str, dict[str, Any]]:
    """Run each method for ITERATIONS iterations on both problems (the current path)."""
    import crfopt
    from crfopt.bench.runner import Budget, run

    reg = crfopt.get_registry()
    out: dict[str, dict[str, Any]] = {}
    for kind, p in problems().items():
        for name in names:
            res = run(p, name, budget=Budget(iterations=ITERATIONS, passes=None), registry=reg)
            out[f"{name}/{kind}"] = {
                "status": res.status,
                "error": res.meta.get("error_summary"),
                "w": res.w,
                "iterations": int(res.trace["iterations"].iloc[-1]),
            }
    return out


# ------------------------------------------------------------------------------ record


def _is_bundle(x: Any) -> bool:
    """KernelData / Transpose: namedtuples of arrays passed whole into the kernels."""
    return isinstance(x, tuple) and hasattr(x, "_fields")


def _copy(x: Any) -> Any:
    if isinstance(x, np.ndarray):
        c = x.copy()
        c.setflags(write=x.flags.writeable)
        return c
    if _is_bundle(x):
        return type(x)(*(_copy(v) for v in x))
    if isinstance(x, tuple):
        return tuple(_copy(v) for v in x)
    return x


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and a.tobytes() == b.tobytes()


class Recorder:
    """Wraps kernel functions; keeps (name, inputs, changed outputs, return) per call.

    Bundles (KernelData, Transpose) are stored once and referred to by index; their only
    writable array, the audit cell, is recorded before and after each call.
    """

    def __init__(self) -> None:
        self.bundles: list[tuple] = []  # copies, stored in the recording
        self._live: list[tuple] = []  # the originals, kept alive so ids stay unique
        self._bundle_ids: dict[tuple[int, ...], int] = {}
        self.calls: dict[str, list[tuple]] = {}
        self.run_key = "setup"
        self.audit_gaps: list[str] = []
        self._last_audit: dict[int, int] = {}  # bundle index -> audit after its last call
        self._depth = 0

    def _bundle(self, b: tuple) -> int:
        key = tuple(id(v) for v in b)
        idx = self._bundle_ids.get(key)
        if idx is None:
            idx = len(self.bundles)
            self._bundle_ids[key] = idx
            self.bundles.append(_copy(b))
            self._live.append(b)
        return idx

    def wrap(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def recorded(*args: Any) -> Any:
            if self._depth:  # a kernel calling another wrapped one: record the outer only
                return fn(*args)
            enc = []
            for a in args:
                if _is_bundle(a):
                    idx = self._bundle(a)
                    audit = int(a.audit[0]) if hasattr(a, "audit") else None
                    if audit is not None and self._last_audit.get(idx, audit) != audit:
                        self.audit_gaps.append(
                            f"{self.run_key}: {name} saw audit {audit} after "
                            f"{self._last_audit[idx]}: a kernel call bypassed the recorder"
                        )
                    enc.append(("B", idx, audit))
                elif isinstance(a, np.ndarray):
                    enc.append(("A", _copy(a)))
                else:
                    enc.append(("S", a))
            self._depth += 1
            try:
                ret = fn(*args)
            finally:
                self._depth -= 1
            after: list[Any] = []
            for a, e in zip(args, enc):
                if e[0] == "B":
                    audit = int(a.audit[0]) if e[2] is not None else None
                    if audit is not None:
                        self._last_audit[e[1]] = audit
                    after.append(audit)
                elif e[0] == "A":
                    after.append(None if _same_bits(a, e[1]) else a.copy())
                else:
                    after.append(None)
            self.calls.setdefault(self.run_key, []).append((name, enc, after, _copy(ret)))
            return ret

        recorded.__wrapped__ = fn  # type: ignore[attr-defined]
        return recorded

    def check_final_audits(self) -> None:
        """An unrecorded call after the last recorded one also leaves a trace."""
        for idx, b in enumerate(self._live):
            if idx in self._last_audit and int(b.audit[0]) != self._last_audit[idx]:
                self.audit_gaps.append(f"bundle {idx}: audit moved after its last recorded call")


class _Proxy:
    """Stands in for the kernel module that crfopt.core.problem calls as ``_impl``."""

    def __init__(self, module: Any, rec: Recorder) -> None:
        for name in dir(module):
            fn = getattr(module, name)
            if not name.startswith("_") and callable(fn) and not isinstance(fn, type):
                setattr(self, name, rec.wrap(name, fn))


def record(names: list[str]) -> dict[str, Any]:
    """Run ``names`` on the NumPy path, recording every kernel call."""
    from crfopt.kernels.jit import JIT_ENABLED

    if JIT_ENABLED:
        raise RuntimeError("record runs the NumPy kernels: set CRFOPT_DISABLE_JIT=1")
    import crfopt.core.duality as duality_mod
    import crfopt.core.problem as problem_mod
    import crfopt.kernels as kernels
    import crfopt.optim.pieces as pieces_mod
    from crfopt.kernels import _numpy as _kernels_numpy

    rec = Recorder()
    wrapped = [n for n in kernels.__all__ if callable(getattr(kernels, n))]
    saved = {n: getattr(kernels, n) for n in wrapped}
    saved_impl = problem_mod._impl
    # the batch (evaluation) kernels are called from both core modules
    if saved_impl is not _kernels_numpy or duality_mod._impl is not _kernels_numpy:
        raise RuntimeError("crfopt.core no longer serves the NumPy kernels as _impl")
    saved_piece = pieces_mod.local_gradient  # crfopt.pieces re-exports this kernel
    import crfopt
    from crfopt.bench.runner import Budget, run

    runs: dict[str, dict[str, Any]] = {}
    try:
        for n in wrapped:
            setattr(kernels, n, rec.wrap(n, getattr(kernels, n)))
        pieces_mod.local_gradient = kernels.local_gradient
        proxy = _Proxy(_kernels_numpy, rec)
        problem_mod._impl = proxy
        duality_mod._impl = proxy
        reg = crfopt.get_registry()
        for kind, p in problems().items():
            for name in names:
                rec.run_key = f"{name}/{kind}"
                res = run(p, name, budget=Budget(iterations=ITERATIONS, passes=None), registry=reg)
                runs[rec.run_key] = {
                    "status": res.status,
                    "error": res.meta.get("error_summary"),
                    "w": res.w,
                    "iterations": int(res.trace["iterations"].iloc[-1]),
                }
        rec.check_final_audits()
    finally:
        for n, fn in saved.items():
            setattr(kernels, n, fn)
        problem_mod._impl = saved_impl
        duality_mod._impl = saved_impl
        pieces_mod.local_gradient = saved_piece
    return {
        "runs": runs,
        "calls": rec.calls,
        "bundles": rec.bundles,
        "audit_gaps": rec.audit_gaps,
        "wrapped": sorted(set(wrapped) | set(vars(proxy))),
    }


# ------------------------------------------------------------------------------ replay


def _compare(tag: str, got: Any, want: Any, problems_out: list[str]) -> None:
    if isinstance(want, tuple) and not hasattr(want, "_fields"):
        if not isinstance(got, tuple) or len(got) != len(want):
            problems_out.append(f"{tag}: returned {type(got).__name__}, NumPy {want!r}")
            return
        for j, (g, w) in enumerate(zip(got, want)):
            _compare(f"{tag}[{j}]", g, w, problems_out)
        return
    if want is None or got is None:
        if not (want is None and got is None):
            problems_out.append(f"{tag}: returned {got!r}, NumPy {want!r}")
        return
    g = np.asarray(got)
    w = np.asarray(want)
    if g.shape != w.shape:
        problems_out.append(f"{tag}: shape {g.shape}, NumPy {w.shape}")
        return
    if w.dtype.kind in "iub" or g.dtype.kind in "iub":
        if not np.array_equal(g, w):
            problems_out.append(f"{tag}: {g.ravel()[:8]} != NumPy {w.ravel()[:8]}")
        return
    if g.tobytes() == w.tobytes():
        return
    # assert_allclose's rule (NaN equals NaN, inf equals inf of the same sign), inlined:
    # it is called ~100k times, and numpy.testing costs 250 µs a call.
    with np.errstate(invalid="ignore"):
        diff = np.abs(g - w)
        ok = (
            (diff <= TOL["atol"] + TOL["rtol"] * np.abs(w)) | (np.isnan(g) & np.isnan(w)) | (g == w)
        )
    if not ok.all():
        bad = np.flatnonzero(~ok.ravel())
        j = bad[np.argmax(np.nan_to_num(diff.ravel()[bad], nan=np.inf))]
        problems_out.append(
            f"{tag}: {bad.size} of {ok.size} entries differ; worst: JIT {g.ravel()[j]!r}, "
            f"NumPy {w.ravel()[j]!r}"
        )


def replay(recording: dict[str, Any], max_reports: int = 20) -> dict[str, Any]:
    """Call the compiled twin of every recorded call on the same inputs and compare.

    Returns the number of calls replayed per kernel and per run, and the mismatches
    (call, output, error), the first ``max_reports`` of them in full.
    """
    import numba

    from crfopt.kernels import _numba as _kernels_jit

    # One numba thread: on a loaded 2-core machine a parallel region of the batch kernels
    # costs ~20 ms of OpenMP waiting (37 µs on one thread) and the replay makes ~2000 such
    # calls. Threaded batch kernels are compared in test_kernels_agree.
    threads = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        return _replay(recording, _kernels_jit, max_reports)
    finally:
        numba.set_num_threads(threads)


def _work_space(name: str, enc: list) -> set[int]:
    """Positions of the arguments a kernel's documentation makes work space for this call
    (contents unspecified afterwards), which the twins need not agree on: the log arrays
    of ``oracle_scores_bonus(..., linear, logs=False)``."""
    if name == "oracle_scores_bonus" and len(enc) > 12 and enc[12][0] == "S" and not enc[12][1]:
        return {7, 8}
    return set()


def _replay(recording: dict[str, Any], impl: Any, max_reports: int) -> dict[str, Any]:
    bundles = recording["bundles"]
    per_kernel: Counter[str] = Counter()
    per_run: Counter[str] = Counter()
    mismatches: list[str] = []
    n_bad = 0
    for run_key, calls in recording["calls"].items():
        for c, (name, enc, after, ret) in enumerate(calls):
            args = []
            for e in enc:
                if e[0] == "B":
                    b = bundles[e[1]]
                    if e[2] is not None:
                        b.audit[0] = e[2]
                    args.append(b)
                elif e[0] == "A":
                    args.append(_copy(e[1]))  # the replay must not change the recording
                else:
                    args.append(e[1])
            got = getattr(impl, name)(*args)
            found: list[str] = []
            tag = f"{run_key} call {c} {name}"
            _compare(f"{tag} -> return", got, ret, found)
            work_space = _work_space(name, enc)
            for j, (e, a, want) in enumerate(zip(enc, args, after)):
                if j in work_space:
                    continue
                if e[0] == "B" and e[2] is not None:
                    if int(a.audit[0]) != want:
                        found.append(f"{tag} arg {j}: audit {int(a.audit[0])}, NumPy {want}")
                elif e[0] == "A":
                    _compare(f"{tag} arg {j}", a, e[1] if want is None else want, found)
            per_kernel[name] += 1
            per_run[run_key] += 1
            if found:
                n_bad += 1
                if len(mismatches) < max_reports:
                    mismatches.extend(found)
    return {
        "per_kernel": dict(per_kernel),
        "per_run": dict(per_run),
        "mismatched_calls": n_bad,
        "mismatches": mismatches,
    }


def jit_side(recording: dict[str, Any]) -> dict[str, Any]:
    """What the JIT path contributes: the replay and the trajectory methods' runs."""
    from crfopt.kernels.jit import JIT_ENABLED

    if not JIT_ENABLED:
        raise RuntimeError("jit-side runs the compiled kernels: unset CRFOPT_DISABLE_JIT")
    return {
        "replay": replay(recording),
        "runs": run_methods(sorted(TRAJECTORY_METHODS)),
    }


def main(argv: list[str]) -> None:
    if argv[:1] == ["record"] and len(argv) == 2:
        import crfopt

        out = record(sorted(crfopt.get_registry().optimizers))
    elif argv[:1] == ["jit-side"] and len(argv) == 3:
        with open(argv[1], "rb") as f:
            out = jit_side(pickle.load(f))
    else:
        raise SystemExit("usage: kernel_replay.py record OUT | jit-side IN OUT")
    with open(argv[-1], "wb") as f:
        pickle.dump(out, f, protocol=pickle.HIGHEST_PROTOCOL)


if __name__ == "__main__":
    main(sys.argv[1:])
