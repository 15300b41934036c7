"""Vectorizable natural log and exp for compiled loops over many entries.

Dual methods take the log or exp of every entry of K×K edge tables several times per
iteration, and libm's scalar calls (≈4 ns each here) dominate their time. These are
fdlibm's algorithms (``e_log.c``, ``e_exp.c``: same reductions and minimax
coefficients, < 1 ulp) written as straight-line arithmetic on the IEEE bit fields of
whole arrays, so LLVM turns them into SIMD code (≈1 ns per entry with AVX2). Inputs
outside the range the vector path handles (log: not a positive normal number; exp:
below -708 or non-finite) are fixed up with the scalar libm call, so results are
correct everywhere.

``vlog(x, out, n)`` and ``vexp(x, out, n)`` act on the first ``n`` entries of flat
C-contiguous float64 arrays. With ``CRFOPT_DISABLE_JIT=1`` they are ``numpy.log`` /
``numpy.exp``.
"""

from __future__ import annotations

import math

import numpy as np

from crfopt.kernels.jit import JIT_ENABLED

_LN2_HI = 6.93147180369123816490e-01
_LN2_LO = 1.90821492927058770002e-10
_INV_LN2 = 1.44269504088896338700e00
_LG1 = 6.666666666666735130e-01
_LG2 = 3.999999999940941908e-01
_LG3 = 2.857142874366239149e-01
_LG4 = 2.222219843214978396e-01
_LG5 = 1.818357216161805012e-01
_LG6 = 1.531383769920937332e-01
_LG7 = 1.479819860511658591e-01
_P1 = 1.66666666666666019037e-01
_P2 = -2.77777777770155933842e-03
_P3 = 6.61375632143793436117e-05
_P4 = -1.65339022054652515390e-06
_P5 = 4.13813679705723846039e-08
_MIN_NORMAL = 2.2250738585072014e-308

if JIT_ENABLED:
    import numba

    # No reassociation: the evaluation order of fdlibm's formulas carries its accuracy.
    _VEC = {
        "cache": True,
        "nogil": True,
        "error_model": "numpy",
        "fastmath": {"contract", "nsz"},
    }

    @numba.njit(**_VEC)
    def _log_split(x, mant, expo, n):
        xw = x.view(np.int32)  # little-endian: word 2j+1 is the high word
        mw = mant.view(np.int32)
        for j in range(n):
            hx = xw[2 * j + 1]
            m = hx & 0x000FFFFF
            # fdlibm: move the mantissa into [sqrt(2)/2, sqrt(2)) and adjust the exponent
            i = (m + 0x95F64) & 0x100000
            expo[j] = (hx >> 20) - 1023 + (i >> 20)
            mw[2 * j] = xw[2 * j]
            mw[2 * j + 1] = m | (i ^ 0x3FF00000)

    @numba.njit(**_VEC)
    def _log_poly(mant, expo, out, n):
        for j in range(n):
            f = mant[j] - 1.0
            k = float(expo[j])
            s = f / (2.0 + f)
            z = s * s
            w = z * z
            t1 = w * (_LG2 + w * (_LG4 + w * _LG6))
            t2 = z * (_LG1 + w * (_LG3 + w * (_LG5 + w * _LG7)))
            hfsq = 0.5 * f * f
            out[j] = k * _LN2_HI - ((hfsq - (s * (hfsq + (t2 + t1)) + k * _LN2_LO)) - f)

    @numba.njit(**_VEC)
    def _count_outside(x, n, low, high):
        """Entries not in [low, high) (NaN included): a vectorizable scan."""
        bad = 0
        for j in range(n):
            v = x[j]
            bad += 0 if (v >= low and v < high) else 1
        return bad

    @numba.njit(cache=True, nogil=True)
    def _log_fixup(x, out, n):
        for j in range(n):
            v = x[j]
            if not (v >= _MIN_NORMAL and v < math.inf):
                out[j] = math.log(v) if v > 0.0 else (-math.inf if v == 0.0 else math.nan)

    @numba.njit(cache=True, nogil=True)
    def vlog(x, out, n):
        """out[:n] = log(x[:n]) for flat float64 arrays (< 1 ulp; fdlibm)."""
        mant = np.empty(n)
        expo = np.empty(n, dtype=np.int32)
        _log_split(x, mant, expo, n)
        _log_poly(mant, expo, out, n)
        if _count_outside(x, n, _MIN_NORMAL, math.inf):
            _log_fixup(x, out, n)

    @numba.njit(**_VEC)
    def _exp_reduce(x, out, expo, n):
        for j in range(n):
            v = x[j]
            v = v if v >= -708.0 else -708.0  # the vector path builds 2^k for k ≥ -1021
            k = math.floor(v * _INV_LN2 + 0.5)
            hi = v - k * _LN2_HI
            lo = k * _LN2_LO
            r = hi - lo
            t = r * r
            c = r - t * (_P1 + t * (_P2 + t * (_P3 + t * (_P4 + t * _P5))))
            out[j] = 1.0 - ((lo - (r * c) / (2.0 - c)) - hi)
            expo[j] = np.int32(k)

    @numba.njit(**_VEC)
    def _exp_scale(out, expo, scale, n):
        sw = scale.view(np.int32)
        for j in range(n):
            sw[2 * j] = 0
            sw[2 * j + 1] = (expo[j] + 1023) << 20
        for j in range(n):
            out[j] *= scale[j]

    @numba.njit(cache=True, nogil=True)
    def _exp_fixup(x, out, n):
        for j in range(n):
            v = x[j]
            if not (v >= -708.0 and v < 709.0):
                out[j] = math.exp(v)

    @numba.njit(cache=True, nogil=True)
    def vexp(x, out, n):
        """out[:n] = exp(x[:n]) for flat float64 arrays (< 1 ulp; fdlibm)."""
        expo = np.empty(n, dtype=np.int32)
        scale = np.empty(n)
        _exp_reduce(x, out, expo, n)
        _exp_scale(out, expo, scale, n)
        if _count_outside(x, n, -708.0, 709.0):
            _exp_fixup(x, out, n)

else:

    def vlog(x, out, n):
        """out[:n] = log(x[:n]) (NumPy path)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            out[:n] = np.log(x[:n])

    def vexp(x, out, n):
        """out[:n] = exp(x[:n]) (NumPy path)."""
        out[:n] = np.exp(x[:n])


__all__ = ["vexp", "vlog"]
