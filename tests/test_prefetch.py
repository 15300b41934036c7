"""crfopt.kernels.prefetch: the hints compile to prefetch instructions and change nothing;
``stream_copy`` compiles to streaming stores and copies exactly what a plain copy does.

The sparse kernels that use them (SAG's lazy catch-up, the unary scores) are checked
against independent truths in test_pieces.py and test_oracle.py; here, the hints
themselves: that the compiled code really holds them (an intrinsic that compiled to
nothing would silently lose the speed), one per cache line of a span, and that spans
past either end of an array, which a loop running ahead produces, neither fault nor
write.
"""

from __future__ import annotations

import platform
import re

import numpy as np
import pytest

from crfopt import jit
from crfopt.kernels.jit import JIT_ENABLED
from crfopt.kernels.prefetch import prefetch_read, prefetch_write, stream_copy


@jit(cache=False)
def _hint_spans(a, idx, lo, n):
    prefetch_read(a, lo, n)
    prefetch_write(idx, lo, n)
    return a[0] + idx[0]


@pytest.mark.skipif(not JIT_ENABLED, reason="the hints exist only in compiled code")
@pytest.mark.skipif(
    platform.machine().lower() not in ("x86_64", "amd64"), reason="x86 instruction names"
)
def test_spans_compile_to_read_and_write_hints():
    a, idx = np.arange(64.0), np.arange(64, dtype=np.int32)
    _hint_spans(a, idx, 3, 22)
    asm = "\n".join(_hint_spans.inspect_asm().values())
    # prefetcht0: read, keep in every cache level; prefetchw: fetch ready for writing
    assert re.search(r"\bprefetcht0\b", asm)
    assert re.search(r"\bprefetchw\b", asm)


def test_hints_change_no_value_and_spans_past_the_ends_do_not_fault():
    a = np.arange(16.0)
    idx = np.arange(16, dtype=np.int32)
    before = (a.copy(), idx.copy())
    for lo, n in [(0, 16), (5, 3), (14, 40), (1_000_000, 8), (-1_000, 8), (3, 0), (3, -2)]:
        assert _hint_spans(a, idx, lo, n) == 0.0
    np.testing.assert_array_equal(a, before[0])
    np.testing.assert_array_equal(idx, before[1])


@pytest.mark.skipif(not JIT_ENABLED, reason="streaming stores exist only in compiled code")
@pytest.mark.skipif(
    platform.machine().lower() not in ("x86_64", "amd64"), reason="x86 instruction names"
)
def test_stream_copy_compiles_to_streaming_stores_and_a_fence():
    import numba

    fresh = numba.njit(stream_copy.py_func)  # the cached function cannot show its assembly
    fresh(np.zeros(40), 3, np.ones(40), 30)
    asm = "\n".join(fresh.inspect_asm().values())
    # vmovntdq / vmovntpd / movntps …: stores that bypass the caches; sfence orders them
    assert re.search(r"\bv?movnt(dq|pd|ps)\b", asm)
    assert re.search(r"\bsfence\b", asm)


@pytest.mark.parametrize("shape", [(3 * 64 + 5,), (6, 5, 7), (9, 26)])
def test_stream_copy_writes_the_span_and_nothing_else(shape):
    """Every start (so every alignment of the first line) and lengths around whole lines:
    the result equals a plain copy into the flat span, bit for bit, the rest untouched."""
    rng = np.random.default_rng(7)
    dst = rng.standard_normal(shape)
    size = dst.size
    for lo in range(0, 17):
        for n in (0, 1, 7, 8, 9, 15, 16, 17, 31, 64, 65, size - lo):
            if n > size - lo:
                continue
            # OEG's source is a 3-D work table read flat from its start
            src = rng.standard_normal((n + 5,) if lo % 2 else (n + 5, 1, 1))
            want = dst.reshape(-1).copy()
            want[lo : lo + n] = src.reshape(-1)[:n]
            stream_copy(dst, lo, src, n)
            np.testing.assert_array_equal(dst.reshape(-1), want, err_msg=f"lo={lo}, n={n}")


@pytest.mark.skipif(not JIT_ENABLED, reason="the compiled copy's typing")
def test_stream_copy_refuses_other_dtypes():
    """A 64-byte line is eight float64 entries: a float32 table is a typing error, not a
    copy of the wrong width."""
    import numba

    with pytest.raises(numba.core.errors.TypingError):
        stream_copy(np.zeros(32, dtype=np.float32), 0, np.ones(32, dtype=np.float32), 16)
