"""crfopt: train linear-chain CRFs and compare their optimizers on equal terms.

The package is layered (``docs/architecture.md``)::

    apps  →  bench  →  optim  →  core  →  kernels
                  ↘    data   ↗

and ``import crfopt`` loads none of it: every public name below is resolved on first
use (PEP 562), so a worker, a plugin or ``crfopt --help`` pays only for what it touches
(pandas, pyarrow, seaborn and scipy.optimize load with the layers that need them).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from crfopt._version import __version__

#: public name → (module, attribute); attribute None means the module itself.
_PUBLIC: dict[str, tuple[str, str | None]] = {
    # kernels
    "kernels": ("crfopt.kernels", None),
    "vmath": ("crfopt.kernels.vmath", None),
    "prefetch": ("crfopt.kernels.prefetch", None),
    "JIT_ENABLED": ("crfopt.kernels.jit", "JIT_ENABLED"),
    "jit": ("crfopt.kernels.jit", "jit"),
    "borrowed": ("crfopt.kernels.jit", "borrowed"),
    "prange": ("crfopt.kernels.jit", "prange"),
    "KernelData": ("crfopt.kernels.arrays", "KernelData"),
    "Sequences": ("crfopt.kernels.arrays", "Sequences"),
    "COUNTER_NAMES": ("crfopt.kernels.counters", "COUNTER_NAMES"),
    "Counters": ("crfopt.kernels.counters", "Counters"),
    "CounterSnapshot": ("crfopt.kernels.counters", "CounterSnapshot"),
    # core
    "CRFProblem": ("crfopt.core.problem", "CRFProblem"),
    "DualMarginals": ("crfopt.core.problem", "DualMarginals"),
    "ForwardResult": ("crfopt.core.problem", "ForwardResult"),
    "LocalGradient": ("crfopt.core.problem", "LocalGradient"),
    "OracleResult": ("crfopt.core.problem", "OracleResult"),
    "WeightBlocks": ("crfopt.core.problem", "WeightBlocks"),
    "make_synthetic": ("crfopt.core.synthetic", "make_synthetic"),
    # optim
    "Cost": ("crfopt.optim.contract", "Cost"),
    "Optimizer": ("crfopt.optim.contract", "Optimizer"),
    "OptimizerSpec": ("crfopt.optim.contract", "OptimizerSpec"),
    "Param": ("crfopt.optim.contract", "Param"),
    "ParameterError": ("crfopt.optim.contract", "ParameterError"),
    "UnsupportedProblemError": ("crfopt.optim.contract", "UnsupportedProblemError"),
    "hookimpl": ("crfopt.optim.hookspecs", "hookimpl"),
    "hookspec": ("crfopt.optim.hookspecs", "hookspec"),
    "samplers": ("crfopt.optim.samplers", None),
    "Sampler": ("crfopt.optim.samplers", "Sampler"),
    "dual": ("crfopt.optim.dual", None),
    "pieces": ("crfopt.optim.pieces", None),
    "MetricSpec": ("crfopt.optim.registry", "MetricSpec"),
    "ProblemSpec": ("crfopt.optim.registry", "ProblemSpec"),
    "Registry": ("crfopt.optim.registry", "Registry"),
    "get_registry": ("crfopt.optim.registry", "get_registry"),
    # bench
    "load_problem": ("crfopt.bench.problems", "load_problem"),
    "Budget": ("crfopt.bench.runner", "Budget"),
    "RunResult": ("crfopt.bench.runner", "RunResult"),
    "Checkpoint": ("crfopt.bench.evaluator", "Checkpoint"),
    "Schedule": ("crfopt.bench.runner", "Schedule"),
    "run": ("crfopt.bench.runner", "run"),
    "compare": ("crfopt.bench.compare", "compare"),
    "read_results": ("crfopt.bench.results", "read_results"),
    "ReferenceOptimum": ("crfopt.bench.optimum", "ReferenceOptimum"),
    "reference_optimum": ("crfopt.bench.optimum", "reference_optimum"),
    "testing": ("crfopt.testing", None),
    # apps
    "CRF": ("crfopt.apps.estimator", "CRF"),
    "Model": ("crfopt.apps.model", "Model"),
    "ModelFormatError": ("crfopt.apps.model", "ModelFormatError"),
}

__all__ = sorted([*_PUBLIC, "__version__"])


def __getattr__(name: str) -> Any:
    try:
        module, attr = _PUBLIC[name]
    except KeyError:
        raise AttributeError(f"module 'crfopt' has no attribute {name!r}") from None
    value = importlib.import_module(module)
    if attr is not None:
        value = getattr(value, attr)
    globals()[name] = value  # resolved once
    return value


def __dir__() -> list[str]:
    return __all__


if TYPE_CHECKING:  # static analysers and IDEs see the eager imports
    from crfopt import dual, kernels, pieces, prefetch, samplers, testing, vmath
    from crfopt.apps.estimator import CRF
    from crfopt.apps.model import Model, ModelFormatError
    from crfopt.bench.compare import compare
    from crfopt.bench.evaluator import Checkpoint
    from crfopt.bench.optimum import ReferenceOptimum, reference_optimum
    from crfopt.bench.problems import load_problem
    from crfopt.bench.results import read_results
    from crfopt.bench.runner import Budget, RunResult, Schedule, run
    from crfopt.core.problem import (
        CRFProblem,
        DualMarginals,
        ForwardResult,
        LocalGradient,
        OracleResult,
        WeightBlocks,
    )
    from crfopt.core.synthetic import make_synthetic
    from crfopt.kernels.arrays import KernelData, Sequences
    from crfopt.kernels.counters import COUNTER_NAMES, Counters, CounterSnapshot
    from crfopt.kernels.jit import JIT_ENABLED, borrowed, jit, prange
    from crfopt.optim.contract import (
        Cost,
        Optimizer,
        OptimizerSpec,
        Param,
        ParameterError,
        UnsupportedProblemError,
    )
    from crfopt.optim.hookspecs import hookimpl, hookspec
    from crfopt.optim.registry import MetricSpec, ProblemSpec, Registry, get_registry
    from crfopt.optim.samplers import Sampler
