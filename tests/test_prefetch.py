"""crfopt.kernels.prefetch: the hints compile to prefetch instructions and change nothing.

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
from crfopt.kernels.prefetch import prefetch_read, prefetch_write


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
