"""The runner: one (problem, optimizer, parameters, seed) under a budget → trace rows.

Three things are kept apart: the checkpoint schedule (when to evaluate),
the budget (when to stop), and the optimizer's own convergence test. The runner owns the
clock: only the optimizer's blocks of iterations are timed; evaluation at checkpoints,
trace writing and JIT warm-up are not, and evaluation uses uncounted kernels
(docs/algorithms.md §2). Blocks run up to the next checkpoint, sized from the work per
iteration observed so far, so a stochastic method loops in compiled code and is never
restarted between checkpoints.

Building the optimizer (its ``setup()``) happens inside ``problem.initialization()``: the
oracle work done there goes to the ``init_*`` counters and its wall-clock time to
``init_time_s``, so the iteration axes (``effective_passes``, ``oracle_calls``,
``time_s``) and the budget measure the iterations alone, while every trace row carries
the initialization work for tables and figures to add (``crfopt report`` does by default).

Metric plugins (``crfopt_register_metrics``: the built-in ``test_error`` and ``chunk_f1``,
plugins/metrics.py) add columns to the checkpoint rows. They are computed after the row's
status is known (so an expensive metric can be computed at the last checkpoint), outside
the clock and on the evaluator, never on the run's counted problem copy: a run's
``oracle_calls``, ``updates`` and ``time_s`` are the same with or without them.
"""

from __future__ import annotations

import contextlib
import math
import time
import traceback
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from crfopt.bench.budget import Budget, Clock, Schedule
from crfopt.bench.evaluator import Evaluator, MetricWarning
from crfopt.bench.results import COLUMNS, to_frame
from crfopt.core.problem import CRFProblem, ProblemChangedError
from crfopt.kernels.jit import JIT_ENABLED
from crfopt.optim.contract import (
    Optimizer,
    OptimizerSpec,
    ParameterError,
    RunLimits,
    canonical_params,
    display_name,
)
from crfopt.optim.parse import parse_bytes


@dataclass
class RunResult:
    """A finished run: its trace, final weights and what is known about it."""

    trace: pd.DataFrame
    status: str
    meta: dict[str, Any] = field(default_factory=dict)
    w: np.ndarray | None = None

    def summary(self) -> dict[str, Any]:
        """What a saved model records about its training (JSON-safe)."""
        last = self.trace.iloc[-1] if len(self.trace) else None

        def final(column: str) -> float | None:
            if last is None or column not in last or pd.isna(last[column]):
                return None
            return float(last[column])

        return {
            "optimizer": self.meta.get("optimizer_variant"),
            "params": _json_safe(self.meta.get("params", {})),
            "seed": self.meta.get("seed"),
            "status": self.status,
            "effective_passes": final("effective_passes"),
            "seconds": final("time_s"),
            "primal": final("primal"),
            "duality_gap": final("duality_gap"),
            "train_error": final("train_error"),
            "test_error": final("test_error"),
        }


