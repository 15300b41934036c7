"""The step γ of a dual block: line searches on the block objective (docs/algorithms.md §3.2).

Along the segment μ_γ = μ_i + γδ, γ ∈ [0, 1], a dual coordinate method maximizes the
concave block objective (LPL18 eq. 20)

    f(γ) = H̃(μ_γ) − λn/2 (γ²a + 2γb),      a = ‖v‖², b = ⟨w, v⟩,

or, with an ℓ1 weight σ > 0, its prox form f(γ) = H̃(μ_γ) − λn ψ(γ) (§3.14, the segment
of :mod:`crfopt.dual.prox`). :func:`newton_line_search` / :func:`prox_line_search` run
a safeguarded Newton–bisection on f' (its closed-form derivatives, LP17 §2.5) from the
first point :func:`newton_start` picks; :func:`golden_line_search` a golden-section
search on f. The tables of the block are those of a :class:`crfopt.dual.blocks.Scratch`
after :func:`crfopt.dual.blocks.block_gaps`.

References: LPL18 eq. 20, App. A.3; LP17 §2.5; Press et al., Numerical Recipes §9.4
("rtsafe").
"""

from __future__ import annotations

import math
from enum import IntEnum

import numpy as np

from crfopt import kernels
from crfopt.kernels.jit import jit
from crfopt.kernels.vmath import log_scalar
from crfopt.optim.dual.blocks import TINY, mix_tables
from crfopt.optim.dual.prox import segment_slope, segment_value

__all__ = [
    "STARTS",
    "Start",
    "block_value",
    "derivatives",
    "golden_line_search",
    "newton_line_search",
    "newton_start",
    "newton_step",
    "prox_derivatives",
    "prox_line_search",
]


class Start(IntEnum):
    """First point of the Newton search; SDCA's ``start`` takes the lower-case names."""

    HALF = 0  # γ = 0.5
    PREVIOUS = 1  # the example's previous step (LPL18 fn. 4)
    CHORD = 2  # the root of the chord of f' between its closed-form end values


STARTS = tuple(s.name.lower() for s in Start)

# The empty segment of the ℓ2 searches (τ = 0: never read).
_NO_SEGMENT = np.zeros((3, 0))


@jit(fastmath=True)
def _derivatives_fused(gamma, lna, T, K, mn, dn, lnun, xn, me, de, lnue, ratio):
    """(f'(γ), f''(γ), bad) of :func:`derivatives` in one pass over the flat tables.

    μ_γ = μ + γδ and its log are formed entry by entry (``log_scalar``, inlined, so the
    loop vectorizes) and summed at once; only the node entries μ_γ (``xn``) and the
    rows' δ_k/μ_k repeated per edge entry (``ratio``) are written. ``bad`` counts
    entries μ_γ ≤ TINY (or NaN), where the log must come from log space: the caller
    then discards the sums and takes the table path.
    """
    TK = T * K
    bad = 0
    for j in range(TK):
        x = mn[j] + gamma * dn[j]
        xn[j] = x
        bad += 0 if x > TINY else 1
    if bad:
        return 0.0, 0.0, bad
    d1 = -lna * gamma
    d2 = -lna
    if T == 1:
        for k in range(K):
            dk = dn[k]
            x = xn[k]
            if dk != 0.0:
                d1 += dk * (lnun[k] - log_scalar(x))
                d2 -= dk * dk / x
        return d1, d2, 0
    for j in range(K, (T - 1) * K):  # separators: interior nodes
        dk = dn[j]
        term = dk * (lnun[j] - log_scalar(xn[j]))
        d1 -= term if dk != 0.0 else 0.0
    for k in range(K):
        d2 -= dn[k] * dn[k] / xn[k]
    for r in range(TK - K):  # each edge row's δ_k/μ_k, repeated over its entries
        v = dn[r] / xn[r]
        for l in range(K):
            ratio[r * K + l] = v
    acc1 = 0.0
    acc2 = 0.0
    for j in range((T - 1) * K * K):  # cliques: edges
        dkl = de[j]
        x = me[j] + gamma * dkl
        bad += 0 if x > TINY else 1
        term = dkl * (lnue[j] - log_scalar(x))
        acc1 += term if dkl != 0.0 else 0.0
        r = dkl - ratio[j] * x
        # a tiny x makes the caller discard these sums; the guard keeps the uncompiled
        # path (NumPy scalars) from warning about its division by zero meanwhile
        acc2 += r * r / x if x > TINY else 0.0
    return d1 + acc1, d2 - acc2, bad


