"""Comparisons: a grid of (problem × optimizer × parameters × seed) runs → one table.

The work is split by concern: :mod:`crfopt.bench.plan` expands the grid into run tasks
with run ids (no data loaded) and finds which are already on disk;
:mod:`crfopt.bench.execute` performs one task; :mod:`crfopt.bench.backends` runs the
pending tasks serially, in local processes or on Dask. This module orchestrates them:
plan, check the results folder is writable, attach P*, execute, and read the grid's
files back as one table. Selections (``NAME[param=value]``, comma lists) are read by
:mod:`crfopt.optim.parse`, the one grammar of the CLI and the Python API.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from crfopt.bench.backends import (
    BACKENDS,
    SchedulerUnreachableError,
    check_scheduler,
    resolve_backend,
    run_tasks,
)
from crfopt.bench.execute import ProblemCache, execute_task
from crfopt.bench.plan import GridPlan, RunTask, plan_grid
from crfopt.bench.results import read_results
from crfopt.bench.runner import Budget, budget_of, run
from crfopt.optim.parse import parse_bytes, parse_selection, split_list
from crfopt.optim.registry import Registry, get_registry

#: The selection parser under its historical name (``crfopt.optim.parse`` owns it).
parse_optimizer = parse_selection

#: Final statuses that make ``crfopt compare`` exit 1 (unless ``--allow-failures``);
#: ``skipped`` (the optimizer declined the problem) is not one of them.
UNSUCCESSFUL = ("failed", "diverged")


class ResultsNotWritableError(OSError):
    """The results folder cannot be written: read-only, full, or a file in the way.

    Raised only where results are written, so a missing *input* (also an ``OSError``)
    is never reported as a write failure. ``out_dir`` is the folder, ``__cause__`` the
    operating system's error.
    """

    def __init__(self, out_dir: Path, cause: OSError) -> None:
        # one argument: OSError's str() would otherwise show only errno and strerror
        super().__init__(f"cannot write results to {out_dir}: {cause}")
        self.out_dir = out_dir
        self.cause = cause


def _check_writable(out_dir: Path) -> None:
    """Fail before any work when results cannot be stored (read-only folder, a file in
    the way, no space for even an empty file), not after the first hour of a grid."""
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".tmp-probe-", dir=out_dir)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise ResultsNotWritableError(out_dir, exc) from exc


def _load_inputs(tasks: Sequence[RunTask], reg: Registry, cache: ProblemCache) -> None:
    """Load each problem of ``tasks`` once, before any run, so that a missing or damaged
    input raises here (the CLI's exit 2 naming the file) instead of being stored as a
    failed run by every task (:func:`execute_task` records, never raises). The P* step
    does this by itself; this is for ``optimum=False``."""
    seen: set[str] = set()
    for t in tasks:
        key = f"{t.problem}|{sorted(t.problem_params.items())}"
        if key not in seen:
            seen.add(key)
            cache.get(reg, t.problem, t.problem_params)


def _with_optimum(
    tasks: list[RunTask], reg: Registry, cache: ProblemCache, optimum: bool, progress: Any
) -> list[RunTask]:
    """Attach the cached (or freshly computed) P* of each problem to its pending runs."""
    if not optimum:
        return tasks
    from crfopt.bench.optimum import reference_optimum

    p_stars: dict[str, float] = {}
    out = []
    for t in tasks:
        key = f"{t.problem}|{sorted(t.problem_params.items())}"
        if key not in p_stars:
            problem = cache.get(reg, t.problem, t.problem_params)
            if progress is not None:
                progress(f"reference optimum of {t.problem}")

            def shown(it: int, value: float, gap: float, name: str = t.problem) -> None:
                progress(f"  {name}: L-BFGS iteration {it}, P = {value:.10g}, gap {gap:.2e}")

            ref = reference_optimum(problem, progress=shown if progress is not None else None)
            if progress is not None and ref.source != "computed":
                progress(
                    f"  P* = {ref.p_star:.10g} ({ref.source}, certified gap {ref.certificate:.1e})"
                )
            p_stars[key] = ref.p_star
        out.append(t.with_(p_star=p_stars[key]))
    return out


def compare(
    problems: str | Sequence[str],
    optimizers: str | Sequence[str],
    *,
    seeds: Iterable[int] = (0,),
    passes: float | None = None,
    budget: Budget | None = None,
    checkpoints: str | Sequence[float] = "default",
    out: str | os.PathLike[str] = "results",
    backend: str | None = None,
    n_jobs: int | None = None,
    scheduler: str | None = None,
    plugin_dirs: Sequence[str] = (),
    overrides: Mapping[str, Mapping[str, Any]] | None = None,
    problem_params: Mapping[str, Mapping[str, Any]] | None = None,
    optimum: bool = True,
    retry_failed: bool = False,
    timeout: float | None = None,
    max_memory: int | str | None = None,
    reporter: Any = None,
) -> pd.DataFrame:
    """Run a comparison grid and return the union of its traces as one DataFrame.

    Parameters
    ----------
    problems, optimizers : str or sequence of str
        Names (comma-separated strings allowed); an optimizer may carry overrides as
        ``"sdca-gap[non_uniformity=0.5]"``.
    seeds : iterable of int
    passes : float, optional
        Shorthand for ``Budget(passes=passes)``; not together with ``budget``.
    budget : Budget, optional
    checkpoints : str or list of float
        See :class:`crfopt.Schedule`.
    out : path
        Results folder: one Parquet file per run; runs already there are not redone.
        A relative path is taken from the caller's working directory (made absolute
        before runs are shipped, so remote workers write there too).
    backend : {"serial", "joblib", "dask"}, optional
        Default: ``"dask"`` when ``scheduler`` is given, else ``"serial"``.
    n_jobs : int, optional
        Parallel workers (joblib processes, or LocalCluster workers).
    scheduler : str, optional
        Address of a running Dask scheduler; without it a LocalCluster is started.
    plugin_dirs : sequence of paths
        Extra plugin folders (workers load them too).
    overrides : {optimizer name: {param: value}}
        As ``--set name.param=value``.
    problem_params : {problem name: {param: value}}
    optimum : bool
        Compute (or read from cache) P* so that ``suboptimality`` is filled.
    retry_failed : bool
        Rerun runs stored with status ``failed``.
    timeout : float, optional
        Hard wall-clock limit per run in seconds (evaluation included): each run then
        happens in a child process that is killed if it hangs, and is stored as
        ``failed`` with the checkpoints it reached.
    max_memory : int or str, optional
        Memory limit of an optimizer's state, bytes or ``"2G"`` (default: none). An
        optimizer that declines a problem under it (SDCA: the dual would not fit) is
        stored as ``skipped`` with the reason, which is not a failure; stored skipped
        runs are planned again on the next invocation.
    reporter : object, optional
        Progress callbacks (``crfopt.apps.cli`` passes a rich display).

    Examples
    --------
    >>> import crfopt
    >>> table = crfopt.compare("synthetic", "lbfgs", passes=3, out=tmp_path)  # doctest: +SKIP
    """
    budget = budget_of(passes, budget)
    backend = resolve_backend(backend, scheduler)
    # Workers (Dask's above all) run elsewhere: a relative folder would be resolved in
    # each worker's own working directory, scattering the results.
    out = Path(out).expanduser().absolute()
    if timeout is not None and timeout <= 0:
        raise ValueError("timeout must be positive")
    limit = None if max_memory is None else parse_bytes(max_memory)
    reg = get_registry(plugin_dirs)
    plan = plan_grid(
        split_list(problems),
        split_list(optimizers),
        seeds=seeds,
        budget=budget,
        checkpoints=checkpoints,
        out=out,
        plugin_dirs=plugin_dirs,
        overrides=overrides,
        problem_params=problem_params,
        max_memory=limit,
        retry_failed=retry_failed,
        registry=reg,
    )
    if plan.pending:
        _check_writable(plan.out_dir)
        if backend == "dask" and scheduler:
            check_scheduler(scheduler)
    if reporter is not None:
        reporter.planned(plan)
    # One cache for this process: the problem loaded for P* is the one serial runs use.
    cache = ProblemCache()
    if not optimum:
        _load_inputs(plan.pending, reg, cache)
    pending = _with_optimum(plan.pending, reg, cache, optimum, getattr(reporter, "message", None))
    if timeout is not None:
        pending = [t.with_(timeout=float(timeout)) for t in pending]
    if pending:
        serial = backend == "serial"
        on_cp = getattr(reporter, "checkpoint", None) if serial else None
        # a run's setup (a dual initialization, a first compile) can take minutes before
        # its first checkpoint: a reporter with started() names the run as it begins
        on_start = getattr(reporter, "started", None) if serial else None
        summaries = run_tasks(
            backend,
            pending,
            n_jobs=n_jobs,
            scheduler=scheduler,
            cache=cache,
            on_checkpoint=on_cp,
            on_start=on_start,
        )
        try:
            for summary in summaries:
                if reporter is not None:
                    reporter.finished(summary)
        except SchedulerUnreachableError:
            raise
        except OSError as exc:
            # execute_task stores every failure of a run (inputs included) in its
            # summary; what escapes it is writing the run's file.
            raise ResultsNotWritableError(plan.out_dir, exc) from exc
    return read_results(plan.out_dir, run_ids={t.run_id for t in plan.tasks})


def unsuccessful_runs(table: pd.DataFrame) -> pd.DataFrame:
    """The runs of a comparison table whose last checkpoint is ``failed`` or ``diverged``.

    One row per such run: ``run_id``, ``problem``, ``optimizer``, ``seed``, ``status`` and
    ``error`` (the exception of a failed run from its metadata; for a diverged run, what
    diverging means here). Runs kept from earlier invocations count too: the table is
    the whole grid.
    """
    cols = ["run_id", "problem", "optimizer", "seed", "status", "error"]
    if len(table) == 0:
        return pd.DataFrame(columns=cols)
    last = table.sort_values("checkpoint").groupby("run_id", sort=False).tail(1)
    bad = last[last["status"].isin(UNSUCCESSFUL)].sort_values(["problem", "optimizer", "seed"])
    runs = table.attrs.get("runs", {})

    def error(r: pd.Series) -> str:
        meta = runs.get(r["run_id"]) or {}
        if meta.get("error_summary"):
            return str(meta["error_summary"])
        if r["status"] == "diverged":
            return "non-finite weights or objective at a checkpoint"
        return "unknown error"

    out = bad[cols[:-1]].reset_index(drop=True)
    out["error"] = [error(r) for _, r in bad.iterrows()]
    return out


#: A run that stops on its budget with P(w) − P* (or, without P*, its duality gap) above
#: this fraction of P(0) is reported as far from the optimum: at 1 % of the objective at
#: w = 0 the weights are still visibly short of the optimum in test error and
#: sub-optimality curves, while every built-in method reaches it within its default
#: budget on the built-in problems, so the note does not cry wolf.
FAR_FROM_OPTIMUM = 1e-2


def distance_from_optimum(
    row: Mapping[str, Any], p0: float | None
) -> tuple[str, float, float] | None:
    """(measure, value, value / P(0)) of a run's last checkpoint, or None if unknown.

    The measure is the sub-optimality P(w) − P* when P* is known, else the duality gap
    (an upper bound on it, loose for primal methods whose gap uses ν(w)).
    """
    if p0 is None or not p0 > 0:
        return None
    for column, measure in (("suboptimality", "P(w) - P*"), ("duality_gap", "duality gap")):
        value = row.get(column)
        if value is not None and not pd.isna(value):
            return measure, float(value), float(value) / float(p0)
    return None


def far_from_optimum(table: pd.DataFrame, threshold: float = FAR_FROM_OPTIMUM) -> pd.DataFrame:
    """The runs that ended on their budget (status ``budget``) far from the optimum.

    One row per such run: ``run_id``, ``problem``, ``optimizer``, ``seed``,
    ``effective_passes``, ``measure`` ("P(w) - P*" or "duality gap"), ``value`` and
    ``relative`` (value / P(0), above ``threshold``).
    """
    cols = ["run_id", "problem", "optimizer", "seed", "effective_passes", "measure", "value"]
    cols += ["relative"]
    if len(table) == 0:
        return pd.DataFrame(columns=cols)
    last = table.sort_values("checkpoint").groupby("run_id", sort=False).tail(1)
    runs = table.attrs.get("runs", {})
    rows = []
    for _, r in last[last["status"] == "budget"].iterrows():
        found = distance_from_optimum(r, (runs.get(r["run_id"]) or {}).get("P0"))
        if found is not None and found[2] > threshold:
            rows.append([*(r[c] for c in cols[:5]), *found])
    out = pd.DataFrame(rows, columns=cols)
    return out.sort_values(["problem", "optimizer", "seed"]).reset_index(drop=True)


def skipped_runs(table: pd.DataFrame) -> pd.DataFrame:
    """The runs of a comparison table that their optimizer declined (status ``skipped``).

    One row per such run: ``run_id``, ``problem``, ``optimizer``, ``seed`` and
    ``reason`` (what the optimizer's ``decline`` said).
    """
    cols = ["run_id", "problem", "optimizer", "seed", "reason"]
    if len(table) == 0:
        return pd.DataFrame(columns=cols)
    last = table.sort_values("checkpoint").groupby("run_id", sort=False).tail(1)
    skipped = last[last["status"] == "skipped"].sort_values(["problem", "optimizer", "seed"])
    runs = table.attrs.get("runs", {})
    out = skipped[cols[:-1]].reset_index(drop=True)
    out["reason"] = [
        str((runs.get(rid) or {}).get("skip_reason") or "declined") for rid in skipped["run_id"]
    ]
    return out


__all__ = [
    "BACKENDS",
    "FAR_FROM_OPTIMUM",
    "UNSUCCESSFUL",
    "Budget",
    "GridPlan",
    "ResultsNotWritableError",
    "RunTask",
    "compare",
    "distance_from_optimum",
    "execute_task",
    "far_from_optimum",
    "parse_optimizer",
    "plan_grid",
    "run",
    "skipped_runs",
    "split_list",
    "unsuccessful_runs",
]
