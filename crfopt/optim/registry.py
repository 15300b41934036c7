"""Plugin manager and registry: where optimizer, problem and metric names come from.

Sources, in order (docs/plugins.md "Where plugins come from"): the built-in packages
``crfopt_plugins`` (folder ``plugins/``) and ``crfopt_datasets`` (folder ``datasets/``),
installed distributions that expose the ``crfopt`` entry-point group, and ``.py`` files
of ``--plugin-dir`` directories. Each plugin is imported and registered on its own; one
that fails to import, to validate or to register is recorded
(:attr:`Registry.failures`, a warning with its traceback) and the others keep working.
A fresh manager is built per call — there is no module-level registry.

Environment:

``CRFOPT_STRICT_PLUGINS=1``
    re-raise plugin failures (for plugin authors).
``CRFOPT_DISABLE_PLUGINS=a,b``
    skip the named plugins (module stem or entry-point name).
``CRFOPT_TRACE_PLUGINS=1``
    print every hook call and what it returned to stderr.
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import importlib
import importlib.metadata
import importlib.util
import inspect
import os
import pkgutil
import re
import sys
import traceback
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import pluggy

from crfopt.core.problem import CRFProblem
from crfopt.optim import hookspecs
from crfopt.optim.contract import OptimizerSpec

BUILTIN_PACKAGES: tuple[str, ...] = ("crfopt_plugins", "crfopt_datasets")
ENTRY_POINT_GROUP = "crfopt"
HOOK_NAMES: tuple[str, ...] = tuple(
    name
    for name, fn in inspect.getmembers(hookspecs, inspect.isfunction)
    if name.startswith(f"{hookspecs.PROJECT}_")
)


class PluginWarning(UserWarning):
    """A plugin failed to import, validate or register; the rest keeps working."""


class UnknownNameError(KeyError):
    """An optimizer or problem name that no plugin registered."""

    def __str__(self) -> str:  # KeyError quotes its message; show it plainly
        return str(self.args[0])


@dataclass(frozen=True)
class ProblemSpec:
    """A registered problem: a name and a loader.

    Parameters
    ----------
    name : str
        What users type (``ocr``, ``conll2000``, ``synthetic``).
    load : callable
        ``load(**params) -> CRFProblem``; called only when the problem is asked for.
    defaults : mapping
        The loader's parameters and their defaults (``lam``, template, sizes…);
        ``crfopt info`` shows them and unknown keys are rejected with this list.
    summary : str
        One line for ``crfopt list problems``.
    reference : str
        The paper or corpus it reproduces.
    files : sequence
        Raw files it reads (objects with ``name``, ``url``, ``sha256``), for ``crfopt fetch``.
    notes : str
        Provenance and caveats shown by ``crfopt info``.
    source : str
        Filled in by the plugin manager.
    """

    name: str
    load: Callable[..., CRFProblem]
    defaults: Mapping[str, Any] = field(default_factory=dict)
    summary: str = ""
    reference: str = ""
    files: Sequence[Any] = ()
    notes: str = ""
    source: str = ""

    def create(self, **params: Any) -> CRFProblem:
        unknown = sorted(set(params) - set(self.defaults))
        if unknown:
            valid = ", ".join(sorted(self.defaults)) or "(none)"
            raise ValueError(
                f"problem {self.name!r}: unknown parameter(s) {', '.join(map(repr, unknown))}; "
                f"valid parameters: {valid}"
            )
        merged = {**self.defaults, **params}
        problem = self.load(**merged)
        if not isinstance(problem, CRFProblem):
            raise TypeError(
                f"problem {self.name!r} (from {self.source}) returned "
                f"{type(problem).__name__}, not a CRFProblem"
            )
        return problem


#: Values of :attr:`MetricSpec.cost`.
METRIC_COSTS: tuple[str, ...] = ("cheap", "expensive")
#: An expensive metric's default schedule: every k-th checkpoint (0, k, 2k, …) and the last.
EXPENSIVE_EVERY = 5
_METRIC_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


@dataclass(frozen=True)
class MetricSpec:
    """A registered checkpoint metric: one results column, filled in the evaluation phase.

    Parameters
    ----------
    name : str
        The metric and the results column it fills (``chunk_f1``): lower case letters,
        digits and underscores, starting with a letter.
    compute : callable
        ``compute(checkpoint) -> float`` of a :class:`crfopt.bench.evaluator.Checkpoint`
        (``problem``, read-only ``w``, ``predict(split)`` and ``gold(split)``, which
        decode once per checkpoint for all metrics and count nothing). Return nan when
        the value does not exist at this checkpoint.
    cost : {"cheap", "expensive"}
        ``"cheap"``: computed at every checkpoint. ``"expensive"``: at checkpoints 0,
        ``every``, 2·``every``, … and at the run's last checkpoint; the others hold null.
    every : int, optional
        The spacing of an expensive metric, in checkpoints (default
        :data:`EXPENSIVE_EVERY`); only for ``cost="expensive"``.
    applies : callable, optional
        ``applies(problem) -> bool``; when false the metric writes no column for runs
        on that problem (chunk F1 on OCR). Default: applies everywhere.
    summary : str
        One line (what it measures, on which split); the report's axis label.
    source : str
        Filled in by the plugin manager.
    """

    name: str
    compute: Callable[[Any], float]
    cost: str = "cheap"
    every: int | None = None
    applies: Callable[[CRFProblem], bool] | None = None
    summary: str = ""
    source: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _METRIC_NAME.match(self.name):
            raise ValueError(
                f"metric name {self.name!r} is not a column name: use lower case letters, "
                "digits and underscores, starting with a letter (e.g. 'chunk_f1')"
            )
        if not callable(self.compute):
            raise TypeError(f"metric {self.name!r}: compute must be callable")
        if self.applies is not None and not callable(self.applies):
            raise TypeError(f"metric {self.name!r}: applies must be callable or None")
        if self.cost not in METRIC_COSTS:
            raise ValueError(
                f"metric {self.name!r}: unknown cost {self.cost!r}; valid costs: "
                f"{', '.join(METRIC_COSTS)}"
            )
        if self.every is not None:
            if self.cost != "expensive":
                raise ValueError(
                    f"metric {self.name!r}: every={self.every!r} needs cost='expensive' "
                    "(cheap metrics are computed at every checkpoint)"
                )
            if isinstance(self.every, bool) or not isinstance(self.every, int) or self.every < 1:
                raise ValueError(
                    f"metric {self.name!r}: every must be a positive whole number of "
                    f"checkpoints, got {self.every!r}"
                )

    @property
    def interval(self) -> int:
        """Checkpoints between two evaluations (1 for a cheap metric)."""
        if self.cost == "cheap":
            return 1
        return self.every if self.every is not None else EXPENSIVE_EVERY

    def due(self, checkpoint: int, final: bool) -> bool:
        """Whether the metric is computed at checkpoint number ``checkpoint`` (0-based)."""
        return final or checkpoint % self.interval == 0

    def applies_to(self, problem: CRFProblem) -> bool:
        return True if self.applies is None else bool(self.applies(problem))


@dataclass(frozen=True)
class PluginFailure:
    """A plugin that could not be used, with the reason and traceback."""

    name: str
    source: str
    error: str
    traceback: str


@dataclass(frozen=True)
class PluginInfo:
    name: str
    source: str
    module: ModuleType = field(repr=False, compare=False)


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in {"1", "true", "yes", "on"}


def _disabled() -> set[str]:
    raw = os.environ.get("CRFOPT_DISABLE_PLUGINS", "")
    return {part.strip() for part in raw.split(",") if part.strip()}


def unmarked_hooks(module: ModuleType) -> list[str]:
    """Functions of ``module`` named like a hook (or nearly) but not marked as one.

    pluggy registers only functions marked with :data:`crfopt.hookimpl`; an unmarked
    ``crfopt_register_optimizers`` is silently never called, so its variants vanish.
    """
    out = []
    marker = f"{hookspecs.PROJECT}_impl"  # the attribute pluggy's HookimplMarker sets
    for attr, obj in vars(module).items():
        if not inspect.isfunction(obj) or obj.__module__ != module.__name__:
            continue  # imported helpers are not this plugin's hooks
        if getattr(obj, marker, None) is not None:
            continue
        if attr in HOOK_NAMES or difflib.get_close_matches(attr, HOOK_NAMES, n=1, cutoff=0.85):
            out.append(attr)
    return sorted(out)


def _import_path(path: Path) -> ModuleType:
    """Import a plugin file under a stable, unique module name (so pickling works)."""
    digest = hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:8]
    modname = f"crfopt_plugin_dir.{path.stem}_{digest}"
    if modname in sys.modules:
        return sys.modules[modname]
    if "crfopt_plugin_dir" not in sys.modules:
        pkg = ModuleType("crfopt_plugin_dir")
        pkg.__path__ = []  # a namespace for user plugin files
        sys.modules["crfopt_plugin_dir"] = pkg
    spec = importlib.util.spec_from_file_location(modname, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[modname] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[modname]
        raise
    return module


class Registry:
    """Everything the plugins registered, plus what went wrong.

    Build one with :func:`get_registry`.
    """

    def __init__(self) -> None:
        self.manager = pluggy.PluginManager(hookspecs.PROJECT)
        self.manager.add_hookspecs(hookspecs)
        self.plugins: list[PluginInfo] = []
        self.failures: list[PluginFailure] = []
        self.optimizers: dict[str, OptimizerSpec] = {}
        self.problems: dict[str, ProblemSpec] = {}
        self.metrics: dict[str, MetricSpec] = {}
        self._strict = _env_flag("CRFOPT_STRICT_PLUGINS")
        self._trace = _env_flag("CRFOPT_TRACE_PLUGINS")
        self._disabled = _disabled()

    # ------------------------------------------------------------------ loading
    def _fail(self, name: str, source: str, exc: BaseException) -> None:
        tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        failure = PluginFailure(name, source, f"{type(exc).__name__}: {exc}", tb)
        self.failures.append(failure)
        if self._strict:
            raise exc
        warnings.warn(
            f"crfopt plugin {name!r} ({source}) failed and is skipped: {failure.error}\n{tb}",
            PluginWarning,
            stacklevel=3,
        )

    def add_module(self, name: str, source: str, load: Callable[[], ModuleType]) -> None:
        """Import (via ``load``), validate and register one plugin module."""
        if name in self._disabled:
            return
        try:
            module = load()
            unmarked = unmarked_hooks(module)
            if unmarked:
                warnings.warn(
                    f"crfopt plugin {name!r} ({source}): {', '.join(unmarked)} "
                    f"{'looks' if len(unmarked) == 1 else 'look'} like a hook but "
                    f"{'lacks' if len(unmarked) == 1 else 'lack'} @crfopt.hookimpl, so "
                    f"crfopt never calls {'it' if len(unmarked) == 1 else 'them'} "
                    f"(hooks: {', '.join(HOOK_NAMES)})",
                    PluginWarning,
                    stacklevel=2,
                )
            plugin_name = f"{source}:{name}"
            self.manager.register(module, name=plugin_name)
            try:
                self.manager.check_pending()
            except pluggy.PluginValidationError:
                self.manager.unregister(name=plugin_name)
                raise
        except Exception as exc:
            self._fail(name, source, exc)
            return
        info = PluginInfo(name, source, module)
        self.plugins.append(info)
        self._collect(info, plugin_name)

    def _call(self, impl: Any, hook: str) -> list[Any]:
        result = impl.function()
        if self._trace:
            print(f"[crfopt plugins] {impl.plugin_name}.{hook}() -> {result!r}", file=sys.stderr)
        if result is None:
            return []
        if not isinstance(result, (list, tuple)):
            raise TypeError(f"{hook}() must return a list, got {type(result).__name__}")
        return list(result)

    def _collect(self, info: PluginInfo, plugin_name: str) -> None:
        hooks = self.manager.hook
        for hook_name, kind, table in (
            ("crfopt_register_optimizers", OptimizerSpec, self.optimizers),
            ("crfopt_register_problems", ProblemSpec, self.problems),
            ("crfopt_register_metrics", MetricSpec, self.metrics),
        ):
            for impl in getattr(hooks, hook_name).get_hookimpls():
                if impl.plugin_name != plugin_name:
                    continue
                try:
                    specs = self._call(impl, hook_name)
                    for spec in specs:
                        if not isinstance(spec, kind):
                            raise TypeError(
                                f"{hook_name}() returned {type(spec).__name__}, "
                                f"expected {kind.__name__}"
                            )
                    staged: dict[str, Any] = {}
                    for spec in specs:
                        spec = dataclasses.replace(spec, source=f"{info.source}:{info.name}")
                        if spec.name in table or spec.name in staged:
                            other = table.get(spec.name) or staged[spec.name]
                            raise ValueError(
                                f"name {spec.name!r} registered twice: by {other.source} "
                                f"and by {spec.source}"
                            )
                        staged[spec.name] = spec
                    table.update(staged)
                except Exception as exc:
                    self._fail(info.name, info.source, exc)

    def load_builtins(self) -> None:
        for package_name in BUILTIN_PACKAGES:
            try:
                package = importlib.import_module(package_name)
            except Exception as exc:
                self._fail(package_name, "builtin", exc)
                continue
            for mod in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
                if mod.name.startswith("_"):
                    continue
                full = f"{package_name}.{mod.name}"
                self.add_module(
                    mod.name, "builtin", lambda full=full: importlib.import_module(full)
                )

    def load_entry_points(self) -> None:
        # One at a time: pluggy's own loader stops at the first broken distribution.
        for ep in sorted(
            importlib.metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name
        ):
            self.add_module(ep.name, f"entry-point {ep.value}", ep.load)

    def load_plugin_dirs(self, plugin_dirs: Iterable[str | os.PathLike[str]]) -> None:
        for d in plugin_dirs:
            directory = Path(d)
            if not directory.is_dir():
                self._fail(str(d), "plugin-dir", NotADirectoryError(f"{d} is not a directory"))
                continue
            for path in sorted(directory.glob("*.py")):
                if path.name.startswith("_"):
                    continue
                self.add_module(
                    path.stem, f"plugin-dir {directory}", lambda p=path: _import_path(p)
                )

    # ------------------------------------------------------------------ lookup
    def optimizer(self, name: str) -> OptimizerSpec:
        try:
            return self.optimizers[name]
        except KeyError:
            raise UnknownNameError(self._unknown("optimizer", name, self.optimizers)) from None

    def problem(self, name: str) -> ProblemSpec:
        try:
            return self.problems[name]
        except KeyError:
            raise UnknownNameError(self._unknown("problem", name, self.problems)) from None

    def metric(self, name: str) -> MetricSpec:
        try:
            return self.metrics[name]
        except KeyError:
            raise UnknownNameError(self._unknown("metric", name, self.metrics)) from None

    def _unknown(self, kind: str, name: str, table: Mapping[str, Any]) -> str:
        close = difflib.get_close_matches(name, list(table), n=3)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        failed = ""
        if self.failures:
            failed = (
                " (plugins that failed to load: " + ", ".join(f.name for f in self.failures) + ")"
            )
        return (
            f"unknown {kind} {name!r}.{hint} Registered {kind}s: "
            f"{', '.join(sorted(table)) or '(none)'}{failed}"
        )


def get_registry(
    plugin_dirs: Iterable[str | os.PathLike[str]] = (), *, entry_points: bool = True
) -> Registry:
    """A fresh registry: built-ins, then entry points, then ``plugin_dirs`` files."""
    reg = Registry()
    reg.load_builtins()
    if entry_points:
        reg.load_entry_points()
    reg.load_plugin_dirs(plugin_dirs)
    return reg
