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

#: The variable that turns the JIT off, and the spellings it accepts.
ENV_VAR = "CRFOPT_DISABLE_JIT"
_DISABLE = frozenset({"1", "true", "yes", "on"})
_ENABLE = frozenset({"0", "false", "no", "off", ""})


def jit_disabled(value: str | None) -> bool:
    """Whether ``CRFOPT_DISABLE_JIT=value`` disables the JIT (None: variable unset).

    The one reading of the variable: the kernels, run keys, result provenance and the
    runner's warm-up all follow :data:`JIT_ENABLED`, computed here once. Anything but
    1/true/yes/on (disable) or 0/false/no/off/empty (enable), case-insensitive, is
    refused rather than guessed, since a misread switch silently changes which kernels
    every run uses.
    """
    text = "" if value is None else value.strip().lower()
    if text in _DISABLE:
        return True
    if text in _ENABLE:
        return False
    raise ValueError(
        f"{ENV_VAR}={value!r} is not understood: use 1/true/yes/on to disable the JIT, "
        "or 0/false/no/off (or leave it empty/unset) to keep it"
    )


JIT_ENABLED: bool = not jit_disabled(os.environ.get(ENV_VAR))

if JIT_ENABLED:
    import numba

    prange = numba.prange

    # Reassociation and contraction let LLVM vectorize reductions over labels; the flags
    # that assume no NaN/inf stay off, so divergence still shows up as NaN.
    SAFE_FASTMATH = frozenset({"contract", "reassoc", "nsz", "arcp"})

    def jit(
        func: F | None = None,
        *,
        parallel: bool = False,
        cache: bool = True,
        fastmath: bool = False,
        inline: bool = False,
    ) -> Any:
        """Compile ``func`` in nopython mode (``numba.njit``) unless the JIT is disabled.

        NumPy's error model is used: a float division by zero gives inf or NaN instead of
        raising, as in NumPy, and loops with divisions can be vectorized. With
        ``fastmath=True`` floating-point sums may be reassociated (vectorized reductions;
        results change in the last bits, deterministically) — never the no-NaN/no-inf
        assumptions. ``inline=True`` inlines the function into its callers at numba's IR
        level: use it for small helpers that take namedtuples of arrays, since a real call
        increments and decrements the reference count of every array in the tuple
        (measured: 150 ns per call for 14 arrays, 28x a 26-entry row update).
        """
        decorator = numba.njit(
            parallel=parallel,
            cache=cache,
            nogil=True,
            error_model="numpy",
            fastmath=set(SAFE_FASTMATH) if fastmath else False,
            inline="always" if inline else "never",
        )
        return decorator if func is None else decorator(func)

else:
    prange = range

    def jit(
        func: F | None = None,
        *,
        parallel: bool = False,
        cache: bool = True,
        fastmath: bool = False,
        inline: bool = False,
    ) -> Any:
        """Identity decorator: the JIT is disabled by ``CRFOPT_DISABLE_JIT``."""
        if func is None:
            return lambda f: f
        return func


__all__ = ["ENV_VAR", "JIT_ENABLED", "jit", "jit_disabled", "prange"]