@jit(fastmath=True, inline=True)
def derivatives(gamma, sc, T, K, lna):
    """f'(γ) and f''(γ) of the block objective f(γ) = H̃(μ_γ) - λn/2 (γ²a + 2γb).

    f'(γ) = ⟨δ, log ν - log μ_γ⟩_tree - λnγa and f''(γ) = -(Fisher information of μ_γ
    along δ) - λna (LPL18 eq. 20, App. A.3); ``lna`` = λna. The curvature uses the
    non-negative chain-rule form Σ δ_1²/μ_1 + Σ_t Σ_kl (δ_kl - δ_k μ_kl/μ_k)²/μ_kl
    (§5.4), which never subtracts separator terms from clique terms.

    One fused pass (:func:`_derivatives_fused`) unless some entry of μ_γ is tiny; then
    the tables x, log x are formed (``mix_tables``, log space where tiny) and summed.
    """
    d1, d2, bad = _derivatives_fused(
        gamma,
        lna,
        T,
        K,
        sc.mn_f,
        sc.dn_f,
        sc.lnun_f,
        sc.xn_f,
        sc.me_f,
        sc.de_f,
        sc.lnue_f,
        sc.xe_f,
    )
    if bad == 0:
        return d1, d2
    return _derivatives_tables(gamma, sc, T, K, lna)


@jit(fastmath=True, inline=True)
def _derivatives_tables(gamma, sc, T, K, lna):
    """:func:`derivatives` through the tables x = μ_γ and lx = log μ_γ (``mix_tables``)."""
    mix_tables(gamma, sc, T, K)
    # locals, not tuple fields, inside loops (each field read costs a reference count)
    dn, xn, lnun, lxn = sc.dn, sc.xn, sc.lnun, sc.lxn
    d1 = -lna * gamma
    d2 = -lna
    if T == 1:
        for k in range(K):
            dk = dn[0, k]
            if dk != 0.0:
                d1 += dk * (lnun[0, k] - lxn[0, k])
                if xn[0, k] > 0.0:
                    d2 -= dk * dk / xn[0, k]
        return d1, d2
    for t in range(1, T - 1):  # separators: interior nodes
        for k in range(K):
            dk = dn[t, k]
            if dk != 0.0:
                d1 -= dk * (lnun[t, k] - lxn[t, k])
    for k in range(K):
        if xn[0, k] > 0.0:
            d2 -= dn[0, k] * dn[0, k] / xn[0, k]
    # cliques: edges, over the flat tables so the loop vectorizes
    KK = K * K
    de = sc.de_f
    lnue = sc.lnue_f
    lxe = sc.lxe_f
    xe = sc.xe_f
    for t in range(T - 1):
        base = t * KK
        for k in range(K):
            xk = xn[t, k]
            ratio = dn[t, k] / xk if xk > 0.0 else 0.0
            row = base + k * K
            acc1 = 0.0
            acc2 = 0.0
            for l in range(K):
                j = row + l
                dkl = de[j]
                x = xe[j]
                term = dkl * (lnue[j] - lxe[j])
                acc1 += term if dkl != 0.0 else 0.0
                r = dkl - ratio * x
                acc2 += r * r / x if x > 0.0 else 0.0
            d1 += acc1
            d2 -= acc2
    return d1, d2


