"""Comparisons: a grid of (problem × optimizer × parameters × seed) runs → one table.

The grid is expanded into :class:`RunTask` records — names and values only, so they can
be hashed into run ids, pickled to worker processes and rebuilt there. Runs whose result
file already exists are skipped *before* any data is loaded or any work is handed to a
backend; the rest run serially, in local processes (joblib) or on a Dask cluster, each
worker loading its own problem and writing its own file atomically. The returned table
is the union of all the grid's files, read back from disk.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from crfopt._version import __version__
from crfopt.bench.problems import is_corpus_path, load_from
from crfopt.bench.results import read_results, result_files, run_key, run_path, write_run
from crfopt.bench.runner import Budget, Schedule, run
from crfopt.optim.contract import ParameterError, display_name
from crfopt.optim.parse import parse_value
from crfopt.optim.registry import Registry, get_registry

BACKENDS = ("serial", "joblib", "dask")

#: Final statuses that make ``crfopt compare`` exit 1 (unless ``--allow-failures``).
UNSUCCESSFUL = ("failed", "diverged")

_SPEC_RE = re.compile(r"^\s*([a-z][a-z0-9*-]*)\s*(?:\[(.*)\])?\s*$")


def parse_optimizer(text: str) -> tuple[str, dict[str, Any]]:
    """``"sdca-gap[non_uniformity=0.5,sampler=gap]"`` → (name, overrides)."""
    m = _SPEC_RE.match(text)
    if not m:
        raise ParameterError(
            f"bad optimizer selection {text!r}: expected NAME or NAME[param=value,...]"
        )
    name, inner = m.group(1), m.group(2)
    overrides: dict[str, Any] = {}
    if inner:
        for part in inner.split(","):
            if not part.strip():
                continue
            if "=" not in part:
                raise ParameterError(f"bad override {part!r} in {text!r}: expected param=value")
            k, v = part.split("=", 1)
            overrides[k.strip()] = parse_value(v.strip())
    return name, overrides


def split_list(text: str | Sequence[str]) -> list[str]:
    """Comma-separated selections; commas inside [...] do not split."""
    if not isinstance(text, str):
        return [t for item in text for t in split_list(item)]
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        if ch == "," and depth == 0:
            if cur.strip():
                out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


@dataclass(frozen=True)
class RunTask:
    """Everything a worker needs to perform one run; plain data, picklable."""

    run_id: str
    problem: str
    problem_params: Mapping[str, Any]
    optimizer: str
    overrides: Mapping[str, Any]
    seed: int
    budget: Mapping[str, Any]
    checkpoints: Any
    out_dir: str
    plugin_dirs: tuple[str, ...] = ()
    p_star: float | None = None
    threads: int | None = None
    timeout: float | None = None
    config: Mapping[str, Any] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return f"{self.problem} · {display_name(self.optimizer, self.overrides)} · seed {self.seed}"


_problem_cache: dict[str, Any] = {}


def _file_digest(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def problem_identity(reg: Registry, name: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """What identifies a problem in a run key, computed without loading its data.

    Registered problems are identified by name and parameters (the crfopt version in
    the key covers built-in templates); a user corpus by its path and content hash, and
    the content hash of any file parameter (test split, template file).
    """
    ident: dict[str, Any] = {"name": name, "params": dict(params)}
    if name not in reg.problems and Path(name).is_file():
        ident["sha256"] = _file_digest(name)
    for k, v in params.items():
        if isinstance(v, str) and (os.sep in v or "." in v) and Path(v).is_file():
            ident.setdefault("files", {})[k] = _file_digest(v)
    return ident


def load_problem_cached(reg: Registry, name: str, params: Mapping[str, Any]):
    """Load a problem once per process (workers run several runs of one problem)."""
    from crfopt.bench.results import canonical_json

    key = canonical_json({"name": name, "params": dict(params)})
    if key not in _problem_cache:
        _problem_cache.clear()  # keep one problem in memory per worker
        _problem_cache[key] = load_from(reg, name, **params)
    return _problem_cache[key]


def execute_task(
    task: RunTask,
    on_checkpoint: Callable[[dict[str, Any]], None] | None = None,
    on_start: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Perform one run and write its file. Never raises for an optimizer's failure.

    With ``task.timeout`` the run happens in a child process that is killed when the
    hard wall-clock limit passes (a compiled loop cannot be interrupted otherwise); the
    checkpoints it reported are kept and the run is stored as ``failed``.
    """
    if task.timeout is not None:
        return _execute_isolated(task, on_checkpoint)
    if task.threads is not None:
        from crfopt.kernels.jit import JIT_ENABLED

        if JIT_ENABLED:
            import numba

            numba.set_num_threads(max(1, min(task.threads, numba.config.NUMBA_NUM_THREADS)))
    reg = get_registry(task.plugin_dirs)
    try:
        spec = reg.optimizer(task.optimizer)
        problem = load_problem_cached(reg, task.problem, task.problem_params)
    except Exception as exc:
        return {
            "run_id": task.run_id,
            "label": task.label,
            "status": "failed",
            "error": f"{type(exc).__name__}: {exc}",
            "written": False,
        }
    result = run(
        problem,
        spec,
        seed=task.seed,
        params=task.overrides,
        budget=Budget(**task.budget),
        checkpoints=task.checkpoints,
        p_star=task.p_star,
        on_checkpoint=on_checkpoint,
        on_start=on_start,
        run_id=task.run_id,
        problem_label=task.problem,
    )
    meta = {"run_id": task.run_id, "config": dict(task.config), **result.meta}
    write_run(run_path(task.out_dir, task.run_id), result.trace, meta)
    if result.meta.get("p_star") is not None and "dual" in result.trace:
        duals = result.trace["dual"].dropna()
        if len(duals):
            from crfopt.bench.optimum import record_dual

            with contextlib.suppress(Exception):
                record_dual(problem, float(duals.max()))
    last = result.trace.iloc[-1].to_dict()
    return {
        "run_id": task.run_id,
        "label": task.label,
        "status": result.status,
        "error": result.meta.get("error_summary"),
        "written": True,
        "last": last,
    }


