"""Software prefetch for compiled loops that walk scattered rows of large arrays.

Sparse problems keep weights and SAG's gradient memory in arrays far larger than the
caches (CoNLL-2000: two 59 MB vectors of attribute rows), and a sequence reads a few
hundred of their rows in an order the hardware prefetcher cannot guess. A loop over
those rows waits on one row's cache misses at a time; asking for rows a few iterations
ahead keeps many misses in flight instead. A prefetch is only a hint: it reads and
writes nothing and never faults, so results are the same bit for bit with or without.

``prefetch_read(a, lo, n)`` hints that the flat entries ``lo … lo+n-1`` of the
C-contiguous array ``a`` (``a.reshape(-1)[lo:lo+n]``) will be read soon, one hint per
cache line; ``prefetch_write(a, lo, n)`` that they will be written (the line is fetched
ready to be modified; use it only for rows this thread updates, since on rows other
threads read it would pull the line away from their caches). Without the JIT both do
nothing.
"""

from __future__ import annotations

from crfopt.kernels.jit import JIT_ENABLED

#: float64 entries per 64-byte cache line.
LINE = 8

if JIT_ENABLED:
    import numba
    from llvmlite import ir
    from numba.core import cgutils, types
    from numba.extending import intrinsic

    def _hint(write: int):
        """An intrinsic f(a, j): llvm.prefetch of the flat entry j of array a."""

        @intrinsic
        def hint(typingctx, arr, index):
            sig = types.void(arr, index)

            def codegen(context, builder, signature, args):
                ary = context.make_array(signature.args[0])(context, builder, args[0])
                # the flat offset from the data pointer, whatever the array's rank: an
                # address past the end is only a wasted hint
                j = context.cast(builder, args[1], signature.args[1], types.intp)
                i8p = ir.IntType(8).as_pointer()
                i32 = ir.IntType(32)
                fnty = ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32])
                fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.prefetch.p0")
                ptr = builder.bitcast(builder.gep(ary.data, [j]), i8p)
                # (address, read 0 / write 1, locality 3: keep in all levels, data cache)
                builder.call(fn, [ptr, i32(write), i32(3), i32(1)])
                return context.get_dummy_value()

            return sig, codegen

        return hint

    _read_hint = _hint(0)
    _write_hint = _hint(1)

    @numba.njit(cache=True, nogil=True, inline="always")
    def prefetch_read(a, lo, n):
        """Hint that the flat entries a[lo:lo+n] will be read soon (no effect on values)."""
        if n > 0:
            for j in range(lo, lo + n, LINE):
                _read_hint(a, j)
            _read_hint(a, lo + n - 1)  # the span's last line when lo is not line-aligned

    @numba.njit(cache=True, nogil=True, inline="always")
    def prefetch_write(a, lo, n):
        """Hint that the flat entries a[lo:lo+n] will be written soon (no effect on values)."""
        if n > 0:
            for j in range(lo, lo + n, LINE):
                _write_hint(a, j)
            _write_hint(a, lo + n - 1)

else:

    def prefetch_read(a, lo, n):
        """No effect without the JIT."""

    def prefetch_write(a, lo, n):
        """No effect without the JIT."""


__all__ = ["LINE", "prefetch_read", "prefetch_write"]
