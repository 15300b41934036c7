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

``log_scalar(x)`` and ``exp_scalar(x)`` are the same computations on one number, for
compiled loops that fuse a log or exp with their own arithmetic (SDCA's line search
takes log(μ + γδ) and sums its terms in one pass, without writing the logs out): LLVM
inlines them and vectorizes the caller's loop. They are bit-identical to ``vlog`` /
``vexp`` where they are valid — log: positive normal x; exp: -708 ≤ x < 709 — and the
caller must check its entries against that range (as ``vlog``/``vexp`` do with their
fix-up pass), since a branch to libm inside the loop would stop the vectorization.
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
    def log_scalar(x):
        """log(x) for a positive normal float64 x (fdlibm ``e_log.c``; < 1 ulp).

        Inlinable: no branch, no call. Other inputs (0, negatives, subnormals, inf,
        NaN) give a wrong finite value or NaN: callers detect them and use libm.
        """
        bits = np.float64(x).view(np.int64)
        hx = np.int32(bits >> 32)  # the high word: sign, exponent, top of the mantissa
        m = hx & 0x000FFFFF
        # fdlibm: move the mantissa into [sqrt(2)/2, sqrt(2)) and adjust the exponent
        i = (m + 0x95F64) & 0x100000
        k = float((hx >> 20) - 1023 + (i >> 20))
        high = np.int64(m | (i ^ 0x3FF00000)) << 32
        f = np.int64(high | (bits & 0xFFFFFFFF)).view(np.float64) - 1.0
        s = f / (2.0 + f)
        z = s * s
        w = z * z
        t1 = w * (_LG2 + w * (_LG4 + w * _LG6))
        t2 = z * (_LG1 + w * (_LG3 + w * (_LG5 + w * _LG7)))
        hfsq = 0.5 * f * f
        return k * _LN2_HI - ((hfsq - (s * (hfsq + (t2 + t1)) + k * _LN2_LO)) - f)

    @numba.njit(**_VEC)
    def _log_loop(x, out, n):
        for j in range(n):
            out[j] = log_scalar(x[j])

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
        _log_loop(x, out, n)  # one fused pass, no work arrays to allocate
        if _count_outside(x, n, _MIN_NORMAL, math.inf):
            _log_fixup(x, out, n)

    @numba.njit(**_VEC)
    def exp_scalar(x):
        """exp(x) for -708 ≤ x < 709 (fdlibm ``e_exp.c``; < 1 ulp).

        Inlinable: no call, no branch but a clamp. Below -708 (the result would need a
        subnormal 2^k) and at non-finite x the value is wrong: callers detect those
        inputs and use libm.
        """
        v = x if x >= -708.0 else -708.0  # the vector path builds 2^k for k ≥ -1021
        k = math.floor(v * _INV_LN2 + 0.5)
        hi = v - k * _LN2_HI
        lo = k * _LN2_LO
        r = hi - lo
        t = r * r
        c = r - t * (_P1 + t * (_P2 + t * (_P3 + t * (_P4 + t * _P5))))
        y = 1.0 - ((lo - (r * c) / (2.0 - c)) - hi)
        scale = np.int64((np.int64(k) + 1023) << 52).view(np.float64)  # 2^k from its bits
        return y * scale

    @numba.njit(**_VEC)
    def _exp_loop(x, out, n):
        for j in range(n):
            out[j] = exp_scalar(x[j])

    @numba.njit(cache=True, nogil=True)
    def _exp_fixup(x, out, n):
        for j in range(n):
            v = x[j]
            if not (v >= -708.0 and v < 709.0):
                out[j] = math.exp(v)

    @numba.njit(cache=True, nogil=True)
    def vexp(x, out, n):
        """out[:n] = exp(x[:n]) for flat float64 arrays (< 1 ulp; fdlibm)."""
        _exp_loop(x, out, n)  # one fused pass, no work arrays to allocate
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

    def log_scalar(x):
        """log(x) for a positive x (NumPy path: libm)."""
        return math.log(x) if x > 0.0 else math.nan

    def exp_scalar(x):
        """exp(x) for -708 ≤ x < 709 (NumPy path: libm, clamped like the compiled form)."""
        return math.exp(min(max(x, -708.0), 709.0))


__all__ = ["exp_scalar", "log_scalar", "vexp", "vlog"]
