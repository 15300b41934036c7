"""The optimizer contract (docs/architecture.md "Optimizer", docs/algorithms.md §3.0).

A plugin optimizer subclasses :class:`Optimizer`, declares its parameters, and
implements :meth:`Optimizer.setup` and either :meth:`Optimizer.step` (one iteration) or,
for speed, :meth:`Optimizer.run_block` (a compiled loop of up to k iterations that
returns how many ran). A complete example — plain SGD in under 40 lines — is in
``docs/plugins.md``.

The optimizer touches the problem only through its counted oracles
(``problem.oracle``/``forward``/``value_and_gradient`` or :mod:`crfopt.kernels`) and
reports the weight updates it committed with :meth:`Optimizer.count` (or the ``UPDATES``
slot of the counter array in compiled code). Iterations are counted for it, from what
``run_block`` returns. Budgets, checkpoints, evaluation and timing belong to the runner.
"""

from __future__ import annotations

import abc
import functools
import json
import math
import os
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from crfopt.core.problem import CRFProblem, DualMarginals

CAPABILITIES = frozenset({"stochastic", "has_dual", "line_search", "gap_estimate"})
#: The penalties a problem's P may hold (``CRFProblem.regularizers``); an optimizer
#: declares the ones it handles in :attr:`Optimizer.regularizers` (always ``"l2"``).
REGULARIZERS: tuple[str, ...] = ("l2", "l1")


class UnsupportedProblemError(ValueError):
    """A problem holds a penalty (e.g. ℓ1, σ > 0) the optimizer does not handle."""


def regularizer_refusal(
    name: str, regularizers: tuple[str, ...], problem: CRFProblem
) -> str | None:
    """Why an optimizer declaring ``regularizers`` cannot solve ``problem``, or None.

    The one wording of the refusal: the runner stores it as a skipped run's reason, and
    constructing the optimizer directly raises it (:class:`UnsupportedProblemError`).
    """
    missing = [r for r in problem.regularizers if r not in regularizers]
    if not missing:
        return None
    return (
        f"{name} handles the {'/'.join(regularizers)} penalty only, but problem "
        f"{problem.name!r} has an ℓ1 weight σ = l1 = {problem.l1:g}; use an optimizer "
        f"that declares regularizers including {', '.join(map(repr, missing))} (built-in: "
        "owlqn, prox-saga and every sdca variant; `crfopt list optimizers` marks them), "
        "or σ = 0"
    )


PARAM_TYPES: tuple[type, ...] = (float, int, bool, str)


class ParameterError(ValueError):
    """An unknown, inapplicable or ill-typed optimizer parameter."""


