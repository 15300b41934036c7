"""The switch between compiled (numba) and pure-Python execution.

``CRFOPT_DISABLE_JIT=1`` makes :func:`jit` the identity and :data:`prange` the builtin
``range``; :mod:`crfopt.kernels` then serves the pure-NumPy kernels instead of the numba
ones. Plugins decorate their inner loops with :func:`crfopt.jit` so that they follow the
same switch.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

JIT_ENABLED: bool = os.environ.get("CRFOPT_DISABLE_JIT", "").strip().lower() not in {
    "1",
    "true",
    "yes",
    "on",
}

if JIT_ENABLED:
    import numba

    prange = numba.prange

    def jit(func: F | None = None, *, parallel: bool = False, cache: bool = True) -> Any:
        """Compile ``func`` in nopython mode (``numba.njit``) unless the JIT is disabled."""
        decorator = numba.njit(parallel=parallel, cache=cache, nogil=True)
        return decorator if func is None else decorator(func)

else:
    prange = range

    def jit(func: F | None = None, *, parallel: bool = False, cache: bool = True) -> Any:
        """Identity decorator: the JIT is disabled by ``CRFOPT_DISABLE_JIT``."""
        if func is None:
            return lambda f: f
        return func


__all__ = ["JIT_ENABLED", "jit", "prange"]
