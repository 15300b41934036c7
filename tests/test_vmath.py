"""The vectorized log/exp agree with libm to within 1 ulp, and handle every edge case."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from crfopt.kernels.vmath import vexp, vlog


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
