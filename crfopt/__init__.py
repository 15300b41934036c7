"""crfopt: train linear-chain CRFs and compare their optimizers on equal terms."""

from __future__ import annotations

from . import kernels
from ._data import KernelData, Sequences
from ._jit import JIT_ENABLED, jit, prange
from .counters import COUNTER_NAMES, Counters, CounterSnapshot
from .hookspecs import hookimpl, hookspec
from .optimizer import Optimizer, OptimizerSpec, Param, ParameterError
from .problem import (
    CRFProblem,
    DualMarginals,
    ForwardResult,
    LocalGradient,
    OracleResult,
    WeightBlocks,
)
from .registry import ProblemSpec, Registry, get_registry, load_problem
from .synthetic import make_synthetic

__version__ = "0.1.0"

__all__ = [
    "COUNTER_NAMES",
    "JIT_ENABLED",
    "CRFProblem",
    "CounterSnapshot",
    "Counters",
    "DualMarginals",
    "ForwardResult",
    "KernelData",
    "LocalGradient",
    "Optimizer",
    "OptimizerSpec",
    "OracleResult",
    "Param",
    "ParameterError",
    "ProblemSpec",
    "Registry",
    "Sequences",
    "WeightBlocks",
    "__version__",
    "get_registry",
    "hookimpl",
    "hookspec",
    "jit",
    "kernels",
    "load_problem",
    "make_synthetic",
    "prange",
]