def _json_safe(params: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in params.items():
        if isinstance(v, (np.integer, np.floating, np.bool_)):
            v = v.item()
        out[k] = v if isinstance(v, (str, int, float, bool, type(None))) else str(v)
    return out


def warm_up(spec: OptimizerSpec, params: Mapping[str, Any], problem: CRFProblem) -> None:
    """Compile the optimizer's numba code on a tiny problem of the same kind, untimed.

    The tiny problem has the same array types (dense or sparse, bias or not), so the
    compiled specializations are the ones the real run uses. Failures are ignored here;
    the real run reports them.
    """
    if not JIT_ENABLED:
        return
    from crfopt.core.synthetic import make_synthetic

    tiny = make_synthetic(
        n=6,
        labels=min(3, problem.n_labels) if problem.n_labels > 1 else 1,
        attributes=8,
        length=3,
        density=0.4,
        dense=problem.dense,
        bias=problem.bias,
        seed=0,
    )
    with contextlib.suppress(Exception):
        with tiny.initialization():
            opt = spec.cls(tiny, 0, **params)
        try:
            opt.run_block(2)
            opt.w  # noqa: B018 - a property may compile code too
        finally:
            opt.close()
        Evaluator(tiny).value_and_gradient(tiny.zeros())


def _capability(opt: Optimizer, name: str) -> bool:
    return name in type(opt).capabilities


def evaluate(
    problem: CRFProblem, opt: Optimizer, p_star: float | None, *, train_error: bool = True
) -> tuple[dict[str, Any], np.ndarray | None]:
    """Checkpoint quantities of the optimizer's current state (uncounted, untimed).

    Returns the row values and the weights they were computed at (None when the state is
    not finite). Everything goes through an :class:`~crfopt.bench.evaluator.Evaluator`,
    so the problem's counters are untouched. Metric plugins' columns (``test_error``
    among them) are added when the row is emitted, after its status is known.
    ``train_error=False`` leaves that column null (it costs a Viterbi pass).
    """
    ev = Evaluator(problem)
    w = np.asarray(opt.w)
    row: dict[str, Any] = {}
    if w.shape != (problem.dim,) or not np.all(np.isfinite(w)):
        return row, None
    mu = opt.dual_state() if _capability(opt, "has_dual") else None
    if mu is None:  # the primal gap: P(w) and D(ν(w)) from one pass
        primal, gap = ev.primal_and_gap(w)
    else:
        primal = ev.primal(w)
    if not math.isfinite(primal):
        return row, None
    row["primal"] = primal
    if p_star is not None:
        row["suboptimality"] = primal - p_star
    if mu is not None:
        dual = ev.dual(mu)
        row["dual"] = dual
        row["duality_gap"] = primal - dual
    else:
        row["duality_gap"] = gap
    est = opt.gap_estimate()
    if est is not None:
        row["gap_estimate"] = float(est)
    if train_error:
        row["train_error"] = ev.error(w, "train")
    return row, w


#: Schema columns a metric plugin may fill (the built-in ``test_error``); any other metric
#: named like a results column is refused, so a plugin cannot overwrite ``primal``.
METRIC_SCHEMA_COLUMNS = ("test_error",)


def run_metrics(problem: CRFProblem, metrics: Any) -> tuple[list[Any], dict[str, str]]:
    """The metrics of ``metrics`` (MetricSpecs) that apply to ``problem``, and the
    reasons others were refused (name taken by a results column, ``applies`` raised)."""
    chosen: list[Any] = []
    refused: dict[str, str] = {}
    for spec in metrics:
        if spec.name in COLUMNS and spec.name not in METRIC_SCHEMA_COLUMNS:
            refused[spec.name] = (
                f"metric {spec.name!r} ({spec.source or 'unregistered'}) is named like the "
                "results column it would overwrite; choose another name"
            )
            continue
        try:
            if spec.applies_to(problem):
                chosen.append(spec)
        except Exception as exc:  # a broken applies() must not fail the run
            refused[spec.name] = f"applies() raised {type(exc).__name__}: {exc}"
    return chosen, refused


def _metric_info(spec: Any) -> dict[str, Any]:
    return {
        "cost": spec.cost,
        "every": spec.interval,
        "summary": spec.summary,
        "source": spec.source,
    }


def budget_of(passes: float | None, budget: Budget | None) -> Budget:
    """The budget of ``passes=`` / ``budget=`` (one of them, default 10 passes)."""
    if passes is not None and budget is not None:
        raise ParameterError(
            f"give either passes= or budget=, not both (passes={passes!r}, budget={budget!r}); "
            "a Budget takes passes too: Budget(passes=..., seconds=...)"
        )
    if budget is not None:
        if not isinstance(budget, Budget):
            raise TypeError(f"budget must be a crfopt.Budget, got {type(budget).__name__}")
        return budget
    return Budget(passes=10.0 if passes is None else passes)


def _merge_overrides(
    params: Mapping[str, Any] | None, keywords: Mapping[str, Any]
) -> dict[str, Any]:
    both = sorted(set(params or {}) & set(keywords))
    if both:
        raise ParameterError(
            f"parameter{'s' if len(both) > 1 else ''} {', '.join(map(repr, both))} given both "
            "in params= and as keyword"
        )
    return {**dict(params or {}), **keywords}


#: run()'s own keywords; any other keyword is a parameter of the optimizer.
_RUN_KEYWORDS = (
    "seed",
    "passes",
    "budget",
    "params",
    "checkpoints",
    "p_star",
    "max_memory",
    "registry",
    "on_checkpoint",
    "on_start",
    "run_id",
    "problem_label",
    "metrics",
    "train_error",
)


def run(
    problem: CRFProblem,
    optimizer: str | OptimizerSpec,
    *,
    seed: int = 0,
    passes: float | None = None,
    budget: Budget | None = None,
    params: Mapping[str, Any] | None = None,
    checkpoints: str | Sequence[float] = "default",
    p_star: float | None = None,
    max_memory: int | str | None = None,
    registry: Any = None,
    on_checkpoint: Callable[[dict[str, Any]], None] | None = None,
    on_start: Callable[[dict[str, Any]], None] | None = None,
    run_id: str = "",
    problem_label: str | None = None,
    metrics: Sequence[Any] | None = None,
    train_error: bool = True,
    **overrides: Any,
) -> RunResult:
    """Run one optimizer on one problem and return its trace.

    ``crfopt.run(problem, "sdca-gap", passes=20, seed=0, non_uniformity=0.5)``: budget
    and optimizer parameters as keywords, as in :func:`crfopt.compare`.

    Parameters
    ----------
    problem : CRFProblem
    optimizer : str or OptimizerSpec
        A registered variant name (``"sdca-gap"``) or a spec.
    seed : int
    passes : float, optional
        Shorthand for ``budget=Budget(passes=passes)``; not together with ``budget``.
    budget : Budget, optional
        Default: 10 effective passes.
    params : mapping, optional
        Overrides of the variant's parameters (the same as giving them as keywords).
    checkpoints : str or list of float
        See :class:`Schedule`.
    p_star : float, optional
        Reference optimum; fills ``suboptimality`` and enables ``target_suboptimality``.
    max_memory : int or str, optional
        Memory limit for the optimizer's state, bytes or ``"2G"``; an optimizer whose
        :meth:`~crfopt.Optimizer.decline` says it would exceed it is not built, and the
        run ends with status ``skipped`` and the reason in ``meta["skip_reason"]``.
    registry : Registry, optional
        Where to look ``optimizer`` up (default: a fresh one).
    on_checkpoint : callable, optional
        Called with each trace row as it is made (progress display).
    on_start : callable, optional
        Called once with the run's metadata before the optimizer is built.
    metrics : sequence of MetricSpec, optional
        The checkpoint metrics (a column each, where they apply); default: every metric
        of ``registry`` (a fresh one when not given), the built-in ``test_error`` and
        ``chunk_f1`` among them. Computed uncounted and untimed.
    train_error : bool
        Compute the ``train_error`` column at every checkpoint (a Viterbi pass over the
        training set each); ``False`` leaves it null (``CRF.fit`` without monitoring).
    **overrides
        Parameters of the optimizer (``non_uniformity=0.5``); an unknown name raises
        :class:`~crfopt.ParameterError` listing the valid parameters.

    Returns
    -------
    RunResult
        ``trace`` (DataFrame with the results schema), final ``status`` and ``meta``
        (resolved parameters, final counters, error traceback if any).
    """
    if registry is None and (isinstance(optimizer, str) or metrics is None):
        from crfopt.optim.registry import get_registry

        registry = get_registry()
    spec = registry.optimizer(optimizer) if isinstance(optimizer, str) else optimizer
    budget = budget_of(passes, budget)
    limits = RunLimits(max_memory=None if max_memory is None else parse_bytes(max_memory))
    schedule = Schedule(checkpoints)
    overrides = _merge_overrides(params, overrides)
    try:
        resolved = spec.resolve(overrides)
    except ParameterError as exc:
        if not set(overrides) - set(spec.cls.parameters):
            raise  # a bad value, not a bad name
        raise ParameterError(f"{exc} (run() itself takes: {', '.join(_RUN_KEYWORDS)})") from None
    name = display_name(spec.name, overrides)
    if budget.target_suboptimality is not None and p_star is None:
        raise ValueError("target_suboptimality needs p_star (see crfopt optimum)")

    base = {
        "problem": problem_label or problem.name,
        "optimizer": name,
        "params": canonical_params(resolved),
        "seed": int(seed),
        "run_id": run_id,
    }
    rows: list[dict[str, Any]] = []
    meta: dict[str, Any] = {
        "optimizer_variant": spec.name,
        "optimizer_source": spec.source,
        "params": resolved,
        "overrides": overrides,
        "seed": int(seed),
        "budget": budget.as_dict(),
        "checkpoints": schedule.describe(),
        "p_star": p_star,
        "max_memory": limits.max_memory,
        "P0": problem.primal_at_zero(),
        "n": problem.n,
        "error": None,
    }
    metric_specs, refused = run_metrics(
        problem, registry.metrics.values() if metrics is None else metrics
    )
    meta["metrics"] = {m.name: _metric_info(m) for m in metric_specs}
    metric_errors: dict[str, str] = {}
    for name, why in refused.items():
        _metric_failed(metric_errors, name, why, meta["optimizer_variant"])
    # The run's isolation (issue 17): the optimizer gets a copy of the problem with its
    # own counters (a thread it leaves behind cannot count into the next run's), and the
    # data and λ are verified against their digests before and after the run.
    changed = problem.changed_data()
    if changed:
        raise ProblemChangedError(
            f"problem {problem.name!r} changed since its first run ({', '.join(changed)}); "
            "a plugin wrote to it: load it again"
        )
    run_problem = problem.for_run()
    counters = run_problem.counters
    clock = Clock()
    status = "running"

    init: dict[str, float | None] = {"seconds": None}

    def make_row(opt: Optimizer | None, evaluate_state: bool) -> dict[str, Any]:
        snap = counters.snapshot()
        row = dict(base)
        row.update(
            checkpoint=len(rows),
            iterations=snap.iterations,
            oracle_calls=snap.oracle_calls,
            forward_calls=snap.forward_calls,
            updates=snap.updates,
            effective_passes=snap.effective_passes,
            time_s=clock.elapsed,
            # setup() work, kept off the iteration axes but stored with every row so
            # that tables and figures can charge it (results.INIT_COLUMNS)
            init_oracle_calls=snap.init_oracle_calls,
            init_forward_calls=snap.init_forward_calls,
            init_passes=(snap.init_oracle_calls + snap.init_forward_calls) / snap.n,
            init_time_s=init["seconds"],
            status="running",
        )
        if opt is not None and evaluate_state:
            values, w = evaluate(problem, opt, p_star, train_error=train_error)
            row.update(values)
            row["_finite"] = w is not None
            row["_w"] = w
        return row

    def emit(row: dict[str, Any]) -> None:
        row.pop("_finite", None)
        w = row.pop("_w", None)
        if w is not None and metric_specs:
            # after the status is known (expensive metrics run at the last checkpoint),
            # outside the clock, on the evaluator: uncounted and untimed
            values, errors = Evaluator(problem).metrics(
                w, metric_specs, checkpoint=row["checkpoint"], final=row["status"] != "running"
            )
            row.update(values)
            for name, error in errors.items():
                _metric_failed(metric_errors, name, error, meta["optimizer_variant"])
        rows.append(row)
        if on_checkpoint is not None:
            on_checkpoint(row)

    if on_start is not None:
        on_start(dict(meta))
    opt: Optimizer | None = None
    try:
        # a penalty the optimizer does not handle (ℓ1 for an ℓ2-only method) is refused
        # like a limit: skipped with the reason, so a grid with --l1 keeps its other runs
        reason = spec.refusal(run_problem) or spec.cls.decline(run_problem, resolved, limits)
        if reason is not None:
            # Declined before anything was compiled, built or run: one row with zero
            # counters, the reason in the metadata, and no weights.
            status = "skipped"
            meta["skip_reason"] = str(reason)
            row = make_row(None, False)
            row["status"] = status
            emit(row)
            status = _verify(problem, run_problem, status, rows, meta)
            return _finish(
                RunResult(to_frame(rows, meta["metrics"]), status, meta, None),
                problem,
                run_problem,
                clock,
            )
        warm_up(spec, resolved, problem)
        counters.reset()
        t0 = time.perf_counter()
        try:
            with run_problem.initialization():
                opt = spec.cls(run_problem, seed, **resolved)
        finally:
            # also when setup() raises: the time it spent before failing is reported
            init["seconds"] = time.perf_counter() - t0
            meta["init_seconds"] = init["seconds"]
        row = make_row(opt, True)
        if not row.get("_finite", False):
            status = "diverged"
            row["status"] = status
            emit(row)
        else:
            emit(row)
            status = _loop(run_problem, opt, budget, schedule, clock, make_row, emit)
    except Exception as exc:  # a failing plugin must not take the comparison down
        status = "failed"
        meta["error"] = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        meta["error_summary"] = f"{type(exc).__name__}: {exc}"
        try:
            row = make_row(opt, opt is not None)
        except Exception:  # the state itself may be what broke
            row = make_row(None, False)
        row["status"] = status
        emit(row)
    finally:
        final_w = None
        if opt is not None:
            with contextlib.suppress(Exception):
                final_w = np.array(opt.w, dtype=np.float64, copy=True)
            with contextlib.suppress(Exception):
                opt.close()
    status = _verify(problem, run_problem, status, rows, meta)
    if metric_errors:
        meta["metric_errors"] = metric_errors
    return _finish(
        RunResult(to_frame(rows, meta["metrics"]), status, meta, final_w),
        problem,
        run_problem,
        clock,
    )


def _metric_failed(errors: dict[str, str], name: str, error: str, optimizer: str) -> None:
    """Record a metric's first failure in a run and warn once; its cells stay null."""
    if name in errors:
        return
    errors[name] = error
    warnings.warn(
        f"metric {name!r} failed in the run of {optimizer} ({error}); its column is null "
        "where it failed, the run itself is unaffected",
        MetricWarning,
        stacklevel=3,
    )


def _verify(
    problem: CRFProblem,
    run_problem: CRFProblem,
    status: str,
    rows: list[dict[str, Any]],
    meta: dict[str, Any],
) -> str:
    """The run's status once the problem is checked: ``failed`` if the run changed it.

    Checks the run's copy (its data and λ), then the original (a plugin may reach it
    too); arrays both share are hashed once. Whatever the run computed rests on data it
    changed, so it fails whatever its status was; ``meta["problem_changed"]`` names what
    changed, and the caller reloads the problem (``execute_task`` does).
    """
    memo: dict[int, str] = {}
    changed = run_problem.changed_data(memo)
    changed += [c for c in problem.changed_data(memo) if c not in changed]
    if not changed:
        return status
    summary = f"ProblemChangedError: problem data changed during the run: {', '.join(changed)}"
    meta["problem_changed"] = changed
    meta["error_summary"] = summary
    meta["error"] = f"{meta['error']}\n{summary}" if meta.get("error") else summary
    rows[-1]["status"] = "failed"
    return "failed"


def _finish(
    result: RunResult, problem: CRFProblem, run_problem: CRFProblem, clock: Clock
) -> RunResult:
    """Record the final counters, status and optimizer time in the run's metadata.

    The run's counters are copied to ``problem.counters`` (which shows the last run's
    work, as it did when runs counted there); the run's own copy is dropped, so later
    calls from a leftover thread count into an array nobody reads.
    """
    problem.counters.array[:] = run_problem.counters.array
    result.meta["final_counters"] = run_problem.counters.snapshot().as_dict()
    result.meta["status"] = result.status
    result.meta["time_s"] = clock.elapsed
    return result


#: Blocks in a row that advance none of the counters the budget ends on before the
#: runner fails the run instead of looping for ever (a plugin that resets its counters
#: or never counts). Blocks stop growing while stalled, so this bounds the iterations.
MAX_STALLED_BLOCKS = 50

#: Counters that may only grow during the optimizer's blocks.
_GUARDED = (
    "oracle_calls",
    "forward_calls",
    "updates",
    "iterations",
    "init_oracle_calls",
    "init_forward_calls",
)


def _loop(
    problem: CRFProblem,
    opt: Optimizer,
    budget: Budget,
    schedule: Schedule,
    clock: Clock,
    make_row: Callable[[Optimizer | None, bool], dict[str, Any]],
    emit: Callable[[dict[str, Any]], None],
) -> str:
    counters = problem.counters
    n = problem.n
    next_cp = schedule.next_after(0.0)
    # The guard: counters the budget (or the next checkpoint) waits for. Work always
    # (passes, oracle calls and checkpoints are measured in it); iterations or updates
    # only when the budget limits them. A seconds limit ends a run by itself.
    progress = ["oracle_calls", "forward_calls"]
    progress += [c for c in ("iterations", "updates") if getattr(budget, c) is not None]
    stalled_blocks, last_k = 0, 1

    def work() -> int:
        return counters.oracle_calls + counters.forward_calls

    def budget_exhausted() -> bool:
        s = counters.snapshot()
        return bool(
            (budget.passes is not None and s.effective_passes >= budget.passes - 1e-12)
            or (budget.oracle_calls is not None and s.oracle_calls >= budget.oracle_calls)
            or (budget.updates is not None and s.updates >= budget.updates)
            or (budget.iterations is not None and s.iterations >= budget.iterations)
            or (budget.seconds is not None and clock.elapsed >= budget.seconds)
        )

    while True:
        # Iterations until the next checkpoint or the nearest budget limit, estimated
        # from the work per iteration seen so far (1 block of 1 to start).
        s = counters.snapshot()
        goal_passes = next_cp if budget.passes is None else min(next_cp, budget.passes)
        if s.iterations == 0:
            k = 1
        else:
            # Grow blocks geometrically while the work-per-iteration estimate rests on few
            # iterations, so a first cheap iteration cannot make a block overshoot.
            k = max(1, s.iterations)
            if math.isfinite(goal_passes):  # no pass limit and no checkpoint left: only k
                per_iter = max(work() / s.iterations, 1e-9)
                k = min(k, max(1, math.ceil((goal_passes * n - work()) / per_iter)))
            if budget.oracle_calls is not None:
                per_oracle = max(s.oracle_calls / s.iterations, 1e-9)
                k = min(k, max(1, math.ceil((budget.oracle_calls - s.oracle_calls) / per_oracle)))
        if budget.updates is not None:
            k = min(k, max(1, budget.updates - s.updates))
        if budget.iterations is not None:
            k = min(k, max(1, budget.iterations - s.iterations))

        if stalled_blocks:
            k = min(k, last_k)  # no geometric growth while nothing advances
        with clock.timing():
            done = opt.run_block(k)
        after = counters.snapshot()
        backwards = [
            f"{name} {getattr(s, name)} → {getattr(after, name)}"
            for name in _GUARDED
            if getattr(after, name) < getattr(s, name)
        ]
        if backwards:
            raise RuntimeError(
                f"{type(opt).__name__}.run_block({k}) made the work counters go backwards "
                f"({', '.join(backwards)}): only the counted oracles and Optimizer.count() "
                "may change them, and only upwards"
            )
        advanced = [name for name in progress if getattr(after, name) > getattr(s, name)]
        stalled = after.iterations == s.iterations and work() == s.oracle_calls + s.forward_calls
        if done == 0 and not opt.converged and stalled:
            raise RuntimeError(
                f"{type(opt).__name__}.run_block({k}) made no progress and did not converge"
            )
        stalled_blocks = 0 if advanced or opt.converged else stalled_blocks + 1
        last_k = k
        if stalled_blocks >= MAX_STALLED_BLOCKS:
            raise RuntimeError(
                f"{type(opt).__name__} made no progress: {stalled_blocks} blocks in a row "
                f"(the last of {k} iterations) advanced none of the counters the budget "
                f"ends on ({', '.join(progress)}); a run that never reaches its budget "
                "would not end"
            )

        passes_now = counters.effective_passes
        at_checkpoint = passes_now >= next_cp - 1e-12
        stop_budget = budget_exhausted()
        stop = stop_budget or opt.converged
        if not (at_checkpoint or stop):
            continue
        row = make_row(opt, True)
        status = "running"
        if not row.get("_finite", False):
            status = "diverged"
        elif (
            opt.converged
            or (
                budget.target_suboptimality is not None
                and row.get("suboptimality") is not None
                and (row["suboptimality"] <= budget.target_suboptimality)
            )
            or (
                budget.target_gap is not None
                and row.get("duality_gap") is not None
                and (row["duality_gap"] <= budget.target_gap)
            )
        ):
            status = "converged"
        elif stop_budget:
            status = "budget"
        row["status"] = status
        emit(row)
        if status != "running":
            return status
        # jump straight past every checkpoint this block crossed (stepping through
        # them one by one took ~passes/X calls)
        while next_cp <= passes_now + 1e-12:
            next_cp = schedule.next_after(max(next_cp, passes_now))
