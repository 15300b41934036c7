"""Backends: where the pending runs of a grid execute — in this process, in local
processes (joblib) or on a Dask cluster. Each yields one summary per finished run, in
the order runs finish; every worker loads its own problems and writes its own files.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from crfopt.bench.execute import ProblemCache, execute_task
from crfopt.bench.plan import RunTask

Summaries = Iterator[dict[str, Any]]
OnCheckpoint = Callable[[RunTask, dict[str, Any]], None]


def run_serial(
    tasks: Sequence[RunTask],
    *,
    cache: ProblemCache | None = None,
    on_checkpoint: OnCheckpoint | None = None,
    on_start: OnCheckpoint | None = None,
) -> Summaries:
    """One run after the other in this process, sharing ``cache`` (and live progress:
    ``on_start(task, meta)`` before a run's setup, which may compile or initialize a dual
    for a while, then ``on_checkpoint(task, row)``)."""
    cache = cache if cache is not None else ProblemCache()
    for t in tasks:
        cb = (lambda row, t=t: on_checkpoint(t, row)) if on_checkpoint else None
        started = (lambda meta, t=t: on_start(t, meta)) if on_start else None
        yield execute_task(t, cb, started, cache=cache, backend="serial")


def _single_threaded(tasks: Sequence[RunTask]) -> list[RunTask]:
    # Parallel runs: each worker uses one thread so runs do not fight for cores.
    return [t.with_(threads=1) for t in tasks]


def run_joblib(tasks: Sequence[RunTask], *, n_jobs: int) -> Summaries:
    """Local worker processes (joblib's loky); each keeps its own problem cache."""
    from joblib import Parallel, delayed

    yield from Parallel(n_jobs=n_jobs, return_as="generator_unordered")(
        delayed(execute_task)(t, backend="joblib") for t in _single_threaded(tasks)
    )


class SchedulerUnreachableError(ConnectionError):
    """No Dask scheduler answers at the given address (a malformed address is a
    ValueError: a usage error, not an unreachable service)."""


def connect(scheduler: str, timeout: float | None = None) -> Any:
    """A ``distributed.Client`` of the scheduler at ``scheduler``.

    Raises :class:`SchedulerUnreachableError` naming the address and how to start a
    scheduler, instead of distributed's bare "Timed out trying to connect".
    ``timeout`` (s) defaults to Dask's ``distributed.comm.timeouts.connect``.
    """
    try:
        from distributed import Client
    except ImportError as exc:  # pragma: no cover - dask is a test dependency
        raise RuntimeError("the dask backend needs `pip install crfopt[dask]`") from exc
    # Client's own default is a sentinel, not None: pass a timeout only when given.
    kwargs = {} if timeout is None else {"timeout": timeout}
    try:
        return Client(scheduler, **kwargs)
    except (OSError, TimeoutError) as exc:
        raise SchedulerUnreachableError(
            f"cannot reach the Dask scheduler at {scheduler} ({exc}); start one with "
            f"`dask scheduler` and workers with `dask worker ADDRESS`, or check the address"
        ) from exc


def check_scheduler(scheduler: str) -> None:
    """Connect once and disconnect: an unreachable scheduler fails before any work (P*
    can take minutes), not after it."""
    connect(scheduler).close()


# A grid's own cluster has no dashboard, so what feeds one is overhead: each worker's
# statistical profiler and system monitor, and every process's event-loop tick.
QUIET_CLUSTER = {
    "distributed.worker.profile.enabled": False,
    "distributed.admin.system-monitor.interval": "5s",
    "distributed.admin.tick.interval": "1s",
    "distributed.worker.memory.monitor-interval": "1s",
}


def local_cluster(n_jobs: int) -> Any:
    """A LocalCluster of ``n_jobs`` single-threaded worker processes, configured for
    long CPU-bound runs (``QUIET_CLUSTER``; the caller's Dask configuration is left as
    it was).

    With both cores running tasks, the background work of an idle 2-worker cluster
    (about 7 % of one core, measured) comes out of the runs: the 4-run grid of
    benchmarks/performance.py took 21.8 s with Dask's defaults and 21.2 s with these
    settings (means of 7 alternating runs each), against 19.4 s with joblib.
    """
    import dask
    from distributed import LocalCluster

    with dask.config.set(QUIET_CLUSTER):  # read when the scheduler and nannies start
        return LocalCluster(
            n_workers=n_jobs, threads_per_worker=1, processes=True, dashboard_address=None
        )


def run_dask(tasks: Sequence[RunTask], *, n_jobs: int, scheduler: str | None = None) -> Summaries:
    """A running Dask scheduler at ``scheduler``, or a LocalCluster of ``n_jobs`` workers."""
    try:
        from distributed import Client, as_completed
    except ImportError as exc:  # pragma: no cover - dask is a test dependency
        raise RuntimeError("the dask backend needs `pip install crfopt[dask]`") from exc
    cluster = None
    if scheduler:
        client = connect(scheduler)
    else:
        cluster = local_cluster(n_jobs)
        client = Client(cluster)
    try:
        futures = client.map(execute_task, _single_threaded(tasks), pure=False, backend="dask")
        for fut in as_completed(futures):
            yield fut.result()
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


BACKENDS = ("serial", "joblib", "dask")


def check_backend(backend: str) -> None:
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")


def resolve_backend(backend: str | None, scheduler: str | None) -> str:
    """The backend a comparison runs on: a scheduler address means Dask.

    ``backend=None`` is Dask when ``scheduler`` is given, else serial; a scheduler with
    an explicit non-Dask backend is a contradiction, refused rather than ignored.
    """
    if backend is None:
        return "dask" if scheduler else "serial"
    check_backend(backend)
    if scheduler and backend != "dask":
        raise ValueError(
            f"a scheduler address ({scheduler}) runs on the dask backend, not {backend!r}; "
            "drop the backend or choose dask"
        )
    return backend


def run_tasks(
    backend: str,
    tasks: Sequence[RunTask],
    *,
    n_jobs: int | None = None,
    scheduler: str | None = None,
    cache: ProblemCache | None = None,
    on_checkpoint: OnCheckpoint | None = None,
    on_start: OnCheckpoint | None = None,
) -> Summaries:
    """Execute ``tasks`` on ``backend``; live starts and checkpoints only in the serial
    backend."""
    check_backend(backend)
    if backend == "serial":
        return run_serial(tasks, cache=cache, on_checkpoint=on_checkpoint, on_start=on_start)
    workers = n_jobs or min(len(tasks), os.cpu_count() or 1)
    if backend == "joblib":
        return run_joblib(tasks, n_jobs=workers)
    return run_dask(tasks, n_jobs=workers, scheduler=scheduler)


__all__ = [
    "BACKENDS",
    "SchedulerUnreachableError",
    "check_backend",
    "check_scheduler",
    "connect",
    "resolve_backend",
    "run_dask",
    "run_joblib",
    "run_serial",
    "run_tasks",
]