def _child_main(task: RunTask, conn: Any) -> None:
    """Entry point of an isolated run: stream rows to the parent, then the summary."""
    try:
        summary = execute_task(
            task,
            on_checkpoint=lambda row: conn.send(("row", row)),
            on_start=lambda meta: conn.send(("start", meta)),
        )
        conn.send(("done", summary))
    finally:
        conn.close()


def _execute_isolated(
    task: RunTask, on_checkpoint: Callable[[dict[str, Any]], None] | None
) -> dict[str, Any]:
    import multiprocessing
    import time

    from crfopt.bench.results import to_frame

    ctx = multiprocessing.get_context("spawn")  # no inherited threads or locks
    recv_end, send_end = ctx.Pipe(duplex=False)
    child_task = RunTask(**{**asdict(task), "timeout": None})
    proc = ctx.Process(target=_child_main, args=(child_task, send_end), daemon=True)
    proc.start()
    send_end.close()
    rows: list[dict[str, Any]] = []
    meta: dict[str, Any] = {}
    summary = None
    deadline = time.monotonic() + float(task.timeout)
    try:
        while summary is None and time.monotonic() < deadline:
            if recv_end.poll(min(0.2, max(0.0, deadline - time.monotonic()))):
                try:
                    kind, payload = recv_end.recv()
                except EOFError:
                    break
                if kind == "row":
                    rows.append(payload)
                    if on_checkpoint is not None:
                        on_checkpoint(payload)
                elif kind == "start":
                    meta = payload
                else:
                    summary = payload
            elif not proc.is_alive():
                break
    finally:
        if proc.is_alive():
            proc.kill()
        proc.join()
        recv_end.close()
    if summary is not None:
        return summary
    if time.monotonic() >= deadline:
        error = (
            f"TimeoutError: the run exceeded its hard limit of {task.timeout:g} s "
            "wall-clock and was killed"
        )
    else:
        error = f"RuntimeError: the worker process died (exit code {proc.exitcode})"
    last = (
        dict(rows[-1])
        if rows
        else {
            "problem": task.problem,
            "optimizer": display_name(task.optimizer, task.overrides),
            "seed": task.seed,
            "run_id": task.run_id,
            "checkpoint": 0,
        }
    )
    last["status"] = "failed"
    if rows:
        last["checkpoint"] = int(rows[-1].get("checkpoint", 0)) + 1
    frame = to_frame([*rows, last])
    write_run(
        run_path(task.out_dir, task.run_id),
        frame,
        {
            "run_id": task.run_id,
            "config": dict(task.config),
            **meta,
            "status": "failed",
            "error": error,
            "error_summary": error,
        },
    )
    return {
        "run_id": task.run_id,
        "label": task.label,
        "status": "failed",
        "error": error,
        "written": True,
        "last": last,
    }


