"""crfopt.borrowed (crfopt/kernels/jit.py): arrays without reference counting in a block.

The borrowed copy must reach the same memory as the original, leave the originals'
reference counts as they were (a borrowed array whose count numba still released would
free the caller's array early), and keep counting whatever is not an array.
"""

from __future__ import annotations

import sys
from typing import NamedTuple

import numpy as np
import pytest

import crfopt
from crfopt import borrowed, jit


class Inner(NamedTuple):
    a: np.ndarray
    scale: float


class Outer(NamedTuple):
    x: np.ndarray
    inner: Inner
    n: int
    flags: np.ndarray


@jit(cache=False)
def _accumulate(st, out, k):
    st, out = borrowed((st, out))
    total = 0.0
    for _ in range(k):
        x, a = st.x, st.inner.a
        for j in range(x.shape[0]):
            a[j] += st.inner.scale * x[j]
            total += a[j]
        st.flags[0] += st.n
        out[0] = total
    return out[:1].sum()


def _outer() -> Outer:
    return Outer(np.arange(4.0), Inner(np.zeros(4), 0.5), 3, np.zeros(1, dtype=np.int64))


def test_a_borrowed_tuple_reaches_the_same_memory():
    st, out = _outer(), np.zeros(1)
    got = _accumulate(st, out, 3)
    want_a = 3 * 0.5 * np.arange(4.0)
    np.testing.assert_array_equal(st.inner.a, want_a)
    assert st.flags[0] == 9
    assert got == out[0] == pytest.approx(0.5 * 6 * (1 + 2 + 3))


def test_borrowing_leaves_the_callers_reference_counts_alone():
    st, out = _outer(), np.zeros(1)
    _accumulate(st, out, 1)  # compiled
    before = [sys.getrefcount(v) for v in (st.x, st.inner.a, st.flags, out)]
    for _ in range(200):
        _accumulate(st, out, 2)
    after = [sys.getrefcount(v) for v in (st.x, st.inner.a, st.flags, out)]
    assert after == before


@pytest.mark.skipif(not crfopt.JIT_ENABLED, reason="needs numba's reference counting")
def test_counted_values_that_are_not_arrays_stay_counted():
    """A list inside a borrowed tuple is shared, not borrowed: the block's copy holds a
    reference of its own, so the list outlives the tuple it came in."""
    import numba

    @numba.njit
    def build_and_borrow(x):
        items = [x.sum(), 1.0]
        kept = borrowed((x, items))[1]
        kept.append(2.0)
        return kept

    assert build_and_borrow(np.ones(3)) == [3.0, 1.0, 2.0]


def test_in_python_it_returns_the_value_itself():
    value = _outer()
    assert borrowed(value) is value
