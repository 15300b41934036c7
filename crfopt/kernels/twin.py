"""The one JIT switch of the kernels: which twin every caller runs.

``impl`` is :mod:`crfopt.kernels._numba` (compiled) unless ``CRFOPT_DISABLE_JIT`` turns
the JIT off, then :mod:`crfopt.kernels._numpy`. The plugin-facing API
(:mod:`crfopt.kernels`) and the core's full-batch evaluation (``core.problem``,
``core.duality``) all take their functions from here, so a process never mixes twins.
"""

from __future__ import annotations

from crfopt.kernels.jit import JIT_ENABLED

if JIT_ENABLED:
    from crfopt.kernels import _numba as impl
else:
    from crfopt.kernels import _numpy as impl

__all__ = ["impl"]