@dataclass(frozen=True)
class Param:
    """A declared optimizer parameter: default, type and one line of help.

    ``type`` is one of ``float``, ``int``, ``bool``, ``str``; ``choices`` restricts a
    ``str``; ``allow_none`` admits ``None`` (for "off" settings). The help line names
    the section of docs/algorithms.md or the paper that fixes the default.
    """

    default: Any
    type: type = float
    help: str = ""
    choices: tuple[Any, ...] | None = None
    allow_none: bool = False
    low: float | None = None
    high: float | None = None

    def coerce(self, name: str, value: Any, owner: str) -> Any:
        """Validate ``value``; ints are accepted for floats, strings are parsed."""
        if value is None:
            if self.allow_none:
                return None
            raise ParameterError(f"{owner}: parameter {name!r} cannot be None")
        try:
            if self.type is bool:
                if isinstance(value, str):
                    low = value.strip().lower()
                    if low in {"none", "null"} and self.allow_none:
                        return None
                    if low not in {"true", "false", "1", "0", "yes", "no", "on", "off"}:
                        raise ValueError
                    value = low in {"true", "1", "yes", "on"}
                elif isinstance(value, (bool, np.bool_)):
                    value = bool(value)
                else:
                    raise ValueError
            elif self.type is int:
                if isinstance(value, (bool, np.bool_)):
                    raise ValueError
                if isinstance(value, str):
                    value = int(value.strip())
                elif isinstance(value, (int, np.integer)) or (
                    isinstance(value, (float, np.floating)) and float(value).is_integer()
                ):
                    value = int(value)
                else:
                    raise ValueError
            elif self.type is float:
                if isinstance(value, (bool, np.bool_)):
                    raise ValueError
                if isinstance(value, str) and value.strip().lower() in {"none", "null"}:
                    if self.allow_none:
                        return None
                    raise ValueError
                value = float(value)
                if math.isnan(value):
                    raise ValueError
            elif self.type is str:
                if not isinstance(value, str):
                    raise ValueError
            else:  # pragma: no cover - declarations are checked at registration
                raise ParameterError(f"{owner}: unsupported parameter type {self.type!r}")
        except (ValueError, TypeError):
            raise ParameterError(
                f"{owner}: parameter {name!r} expects {self.type.__name__}"
                f"{' or None' if self.allow_none else ''}, got {value!r}"
            ) from None
        if self.choices is not None and value not in self.choices:
            raise ParameterError(
                f"{owner}: parameter {name!r} must be one of "
                f"{', '.join(map(str, self.choices))}; got {value!r}"
            )
        if self.low is not None and value < self.low:
            raise ParameterError(f"{owner}: parameter {name!r} must be ≥ {self.low}, got {value}")
        if self.high is not None and value > self.high:
            raise ParameterError(f"{owner}: parameter {name!r} must be ≤ {self.high}, got {value}")
        return value

    def check_declaration(self, name: str, owner: str) -> None:
        """Refuse a declaration that could never work; called at registration.

        A bad declaration (unknown type, default of another type, default outside its
        range or choices) would otherwise only fail when someone runs the optimizer.
        """
        where = f"{owner}: parameter {name!r}"
        if self.type not in PARAM_TYPES:
            raise ParameterError(
                f"{where} has unsupported type {self.type!r}; use one of "
                f"{', '.join(t.__name__ for t in PARAM_TYPES)}"
            )
        if self.low is not None and self.high is not None and self.low > self.high:
            raise ParameterError(f"{where}: low = {self.low} is above high = {self.high}")
        d = self.default
        if d is None:
            if not self.allow_none:
                raise ParameterError(f"{where}: default is None but allow_none is False")
            return
        if self.type is bool:
            ok = isinstance(d, (bool, np.bool_))
        elif self.type is int:
            ok = isinstance(d, (int, np.integer)) and not isinstance(d, (bool, np.bool_))
        elif self.type is float:
            # an int default of a float parameter is fine (1 means 1.0); NaN never is
            ok = isinstance(d, (int, float, np.integer, np.floating)) and not isinstance(
                d, (bool, np.bool_)
            )
            ok = ok and not math.isnan(float(d))
        else:
            ok = isinstance(d, str)
        if not ok:
            raise ParameterError(
                f"{where}: default {d!r} is not a {self.type.__name__}"
                f"{' or None' if self.allow_none else ''}"
            )
        if self.choices is not None and d not in self.choices:
            raise ParameterError(
                f"{where}: default {d!r} is not one of its choices "
                f"{', '.join(map(repr, self.choices))}"
            )
        if self.low is not None and d < self.low:
            raise ParameterError(f"{where}: default {d} is below its lower bound {self.low}")
        if self.high is not None and d > self.high:
            raise ParameterError(f"{where}: default {d} is above its upper bound {self.high}")


def resolve_params(
    declared: Mapping[str, Param], given: Mapping[str, Any], owner: str
) -> dict[str, Any]:
    """Defaults overridden by ``given``; unknown keys fail with the list of valid ones."""
    unknown = sorted(set(given) - set(declared))
    if unknown:
        valid = ", ".join(sorted(declared)) or "(none)"
        raise ParameterError(
            f"{owner}: unknown parameter{'s' if len(unknown) > 1 else ''} "
            f"{', '.join(map(repr, unknown))}; valid parameters: {valid}"
        )
    out = {}
    for name, spec in declared.items():
        out[name] = spec.coerce(name, given[name], owner) if name in given else spec.default
    return out


