"""Execution of one planned run: load its problem, run it, write its file.

:func:`execute_task` never raises for an optimizer's failure: the run is stored as
``failed`` (or ``skipped`` when the optimizer declined it) and a summary is returned for
the progress display. With a timeout the run happens in a child process that is killed
at the hard limit. Problems are kept by a :class:`ProblemCache` object: the caller
passes one (serial runs share the one that computed P*), and a worker process that is
given none uses its own, so consecutive runs of one problem load it once.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
from collections.abc import Callable, Mapping
from typing import Any

from crfopt.bench.plan import RunTask, claim_run
from crfopt.bench.problems import load_from
from crfopt.bench.results import COLUMNS, canonical_json, run_path, to_frame, write_run
from crfopt.bench.runner import Budget, run
from crfopt.core.problem import CRFProblem, ProblemChangedError
from crfopt.kernels.jit import JIT_ENABLED
from crfopt.optim.contract import display_name
from crfopt.optim.registry import Registry, get_registry


class ProblemCache:
    """Loaded problems by (name, parameters), keeping the last ``size`` of them.

    One per worker: a grid's runs are ordered problem by problem, so one entry is enough
    to load each problem once per worker while never holding two large corpora.
    """

    def __init__(self, size: int = 1) -> None:
        if size < 1:
            raise ValueError("a problem cache holds at least one problem")
        self.size = size
        self._problems: dict[str, CRFProblem] = {}
        self.loads = 0  # how many problems were loaded (tests, diagnostics)

    def get(self, reg: Registry, name: str, params: Mapping[str, Any]) -> CRFProblem:
        key = canonical_json({"name": name, "params": dict(params)})
        if key in self._problems:
            self._problems[key] = self._problems.pop(key)  # most recently used last
            return self._problems[key]
        while len(self._problems) >= self.size:
            self._problems.pop(next(iter(self._problems)))
        problem = load_from(reg, name, **params)
        self.loads += 1
        self._problems[key] = problem
        return problem

    def discard(self, name: str, params: Mapping[str, Any]) -> None:
        """Forget one problem (a run changed it), so that the next :meth:`get` reloads it."""
        self._problems.pop(canonical_json({"name": name, "params": dict(params)}), None)

    def clear(self) -> None:
        self._problems.clear()


_worker: tuple[int, ProblemCache] | None = None


def worker_cache() -> ProblemCache:
    """This process's cache, for tasks sent to a worker without one (joblib, Dask).

    Keyed by process id, so a forked worker starts empty instead of sharing (and
    mutating) a copy of its parent's.
    """
    global _worker
    if _worker is None or _worker[0] != os.getpid():
        _worker = (os.getpid(), ProblemCache())
    return _worker[1]


def worker_name() -> str:
    """Who computes a run: the Dask worker's address inside a Dask worker, else
    ``host:pid`` (a joblib worker, the serial caller, an isolated run's parent)."""
    if "distributed" in sys.modules:  # never import Dask just to ask (serial start-up)
        from distributed import get_worker

        try:
            return str(get_worker().address)
        except ValueError:  # not inside a Dask worker
            pass
    return f"{socket.gethostname()}:{os.getpid()}"


def _kernel_threads() -> int:
    """Threads the kernels may use in this thread: numba's setting, 1 on the NumPy path."""
    if not JIT_ENABLED:
        return 1
    import numba

    return int(numba.get_num_threads())


def load_average() -> float | None:
    """The machine's 1-minute load average (None where the OS has none, e.g. Windows).

    Recorded at a run's start and end (``load_average`` in its metadata): seconds are
    comparable only between runs that had the machine to themselves, and this is the
    record that says whether they did — a serial grid on an idle machine reads about the
    run's own thread count, anything above it is another process."""
    try:
        return round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):
        return None


def _with_place(trace: Any, place: Mapping[str, Any]) -> Any:
    """``trace`` with its ``backend``, ``threads`` and ``worker`` columns filled."""
    import pandas as pd

    trace = trace.copy()
    for col, value in place.items():
        trace[col] = pd.Series([value] * len(trace), dtype=COLUMNS[col], index=trace.index)
    return trace


def _summary(task: RunTask, status: str, error: str | None, **extra: Any) -> dict[str, Any]:
    return {"run_id": task.run_id, "label": task.label, "status": status, "error": error, **extra}


