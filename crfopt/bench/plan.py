"""Grid planning: problems × optimizers × seeds → :class:`RunTask` records with run ids.

A task holds names and values only, so it can be hashed into its run id, pickled to a
worker process and rebuilt there. :func:`expand_grid` is pure apart from hashing the
content of file problems: it validates every selection and parameter (a usage error
before any work) and loads no data. :func:`pending` then looks at the results folder to
find what still has to run, verifying every stored run of the grid (a damaged file is
moved aside and its run planned again). :func:`claim_run` is the per-run lock that
makes two ``compare`` processes on one folder compute each run once.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from crfopt._version import __version__
from crfopt.bench.problems import is_corpus_path
from crfopt.bench.results import (
    DamagedResultError,
    load_run,
    quarantine,
    result_files,
    run_key,
    run_path,
)
from crfopt.bench.runner import Budget, Schedule
from crfopt.data.fileio import clean_stale_tmp, file_lock
from crfopt.kernels.jit import JIT_ENABLED
from crfopt.optim.contract import ParameterError, display_name
from crfopt.optim.parse import describe_values, expand_selection
from crfopt.optim.registry import Registry, get_registry


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
    max_memory: int | None = None
    config: Mapping[str, Any] = field(default_factory=dict)
    #: What :func:`pending` saw of the run's file: None (not checked), ``"absent"``, or
    #: its stamp (:func:`file_stamp`); :func:`claim_run` compares it with the file it
    #: finds once it holds the lock, to tell a run another process has just done.
    stored: str | None = None

    @property
    def label(self) -> str:
        return f"{self.problem} · {display_name(self.optimizer, self.overrides)} · seed {self.seed}"

    def with_(self, **changes: Any) -> RunTask:
        """A copy with some fields changed (P*, threads, timeout: not part of the run id)."""
        return replace(self, **changes)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


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


# (path, inode, size, mtime_ns) → sha256: a grid plans each data file once per process.
_DIGESTS: dict[tuple[str, int, int, int], str] = {}


def _file_digest(path: str | os.PathLike[str]) -> str:
    st = os.stat(path)
    key = (os.path.abspath(path), st.st_ino, st.st_size, st.st_mtime_ns)
    if key not in _DIGESTS:
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        _DIGESTS[key] = h.hexdigest()
    return _DIGESTS[key]


def _data_identity(folders: Iterable[str]) -> dict[str, str]:
    """SHA-256 of every file a registered problem could read: all files of its data
    folders, each taken from the first data root that has it (as ``locate`` does).

    A loader may choose among files (``ocr`` reads ``letter.data`` when present, else
    ``ocr.mat``), so the whole folder is hashed, not only the files the spec lists: a
    file added, replaced or edited changes the run ids, and old runs no longer count.
    """
    from crfopt.data.sources import data_roots

    out: dict[str, str] = {}
    for folder in sorted(set(folders)):
        for root in data_roots():
            d = root / folder
            if not d.is_dir():
                continue
            for f in sorted(d.iterdir()):
                rel = f"{folder}/{f.name}"
                if f.name.startswith(".") or not f.is_file() or rel in out:
                    continue
                out[rel] = _file_digest(f)
    return out


def problem_identity(reg: Registry, name: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """What identifies a problem in a run key, computed without loading its data.

    Registered problems are identified by name, parameters (the crfopt version in the
    key covers built-in templates) and the content hash of the files in their data
    folders; a user corpus by its path and content hash, and the content hash of any
    file parameter (test split, template file).
    """
    ident: dict[str, Any] = {"name": name, "params": dict(params)}
    if name in reg.problems:
        folders = [f.folder for f in reg.problems[name].files if getattr(f, "folder", None)]
        if folders:
            ident["data"] = _data_identity(folders)
    elif Path(name).is_file():
        ident["sha256"] = _file_digest(name)
    for k, v in params.items():
        if isinstance(v, str) and (os.sep in v or "." in v) and Path(v).is_file():
            ident.setdefault("files", {})[k] = _file_digest(v)
    return ident


def run_config(
    ident: Mapping[str, Any],
    optimizer: str,
    resolved: Mapping[str, Any],
    seed: int,
    budget: Budget,
    schedule: Schedule,
) -> dict[str, Any]:
    """The configuration a run id hashes: names and values that change its numbers.

    ``jit`` is :data:`crfopt.kernels.jit.JIT_ENABLED`, the switch the kernels themselves
    follow, so the key says which kernels produced the trace. Limits that only decide
    *whether* a run happens (``max_memory``) are not in it: a run skipped under one limit
    is the same run as the one done under a larger limit.
    """
    return {
        "problem": dict(ident),
        "optimizer": optimizer,
        "params": dict(resolved),
        "seed": int(seed),
        "budget": budget.as_dict(),
        "checkpoints": schedule.describe(),
        "crfopt": __version__,
        "jit": JIT_ENABLED,
    }


def _check_problem(reg: Registry, prob: str, params: Mapping[str, Any]) -> None:
    # l1 (σ) is every problem's parameter, applied by load_from after loading (--l1)
    params = {k: v for k, v in params.items() if k != "l1"}
    if prob in reg.problems:
        unknown = sorted(set(params) - set(reg.problems[prob].defaults))
        if unknown:
            raise ParameterError(
                f"problem {prob!r}: unknown parameter(s) {', '.join(unknown)}; valid "
                f"parameters: {', '.join(sorted([*reg.problems[prob].defaults, 'l1']))}"
            )
    elif is_corpus_path(reg, prob):
        from crfopt.bench.problems import check_corpus_params

        try:
            check_corpus_params(dict(params))
        except ValueError as exc:
            raise ParameterError(str(exc)) from None
    else:
        reg.problem(prob)  # raises UnknownNameError with the choices


def _resolve(reg: Registry, name: str, merged: Mapping[str, Any]) -> dict[str, Any]:
    """The run's resolved parameters; a bad value's error also says what is valid."""
    spec = reg.optimizer(name)
    try:
        return spec.resolve(merged)
    except ParameterError as exc:
        declared = spec.parameters()
        bad = [k for k, v in merged.items() if k in declared and not _accepts(declared[k], k, v)]
        if not bad:
            raise  # an unknown parameter: the message already lists the valid ones
        k = bad[0]
        # the message starts with the variant's name: name the run's whole selection
        text = str(exc).removeprefix(f"{name}: ")
        raise ParameterError(
            f"{display_name(name, merged)}: {text}; {k} accepts {declared[k].type.__name__} "
            f"{describe_values(declared[k])} (crfopt list optimizers {name})"
            + (
                # --set NAME.param=1,0.1 reaches here as the text "1,0.1"
                f"; to sweep it, select {name}[{k}={merged[k]}] in --optimizers"
                if isinstance(merged[k], str) and "," in merged[k]
                else ""
            )
        ) from None


def _accepts(param: Any, key: str, value: Any) -> bool:
    try:
        param.coerce(key, value, "")
    except ParameterError:
        return False
    return True


def expand_grid(
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
    max_memory: int | None = None,
    registry: Registry | None = None,
) -> list[RunTask]:
    """Every run of the grid, in order (problem, optimizer, seed), validated; no data loaded.

    ``optimizers`` are selections (``NAME[param=value,...]``) or sweeps
    (``NAME[param=v1,v2,...]``, one run per value, the cartesian product of several
    swept parameters: :func:`crfopt.optim.parse.expand_selection`); ``overrides`` maps an
    optimizer name to parameters (``--set``), which inline ones take precedence over.
    Every value is converted by its parameter's type and checked against its range or
    choices here, before any run: an error names the value, the parameter and what it
    accepts.
    """
    reg = registry or get_registry(plugin_dirs)
    budget = budget or Budget()
    schedule = Schedule(checkpoints)
    overrides = {k: dict(v) for k, v in (overrides or {}).items()}
    problem_params = {k: dict(v) for k, v in (problem_params or {}).items()}
    parsed = [sel for o in optimizers for sel in expand_selection(o)]
    stray = sorted(set(overrides) - ({name for name, _ in parsed} | set(problems)))
    if stray:
        raise ParameterError(
            f"--set names {', '.join(stray)}, which is neither a selected optimizer nor a problem"
        )
    selections: list[tuple[str, dict[str, Any], dict[str, Any]]] = []
    for name, inline in parsed:
        merged = {**overrides.get(name, {}), **inline}
        resolved = _resolve(reg, name, merged)  # a usage error, before any work
        selections.append((name, merged, resolved))
    seeds = [int(s) for s in seeds]
    tasks = []
    for prob in problems:
        params = dict(problem_params.get(prob, {}))
        _check_problem(reg, prob, params)
        ident = problem_identity(reg, prob, params)
        for name, merged, resolved in selections:
            for seed in seeds:
                config = run_config(ident, name, resolved, seed, budget, schedule)
                tasks.append(
                    RunTask(
                        run_id=run_key(config),
                        problem=prob,
                        problem_params=params,
                        optimizer=name,
                        overrides=merged,
                        seed=seed,
                        budget=budget.as_dict(),
                        checkpoints=schedule.describe(),
                        out_dir=str(out),
                        plugin_dirs=tuple(str(p) for p in plugin_dirs),
                        max_memory=max_memory,
                        config=config,
                    )
                )
    return tasks


def pending(
    tasks: Sequence[RunTask], out_dir: str | os.PathLike[str], *, retry_failed: bool = False
) -> list[RunTask]:
    """The tasks whose result is not in ``out_dir`` yet, each run id once.

    Every stored run of the grid is verified (:func:`crfopt.bench.results.load_run`): a
    damaged file is moved to ``damaged/`` with a warning naming it and its run is
    pending again. Stored ``skipped`` runs are always planned again (declining costs
    nothing, and the limit that made the optimizer decline may have changed); stored
    ``failed`` runs with ``retry_failed``. Temporary files of writers killed long ago
    are removed. Each pending task records what it saw of its file (``stored``).
    """
    out_dir = Path(out_dir)
    clean_stale_tmp(out_dir)
    existing = (
        {f.stem.removeprefix("run-") for f in result_files(out_dir)} if out_dir.exists() else set()
    )
    redo = {"skipped", "failed"} if retry_failed else {"skipped"}
    stamps: dict[str, str] = {}
    for rid in {t.run_id for t in tasks} & existing:
        path = run_path(out_dir, rid)
        stamps[rid] = file_stamp(path)
        try:
            status = _stored_status(path)
        except DamagedResultError as exc:
            quarantine(path, exc.reason)
            stamps[rid] = "absent"
            existing.discard(rid)
            continue
        if status in redo:
            existing.discard(rid)
    seen: set[str] = set()
    out = []
    for t in tasks:
        if t.run_id in existing or t.run_id in seen:
            continue
        seen.add(t.run_id)
        out.append(t.with_(stored=stamps.get(t.run_id, "absent")))
    return out


def _stored_status(path: Path) -> str | None:
    """A stored run's final status, from its verified file: its metadata, else its last
    trace row. Raises :class:`DamagedResultError` for a damaged file."""
    trace, meta = load_run(path)
    status = meta.get("status")
    if status is None and len(trace):
        status = str(trace["status"].iloc[-1])
    return status


def file_stamp(path: str | os.PathLike[str]) -> str:
    """Identity of a file's current version (inode, size, mtime), or ``"absent"``.

    Result files are replaced by rename, so a rewritten file has a new stamp.
    """
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return "absent"
    return f"{st.st_ino}:{st.st_size}:{st.st_mtime_ns}"


def run_lock_path(out_dir: str | os.PathLike[str], run_id: str) -> Path:
    """The lock file of one run: ``<out>/.locks/run-<id>.lock``."""
    return Path(out_dir) / ".locks" / f"run-{run_id}.lock"


@contextlib.contextmanager
def claim_run(task: RunTask) -> Iterator[dict[str, Any] | None]:
    """Hold the run's lock while it is computed; yields None when it is to be computed.

    A process that finds the run locked *waits* for the lock (another ``compare`` is
    computing it). Once it holds the lock, if the run's file is no longer the one
    :func:`pending` saw (``task.stored``) and it reads back intact, another process has
    just done the run: it yields that run's ``status``, ``error`` and ``last`` row
    instead, and the caller computes nothing. A task never planned by :func:`pending`
    (``stored`` None) is always computed. The lock is released when the holder exits
    or dies, so a crashed process never leaves a run locked.
    """
    with file_lock(run_lock_path(task.out_dir, task.run_id)):
        path = run_path(task.out_dir, task.run_id)
        stamp = file_stamp(path)
        if task.stored is None or stamp in ("absent", task.stored):
            yield None
            return
        try:
            trace, meta = load_run(path)
        except DamagedResultError as exc:
            quarantine(path, exc.reason)
            yield None
            return
        status = meta.get("status") or (str(trace["status"].iloc[-1]) if len(trace) else None)
        last = trace.iloc[-1].to_dict() if len(trace) else {}
        error = meta.get("skip_reason") or meta.get("error_summary")
        yield {"status": status, "error": error, "last": last}


def plan_grid(
    problems: Sequence[str],
    optimizers: Sequence[str],
    *,
    out: str | os.PathLike[str] = "results",
    retry_failed: bool = False,
    **grid: Any,
) -> GridPlan:
    """Expand the grid (:func:`expand_grid`) and find the runs not on disk yet."""
    tasks = expand_grid(problems, optimizers, out=out, **grid)
    return GridPlan(tasks, pending(tasks, out, retry_failed=retry_failed), Path(out))


__all__ = [
    "GridPlan",
    "RunTask",
    "claim_run",
    "expand_grid",
    "file_stamp",
    "pending",
    "plan_grid",
    "problem_identity",
    "run_config",
    "run_lock_path",
]