@dataclass(frozen=True)
class Cost:
    """Declared work per iteration (docs/algorithms.md §2), checked by the conformance suite.

    Each field is a ``(min, max)`` range per iteration (``max=None``: unbounded). With
    ``per_pass=True`` the oracle and forward counts are in units of n full passes and
    must be whole multiples of n (batch methods such as L-BFGS).

    ``init_passes`` bounds the work of :meth:`Optimizer.setup`: at most that many
    effective passes ((init oracle + init forward calls) / n, docs/algorithms.md §2), counted
    apart in ``init_oracle_calls``/``init_forward_calls`` and kept off the axes. The
    default 0 holds an optimizer that declares nothing to an initialization without
    oracle work, so expensive initializations cannot hide there.

    Examples: SDCA ``Cost(init_passes=1.0)`` (1 oracle call, no forward call, 1 update;
    its gibbs dual initialization costs one oracle call per sequence); SAG
    ``Cost(forward_calls=(0, None))``; OEG ``Cost(oracle_calls=(1, 20), updates=(0, 1),
    init_passes=1.0)``; L-BFGS ``Cost(oracle_calls=(1, None), per_pass=True)``.
    """

    oracle_calls: tuple[float, float | None] = (1, 1)
    forward_calls: tuple[float, float | None] = (0, 0)
    updates: tuple[float, float | None] = (1, 1)
    per_pass: bool = False
    init_passes: float = 0.0

    def __post_init__(self) -> None:
        if not (isinstance(self.init_passes, (int, float)) and 0 <= self.init_passes < math.inf):
            raise ValueError(f"Cost.init_passes must be finite and ≥ 0, got {self.init_passes!r}")


GIB = 2**30


