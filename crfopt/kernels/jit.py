"""The switch between compiled (numba) and pure-Python execution.

``CRFOPT_DISABLE_JIT=1`` makes :func:`jit` the identity and :data:`prange` the builtin
``range``; :mod:`crfopt.kernels` then serves the pure-NumPy kernels instead of the numba
ones. Plugins decorate their inner loops with :func:`crfopt.jit` so that they follow the
same switch.

Compiled kernels are cached on disk (``cache=True``: next to the module, or under
``NUMBA_CACHE_DIR``), so only the first run of an install compiles (about two minutes on
a laptop; ``crfopt compile``, :mod:`crfopt.bench.warmup`, does it ahead of time); later
processes load the machine code. The first real compilation of a
crfopt kernel in a process prints "compiling kernels (once) …" on stderr, so that wait
is never silent; a process that loads everything from the cache prints nothing.
"""

from __future__ import annotations

import functools
import hashlib
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")

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

#: The modules whose compilation is announced (the package's kernels and plugins).
_ANNOUNCED_MODULES = ("crfopt", "crfopt_plugins", "crfopt_datasets")
#: The attribute :func:`jit` sets on the functions it compiles.
_MARK = "__crfopt_jit__"


def _compile_notice() -> str:
    where = os.environ.get("NUMBA_CACHE_DIR") or "__pycache__ folders beside the modules"
    return (
        "compiling kernels (once): a first run takes a minute or two; the machine code is "
        f"cached in {where} and loaded by later runs (`crfopt compile` does this ahead of "
        "time, once after installing)"
    )


def compiled_sources_digest(root: Path | None = None) -> str:
    """A digest of crfopt's compiled sources: every module of ``crfopt/kernels`` (its
    constants, e.g. the counter slots, are frozen into machine code too) and every other
    crfopt module that compiles something (its text contains ``jit(``).

    numba's disk cache checks only the source file of the function it caches, so a
    cached optimizer block that inlines a crfopt kernel kept the old kernel's code after
    that kernel changed (an edit, or an upgrade that left a plugin file as it was). The
    cache stamp of every crfopt and :func:`jit`-compiled function includes this digest.
    """
    return _package_digest() if root is None else _digest_of(root)


@functools.cache
def _package_digest() -> str:
    return _digest_of(Path(__file__).resolve().parent.parent)


def _digest_of(root: Path) -> str:
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        data = path.read_bytes()
        if rel.startswith("kernels/") or b"jit(" in data:
            h.update(rel.encode() + b"\0" + data + b"\0")
    return h.hexdigest()