def execute_task(
    task: RunTask,
    on_checkpoint: Callable[[dict[str, Any]], None] | None = None,
    on_start: Callable[[dict[str, Any]], None] | None = None,
    cache: ProblemCache | None = None,
    *,
    claim: bool = True,
    backend: str = "serial",
    worker: str | None = None,
) -> dict[str, Any]:
    """Perform one run and write its file. Never raises for an optimizer's failure.

    The run's lock is held throughout (:func:`crfopt.bench.plan.claim_run`; ``claim``
    False: the caller holds it), so a run another process is computing is waited for
    and then reported from its file instead of being computed twice.

    With ``task.timeout`` the run happens in a child process that is killed when the
    hard wall-clock limit passes (a compiled loop cannot be interrupted otherwise); the
    checkpoints it reported are kept and the run is stored as ``failed``.

    Every row of the run's file records ``backend`` (the backend that dispatched it),
    ``threads`` (the kernels' thread count during the run) and ``worker`` (``worker``,
    default :func:`worker_name`), so a report can tell which seconds are comparable.
    """
    worker = worker if worker is not None else worker_name()
    if claim:
        with claim_run(task) as done:
            if done is not None:  # computed by another process meanwhile
                return _summary(
                    task, done["status"], done["error"], written=False, last=done["last"]
                )
            return execute_task(
                task, on_checkpoint, on_start, cache, claim=False, backend=backend, worker=worker
            )
    if task.timeout is not None:
        return execute_isolated(task, on_checkpoint, backend=backend, worker=worker)
    if task.threads is not None and JIT_ENABLED:
        import numba

        numba.set_num_threads(max(1, min(task.threads, numba.config.NUMBA_NUM_THREADS)))
    cache = cache if cache is not None else worker_cache()
    reg = get_registry(task.plugin_dirs)
    try:
        spec = reg.optimizer(task.optimizer)
        problem = cache.get(reg, task.problem, task.problem_params)
    except Exception as exc:
        return _summary(task, "failed", f"{type(exc).__name__}: {exc}", written=False)

    load_start = load_average()

    def attempt(problem: CRFProblem) -> Any:
        return run(
            problem,
            spec,
            seed=task.seed,
            params=task.overrides,
            budget=Budget(**task.budget),
            checkpoints=task.checkpoints,
            p_star=task.p_star,
            max_memory=task.max_memory,
            on_checkpoint=on_checkpoint,
            on_start=on_start,
            run_id=task.run_id,
            problem_label=task.problem,
            registry=reg,  # its metrics, --plugin-dir ones included
        )

    try:
        result = attempt(problem)
    except ProblemChangedError:
        # Changed after an earlier run's check (e.g. by a thread that run left
        # behind): this run is not to blame; it runs on a fresh load.
        cache.discard(task.problem, task.problem_params)
        try:
            problem = cache.get(reg, task.problem, task.problem_params)
        except Exception as exc:
            return _summary(task, "failed", f"{type(exc).__name__}: {exc}", written=False)
        result = attempt(problem)
    changed = bool(result.meta.get("problem_changed"))
    if changed:  # the run wrote to the problem: the next run gets it loaded afresh
        cache.discard(task.problem, task.problem_params)
    meta = {
        "run_id": task.run_id,
        "config": dict(task.config),
        **result.meta,
        "load_average": {"start": load_start, "end": load_average()},
    }
    place = {"backend": backend, "threads": _kernel_threads(), "worker": worker}
    write_run(run_path(task.out_dir, task.run_id), _with_place(result.trace, place), meta)
    if not changed and result.meta.get("p_star") is not None and "dual" in result.trace:
        duals = result.trace["dual"].dropna()
        if len(duals):
            from crfopt.bench.optimum import record_dual

            with contextlib.suppress(Exception):
                record_dual(problem, float(duals.max()))
    error = result.meta.get("skip_reason") or result.meta.get("error_summary")
    return _summary(task, result.status, error, written=True, last=result.trace.iloc[-1].to_dict())


def write_killed(
    task: RunTask,
    rows: list[dict[str, Any]],
    meta: Mapping[str, Any],
    error: str,
    *,
    backend: str | None = None,
    worker: str | None = None,
) -> dict[str, Any]:
    """Store a run whose process was killed or died: its reported rows, then ``failed``.

    ``threads`` is what the task asked for (null when it did not: the dead child's
    setting is unknown)."""
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
    write_run(
        run_path(task.out_dir, task.run_id),
        _with_place(
            to_frame([*rows, last], meta.get("metrics", ())),
            {"backend": backend, "threads": task.threads, "worker": worker},
        ),
        {
            "run_id": task.run_id,
            "config": dict(task.config),
            **meta,
            "status": "failed",
            "error": error,
            "error_summary": error,
        },
    )
    return _summary(task, "failed", error, written=True, last=last)


def _child_main(task: RunTask, conn: Any, backend: str, worker: str | None) -> None:
    """Entry point of an isolated run: stream rows to the parent, then the summary."""
    try:
        summary = execute_task(
            task,
            on_checkpoint=lambda row: conn.send(("row", row)),
            on_start=lambda meta: conn.send(("start", meta)),
            claim=False,  # the parent holds the run's lock
            backend=backend,
            worker=worker,  # the parent's identity: the child is its helper process
        )
        conn.send(("done", summary))
    finally:
        conn.close()


def execute_isolated(
    task: RunTask,
    on_checkpoint: Callable[[dict[str, Any]], None] | None = None,
    *,
    backend: str = "serial",
    worker: str | None = None,
) -> dict[str, Any]:
    """Run ``task`` in a spawned child and kill it at ``task.timeout`` seconds."""
    import multiprocessing
    import time

    ctx = multiprocessing.get_context("spawn")  # no inherited threads or locks
    recv_end, send_end = ctx.Pipe(duplex=False)
    worker = worker if worker is not None else worker_name()
    args = (task.with_(timeout=None), send_end, backend, worker)
    proc = ctx.Process(target=_child_main, args=args, daemon=True)
    proc.start()
    send_end.close()
    rows: list[dict[str, Any]] = []
    meta: dict[str, Any] = {}
    summary = None
    deadline = time.monotonic() + float(task.timeout or 0.0)
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
    return write_killed(task, rows, meta, error, backend=backend, worker=worker)


__all__ = [
    "ProblemCache",
    "execute_isolated",
    "execute_task",
    "worker_cache",
    "worker_name",
    "write_killed",
]
