"""crfopt: train linear-chain CRFs and compare their optimizers on equal terms."""

from __future__ import annotations

from . import dual, kernels, samplers, vmath
from ._data import KernelData, Sequences
from ._jit import JIT_ENABLED, jit, prange
from ._version import __version__
from .compare import compare
from .counters import COUNTER_NAMES, Counters, CounterSnapshot
from .estimator import CRF
from .hookspecs import hookimpl, hookspec
from .model import Model, ModelFormatError
from .optim import pieces
from .optimizer import Cost, Optimizer, OptimizerSpec, Param, ParameterError
from .optimum import ReferenceOptimum, reference_optimum
from .problem import (
    CRFProblem,
    DualMarginals,
    ForwardResult,
    LocalGradient,
    OracleResult,
    WeightBlocks,
)
from .registry import ProblemSpec, Registry, get_registry, load_problem
from .results import read_results
from .runner import Budget, RunResult, Schedule, run
from .samplers import Sampler
from .synthetic import make_synthetic

__all__ = [
    "COUNTER_NAMES",
    "CRF",
    "JIT_ENABLED",
    "Budget",
    "CRFProblem",
    "Cost",
    "CounterSnapshot",
    "Counters",
    "DualMarginals",
    "ForwardResult",
    "KernelData",
    "LocalGradient",
    "Model",
    "ModelFormatError",
    "Optimizer",
    "OptimizerSpec",
    "OracleResult",
    "Param",
    "ParameterError",
    "ProblemSpec",
    "ReferenceOptimum",
    "Registry",
    "RunResult",
    "Sampler",
    "Schedule",
    "Sequences",
    "WeightBlocks",
    "__version__",
    "compare",
    "dual",
    "get_registry",
    "hookimpl",
    "hookspec",
    "jit",
    "kernels",
    "load_problem",
    "make_synthetic",
    "pieces",
    "prange",
    "read_results",
    "reference_optimum",
    "run",
    "samplers",
    "vmath",
]