@dataclass
class GridPlan:
    """The expanded grid: every task, and which of them still have to run."""

    tasks: list[RunTask]
    pending: list[RunTask]
    out_dir: Path

    @property
    def done(self) -> list[RunTask]:
        ids = {t.run_id for t in self.pending}
        return [t for t in self.tasks if t.run_id not in ids]


def _check_writable(out_dir: Path) -> None:
    """Fail before any work when results cannot be stored (read-only folder, a file in
    the way, no space for even an empty file), not after the first hour of a grid."""
    out_dir.mkdir(parents=True, exist_ok=True)
    fd, probe = tempfile.mkstemp(prefix=".tmp-probe-", dir=out_dir)
    os.close(fd)
    os.unlink(probe)


def plan_grid(
    problems: Sequence[str],
    optimizers: Sequence[str],
    *,
    seeds: Iterable[int] = (0,),
    budget: Budget | None = None,
    checkpoints: str | Sequence[float] = "default",
    out: str | os.PathLike[str] = "results",
    plugin_dirs: Sequence[str] = (),
    overrides: Mapping[str, Mapping[str, Any]] | None = None,
    problem_params: Mapping[str, Mapping[str, Any]] | None = None,
    retry_failed: bool = False,
    registry: Registry | None = None,
) -> GridPlan:
    """Expand the grid and find the runs that are not on disk yet (no data loaded)."""
    reg = registry or get_registry(plugin_dirs)
    budget = budget or Budget()
    schedule = Schedule(checkpoints)
    overrides = {k: dict(v) for k, v in (overrides or {}).items()}
    problem_params = {k: dict(v) for k, v in (problem_params or {}).items()}
    known = {name for name, _ in (parse_optimizer(o) for o in optimizers)} | set(problems)
    stray = sorted(set(overrides) - known)
    if stray:
        raise ParameterError(
            f"--set names {', '.join(stray)}, which is neither a selected optimizer nor a problem"
        )
    out_dir = Path(out)
    selections: list[tuple[str, dict[str, Any]]] = []
    for text in optimizers:
        name, inline = parse_optimizer(text)
        spec = reg.optimizer(name)
        merged = {**overrides.get(name, {}), **inline}
        spec.resolve(merged)  # validate now: a usage error, before any work
        selections.append((name, merged))
    tasks = []
    for prob in problems:
        params = dict(problem_params.get(prob, {}))
        if prob in reg.problems:
            unknown = sorted(set(params) - set(reg.problems[prob].defaults))
            if unknown:
                raise ParameterError(
                    f"problem {prob!r}: unknown parameter(s) {', '.join(unknown)}; valid "
                    f"parameters: {', '.join(sorted(reg.problems[prob].defaults))}"
                )
        elif is_corpus_path(reg, prob):
            from crfopt.bench.problems import check_corpus_params

            try:
                check_corpus_params(params)
            except ValueError as exc:
                raise ParameterError(str(exc)) from None
        else:
            reg.problem(prob)  # raises UnknownNameError with the choices
        ident = problem_identity(reg, prob, params)
        for name, merged in selections:
            resolved = reg.optimizer(name).resolve(merged)
            for seed in seeds:
                config = {
                    "problem": ident,
                    "optimizer": name,
                    "params": resolved,
                    "seed": int(seed),
                    "budget": budget.as_dict(),
                    "checkpoints": schedule.describe(),
                    "crfopt": __version__,
                    "jit": os.environ.get("CRFOPT_DISABLE_JIT", "") in ("", "0"),
                }
                rid = run_key(config)
                tasks.append(
                    RunTask(
                        run_id=rid,
                        problem=prob,
                        problem_params=params,
                        optimizer=name,
                        overrides=merged,
                        seed=int(seed),
                        budget=budget.as_dict(),
                        checkpoints=schedule.describe(),
                        out_dir=str(out_dir),
                        plugin_dirs=tuple(str(p) for p in plugin_dirs),
                        config=config,
                    )
                )
    existing = (
        {f.stem.removeprefix("run-") for f in result_files(out_dir)} if out_dir.exists() else set()
    )
    if retry_failed and existing:
        failed = read_results(out_dir, run_ids={t.run_id for t in tasks} & existing)
        bad = set(failed.loc[failed["status"] == "failed", "run_id"].dropna())
        existing -= bad
    seen: set[str] = set()
    pending = []
    for t in tasks:
        if t.run_id in existing or t.run_id in seen:
            continue
        seen.add(t.run_id)
        pending.append(t)
    return GridPlan(tasks, pending, out_dir)


