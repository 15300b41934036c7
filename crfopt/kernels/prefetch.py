"""Cache hints for compiled loops: software prefetch, and streaming stores.

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

``stream_copy(dst, lo, src, n)`` sets the flat entries ``lo … lo+n-1`` of the float64
array ``dst`` to the first ``n`` of ``src``, bit for bit a plain copy, but writes every
whole 64-byte line of the span with non-temporal stores: the line goes to memory
without being read first and without taking a place in the caches. It suits a block of
a table far larger than the caches that the loop writes and will not read again soon
(OEG's stored log-marginals, written at each accepted trial and never read by its loop):
an ordinary store first reads every line it writes, which doubles the memory traffic.
The partial lines at either end take ordinary stores, and a fence after the copy orders
the streamed lines before any later access, by this thread or another.
"""

from __future__ import annotations

from crfopt.kernels.jit import JIT_ENABLED

#: float64 entries per 64-byte cache line.
LINE = 8

if JIT_ENABLED:
    import platform

    import numba
    from llvmlite import ir
    from numba.core import cgutils, types
    from numba.extending import intrinsic

    _X86 = platform.machine().lower() in ("x86_64", "amd64", "i386", "i686", "x86")

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

    @intrinsic
    def _stream_line(typingctx, dst, j, src, k):
        """dst.flat[j:j+8] = src.flat[k:k+8]: one non-temporal store of a 64-byte line
        (the caller makes dst's entry j 64-byte aligned)."""
        if not all(isinstance(a, types.Array) and a.dtype == types.float64 for a in (dst, src)):
            return None  # a typing error: the line is eight float64 entries
        sig = types.void(dst, j, src, k)

        def codegen(context, builder, signature, args):
            d = context.make_array(signature.args[0])(context, builder, args[0])
            s = context.make_array(signature.args[2])(context, builder, args[2])
            jj = context.cast(builder, args[1], signature.args[1], types.intp)
            kk = context.cast(builder, args[3], signature.args[3], types.intp)
            line = ir.VectorType(ir.DoubleType(), LINE)
            value = builder.load(
                builder.bitcast(builder.gep(s.data, [kk]), line.as_pointer()), align=8
            )
            store = builder.store(
                value, builder.bitcast(builder.gep(d.data, [jj]), line.as_pointer()), align=64
            )
            store.set_metadata(
                "nontemporal", builder.module.add_metadata([ir.Constant(ir.IntType(32), 1)])
            )
            return context.get_dummy_value()

        return sig, codegen

    @intrinsic
    def _store_fence(typingctx):
        """Orders the streamed stores before every later memory access (they are weakly
        ordered on x86)."""
        sig = types.void()

        def codegen(context, builder, signature, args):
            if _X86:
                # sfence: a locked instruction, LLVM's seq_cst fence on x86, is not
                # documented to order streaming stores
                fn = cgutils.get_or_insert_function(
                    builder.module, ir.FunctionType(ir.VoidType(), []), "llvm.x86.sse.sfence"
                )
                builder.call(fn, [])
            else:
                builder.fence("seq_cst")
            return context.get_dummy_value()

        return sig, codegen

    @intrinsic
    def _address(typingctx, arr):
        """The address of arr's first entry (signed: user-space addresses are below 2⁶³,
        and the line arithmetic mixes it with signed offsets)."""
        sig = types.intp(arr)

        def codegen(context, builder, signature, args):
            ary = context.make_array(signature.args[0])(context, builder, args[0])
            return builder.ptrtoint(ary.data, ir.IntType(context.address_size))

        return sig, codegen

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

    @numba.njit(cache=True, nogil=True)
    def stream_copy(dst, lo, src, n):
        """dst.flat[lo:lo+n] = src.flat[:n] (float64, C-contiguous), whole lines of dst
        written with non-temporal stores; the values are a plain copy's."""
        if n <= 0:
            return
        # entries before dst's first line boundary at or after lo (Python's %: ≥ 0)
        head = min((-(_address(dst) + 8 * lo) % (8 * LINE)) // 8, n)
        d = dst.reshape(-1)
        s = src.reshape(-1)
        for j in range(head):
            d[lo + j] = s[j]
        j = head
        while j + LINE <= n:
            _stream_line(d, lo + j, s, j)
            j += LINE
        for m in range(j, n):
            d[lo + m] = s[m]
        _store_fence()

else:

    def stream_copy(dst, lo, src, n):
        """A plain copy without the JIT."""
        if n > 0:
            dst.reshape(-1)[lo : lo + n] = src.reshape(-1)[:n]

    def prefetch_read(a, lo, n):
        """No effect without the JIT."""

    def prefetch_write(a, lo, n):
        """No effect without the JIT."""


__all__ = ["LINE", "prefetch_read", "prefetch_write", "stream_copy"]