if JIT_ENABLED:
    import numba
    from numba.core import caching as _numba_caching
    from numba.core import event as _numba_event

    prange = numba.prange

    # numba's locator list and base class are private: a numba without them keeps its
    # own stamps (tests/test_cache_stamp.py then fails, so CI says so), rather than
    # crfopt failing to import.
    _NUMBA_LOCATORS = tuple(
        getattr(getattr(_numba_caching, "CacheImpl", None), "_locator_classes", ())
    )
    _LocatorBase: Any = getattr(_numba_caching, "_CacheLocator", object)

    class _CompiledSourcesLocator(_LocatorBase):
        """numba's own cache locator for the function, with the stamp extended by
        :func:`compiled_sources_digest`, for crfopt's functions and those compiled with
        :func:`jit` (plugins): a changed kernel makes their cache entries stale."""

        def __init__(self, inner: Any) -> None:
            self._inner = inner

        def ensure_cache_path(self) -> None:
            self._inner.ensure_cache_path()

        def get_cache_path(self) -> str:
            return self._inner.get_cache_path()

        def get_source_stamp(self) -> Any:
            return (self._inner.get_source_stamp(), compiled_sources_digest())

        def get_disambiguator(self) -> str:
            return self._inner.get_disambiguator()

        def __getattr__(self, name: str) -> Any:
            # numba reads other attributes of its locator too (``_py_file`` in its
            # "cannot cache" warning): answer them as the wrapped locator would
            return getattr(self._inner, name)

        @classmethod
        def from_function(cls, py_func: Any, py_file: str) -> Any:
            module = (getattr(py_func, "__module__", "") or "").split(".")[0]
            if module not in _ANNOUNCED_MODULES and not getattr(py_func, _MARK, False):
                return None
            for locator in _NUMBA_LOCATORS:
                inner = locator.from_function(py_func, py_file)
                if inner is not None:
                    return cls(inner)
            return None

    if _NUMBA_LOCATORS and _LocatorBase is not object:
        _numba_caching.CacheImpl._locator_classes = [_CompiledSourcesLocator, *_NUMBA_LOCATORS]

    class _FirstCompileNotice(_numba_event.Listener):
        """Says "compiling kernels (once)" on stderr at the first compilation of a crfopt
        function in this process. numba fires ``numba:compile`` only for a real compile,
        never for a load from the disk cache, so a warm cache stays silent."""

        def __init__(self) -> None:
            self.done = False
            self._lock = threading.Lock()

        def on_start(self, ev: Any) -> None:
            if self.done:
                return
            dispatcher = (ev.data or {}).get("dispatcher")
            module = getattr(getattr(dispatcher, "py_func", None), "__module__", "") or ""
            if module.split(".")[0] not in _ANNOUNCED_MODULES:
                return
            with self._lock:
                if not self.done:
                    self.done = True
                    print(_compile_notice(), file=sys.stderr, flush=True)

        def on_end(self, ev: Any) -> None:
            pass

    _numba_event.register("numba:compile", _FirstCompileNotice())

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
        (measured: 150 ns per call for 14 arrays, 28x a 26-entry row update). Inlined
        helpers still count references on entry; :func:`borrowed` removes that too.
        """
        decorator = numba.njit(
            parallel=parallel,
            cache=cache,
            nogil=True,
            error_model="numpy",
            fastmath=set(SAFE_FASTMATH) if fastmath else False,
            inline="always" if inline else "never",
        )

        def compile_marked(f: F) -> Any:
            setattr(f, _MARK, True)  # its cache entries follow crfopt's kernels too
            return decorator(f)

        return compile_marked if func is None else compile_marked(func)

    from numba.core import types as _types
    from numba.extending import intrinsic as _intrinsic
    from numba.extending import overload as _overload

    def _borrow(context: Any, builder: Any, ty: Any, value: Any) -> Any:
        if isinstance(ty, _types.Array):
            src = context.make_array(ty)(context, builder, value=value)
            dst = context.make_array(ty)(context, builder)
            context.populate_array(
                dst,
                data=src.data,
                shape=src.shape,
                strides=src.strides,
                itemsize=src.itemsize,
                meminfo=None,
            )
            return dst._getvalue()
        if isinstance(ty, _types.BaseTuple):
            for k, member in enumerate(ty):
                inner = _borrow(context, builder, member, builder.extract_value(value, k))
                value = builder.insert_value(value, inner, k)
            return value
        # the caller owns the result: anything else counted (a list, a string) is shared
        context.nrt.incref(builder, ty, value)
        return value

    @_intrinsic
    def _borrowed(typingctx: Any, value: Any) -> Any:
        def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
            return _borrow(context, builder, signature.args[0], args[0])

        return value(value), codegen

    def borrowed(value: T) -> T:
        """``value`` with its arrays (also inside namedtuples) borrowed, not referenced.

        In compiled code every array variable, every array passed to a helper and every
        array read from a namedtuple takes and releases a reference: an atomic increment
        and decrement of the array's count, about 20 cycles each, hundreds per iteration
        of an optimizer whose helpers take tuples of arrays (14 % of a SAG-NUS* step on
        OCR). The borrowed copy shares the data but has no reference count to update.

        Call it at the top of a compiled block on the block's own arguments, which keep
        the arrays alive until the block returns; never let a borrowed array outlive them
        (return it, store it in a container, or keep it in a global), and never borrow an
        array the function allocates itself: numba frees that after its last use, which
        may be the borrowing. In a ``parallel=True`` function, borrow inside the
        ``prange`` body (an inlined helper's first line will do): numba 0.68 cannot lower
        a parallel loop that uses tuples borrowed outside it. In Python, and with the JIT
        disabled, it returns ``value`` itself.
        """
        return value

    # not cached: its index would hold every caller's namedtuple types, and a process
    # without a caller's module (a plugin folder, a test) could not read the index
    @_overload(borrowed)
    def _borrowed_overload(value):  # numba compares its signature with the lambda's
        return lambda value: _borrowed(value)

else:
    prange = range

    def borrowed(value: T) -> T:
        """``value`` itself: the JIT is disabled (see the compiled version's docstring)."""
        return value

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


__all__ = [
    "ENV_VAR",
    "JIT_ENABLED",
    "borrowed",
    "compiled_sources_digest",
    "jit",
    "jit_disabled",
    "prange",
]
