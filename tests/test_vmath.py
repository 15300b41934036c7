"""The vectorized log/exp agree with libm to within 1 ulp, and handle every edge case."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crfopt.kernels.vmath import exp_scalar, log_scalar, vexp, vlog


def _ulps(got, ref):
    ref = np.asarray(ref)
    finite = np.isfinite(ref) & (ref != 0)
    err = np.zeros_like(ref)
    err[finite] = np.abs(got[finite] - ref[finite]) / np.spacing(np.abs(ref[finite]))
    return err


def test_log_accuracy_over_probabilities():
    rng = np.random.default_rng(0)
    x = np.concatenate(
        [
            np.exp(rng.uniform(-745, 0, 20000)),
            rng.random(20000),
            1 - rng.random(1000) * 1e-12,
            [1.0, 0.5, 2.0, 1e300],
        ]
    )
    out = np.empty_like(x)
    vlog(x, out, len(x))
    assert _ulps(out, np.log(x)).max() <= 1.0


def test_log_edge_cases():
    x = np.array([0.0, -1.0, np.inf, np.nan, 5e-324, 1e-310, 2.2250738585072014e-308])
    out = np.empty_like(x)
    vlog(x, out, len(x))
    with np.errstate(divide="ignore", invalid="ignore"):
        ref = np.log(x)
    np.testing.assert_array_equal(np.isnan(out), np.isnan(ref))
    ok = ~np.isnan(ref)
    np.testing.assert_allclose(out[ok], ref[ok], rtol=1e-15)


def test_exp_accuracy_and_edges():
    rng = np.random.default_rng(1)
    x = np.concatenate(
        [
            rng.uniform(-745, 0, 20000),
            rng.uniform(-1, 1, 5000),
            [0.0, -708.5, -740.0, -746.0, -np.inf, 1.0, 700.0, np.nan],
        ]
    )
    out = np.empty_like(x)
    vexp(x, out, len(x))
    ref = np.exp(x)
    assert _ulps(out, ref)[np.abs(ref) > 2.3e-308].max() <= 1.0
    np.testing.assert_array_equal(out[ref == 0], 0.0)
    assert np.isnan(out[-1])
    sub = (ref > 0) & (ref < 2.3e-308)
    np.testing.assert_allclose(out[sub], ref[sub], rtol=1e-12)


def test_only_the_first_n_entries_are_written():
    x = np.array([1.0, 2.0, 3.0])
    out = np.full(3, -7.0)
    vlog(x, out, 2)
    assert out[2] == -7.0 and out[0] == 0.0


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(min_value=1e-300, max_value=1.0), min_size=1, max_size=64))
def test_log_exp_roundtrip(values):
    x = np.array(values)
    lx = np.empty_like(x)
    vlog(x, lx, len(x))
    back = np.empty_like(x)
    vexp(lx, back, len(x))
    np.testing.assert_allclose(back, x, rtol=1e-13)


def test_scalar_forms_in_a_reassociating_loop_give_vlog_and_vexp_bits():
    """log_scalar/exp_scalar inlined into a loop compiled with reassociation (as SDCA's
    fused kernels are) keep fdlibm's evaluation order: the same bits as vlog/vexp."""
    from crfopt.kernels.jit import JIT_ENABLED

    if not JIT_ENABLED:
        pytest.skip("the NumPy path has no compiled loop")
    import numba

    @numba.njit(fastmath={"contract", "reassoc", "nsz", "arcp"}, error_model="numpy")
    def both(x, y, lo, ex):
        total = 0.0
        for j in range(x.shape[0]):
            lo[j] = log_scalar(x[j])
            ex[j] = exp_scalar(y[j])
            total += lo[j] + ex[j]  # a reduction: the loop vectorizes only with reassoc
        return total

    rng = np.random.default_rng(3)
    x = np.concatenate([np.exp(rng.uniform(-700, 0, 5000)), rng.random(5000) + 1e-300])
    y = np.concatenate([rng.uniform(-708, 0, 5000), rng.uniform(-5, 5, 5000)])
    lo, ex, ref_lo, ref_ex = (np.empty_like(x) for _ in range(4))
    both(x, y, lo, ex)
    vlog(x, ref_lo, len(x))
    vexp(y, ref_ex, len(y))
    np.testing.assert_array_equal(lo.view(np.int64), ref_lo.view(np.int64))
    np.testing.assert_array_equal(ex.view(np.int64), ref_ex.view(np.int64))