def _with_optimum(plan: GridPlan, reg: Registry, optimum: bool, progress: Any) -> list[RunTask]:
    """Attach the cached (or freshly computed) P* of each problem to its pending runs."""
    if not optimum:
        return plan.pending
    from crfopt.bench.optimum import reference_optimum

    p_stars: dict[str, float] = {}
    out = []
    for t in plan.pending:
        key = f"{t.problem}|{sorted(t.problem_params.items())}"
        if key not in p_stars:
            problem = load_problem_cached(reg, t.problem, t.problem_params)
            if progress is not None:
                progress(f"reference optimum of {t.problem}")
            p_stars[key] = reference_optimum(problem).p_star
        out.append(RunTask(**{**asdict(t), "p_star": p_stars[key]}))
    return out


def _iter_backend(
    backend: str,
    tasks: list[RunTask],
    n_jobs: int | None,
    scheduler: str | None,
    on_checkpoint: Callable[[RunTask, dict[str, Any]], None] | None,
) -> Iterator[dict[str, Any]]:
    if backend == "serial":
        for t in tasks:
            cb = (lambda row, t=t: on_checkpoint(t, row)) if on_checkpoint else None
            yield execute_task(t, cb)
        return
    workers = n_jobs or min(len(tasks), os.cpu_count() or 1)
    # Parallel runs: each worker uses one thread so runs do not fight for cores.
    tasks = [RunTask(**{**asdict(t), "threads": 1}) for t in tasks]
    if backend == "joblib":
        from joblib import Parallel, delayed

        yield from Parallel(n_jobs=workers, return_as="generator_unordered")(
            delayed(execute_task)(t) for t in tasks
        )
        return
    if backend == "dask":
        try:
            from distributed import Client, LocalCluster, as_completed
        except ImportError as exc:  # pragma: no cover - dask is a test dependency
            raise RuntimeError("the dask backend needs `pip install crfopt[dask]`") from exc
        cluster = None
        if scheduler:
            client = Client(scheduler)
        else:
            cluster = LocalCluster(
                n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None
            )
            client = Client(cluster)
        try:
            futures = client.map(execute_task, tasks, pure=False)
            for fut in as_completed(futures):
                yield fut.result()
        finally:
            client.close()
            if cluster is not None:
                cluster.close()
        return
    raise ValueError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")


def compare(
    problems: str | Sequence[str],
    optimizers: str | Sequence[str],
    *,
    seeds: Iterable[int] = (0,),
    passes: float | None = None,
    budget: Budget | None = None,
    checkpoints: str | Sequence[float] = "default",
    out: str | os.PathLike[str] = "results",
    backend: str = "serial",
    n_jobs: int | None = None,
    scheduler: str | None = None,
    plugin_dirs: Sequence[str] = (),
    overrides: Mapping[str, Mapping[str, Any]] | None = None,
    problem_params: Mapping[str, Mapping[str, Any]] | None = None,
    optimum: bool = True,
    retry_failed: bool = False,
    timeout: float | None = None,
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
        Shorthand for ``Budget(passes=passes)``.
    budget : Budget, optional
    checkpoints : str or list of float
        See :class:`crfopt.Schedule`.
    out : path
        Results folder: one Parquet file per run; runs already there are not redone.
    backend : {"serial", "joblib", "dask"}
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
    reporter : object, optional
        Progress callbacks (``crfopt.apps.cli`` passes a rich display).

    Examples
    --------
    >>> import crfopt
    >>> table = crfopt.compare("synthetic", "lbfgs", passes=3, out=tmp_path)  # doctest: +SKIP
    """
    if budget is not None and passes is not None:
        raise ValueError("give either passes or budget, not both")
    if budget is None:
        budget = Budget(passes=passes if passes is not None else 10.0)
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")
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
        retry_failed=retry_failed,
        registry=reg,
    )
    if plan.pending:
        _check_writable(plan.out_dir)
    if reporter is not None:
        reporter.planned(plan)
    pending = _with_optimum(plan, reg, optimum, getattr(reporter, "message", None))
    if timeout is not None:
        if timeout <= 0:
            raise ValueError("timeout must be positive")
        pending = [RunTask(**{**asdict(t), "timeout": float(timeout)}) for t in pending]
    if pending:
        on_cp = getattr(reporter, "checkpoint", None) if backend == "serial" else None
        for summary in _iter_backend(backend, pending, n_jobs, scheduler, on_cp):
            if reporter is not None:
                reporter.finished(summary)
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