@jit(inline=True)
def prox_derivatives(gamma, sc, T, K, lam_n, seg, m, tau):
    """f'(γ), f''(γ) of the prox block objective f(γ) = H̃(μ_γ) - λn ψ(γ) (§3.14).

    The entropy part is :func:`derivatives` with no quadratic term; ⟨δ, log ν⟩_tree =
    -λn⟨w, v⟩ still holds (ν = ν(w), w the thresholded weights), so the linear term is
    replaced by -λn (φ(γ) - φ(0)) with φ(0) = 0.
    """
    d1, d2 = derivatives(gamma, sc, T, K, 0.0)
    phi, curv = segment_slope(gamma, seg, m, tau)
    return d1 - lam_n * phi, d2 - lam_n * curv


@jit(inline=True)
def _newton_step(x, lo, hi, sc, T, K, lna, seg, m, tau):
    """One evaluation of f', f'' at x: the Newton step f'/f'' and the bracket [lo, hi]
    tightened by the sign of f'(x) (f' < 0 left of the root). ``lna`` is λna, or λn for
    the prox objective (τ > 0, segment ``seg[:, :m]``)."""
    if tau > 0.0:
        u, curv = prox_derivatives(x, sc, T, K, lna, seg, m, tau)
    else:
        u, curv = derivatives(x, sc, T, K, lna)
    if u < 0.0:
        lo = x
    else:
        hi = x
    return u / curv, lo, hi


@jit
def newton_line_search(x0, sub_precision, max_iter, u0, lna, sc, T, K):
    """Safeguarded Newton–bisection on f' over [0, 1] (Press et al. §9.4 "rtsafe", §3.2).

    The root is bracketed: f'(0) = g_i + r_i ≥ 0 (``u0``) and f'(1) = -λna ≤ 0 (``lna``
    = λna). Returns (γ, derivative evaluations, whether the cap ``max_iter`` was hit).
    """
    if u0 <= 0.0:
        return 0.0, 0, False
    if lna <= 0.0:
        return 1.0, 0, False
    return _rtsafe(x0, sub_precision, max_iter, lna, sc, T, K, _NO_SEGMENT, 0, 0.0)


@jit
def prox_line_search(x0, sub_precision, max_iter, u0, lam_n, sc, T, K, seg, m, tau):
    """:func:`newton_line_search` on the prox block objective (§3.14): bracketed since
    f'(0) = g_i + r_i ≥ 0 and f'(1) = -λn φ(1) ≤ 0 (S_τ is monotone); f'' jumps where a
    coordinate crosses ±τ, which the bisection safeguard absorbs."""
    if u0 <= 0.0:
        return 0.0, 0, False
    if m == 0:  # ψ ≡ 0: f' decreases to f'(1) = 0, the maximum is at γ = 1
        return 1.0, 0, False
    return _rtsafe(x0, sub_precision, max_iter, lam_n, sc, T, K, seg, m, tau)


@jit
def _rtsafe(x0, sub_precision, max_iter, lna, sc, T, K, seg, m, tau):
    """The bracketed Newton–bisection loop of both searches (f'(0) > 0 > f'(1) checked)."""
    evals = 0
    lo = 1.0  # f'(lo) < 0
    hi = 0.0  # f'(hi) > 0
    x = x0
    dx_prev2 = 1.0
    dx_prev = 1.0
    # Tighten the bracket with the first evaluation too (rtsafe and REF do not; it only
    # saves a re-evaluation at the midpoint when the first Newton step is rejected, in
    # 0.3-0.6 % of OCR's searches: docs/algorithms.md §7.14).
    newton, lo, hi = _newton_step(x, lo, hi, sc, T, K, lna, seg, m, tau)
    evals += 1
    for _ in range(max_iter):
        cand = x - newton
        a_ = lo if lo < hi else hi
        b_ = hi if lo < hi else lo
        if a_ < cand < b_ and abs(newton) <= 0.5 * abs(dx_prev2):
            dx_prev2 = dx_prev
            dx_prev = newton
            x = cand
        else:
            dx_prev2 = dx_prev
            dx_prev = 0.5 * (hi - lo)
            x = lo + dx_prev
        if abs(dx_prev) < sub_precision:
            return x, evals, False
        newton, lo, hi = _newton_step(x, lo, hi, sc, T, K, lna, seg, m, tau)
        evals += 1
    return x, evals, True


