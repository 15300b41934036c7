"""Grid planning: problems × optimizers × seeds → :class:`RunTask` records with run ids.

A task holds names and values only, so it can be hashed into its run id, pickled to a
worker process and rebuilt there. :func:`expand_grid` is pure apart from hashing the
content of file problems: it validates every selection and parameter (a usage error
before any work) and loads no data. :func:`pending` then looks at the results folder to
find what still has to run.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from crfopt._version import __version__
from crfopt.bench.problems import is_corpus_path
from crfopt.bench.results import read_results, read_run_meta, result_files, run_key, run_path
from crfopt.bench.runner import Budget, Schedule
from crfopt.kernels.jit import JIT_ENABLED
from crfopt.optim.contract import ParameterError, display_name
from crfopt.optim.parse import parse_selection
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
            check_corpus_params(dict(params))
        except ValueError as exc:
            raise ParameterError(str(exc)) from None
    else:
        reg.problem(prob)  # raises UnknownNameError with the choices


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

    ``optimizers`` are selections (``NAME[param=value,...]``); ``overrides`` maps an
    optimizer name to parameters (``--set``), which inline ones take precedence over.
    """
    reg = registry or get_registry(plugin_dirs)
    budget = budget or Budget()
    schedule = Schedule(checkpoints)
    overrides = {k: dict(v) for k, v in (overrides or {}).items()}
    problem_params = {k: dict(v) for k, v in (problem_params or {}).items()}
    parsed = [parse_selection(o) for o in optimizers]
    stray = sorted(set(overrides) - ({name for name, _ in parsed} | set(problems)))
    if stray:
        raise ParameterError(
            f"--set names {', '.join(stray)}, which is neither a selected optimizer nor a problem"
        )
    selections: list[tuple[str, dict[str, Any], dict[str, Any]]] = []
    for name, inline in parsed:
        merged = {**overrides.get(name, {}), **inline}
        resolved = reg.optimizer(name).resolve(merged)  # a usage error, before any work
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

    Stored ``skipped`` runs are always planned again (declining costs nothing, and the
    limit that made the optimizer decline may have changed); stored ``failed`` runs with
    ``retry_failed``. Only the files' metadata is read, never their traces.
    """
    out_dir = Path(out_dir)
    existing = (
        {f.stem.removeprefix("run-") for f in result_files(out_dir)} if out_dir.exists() else set()
    )
    redo = {"skipped", "failed"} if retry_failed else {"skipped"}
    for rid in {t.run_id for t in tasks} & existing:
        if _stored_status(run_path(out_dir, rid)) in redo:
            existing.discard(rid)
    seen: set[str] = set()
    out = []
    for t in tasks:
        if t.run_id in existing or t.run_id in seen:
            continue
        seen.add(t.run_id)
        out.append(t)
    return out


def _stored_status(path: Path) -> str | None:
    """A stored run's final status: from its metadata, else its last trace row."""
    status = read_run_meta(path).get("status")
    if status is None:
        trace = read_results(path)
        status = str(trace["status"].iloc[-1]) if len(trace) else None
    return status


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
    "expand_grid",
    "pending",
    "plan_grid",
    "problem_identity",
    "run_config",
]