def available_memory() -> int | None:
    """Bytes of physical memory available to a new allocation now, or None if unknown.

    Linux's ``MemAvailable`` (free memory plus the page cache it can reclaim) when
    ``/proc/meminfo`` has it, else the free pages ``sysconf`` reports; None where neither
    exists (then nothing is declined for want of memory).
    """
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024  # the unit is always kB
    except (OSError, ValueError, IndexError):
        pass
    try:
        pages, size = os.sysconf("SC_AVPHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None
    return pages * size if pages > 0 and size > 0 else None


@dataclass(frozen=True)
class RunLimits:
    """Resource limits for a run, shown to :meth:`Optimizer.decline`.

    ``max_memory``: bytes the optimizer's own state may take; None means the memory
    the machine has available when the run starts (:func:`available_memory`), so a
    run whose state cannot fit is declined before it allocates, not killed after.
    """

    max_memory: int | None = None

    def __post_init__(self) -> None:
        m = self.max_memory
        if m is not None and not (isinstance(m, int) and not isinstance(m, bool) and m > 0):
            raise ValueError(f"max_memory must be a positive number of bytes, got {m!r}")

    def memory_limit(self) -> int | None:
        """The limit in force: ``max_memory``, else the available memory (None: unknown)."""
        return self.max_memory if self.max_memory is not None else available_memory()

    def decline_memory(self, need: int, hint: str = "") -> str | None:
        """The reason to decline a run whose state takes ``need`` bytes, or None if it fits.

        For :meth:`Optimizer.decline`: ``"needs ~42.1 GiB of state (… bytes), limit 7.6 GiB
        (…)"``;
        ``hint`` (e.g. how to shrink the state) is appended.
        """
        limit = self.memory_limit()
        if limit is None or need <= limit:
            return None
        source = (
            "the max_memory / --max-memory limit"
            if self.max_memory is not None
            else "the memory available on this machine; max_memory / --max-memory sets another"
        )
        reason = f"needs ~{_size(need)} of state ({need:,} bytes), limit {_size(limit)} ({source})"
        return f"{reason}; {hint}" if hint else reason


def _size(nbytes: int) -> str:
    """``42.1 GiB``: three significant digits in the largest binary unit that fits."""
    for unit, scale in (("GiB", GIB), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= scale:
            return f"{nbytes / scale:.3g} {unit}"
    return f"{nbytes} bytes"


class Optimizer(abc.ABC):
    """Base class of every optimizer plugin.

    Subclasses set the class attributes :attr:`parameters` (name → :class:`Param`),
    :attr:`capabilities` (``stochastic``, ``has_dual``, ``gap_estimate``,
    ``line_search``), :attr:`regularizers` (the penalties it minimizes correctly:
    ``("l2",)`` by default, ``("l2", "l1")`` for the elastic net, docs/plugins.md
    "Regularizers") and :attr:`cost` (declared work per iteration), and implement
    :meth:`setup`, :meth:`step` or :meth:`run_block` (either; each defaults to the
    other) and the :attr:`w` property. The iterations a block returns are added to the
    problem's ``iterations`` counter here, so no plugin counts them itself.

    Parameters
    ----------
    problem : CRFProblem
        The problem to solve; only its counted oracles may be used.
    seed : int
        Seed of the run's one random generator ``self.rng`` (PCG64, docs/algorithms.md §3.0).
    **params
        Overrides of the declared parameters; unknown or ill-typed ones raise
        :class:`ParameterError` listing the valid names.

    Attributes
    ----------
    problem, seed, rng, params
        As given, with ``params`` resolved against the declaration.
    converged : bool
        Set by the optimizer when its own stopping test fires; the runner then stops
        with status ``converged``.
    """

    parameters: ClassVar[dict[str, Param]] = {}
    capabilities: ClassVar[frozenset[str]] = frozenset()
    #: Penalties this optimizer minimizes correctly. The default is ℓ2 only: a method
    #: written for λ/2‖w‖² would silently minimize the wrong objective (or compute a
    #: wrong dual) on a problem with σ > 0, so it is refused instead.
    regularizers: ClassVar[tuple[str, ...]] = ("l2",)
    cost: ClassVar[Cost] = Cost()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        own = cls.__dict__.get("run_block")
        if own is not None and not getattr(own, _COUNTS_ITERATIONS, False):
            cls.run_block = _counting_iterations(own)  # type: ignore[method-assign]
        own_step = cls.__dict__.get("step")
        if own_step is not None and not getattr(own_step, _COUNTS_ITERATIONS, False):
            cls.step = _counting_step(own_step)  # type: ignore[method-assign]

    def __init__(self, problem: CRFProblem, seed: int = 0, **params: Any) -> None:
        cls = type(self)
        if cls.step is Optimizer.step and cls.run_block is Optimizer.run_block:
            raise TypeError(
                f"{cls.__name__} implements neither step() nor run_block(k): an optimizer "
                'needs one of them (docs/plugins.md "The contract")'
            )
        if not isinstance(problem, CRFProblem):
            raise TypeError(f"expected a CRFProblem, got {type(problem).__name__}")
        refusal = regularizer_refusal(type(self).__name__, tuple(self.regularizers), problem)
        if refusal is not None:
            raise UnsupportedProblemError(refusal)
        self.problem = problem
        self.seed = int(seed)
        self.rng = np.random.Generator(np.random.PCG64(self.seed))
        self.params = resolve_params(self.parameters, params, type(self).__name__)
        self.converged = False
        self.setup()

    # ------------------------------------------------------------------ optional, before
    @classmethod
    def decline(
        cls, problem: CRFProblem, params: Mapping[str, Any], limits: RunLimits
    ) -> str | None:
        """Why this optimizer will not run on ``problem`` under ``limits``, or None.

        Called by the runner before the optimizer is built, with the resolved
        parameters; a reason makes the run ``skipped`` (stored with the reason, not a
        failure), so a grid is not stopped by a run that cannot fit. Must be cheap and
        must not touch the counted oracles. The default accepts every problem.
        """
        return None

    # ------------------------------------------------------------------ to implement
    def setup(self) -> None:  # noqa: B027 - an optional hook, empty by default
        """Build the initial state from ``self.problem`` and ``self.params``."""

    def step(self) -> None:
        """Run one iteration (one sampled example, or one L-BFGS iteration).

        The default runs ``run_block(1)``: a plugin implements this or :meth:`run_block`.
        """
        self.run_block(1)

    @property
    @abc.abstractmethod
    def w(self) -> np.ndarray:
        """Current weights (a flat vector of length ``problem.dim``)."""

    # ------------------------------------------------------------------ optional
    def run_block(self, k: int) -> int:
        """Run up to ``k`` iterations; return how many ran (fewer only if converged).

        The default loops over :meth:`step`; stochastic methods override it with a
        compiled loop so that no Python call happens per iteration. The number returned
        is added to the problem's ``iterations`` counter (every override is wrapped to
        do so), which is why no plugin counts its iterations.
        """
        return _default_run_block(self, k)

    def dual_state(self) -> DualMarginals | None:
        """Current dual marginals μ (dual methods), or None."""
        return None

    def gap_estimate(self) -> float | None:
        """The method's own duality-gap estimate (SDCA: mean stale block gap), or None."""
        return None

    def dual_value(self) -> float | None:
        """An incrementally maintained dual value D(μ), or None."""
        return None

    def close(self) -> None:  # noqa: B027 - optional hook, empty by default
        """Release resources (threads, files); called by the runner when the run ends."""

    # ------------------------------------------------------------------ helpers
    def count(self, *, updates: int = 0, iterations: int = 0) -> None:
        """Report committed weight updates to the problem.

        ``iterations`` is deprecated: iterations are counted from what :meth:`run_block`
        returns. A count given here is still taken (the block then adds none).
        """
        c = self.problem.counters
        if iterations:
            warnings.warn(
                f"{type(self).__name__}: Optimizer.count(iterations=...) is deprecated; "
                "iterations are counted from what run_block returns (docs/plugins.md)",
                DeprecationWarning,
                stacklevel=2,
            )
            c.add_iterations(iterations)
        if updates:
            c.add_updates(updates)


def _default_run_block(opt: Optimizer, k: int) -> int:
    done = 0
    while done < k and not opt.converged:
        opt.step()
        done += 1
    return done


#: Marks a run_block already wrapped by :func:`_counting_iterations`.
_COUNTS_ITERATIONS = "__crfopt_counts_iterations__"


def _counting_iterations(run_block: Callable[[Optimizer, int], int]) -> Any:
    """``run_block`` that adds the iterations it returns to the problem's counter.

    Iterations counted already when the block returns (an inner, also wrapped
    ``run_block`` reached through ``super()``, or a plugin written for the contract
    where plugins counted them) are not counted twice; a count that is neither 0 nor
    the number returned is a contract error.
    """

    @functools.wraps(run_block)
    def counted(self: Optimizer, k: int) -> int:
        counters = self.problem.counters
        before = counters.iterations
        done = run_block(self, k)
        already = counters.iterations - before
        if already == 0:
            if done:
                counters.add_iterations(int(done))
        elif already > 0 and already != done:  # backwards: the runner's guard says so
            raise RuntimeError(
                f"{type(self).__name__}.run_block({k}) returned {done} but the iterations "
                f"counter moved by {already}: iterations are counted from what run_block "
                "returns, so a plugin must not count them itself"
            )
        return done

    setattr(counted, _COUNTS_ITERATIONS, True)
    return counted


def _counting_step(step: Callable[[Optimizer], None]) -> Any:
    """``step`` that counts its iteration, unless something inside counted it already
    (the default step's ``run_block(1)``, or a plugin of the older contract)."""

    @functools.wraps(step)
    def counted(self: Optimizer) -> None:
        counters = self.problem.counters
        before = counters.iterations
        step(self)
        if counters.iterations == before:
            counters.add_iterations(1)

    setattr(counted, _COUNTS_ITERATIONS, True)
    return counted


Optimizer.run_block = _counting_iterations(Optimizer.run_block)  # type: ignore[method-assign]


@dataclass(frozen=True)
class OptimizerSpec:
    """A registered optimizer variant: a name, a class and its default parameters.

    Parameters
    ----------
    name : str
        What users type and tables show (``sdca-gap``).
    cls : type[Optimizer]
        The implementation.
    defaults : mapping
        Parameter values that define the variant (override the class defaults).
    summary : str
        One line for ``crfopt list``.
    reference : str
        The paper and section it implements (``LPL18 §3.3``).
    source : str
        Filled in by the plugin manager: where the registration came from.
    """

    name: str
    cls: type[Optimizer]
    defaults: Mapping[str, Any] = field(default_factory=dict)
    summary: str = ""
    reference: str = ""
    source: str = ""

    def __post_init__(self) -> None:
        import re

        if not re.fullmatch(r"[a-z][a-z0-9]*(-[a-z0-9*]+)*", self.name):
            raise ValueError(
                f"optimizer name {self.name!r} must be lower case, family first, with hyphens"
            )
        if not (isinstance(self.cls, type) and issubclass(self.cls, Optimizer)):
            raise TypeError(f"{self.name}: cls must be a crfopt.Optimizer subclass")
        bad_caps = set(self.cls.capabilities) - CAPABILITIES
        if bad_caps:
            raise ValueError(f"{self.name}: unknown capabilities {sorted(bad_caps)}")
        regs = self.cls.regularizers
        if not isinstance(regs, tuple) or "l2" not in regs or not set(regs) <= set(REGULARIZERS):
            raise ValueError(
                f"{self.name}: regularizers must be a tuple containing 'l2' with values "
                f"from {', '.join(map(repr, REGULARIZERS))}, got {regs!r}"
            )
        # Validate the declaration and the variant's own defaults now, so a bad
        # registration fails at load with the optimizer's and parameter's names.
        for pname, param in self.cls.parameters.items():
            if not isinstance(param, Param):
                raise TypeError(
                    f"{self.name}: parameter {pname!r} must be a crfopt.Param, "
                    f"got {type(param).__name__}"
                )
            param.check_declaration(pname, self.name)
        if not isinstance(self.cls.cost, Cost):
            raise TypeError(f"{self.name}: cost must be a crfopt.Cost")
        resolve_params(self.cls.parameters, dict(self.defaults), self.name)

    @property
    def capabilities(self) -> frozenset[str]:
        return frozenset(self.cls.capabilities)

    @property
    def regularizers(self) -> tuple[str, ...]:
        """The penalties the variant handles (``("l2",)`` or ``("l2", "l1")``)."""
        return tuple(self.cls.regularizers)

    def refusal(self, problem: CRFProblem) -> str | None:
        """Why this variant cannot solve ``problem`` (a penalty it does not handle), or None."""
        return regularizer_refusal(self.name, self.regularizers, problem)

    def parameters(self) -> dict[str, Param]:
        """Declared parameters with this variant's defaults."""
        out = {}
        for name, p in self.cls.parameters.items():
            if name in self.defaults:
                p = Param(
                    self.defaults[name], p.type, p.help, p.choices, p.allow_none, p.low, p.high
                )
            out[name] = p
        return out

    def resolve(self, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The full parameter set of a run: class defaults < variant defaults < overrides."""
        merged = dict(self.defaults)
        merged.update(overrides or {})
        return resolve_params(self.cls.parameters, merged, self.name)

    def create(
        self, problem: CRFProblem, seed: int = 0, overrides: Mapping[str, Any] | None = None
    ) -> Optimizer:
        return self.cls(problem, seed, **self.resolve(overrides))

    @property
    def doc(self) -> str:
        return (self.cls.__doc__ or "").strip()


def display_name(name: str, overrides: Mapping[str, Any] | None) -> str:
    """``sdca-gap[non_uniformity=0.5]``: the one notation for display and selection."""
    if not overrides:
        return name
    inner = ",".join(f"{k}={_fmt(v)}" for k, v in sorted(overrides.items()))
    return f"{name}[{inner}]"


def _fmt(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return "none"
    return str(v)


def canonical_params(params: Mapping[str, Any]) -> str:
    """Canonical JSON (sorted keys) of a parameter set: the ``params`` column."""
    return json.dumps(dict(params), sort_keys=True, separators=(",", ":"))