@jit(inline=True)
def newton_start(start, previous, g_i, r_i, lna):
    """First point of the Newton search (:class:`Start`): 0.5, the example's previous step,
    or the root of the chord of f' between f'(0) = g_i + r_i and f'(1) = -λna."""
    if start == Start.PREVIOUS:
        x0 = previous
    elif start == Start.CHORD:
        x0 = (g_i + r_i) / (g_i + r_i + lna) if g_i + r_i + lna > 0.0 else 0.5
    else:
        x0 = 0.5
    if not (0.0 < x0 < 1.0):
        x0 = 0.5
    return x0


@jit(inline=True)
def newton_step(
    start, previous, sub_precision, max_iter, g_i, r_i, a, lam_n, sc, T, K, seg, m, tau
):
    """γ on block i's objective by the safeguarded Newton search from :func:`newton_start`
    (LPL18 eq. 20; its prox form when τ > 0, where f'(1) = -λn φ(1) replaces -λna).
    Returns (γ, derivative evaluations, whether ``max_iter`` was reached)."""
    if tau > 0.0:
        end = lam_n * segment_slope(1.0, seg, m, tau)[0]
        x0 = newton_start(start, previous, g_i, r_i, end)
        return prox_line_search(
            x0, sub_precision, max_iter, g_i + r_i, lam_n, sc, T, K, seg, m, tau
        )
    lna = lam_n * a
    x0 = newton_start(start, previous, g_i, r_i, lna)
    return newton_line_search(x0, sub_precision, max_iter, g_i + r_i, lna, sc, T, K)


@jit(inline=True)
def block_value(gamma, a, b, lam_n, sc, T, K):
    """f(γ) = H̃(μ_γ) - λn/2 (γ² a + 2γ b) (LPL18 eq. 20), for the golden-section search."""
    mix_tables(gamma, sc, T, K)
    H = kernels.chain_entropy_linlog(sc.xn, sc.xe, sc.lxn, sc.lxe, T, K)
    return H - 0.5 * lam_n * (gamma * gamma * a + 2.0 * gamma * b)


@jit(inline=True)
def prox_block_value(gamma, lam_n, sc, T, K, seg, m, tau):
    """f(γ) = H̃(μ_γ) - λn ψ(γ), the prox block objective (§3.14); a = b = 0 leaves H̃."""
    return block_value(gamma, 0.0, 0.0, lam_n, sc, T, K) - lam_n * segment_value(gamma, seg, m, tau)


@jit(inline=True)
def _search_value(gamma, a, b, lam_n, sc, T, K, seg, m, tau):
    """The golden search's f: the prox objective when τ > 0, else LPL18 eq. 20."""
    if tau > 0.0:
        return prox_block_value(gamma, lam_n, sc, T, K, seg, m, tau)
    return block_value(gamma, a, b, lam_n, sc, T, K)


@jit
def golden_line_search(sub_precision, a, b, lam_n, sc, T, K, seg, m, tau):
    """Golden-section maximization of the concave f on [0, 1] to ``sub_precision``.

    Returns (γ, evaluations of f).
    """
    gr = 0.5 * (math.sqrt(5.0) - 1.0)
    lo = 0.0
    hi = 1.0
    c = hi - gr * (hi - lo)
    d = lo + gr * (hi - lo)
    fc = _search_value(c, a, b, lam_n, sc, T, K, seg, m, tau)
    fd = _search_value(d, a, b, lam_n, sc, T, K, seg, m, tau)
    evals = 2
    while hi - lo > sub_precision:
        if fc > fd:
            hi = d
            d = c
            fd = fc
            c = hi - gr * (hi - lo)
            fc = _search_value(c, a, b, lam_n, sc, T, K, seg, m, tau)
        else:
            lo = c
            c = d
            fc = fd
            d = lo + gr * (hi - lo)
            fd = _search_value(d, a, b, lam_n, sc, T, K, seg, m, tau)
        evals += 1
    return 0.5 * (lo + hi), evals
