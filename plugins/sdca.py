"""SDCA for CRFs with adaptive sampling (LPL18 Alg. 1–2; LP17 §2.5; docs/algorithms.md §3.1–3.3).

Stochastic dual coordinate ascent over the marginal polytope of each sequence
(Prox-SDCA option II, SSZ13): the dual variables are the log-marginals μ_i of every
training sequence; an iteration picks a sequence i, asks the oracle for the model's
marginals ν_i = ν_i(w), and moves μ_i toward ν_i by the step γ ∈ [0, 1] that maximizes
the dual along that segment (a safeguarded Newton line search on the closed-form
derivative, LPL18 eq. 20). The primal weights are kept equal to ŵ(μ) by a sparse
update, w += γ v with v = (E_{μ_i}F - E_{ν_i}F)/(λn) (the corrected form of LPL18
Alg. 2, §1.4 erratum). The pre-step block gap g_i = D̃(μ_i ‖ ν_i) drives the gap
sampler and the gap estimate ĝ = mean of the stored gaps (LPL18 §5, §6.3).

With an ℓ1 weight σ > 0 (the elastic net, docs/algorithms.md §1.9) every variant is
prox-SDCA (§3.14): the state keeps u = z(μ)/λ and w = S_τ(u), τ = σ/λ, re-thresholded on
the block's support only, and the line search maximizes the piecewise-quadratic dual
exactly. At σ = 0 the ℓ2 arithmetic runs unchanged.

``sdca-minibatch`` (docs/algorithms.md §3.13) runs the same blocks B at a time in a
parallel loop, all at the same w: each sequence chooses its own γ_i on its block
objective with the quadratic term scaled by σ' = B,

    f_i(γ) = H̃(μ_i + γδ_i) - λn (γ b_i + σ' γ² a_i / 2),   a_i = ‖v_i‖², b_i = ⟨w, v_i⟩,

(the Newton search below with ``lna = σ'·λn·a_i``), and then every update is *added*
(CoCoA+, MJT15). As ‖Σ_i u_i‖² ≤ B Σ_i ‖u_i‖², such a step never decreases the dual.
A step is one iteration with B oracle calls and B updates (a sequence drawn twice in
one step is dropped: two moves of one block from the same μ_i are not a feasible
mixture); with B = 1 it is ``sdca``, iterate for iterate.

References
----------
LPL18: Le Priol, Piché, Lacoste-Julien (2018), "Adaptive stochastic dual coordinate
ascent for conditional random fields", UAI.
LP17: Le Priol (2017), technical report, §2.5 (line search derivatives).
SSZ13: Shalev-Shwartz & Zhang (2013), JMLR, §3, §6, §8.5.
VLZ15: Vainsencher, Liu, Zhang (2015), Alg. 3 (empirical-Δ sampling).
MJT15: Ma, Smith, Jaggi, Jordan, Richtárik, Takáč (2015), "Adding vs. averaging in
distributed primal-dual optimization", ICML (CoCoA+, σ' = K adding).
TBRS13: Takáč, Bijral, Richtárik, Srebro (2013), "Mini-batch primal and dual methods
for SVMs", ICML (mini-batch SDCA).
"""

from __future__ import annotations

import math
import warnings
from collections import namedtuple
from collections.abc import Mapping
from enum import IntEnum
from typing import Any, NamedTuple

import numpy as np

import crfopt
from crfopt import borrowed, jit, kernels, samplers
from crfopt.core import duality
from crfopt.kernels.jit import JIT_ENABLED, prange
from crfopt.kernels.vmath import log_scalar, vexp, vlog
from crfopt.optim.dual import initial_dual


class StepRule(IntEnum):
    """How γ is chosen (§3.2); ``line_search`` takes the lower-case member names."""

    NEWTON = 0  # safeguarded Newton on f' (the default)
    GOLDEN = 1  # golden-section search on f
    FIXED = 2  # γ = fixed_step (ablation)
    THEORY = 3  # γ = (1 + R/(λn))⁻¹, R = max_i R_i: the step of LPL18 App. F Thm. 1


class Start(IntEnum):
    """First point of the Newton search; ``start`` takes the lower-case member names."""

    HALF = 0  # γ = 0.5
    PREVIOUS = 1  # the example's previous step (LPL18 fn. 4)
    CHORD = 2  # the root of the chord of f' between its closed-form end values


LINE_SEARCHES = tuple(r.name.lower() for r in StepRule)
STARTS = tuple(s.name.lower() for s in Start)
# Sampler families (§3.3): ρ only mixes a non-uniform part into the draw, so the uniform
# family has no non_uniformity; only empirical-Δ has a tree refresh policy.
UNIFORM_SAMPLERS = ("uniform", "permutation", "cyclic")
ADAPTIVE_SAMPLERS = ("importance", "gap", "gapimp", "max")
EDELTA_SAMPLERS = ("edelta",)
SAMPLERS = UNIFORM_SAMPLERS + ADAPTIVE_SAMPLERS + EDELTA_SAMPLERS


class SDCAState(NamedTuple):
    """What the compiled loop reads and updates in place (one run's SDCA state).

    The running totals are 1-element arrays so that compiled code can update them.
    """

    w: np.ndarray  # (d,) = ŵ(μ)
    u: np.ndarray  # (d,) z(μ)/λ, unthresholded (w = S_τ(u), τ = σ/λ); the same array as w at σ = 0
    mu_n: np.ndarray  # (N, K) log node marginals of μ_i (float64 or float32)
    mu_e: np.ndarray  # (N - n, K, K) log edge marginals of μ_i
    gaps: np.ndarray  # (n,) stored pre-step block gaps G_i
    entropies: np.ndarray  # (n,) H̃(μ_i)
    last_step: np.ndarray  # (n,) the example's previous γ (Newton start "previous")
    gap_sum: np.ndarray  # (1,) Σ_i G_i
    w_sq: np.ndarray  # (1,) ‖w‖², kept by ‖w + γv‖² = ‖w‖² + γ²a + 2γb
    entropy_sum: np.ndarray  # (1,) Σ_i H̃(μ_i)
    cap_hits: np.ndarray  # (1,) int64, Newton searches that hit max_line_search
    iterations: np.ndarray  # (1,) int64, iterations done so far


class SDCAOptions(NamedTuple):
    """Settings of the compiled loop, fixed for a run."""

    lam_n: float  # λn
    rule: StepRule
    start: Start
    sub_precision: float  # tolerance on γ of the Newton and golden searches
    max_line_search: int  # derivative evaluations before Newton gives up
    fixed_step: float  # γ of StepRule.FIXED (NaN otherwise: never read)
    theory_step: float  # γ of StepRule.THEORY (NaN otherwise: never read)
    tolerance: float  # stop when ĝ = Σ G_i / n falls below it
    refresh_every: int  # iterations between full gap refreshes (0: never)
    tau: float  # σ/λ, the threshold of w = S_τ(u) (0: the ℓ2 arithmetic, untouched)


# The empty segment of the ℓ2 searches (τ = 0: never read).
_NO_SEGMENT = np.zeros((3, 0))

# Below this a linear-space mixture could lose its relative precision (or underflow):
# take the log of the mixture in log space instead (§5.2).
_TINY = 1e-280


# Work arrays of one iteration. Each table exists flat (for the vectorized log/exp over
# all its entries) and shaped (nodes L×K, edges (L-1)×K×K) as a view of the same memory.
# m: μ_i, nu: ν_i, d: δ = ν - μ, x: μ + γδ; a leading l marks logs.
_FIELDS = ("m", "lm", "nu", "lnu", "d", "x", "lx")
Scratch = namedtuple(
    "Scratch",
    [f"{f}n_f" for f in _FIELDS]
    + [f"{f}e_f" for f in _FIELDS]
    + [f"{f}n" for f in _FIELDS]
    + [f"{f}e" for f in _FIELDS],
)


def make_scratch(max_len: int, K: int) -> Scratch:
    """Allocate the work arrays for sequences of up to ``max_len`` tokens."""
    L = max_len
    E = max(L - 1, 1)
    flat_n = [np.zeros(L * K) for _ in _FIELDS]
    flat_e = [np.zeros(E * K * K) for _ in _FIELDS]
    return Scratch(
        *flat_n,
        *flat_e,
        *[a.reshape(L, K) for a in flat_n],
        *[a.reshape(E, K, K) for a in flat_e],
    )


@jit
def _log_mix_scalar(x, y, gamma):
    """log((1-γ) e^x + γ e^y) in log space (for mixtures too small for linear space)."""
    if gamma <= 0.0:
        return x
    if gamma >= 1.0:
        return y
    a = x + math.log1p(-gamma)
    b = y + math.log(gamma)
    if a < b:
        a, b = b, a
    if a == -math.inf:
        return a
    return a + math.log1p(math.exp(b - a))


@jit(fastmath=True)
def _count_tiny(x, cnt):
    bad = 0
    for j in range(cnt):
        bad += 1 if x[j] <= _TINY else 0
    return bad


@jit(fastmath=True)
def _mix_table(m, d, lm, lnu, x, lx, cnt, gamma):
    """x = μ + γδ and lx = log x over ``cnt`` flat entries (log space where x is tiny)."""
    for j in range(cnt):
        x[j] = m[j] + gamma * d[j]
    vlog(x, lx, cnt)
    if _count_tiny(x, cnt):
        for j in range(cnt):
            if x[j] <= _TINY:
                lx[j] = _log_mix_scalar(lm[j], lnu[j], gamma)


@jit(inline=True)
def _mix(gamma, sc, T, K):
    """x = μ + γδ and log x for the nodes and edges of the current sequence."""
    _mix_table(sc.mn_f, sc.dn_f, sc.lmn_f, sc.lnun_f, sc.xn_f, sc.lxn_f, T * K, gamma)
    _mix_table(sc.me_f, sc.de_f, sc.lme_f, sc.lnue_f, sc.xe_f, sc.lxe_f, (T - 1) * K * K, gamma)


@jit
def _expand_rows(row_values, T, K, out):
    """out[t·K² + k·K + l] = row_values[t·K + k] for t < T - 1: a value per edge row
    repeated over its K entries, so that the edge loops run flat over (T-1)·K² entries.

    Loops over a row's K entries are too short for the vectorizer (K = 22, 26 is below
    its 8 lanes × 4 interleaved accumulators and ran scalar); flat loops are long.
    """
    for r in range((T - 1) * K):
        v = row_values[r]
        base = r * K
        for l in range(K):
            out[base + l] = v


@jit(fastmath=True)
def _derivatives_fused(gamma, lna, T, K, mn, dn, lnun, xn, me, de, lnue, ratio):
    """(f'(γ), f''(γ), bad) of :func:`_derivatives` in one pass over the flat tables.

    μ_γ = μ + γδ and its log are formed entry by entry (``log_scalar``, inlined, so the
    loop vectorizes) and summed at once; only the node entries μ_γ (``xn``) and the
    rows' δ_k/μ_k repeated per edge entry (``ratio``) are written. ``bad`` counts
    entries μ_γ ≤ _TINY (or NaN), where the log must come from log space: the caller
    then discards the sums and takes the table path.
    """
    TK = T * K
    bad = 0
    for j in range(TK):
        x = mn[j] + gamma * dn[j]
        xn[j] = x
        bad += 0 if x > _TINY else 1
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
        bad += 0 if x > _TINY else 1
        term = dkl * (lnue[j] - log_scalar(x))
        acc1 += term if dkl != 0.0 else 0.0
        r = dkl - ratio[j] * x
        # a tiny x makes the caller discard these sums; the guard keeps the uncompiled
        # path (NumPy scalars) from warning about its division by zero meanwhile
        acc2 += r * r / x if x > _TINY else 0.0
    return d1 + acc1, d2 - acc2, bad


@jit(fastmath=True, inline=True)
def _derivatives(gamma, sc, T, K, lna):
    """f'(γ) and f''(γ) of the block objective f(γ) = H̃(μ_γ) - λn/2 (γ²a + 2γb).

    f'(γ) = ⟨δ, log ν - log μ_γ⟩_tree - λnγa and f''(γ) = -(Fisher information of μ_γ
    along δ) - λna (LPL18 eq. 20, App. A.3). The curvature uses the non-negative
    chain-rule form Σ δ_1²/μ_1 + Σ_t Σ_kl (δ_kl - δ_k μ_kl/μ_k)²/μ_kl (§5.4), which
    never subtracts separator terms from clique terms.

    One fused pass (:func:`_derivatives_fused`) unless some entry of μ_γ is tiny; then
    the tables x, log x are formed (:func:`_mix`, log space where tiny) and summed.
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
    """:func:`_derivatives` through the tables x = μ_γ and lx = log μ_γ (:func:`_mix`)."""
    _mix(gamma, sc, T, K)
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


# ---------------------------------------------------------------- prox-SDCA (σ > 0)
# With an ℓ1 weight σ the primal map is ∇g*(z) = S_σ(z)/λ (docs/algorithms.md §1.9, §3.14).
# The state keeps u = z(μ)/λ (= w at σ = 0) and w = S_τ(u), τ = σ/λ, on the coordinates a
# block moves. Along a block's segment the quadratic part of n·D becomes
# -λn/2 ‖S_τ(u + γv)‖², piecewise quadratic in γ; only the coordinates of v's support whose
# segment [u_j, u_j + v_j] leaves [-τ, τ] contribute, and they are packed into ``seg``
# (rows: u_j, v_j, S_τ(u_j)) once per step, so each evaluation costs O(their number).


@jit(inline=True)
def _soft(x, tau):
    """S_τ(x) = sign(x) max(|x| - τ, 0), the same rounding as duality.soft_threshold."""
    if x > tau:
        return x - tau
    if x < -tau:
        return x + tau
    return 0.0


@jit(inline=True)
def _pack_one(x, v, tau, seg, m):
    # a coordinate whose whole segment stays in [-τ, τ] has S_τ ≡ 0 on it: no part in f
    if v == 0.0 or (abs(x) <= tau and abs(x + v) <= tau):
        return m
    seg[0, m] = x
    seg[1, m] = v
    seg[2, m] = _soft(x, tau)
    return m + 1


@jit
def _pack_segment(data, i, u, tau, E_loc, trans_dir, seg):
    """Pack the coordinates of v = (E_loc, trans_dir) on sequence i's support where
    S_τ(u + γv) is not identically 0 for γ ∈ [0, 1]; returns their number m."""
    K = data.n_labels
    U = kernels.emission_matrix(data, u)
    lo, hi = kernels.support_bounds(data, i)
    m = 0
    for j in range(hi - lo):
        a = data.support[lo + j]
        for k in range(K):
            m = _pack_one(U[a, k], E_loc[j, k], tau, seg, m)
    W = kernels.transition_matrix(data, u)
    for k in range(K):
        for l in range(K):
            m = _pack_one(W[k, l], trans_dir[k, l], tau, seg, m)
    return m


@jit(fastmath=True)
def _segment_slope(gamma, seg, m, tau):
    """(φ(γ), φ'(γ)) with φ(γ) = ⟨S_τ(u + γv) - S_τ(u), v⟩ over the packed coordinates:
    f'(γ) = ⟨δ, log ν - log μ_γ⟩_tree - λn φ(γ), f''(γ) = -Fisher - λn φ'(γ); φ' = the
    Σ v_j² over the coordinates active (|u_j + γv_j| > τ) at γ, so f'' jumps at kinks."""
    phi = 0.0
    curv = 0.0
    for j in range(m):
        v = seg[1, j]
        x = seg[0, j] + gamma * v
        phi += v * (_soft(x, tau) - seg[2, j])
        curv += v * v if abs(x) > tau else 0.0
    return phi, curv


@jit(fastmath=True)
def _segment_value(gamma, seg, m, tau):
    """ψ(γ) = ½(‖S_τ(u + γv)‖² - ‖S_τ(u)‖²) over the packed coordinates (ψ' = φ)."""
    psi = 0.0
    for j in range(m):
        s0 = seg[2, j]
        s1 = _soft(seg[0, j] + gamma * seg[1, j], tau)
        psi += 0.5 * (s1 - s0) * (s1 + s0)
    return psi


@jit(inline=True)
def _prox_derivatives(gamma, sc, T, K, lam_n, seg, m, tau):
    """f'(γ), f''(γ) of the prox block objective f(γ) = H̃(μ_γ) - λn ψ(γ) (§3.14).

    The entropy part is :func:`_derivatives` with no quadratic term; ⟨δ, log ν⟩_tree =
    -λn⟨w, v⟩ still holds (ν = ν(w), w the thresholded weights), so the linear term is
    replaced by -λn (φ(γ) - φ(0)) with φ(0) = 0.
    """
    d1, d2 = _derivatives(gamma, sc, T, K, 0.0)
    phi, curv = _segment_slope(gamma, seg, m, tau)
    return d1 - lam_n * phi, d2 - lam_n * curv


@jit(inline=True)
def _newton_step(x, lo, hi, sc, T, K, lna, seg, m, tau):
    """One evaluation of f', f'' at x: the Newton step f'/f'' and the bracket [lo, hi]
    tightened by the sign of f'(x) (f' < 0 left of the root). ``lna`` is λna, or λn for
    the prox objective (τ > 0, segment ``seg[:, :m]``)."""
    if tau > 0.0:
        u, curv = _prox_derivatives(x, sc, T, K, lna, seg, m, tau)
    else:
        u, curv = _derivatives(x, sc, T, K, lna)
    if u < 0.0:
        lo = x
    else:
        hi = x
    return u / curv, lo, hi


@jit
def _newton_line_search(x0, sub_precision, max_iter, u0, lna, sc, T, K):
    """Safeguarded Newton–bisection on f' over [0, 1] (Press et al. §9.4 "rtsafe", §3.2).

    The root is bracketed: f'(0) = g_i + r_i ≥ 0 and f'(1) = -λna ≤ 0. Returns
    (γ, derivative evaluations, whether the cap ``max_iter`` was hit).
    """
    if u0 <= 0.0:
        return 0.0, 0, False
    if lna <= 0.0:
        return 1.0, 0, False
    return _rtsafe(x0, sub_precision, max_iter, lna, sc, T, K, _NO_SEGMENT, 0, 0.0)


@jit
def _prox_line_search(x0, sub_precision, max_iter, u0, lam_n, sc, T, K, seg, m, tau):
    """:func:`_newton_line_search` on the prox block objective (§3.14): bracketed since
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
def _block_value(gamma, a, b, lam_n, sc, T, K):
    """f(γ) = H̃(μ_γ) - λn/2 (γ² a + 2γ b) (LPL18 eq. 20), for the golden-section search."""
    _mix(gamma, sc, T, K)
    H = kernels.chain_entropy_linlog(sc.xn, sc.xe, sc.lxn, sc.lxe, T, K)
    return H - 0.5 * lam_n * (gamma * gamma * a + 2.0 * gamma * b)


@jit(inline=True)
def _prox_block_value(gamma, lam_n, sc, T, K, seg, m, tau):
    """f(γ) = H̃(μ_γ) - λn ψ(γ), the prox block objective (§3.14); a = b = 0 leaves H̃."""
    return _block_value(gamma, 0.0, 0.0, lam_n, sc, T, K) - lam_n * _segment_value(
        gamma, seg, m, tau
    )


@jit(inline=True)
def _search_value(gamma, a, b, lam_n, sc, T, K, seg, m, tau):
    """The golden search's f: the prox objective when τ > 0, else LPL18 eq. 20."""
    if tau > 0.0:
        return _prox_block_value(gamma, lam_n, sc, T, K, seg, m, tau)
    return _block_value(gamma, a, b, lam_n, sc, T, K)


@jit
def _golden_line_search(sub_precision, a, b, lam_n, sc, T, K, seg, m, tau):
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


@jit(inline=True)
def _stored_rows(mu_n, mu_e, s, es, T, K):
    """Sequence rows ``s``… (nodes) and ``es``… (edges) of the stored tables as flat
    slices. Loops over them index from 0: an offset s·K + j, read from memory and of
    unknown sign, takes numba's negative-index wrap-around per entry (1.25 against
    1.05 ns an edge entry in the commit)."""
    KK = K * K
    return mu_n.reshape(-1)[s * K : (s + T) * K], mu_e.reshape(-1)[es * KK : (es + T - 1) * KK]


@jit
def _load_tables(src_n, src_e, s, es, T, K, lmn, mn, lme, me):
    """Copy μ_i's logs from storage (float64 or float32) into the scratch tables, then
    exponentiate them with ``vexp`` (no work arrays allocated).

    Copy first, exponentiate after: on its own the fused loop (convert, ``exp_scalar``,
    range count per entry) took 16 µs per OCR sequence, the two passes 10 µs, with
    bit-equal results (``vexp`` is ``exp_scalar`` plus libm where that is out of range).
    Within an SDCA epoch the gain is smaller (1–2 %): the reads of μ_i from memory bound
    both.
    """
    TK = T * K
    KK = K * K
    n_e = (T - 1) * KK
    flat_n, flat_e = _stored_rows(src_n, src_e, s, es, T, K)
    for j in range(TK):
        lmn[j] = np.float64(flat_n[j])
    for j in range(n_e):
        lme[j] = np.float64(flat_e[j])
    vexp(lmn, mn, TK)
    vexp(lme, me, (T - 1) * KK)


@jit(inline=True)
def _load(src_n, src_e, s, es, T, K, sc):
    """Copy μ_i from storage (float64 or float32) and exponentiate it."""
    _load_tables(src_n, src_e, s, es, T, K, sc.lmn_f, sc.mn_f, sc.lme_f, sc.me_f)


@jit(inline=True)
def _refresh_gaps(data, counters, st, sampler, sc):
    """Recompute every stored gap (Osokin et al. 2016), charged n oracle calls as REF does."""
    n = data.offsets.shape[0] - 1
    K = data.n_labels
    for j in range(n):
        sj = data.offsets[j]
        Tj = data.offsets[j + 1] - sj
        _load(st.mu_n, st.mu_e, sj, sj - j, Tj, K, sc)
        kernels.oracle_marginals(data, counters, j, st.w, sc.lnun, sc.lnue, sc.nun, sc.nue)
        gj = kernels.chain_kl_linlog(sc.mn, sc.me, sc.lmn, sc.lme, sc.lnun, sc.lnue, Tj, K)
        gj = gj if gj > 0.0 else 0.0
        st.gap_sum[0] += gj - st.gaps[j]
        st.gaps[j] = gj
        samplers.sampler_feedback(sampler, j, gj, 0.0)


@jit(inline=True)
def _block_gaps(data, counters, st, sc, i, T, K):
    """Load μ_i, ask the oracle for ν_i, form δ = ν - μ; return g_i = D̃(μ‖ν), r_i = D̃(ν‖μ)."""
    s = data.offsets[i]
    _load(st.mu_n, st.mu_e, s, s - i, T, K, sc)
    kernels.oracle_marginals(data, counters, i, st.w, sc.lnun, sc.lnue, sc.nun, sc.nue)
    g_i, r_i = _delta_kls(
        T,
        K,
        sc.mn_f,
        sc.lmn_f,
        sc.nun_f,
        sc.lnun_f,
        sc.dn_f,
        sc.me_f,
        sc.lme_f,
        sc.nue_f,
        sc.lnue_f,
        sc.de_f,
        sc.xe_f,
        sc.lxe_f,
    )
    return (g_i if g_i > 0.0 else 0.0), (r_i if r_i > 0.0 else 0.0)


@jit(fastmath=True)
def _delta_kls(T, K, mn, lmn, nun, lnun, dn, me, lme, nue, lnue, de, rm, rn):
    """δ = ν - μ into ``dn``/``de`` and (D̃(μ‖ν), D̃(ν‖μ)) in one pass over the tables.

    The chain-rule forms of ``kernels.chain_kl_linlog`` (§5.3): both KLs share the
    conditional log-ratio of each entry, D̃(ν‖μ)'s being its negation. ``rm``/``rn``
    receive the rows' node logs repeated over their edge entries (flat, long loops).
    """
    g = 0.0
    r = 0.0
    for j in range(T * K):
        dn[j] = nun[j] - mn[j]
    for k in range(K):
        dl = lmn[k] - lnun[k]
        m = mn[k]
        nu = nun[k]
        g += m * dl if m > 0.0 else 0.0
        r -= nu * dl if nu > 0.0 else 0.0
    _expand_rows(lmn, T, K, rm)
    _expand_rows(lnun, T, K, rn)
    for j in range((T - 1) * K * K):
        m = me[j]
        nu = nue[j]
        de[j] = nu - m
        dl = (lme[j] - rm[j]) - (lnue[j] - rn[j])
        g += m * dl if m > 0.0 else 0.0
        r -= nu * dl if nu > 0.0 else 0.0
    return g, r


@jit(inline=True)
def _direction(data, w, lam_n, sc, i, T, K, E_loc, trans_dir):
    """v = (E_μF - E_νF)/(λn) on the sequence's support; returns a = ‖v‖², b = ⟨w, v⟩."""
    xn_f, dn_f, de = sc.xn_f, sc.dn_f, sc.de
    lo, hi = kernels.support_bounds(data, i)
    for j in range(T * K):
        xn_f[j] = -dn_f[j]  # x is free until the line search: it holds -δ for a moment
    kernels.expected_emission(data, i, sc.xn, E_loc)
    inv = 1.0 / lam_n
    for j in range(hi - lo):
        for k in range(K):
            E_loc[j, k] *= inv
    # -Σ_t δ_t over the tables in memory order; each entry sums in t order as before
    trans_dir[:, :] = 0.0
    for t in range(T - 1):
        for k in range(K):
            for l in range(K):
                trans_dir[k, l] -= de[t, k, l]
    for k in range(K):
        for l in range(K):
            trans_dir[k, l] *= inv
    a = kernels.norm2_local(data, i, E_loc, trans_dir)
    return a, kernels.dot_local(data, i, w, E_loc, trans_dir)


@jit(inline=True)
def _newton_start(start, previous, g_i, r_i, lna):
    """First point of the Newton search (``Start``): 0.5, the example's previous step, or
    the root of the chord of f' between f'(0) = g_i + r_i and f'(1) = -λna."""
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
def _store_mixture(st, sc, s, es, T, K, gamma):
    """Store μ_γ = μ_i + γδ as logs in rows ``s``/``es`` and return H̃(μ_γ): one fused
    pass, or the log-space tables when some entry of μ_γ is tiny (``_mix``)."""
    h_new, bad = _commit_fused(
        gamma,
        T,
        K,
        sc.mn_f,
        sc.dn_f,
        sc.me_f,
        sc.de_f,
        sc.xn_f,
        sc.lxn_f,
        sc.xe_f,
        st.mu_n,
        st.mu_e,
        s,
        es,
    )
    if bad:
        h_new = _commit_tables(st, sc, s, es, T, K, gamma)
    return h_new


@jit(inline=True)
def _choose_step(opts, counters, st, sc, i, T, K, g_i, r_i, a, b, seg, m):
    """γ by the run's step rule (§3.2; the prox objective of §3.14 when τ > 0)."""
    rule = opts.rule
    lam_n = opts.lam_n
    tau = opts.tau
    if rule == StepRule.NEWTON and tau > 0.0:
        # the chord start needs f'(1) = -λn φ(1) (-λna at σ = 0)
        end = lam_n * _segment_slope(1.0, seg, m, tau)[0]
        x0 = _newton_start(opts.start, st.last_step[i], g_i, r_i, end)
        gamma, evals, capped = _prox_line_search(
            x0, opts.sub_precision, opts.max_line_search, g_i + r_i, lam_n, sc, T, K, seg, m, tau
        )
        counters[kernels.LS_EVALS] += evals
        if capped:
            st.cap_hits[0] += 1
        return gamma
    if rule == StepRule.NEWTON:
        lna = lam_n * a
        x0 = _newton_start(opts.start, st.last_step[i], g_i, r_i, lna)
        gamma, evals, capped = _newton_line_search(
            x0, opts.sub_precision, opts.max_line_search, g_i + r_i, lna, sc, T, K
        )
        counters[kernels.LS_EVALS] += evals
        if capped:
            st.cap_hits[0] += 1
        return gamma
    if rule == StepRule.GOLDEN:
        gamma, evals = _golden_line_search(opts.sub_precision, a, b, lam_n, sc, T, K, seg, m, tau)
        counters[kernels.LS_EVALS] += evals
        return gamma
    if rule == StepRule.FIXED:
        return opts.fixed_step
    return opts.theory_step


@jit(fastmath=True)
def _commit_fused(gamma, T, K, mn, dn, me, de, xn, lxn, rows, mu_n, mu_e, s, es):
    """Store log μ_γ (μ_γ = μ + γδ) as sequence i's dual and return (H̃(μ_γ), bad).

    One pass per table: mix, log (``log_scalar``, inlined so the loop vectorizes),
    store clipped at 0 and the chain-rule entropy of ``kernels.chain_entropy_linlog``.
    The node tables x, log x are written (the entropy's conditionals need them, repeated
    per edge entry into ``rows``). ``bad`` counts entries μ_γ ≤ _TINY, whose log must
    come from log space: the caller then redoes the commit through the tables (every
    stored entry is overwritten).
    """
    TK = T * K
    KK = K * K
    bad = 0
    for j in range(TK):
        x = mn[j] + gamma * dn[j]
        xn[j] = x
        lxn[j] = log_scalar(x)
        bad += 0 if x > _TINY else 1
    if bad:
        return 0.0, bad
    n_e = (T - 1) * KK
    dst_n, dst_e = _stored_rows(mu_n, mu_e, s, es, T, K)  # the stores run in long loops
    for j in range(TK):
        v = lxn[j]
        dst_n[j] = v if v < 0.0 else 0.0
    H = 0.0
    for k in range(K):
        H -= xn[k] * lxn[k]
    _expand_rows(lxn, T, K, rows)
    acc = 0.0
    for j in range(n_e):
        x = me[j] + gamma * de[j]
        lx = log_scalar(x)
        bad += 0 if x > _TINY else 1
        dst_e[j] = lx if lx < 0.0 else 0.0
        acc += x * (lx - rows[j])
    return H - acc, bad


@jit(inline=True)
def _commit_tables(st, sc, s, es, T, K, gamma):
    """:func:`_commit_fused` through the tables x = μ_γ, lx = log μ_γ (:func:`_mix`, log
    space where μ_γ is tiny); returns H̃(μ_γ)."""
    mu_n, mu_e, lxn, lxe = st.mu_n, st.mu_e, sc.lxn, sc.lxe
    _mix(gamma, sc, T, K)
    for t in range(T):
        for k in range(K):
            v = lxn[t, k]
            mu_n[s + t, k] = v if v < 0.0 else 0.0
    for t in range(T - 1):
        for k in range(K):
            for l in range(K):
                v = lxe[t, k, l]
                mu_e[es + t, k, l] = v if v < 0.0 else 0.0
    return kernels.chain_entropy_linlog(sc.xn, sc.xe, lxn, lxe, T, K)


@jit
def _threshold_local(data, i, u, w, tau):
    """w = S_τ(u) on sequence i's support (the only coordinates where u just moved);
    returns the change of ‖w‖², Σ (w_new - w_old)(w_new + w_old)."""
    K = data.n_labels
    U = kernels.emission_matrix(data, u)
    Wm = kernels.emission_matrix(data, w)
    lo, hi = kernels.support_bounds(data, i)
    change = 0.0
    for j in range(hi - lo):
        a = data.support[lo + j]
        for k in range(K):
            old = Wm[a, k]
            new = _soft(U[a, k], tau)
            Wm[a, k] = new
            change += (new - old) * (new + old)
    Ut = kernels.transition_matrix(data, u)
    Wt = kernels.transition_matrix(data, w)
    for k in range(K):
        for l in range(K):
            old = Wt[k, l]
            new = _soft(Ut[k, l], tau)
            Wt[k, l] = new
            change += (new - old) * (new + old)
    return change


@jit(inline=True)
def _move_w(data, st, i, gamma, a, b, E_loc, trans_dir, tau):
    """w += γv and ‖w‖² += γ²a + 2γb (ℓ2); with τ > 0, u += γv and w = S_τ(u) on v's
    support, ‖w‖² updated by the change there (§3.14): sparse, no O(d) work."""
    if tau > 0.0:
        if gamma != 0.0:
            kernels.add_local(data, i, st.u, gamma, E_loc, trans_dir)
            st.w_sq[0] += _threshold_local(data, i, st.u, st.w, tau)
        return
    if gamma != 0.0:
        kernels.add_local(data, i, st.w, gamma, E_loc, trans_dir)
    st.w_sq[0] += gamma * gamma * a + 2.0 * gamma * b


@jit(inline=True)
def _commit(data, st, sc, i, T, K, gamma, a, b, E_loc, trans_dir, tau):
    """μ_i ← (1-γ) μ_i + γ ν_i (stored as logs, exact at γ ∈ {0, 1}), w += γv, totals."""
    s = data.offsets[i]
    h_new = _store_mixture(st, sc, s, s - i, T, K, gamma)
    _move_w(data, st, i, gamma, a, b, E_loc, trans_dir, tau)
    st.entropy_sum[0] += h_new - st.entropies[i]
    st.entropies[i] = h_new


@jit
def _sdca_block(data, counters, st, sampler, u, k_iters, opts, sc, E_loc, seg):
    """k_iters SDCA iterations (§3.1) on ``st`` (SDCAState) with ``opts`` (SDCAOptions).

    Returns the number done (fewer if ĝ < tolerance). ``u`` holds the sampler's two
    uniforms per iteration; ``sc`` is a :func:`make_scratch`; ``E_loc`` has room for the
    largest sequence support; ``seg`` (3 × the largest support's coordinates) receives
    the prox segment when τ > 0 (§3.14).
    """
    data, counters, st, sampler, u, sc, E_loc, seg = borrowed(
        (data, counters, st, sampler, u, sc, E_loc, seg)
    )
    n = data.offsets.shape[0] - 1
    K = data.n_labels
    trans_dir = np.empty((K, K))
    refresh_every = opts.refresh_every
    done = 0
    for it in range(k_iters):
        t_done = st.iterations[0]
        if refresh_every > 0 and t_done > 0 and t_done % refresh_every == 0:
            _refresh_gaps(data, counters, st, sampler, sc)
        i = samplers.sampler_draw(sampler, u[it, 0], u[it, 1])
        T = data.offsets[i + 1] - data.offsets[i]
        g_i, r_i = _block_gaps(data, counters, st, sc, i, T, K)  # g_i: the pre-step gap
        a, b = _direction(data, st.w, opts.lam_n, sc, i, T, K, E_loc, trans_dir)
        m = 0
        if opts.tau > 0.0:
            m = _pack_segment(data, i, st.u, opts.tau, E_loc, trans_dir, seg)
        gamma = _choose_step(opts, counters, st, sc, i, T, K, g_i, r_i, a, b, seg, m)
        st.last_step[i] = gamma
        _commit(data, st, sc, i, T, K, gamma, a, b, E_loc, trans_dir, opts.tau)
        st.gap_sum[0] += g_i - st.gaps[i]
        st.gaps[i] = g_i
        samplers.sampler_feedback(sampler, i, g_i, gamma * math.sqrt(a))
        counters[kernels.ITERATIONS] += 1
        counters[kernels.UPDATES] += 1
        st.iterations[0] += 1
        done += 1
        if st.gap_sum[0] / n < opts.tolerance:
            break
    return done


def _sampler_param(default: str, kinds: tuple[str, ...]) -> crfopt.Param:
    return crfopt.Param(default, str, f"sampling scheme (§3.3): {', '.join(kinds)}", choices=kinds)


# Every variant's parameters, in display order; each class keeps the ones that act on it.
_PARAMETERS = {
    "non_uniformity": crfopt.Param(
        0.8,
        float,
        "ρ, weight of the non-uniform sampler part (LPL18 §6.3)",
        low=0.0,
        high=1.0,
    ),
    "initial_gap": crfopt.Param(
        100.0, float, "initial stored gap G_i, the start of ĝ (LPL18 fn. 5)", low=0.0
    ),
    "sub_precision": crfopt.Param(
        1e-3, float, "newton/golden tolerance on the step γ (LPL18 §6.2)", low=0.0
    ),
    "line_search": crfopt.Param(
        "newton",
        str,
        "step rule (§3.2): newton, golden, fixed (γ = fixed_step), "
        "theory (γ = (1 + R/(λn))⁻¹, R = max_i R_i, LPL18 App. F Thm. 1)",
        choices=LINE_SEARCHES,
    ),
    "fixed_step": crfopt.Param(
        None,
        float,
        "γ of line_search='fixed' (ablation); unset means 0.5, refused with other rules",
        allow_none=True,
        low=0.0,
        high=1.0,
    ),
    "start": crfopt.Param(
        "half",
        str,
        "first Newton point: 0.5, the example's previous step (LPL18 fn. 4) "
        "or the root of the chord of f' between 0 and 1",
        choices=STARTS,
    ),
    "max_line_search": crfopt.Param(
        100, int, "derivative evaluations before the line search gives up (§3.2)", low=1
    ),
    "init": crfopt.Param(
        "gibbs",
        str,
        "dual initialization (§3.1, §7.2)",
        choices=("gibbs", "mixture", "uniform"),
    ),
    "init_score": crfopt.Param(
        10.0, float, "c of the gibbs initialization (REF, = SBA15's OEG-10)", low=0.0
    ),
    "init_epsilon": crfopt.Param(
        1e-6, float, "ε of the mixture initialization (§7.2 [choice])", low=0.0, high=1.0
    ),
    "tolerance": crfopt.Param(
        1e-7, float, "stop when the gap estimate ĝ falls below this (REF)", low=0.0
    ),
    "refresh_period": crfopt.Param(
        None,
        int,
        "recompute all gaps every k epochs, charged n oracle calls (§3.1)",
        allow_none=True,
        low=1,
    ),
    "edelta_refresh": crfopt.Param(
        "epoch",
        str,
        "empirical-Δ tree refresh (§3.3 [choice])",
        choices=("epoch", "immediate"),
    ),
    "dtype": crfopt.Param(
        "float64",
        str,
        "storage of the dual log-marginals (float32 for large K)",
        choices=("float64", "float32"),
    ),
}


def _parameters(sampler: crfopt.Param, *drop: str) -> dict[str, crfopt.Param]:
    out = {"sampler": sampler}
    out.update((k, v) for k, v in _PARAMETERS.items() if k not in drop)
    return out


class SDCA(crfopt.Optimizer):
    """SDCA for CRFs with a Newton line search, uniform-family sampling (LPL18 Alg. 1–2).

    The subclasses :class:`SDCAAdaptive` and :class:`SDCAEdelta` add the sampler
    parameters that only act there; a parameter that does not act on a variant is
    refused (``crfopt.ParameterError`` naming the valid ones).

    Parameters (all overridable)
    ----------------------------
    sampler : which example to visit next (§3.3): uniform, permutation, cyclic.
    sub_precision : line-search tolerance on γ (LPL18 §6.2: 1e-3).
    line_search : newton (safeguarded Newton on f', §3.2), golden (section search on f),
        fixed (γ = fixed_step), theory (the fixed γ = (1 + R/(λn))⁻¹ with R = max_i R_i
        under which LPL18 App. F Thm. 1 / SSZ13 prove linear convergence; tiny, ablation).
    """

    parameters = _parameters(
        _sampler_param("uniform", UNIFORM_SAMPLERS), "non_uniformity", "edelta_refresh"
    )
    capabilities = frozenset({"stochastic", "has_dual", "gap_estimate", "line_search"})
    cost = crfopt.Cost(init_passes=1.0)  # the gibbs μ⁰: one oracle_scores per sequence
    # σ > 0 is prox-SDCA (SSZ13's ℓ1 + ℓ2 case, §3.14): the same method with the primal
    # map S_σ(z)/λ, identical to the ℓ2 arithmetic at σ = 0, so every variant takes it.
    regularizers = ("l2", "l1")

    @classmethod
    def state_memory(cls, problem: crfopt.CRFProblem, params: Mapping[str, Any]) -> int:
        """Bytes of the state :meth:`setup` allocates, from the problem's shapes.

        The dual log-marginals (N·K node + (N-n)·K² edge entries, LPL18 Table 1: 1.5 GB
        for POS-WSJ in float64) dominate; then two weight vectors (w and ŵ(μ⁰) while it
        is built), the per-sequence arrays (gaps, entropies, steps, the sampler's), the
        line search's work tables (7 fields × (L·K + (L-1)·K²)) and the emission scratch.
        """
        itemsize = 4 if params["dtype"] == "float32" else 8
        K, kd = problem.n_labels, problem.data
        L = int(kd.max_len)
        support = int(kd.n_attributes) if kd.dense else int(np.diff(kd.support_ptr).max())
        work = len(_FIELDS) * (L * K + max(L - 1, 1) * K * K)
        # σ > 0: u = z/λ beside w, and the prox segment (3 rows over a support's coordinates)
        prox = problem.dim + 3 * (support * K + K * K) if problem.l1 > 0 else 0
        return int(
            problem.dual_memory(itemsize)
            + 8 * (2 * problem.dim + 8 * problem.n + work + support * K + prox)
        )

    @classmethod
    def decline(
        cls, problem: crfopt.CRFProblem, params: Mapping[str, Any], limits: Any
    ) -> str | None:
        """Decline when the state (:meth:`state_memory`) exceeds the memory limit.

        The limit is the user's ``max_memory`` or, by default, the machine's available
        memory: allocating the dual is what would fail or swap, late and without a word.
        """
        hint = "" if params["dtype"] == "float32" else "dtype=float32 halves the dual"
        return limits.decline_memory(cls.state_memory(problem, params), hint)

    def setup(self) -> None:
        p = self.problem
        prm = self.params
        dtype = np.float32 if prm["dtype"] == "float32" else np.float64
        self._mu = initial_dual(
            p, prm["init"], c=prm["init_score"], epsilon=prm["init_epsilon"], dtype=dtype
        )
        tau = p.l1 / p.lam if p.l1 > 0 else 0.0
        if tau > 0.0:  # u⁰ = z(μ⁰)/λ and w⁰ = S_τ(u⁰) = ŵ(μ⁰) (§3.14), no oracle call
            u = duality.dual_direction(p, self._mu) / p.lam
            w = duality.soft_threshold(u, tau)
        else:
            w = p.conjugate_weights(self._mu)  # w⁰ = ŵ(μ⁰), no oracle call
            u = w  # never read at σ = 0
        gaps = np.full(p.n, prm["initial_gap"])
        entropies = duality.entropies(p, self._mu)
        self._state = SDCAState(
            w=w,
            u=u,
            mu_n=self._mu.log_nodes,
            mu_e=self._mu.log_edges,
            gaps=gaps,
            entropies=entropies,
            last_step=np.full(p.n, 0.5),
            gap_sum=np.array([gaps.sum()]),
            w_sq=np.array([float(w @ w)]),
            entropy_sum=np.array([entropies.sum()]),
            cap_hits=np.zeros(1, dtype=np.int64),
            iterations=np.zeros(1, dtype=np.int64),
        )
        self._sampler = self._make_sampler()
        self._opts = self._options()
        kd = p.data
        max_support = int(kd.n_attributes) if kd.dense else int(np.diff(kd.support_ptr).max())
        self._E_loc = np.zeros((max_support, p.n_labels))
        self._scratch = make_scratch(int(kd.max_len), p.n_labels)
        K = p.n_labels
        self._segment = np.zeros((3, max_support * K + K * K if tau > 0.0 else 0))

    def _make_sampler(self, **extra: Any) -> crfopt.Sampler:
        p = self.problem
        importance = None
        if self.params["sampler"] in ("importance", "gapimp"):
            importance = p.lam + p.radii() / p.n  # L_i = λ + R_i/n (§1.7)
        return crfopt.Sampler(
            self.params["sampler"],
            p.n,
            self.rng,
            initial_gap=self.params["initial_gap"],
            importance=importance,
            **extra,
        )

    def _options(self) -> SDCAOptions:
        p = self.problem
        prm = self.params
        rule = StepRule[prm["line_search"].upper()]
        fixed = prm["fixed_step"]
        if fixed is not None and rule != StepRule.FIXED:
            raise crfopt.ParameterError(
                f"{type(self).__name__}: parameter 'fixed_step' applies only to "
                f"line_search='fixed', not {prm['line_search']!r}"
            )
        theory = math.nan
        if rule == StepRule.THEORY:
            theory = 1.0 / (1.0 + float(np.max(p.radii())) / (p.lam * p.n))
        refresh = prm["refresh_period"]
        return SDCAOptions(
            lam_n=p.lam * p.n,
            rule=rule,
            start=Start[prm["start"].upper()],
            sub_precision=prm["sub_precision"],
            max_line_search=prm["max_line_search"],
            fixed_step=(0.5 if fixed is None else fixed) if rule == StepRule.FIXED else math.nan,
            theory_step=theory,
            tolerance=prm["tolerance"],
            refresh_every=0 if refresh is None else int(refresh) * p.n,
            tau=p.l1 / p.lam if p.l1 > 0 else 0.0,
        )

    @property
    def w(self) -> np.ndarray:
        return self._state.w

    def run_block(self, k: int) -> int:
        u = self._sampler.prepare(k)
        st = self._state
        hits = int(st.cap_hits[0])
        p = self.problem
        done = _sdca_block(
            p.data,
            p.counters.array,
            st,
            self._sampler.state,
            u,
            int(k),
            self._opts,
            self._scratch,
            self._E_loc,
            self._segment,
        )
        if done < k:
            self.converged = True
        self._warn_cap_hits(hits)
        return done

    def _warn_cap_hits(self, before: int) -> None:
        """Warn when Newton searches hit ``max_line_search`` since ``before`` (§7.9)."""
        hits = int(self._state.cap_hits[0])
        if hits > before:
            warnings.warn(
                f"SDCA line search hit its cap of {self._opts.max_line_search} evaluations "
                f"{hits - before} time(s); returned the last iterate (§7.9)",
                RuntimeWarning,
                stacklevel=3,
            )

    def step(self) -> None:
        self.run_block(1)

    def dual_state(self) -> crfopt.DualMarginals:
        return self._mu

    def gap_estimate(self) -> float:
        return float(self._state.gap_sum[0] / self.problem.n)

    def dual_value(self) -> float:
        """D_inc = mean H̃(μ_i) - λ/2 ‖w‖², kept up to date in O(1) (REF MonitorDualObjective)."""
        p = self.problem
        st = self._state
        return float(st.entropy_sum[0] / p.n - 0.5 * p.lam * st.w_sq[0])

    @property
    def sampler(self) -> crfopt.Sampler:
        return self._sampler


class SDCAAdaptive(SDCA):
    """SDCA with a non-uniform sampler mixed with uniform draws by ``non_uniformity`` ρ:
    importance (∝ L_i), gap (∝ G_i), gapimp (∝ G_i L_i) or max (argmax G_i) (§3.3)."""

    parameters = _parameters(_sampler_param("gap", ADAPTIVE_SAMPLERS), "edelta_refresh")

    def _make_sampler(self, **extra: Any) -> crfopt.Sampler:
        return super()._make_sampler(non_uniformity=self.params["non_uniformity"], **extra)


class SDCAEdelta(SDCAAdaptive):
    """SDCA with empirical-Δ sampling (VLZ15 Alg. 3) mixed with uniform draws by ρ."""

    parameters = _parameters(_sampler_param("edelta", EDELTA_SAMPLERS))

    def _make_sampler(self, **extra: Any) -> crfopt.Sampler:
        return super()._make_sampler(refresh=self.params["edelta_refresh"], **extra)


# ---------------------------------------------------------------- sdca-minibatch
# Mini-batch SDCA with CoCoA+ safe adding (docs/algorithms.md §3.13): the same blocks,
# B of them at one w in a parallel loop; in this module because it is the SDCA family
# (plugins import only the public API, not each other).

# The default batch: B = 8 whatever the machine. A step's dual gain is guaranteed only
# for the σ' = B-damped steps, so B trades parallel work per step against step length;
# 8 keeps 2–8 cores busy (4 sequences per core on the 2-core reference machine, enough to
# even out unequal lengths) while the damping stays mild (a measured step is about the
# undamped one when supports barely overlap, as on CoNLL-2000). A default that followed
# the thread count would make the same command compute different iterates on another
# machine; B is a parameter, so results depend only on it and the seed.
DEFAULT_BATCH = 8


@jit(inline=True)
def _lane_step(data, counters, st, opts, sigma, sc, i, T, K, E_loc, trans_dir):
    """One drawn sequence at the step's w: ν_i, δ_i, v_i, γ_i (σ'-scaled search) and the
    new μ_i stored (its rows are this lane's alone). Returns (g_i, a_i, γ_i, H̃(μ_i new)).

    Not :func:`_commit`: that one also adds γv to w and the running totals, which the
    lanes must not do concurrently; here only μ_i is stored (:func:`_store_mixture`, as
    ``_commit`` does) and the caller applies the rest in draw order.
    """
    # here, not in the caller: numba cannot lower a prange body using tuples borrowed outside
    data, counters, st, sc, E_loc, trans_dir = borrowed((data, counters, st, sc, E_loc, trans_dir))
    g_i, r_i = _block_gaps(data, counters, st, sc, i, T, K)
    # ⟨w, v_i⟩ is taken again when v_i is added (w has moved by the lanes before it)
    a, _ = _direction(data, st.w, opts.lam_n, sc, i, T, K, E_loc, trans_dir)
    lna = sigma * opts.lam_n * a
    x0 = _newton_start(opts.start, st.last_step[i], g_i, r_i, lna)
    gamma, evals, capped = _newton_line_search(
        x0, opts.sub_precision, opts.max_line_search, g_i + r_i, lna, sc, T, K
    )
    counters[kernels.LS_EVALS] += evals
    s = data.offsets[i]
    h_new = _store_mixture(st, sc, s, s - i, T, K, gamma)  # _commit's μ part
    return g_i, a, gamma, h_new, capped


@jit(parallel=True)
def _minibatch_block(
    data,
    lane_data,
    private_audit,
    counters,
    lane_counts,
    st,
    sampler,
    u,
    k_steps,
    B,
    sigma,
    opts,
    lane_sc,
    E_locs,
    trans_dirs,
):
    """k_steps mini-batch steps; returns the number done (fewer if ĝ < tolerance).

    ``u`` holds two uniforms per draw (B per step). Lane j works on ``lane_sc[j]``,
    ``E_locs[j]``, ``trans_dirs[j]`` and counts into ``lane_counts[j]`` and
    ``lane_data[j]``'s audit cell (private copies under numba, merged after the
    parallel loop, so no count is lost to a race; the NumPy path runs the lanes one
    after the other on the shared ones).
    """
    n = data.offsets.shape[0] - 1
    K = data.n_labels
    idx = np.empty(B, dtype=np.int64)
    g = np.empty(B)
    av = np.empty(B)
    gam = np.empty(B)
    hn = np.empty(B)
    cap = np.zeros(B, dtype=np.int64)
    done = 0
    for step in range(k_steps):
        nb = 0
        for j in range(B):
            i = samplers.sampler_draw(sampler, u[step * B + j, 0], u[step * B + j, 1])
            seen = False
            for q in range(nb):
                if idx[q] == i:
                    seen = True
            if not seen:
                idx[nb] = i
                nb += 1
        for j in prange(nb):
            i = idx[j]
            T = data.offsets[i + 1] - data.offsets[i]
            g[j], av[j], gam[j], hn[j], capped = _lane_step(
                lane_data[np.int64(j)],
                lane_counts[j],
                st,
                opts,
                sigma,
                lane_sc[np.int64(j)],
                i,
                T,
                K,
                E_locs[j],
                trans_dirs[j],
            )
            cap[j] = 1 if capped else 0
        for j in range(nb):
            for c in range(counters.shape[0]):
                counters[c] += lane_counts[j, c]
                lane_counts[j, c] = 0
            if private_audit:
                data.audit[0] += lane_data[j].audit[0]
                lane_data[j].audit[0] = 0
        # w += Σ γ_j v_j in draw order; ‖w‖² is kept exactly by taking each ⟨w, v_j⟩ at
        # the w it is added to (the lanes' b_j were all taken at the step's start).
        for j in range(nb):
            i = idx[j]
            gamma = gam[j]
            a = av[j]
            b = kernels.dot_local(data, i, st.w, E_locs[j], trans_dirs[j])
            _move_w(data, st, i, gamma, a, b, E_locs[j], trans_dirs[j], opts.tau)
            st.entropy_sum[0] += hn[j] - st.entropies[i]
            st.entropies[i] = hn[j]
            st.last_step[i] = gamma
            st.gap_sum[0] += g[j] - st.gaps[i]
            st.gaps[i] = g[j]
            st.cap_hits[0] += cap[j]
            samplers.sampler_feedback(sampler, i, g[j], gamma * math.sqrt(a))
            counters[kernels.UPDATES] += 1
        counters[kernels.ITERATIONS] += 1
        st.iterations[0] += 1
        done += 1
        if st.gap_sum[0] / n < opts.tolerance:
            break
    return done


_KEPT = (
    "initial_gap",
    "sub_precision",
    "start",
    "max_line_search",
    "init",
    "init_score",
    "init_epsilon",
    "tolerance",
    "dtype",
)


class SDCAMinibatch(SDCA):
    """Mini-batch SDCA, B sequences per step in parallel, CoCoA+ adding with σ' = B.

    Parameters (all overridable)
    ----------------------------
    batch_size : B, sequences drawn per step (default 8, see DEFAULT_BATCH).
    sigma : σ', the scale of each block's quadratic term; unset means B, the safe value
        (every step a dual ascent). Smaller values take longer steps without that
        guarantee (ablation; σ' = 1 is plain "adding").
    The SDCA parameters that act here: Newton line search only, uniform sampling.
    """

    parameters = {
        "batch_size": crfopt.Param(
            DEFAULT_BATCH, int, "B, sequences drawn per step (updated in parallel)", low=1
        ),
        "sigma": crfopt.Param(
            None,
            float,
            "σ' of the safe aggregation (unset: B, a guaranteed dual ascent; < B: ablation)",
            allow_none=True,
            low=1.0,
        ),
        **{k: _PARAMETERS[k] for k in _KEPT},
    }
    capabilities = frozenset({"stochastic", "has_dual", "gap_estimate", "line_search"})
    # one iteration = one step: B oracle calls and B updates (fewer on a repeated draw)
    cost = crfopt.Cost(oracle_calls=(1, None), updates=(1, None), init_passes=1.0)

    @classmethod
    def state_memory(cls, problem: crfopt.CRFProblem, params: Mapping[str, Any]) -> int:
        """SDCA's state plus B lanes of line-search tables and emission scratch."""
        base = SDCA.state_memory(problem, params)
        K, kd = problem.n_labels, problem.data
        L = int(kd.max_len)
        support = int(kd.n_attributes) if kd.dense else int(np.diff(kd.support_ptr).max())
        lane = 7 * (L * K + max(L - 1, 1) * K * K) + support * K + K * K
        return int(base + 8 * (int(params["batch_size"]) - 1) * lane)

    def _make_sampler(self, **extra: Any) -> crfopt.Sampler:
        # what SDCA builds for sampler="uniform" (no sampler parameter here)
        return crfopt.Sampler(
            "uniform", self.problem.n, self.rng, initial_gap=self.params["initial_gap"]
        )

    def setup(self) -> None:
        super().setup()
        p = self.problem
        B = int(self.params["batch_size"])
        sigma = self.params["sigma"]
        self._B = B
        self._sigma = float(B if sigma is None else sigma)
        kd = p.data
        L, K = int(kd.max_len), p.n_labels
        max_support = int(kd.n_attributes) if kd.dense else int(np.diff(kd.support_ptr).max())
        self._E_locs = np.zeros((B, max_support, K))
        self._trans_dirs = np.zeros((B, K, K))
        self._lane_counts = np.zeros((B, len(p.counters.array)), dtype=np.int64)
        scratches = [make_scratch(L, K) for _ in range(B)]
        if JIT_ENABLED:
            from numba.typed import List

            # Private audit cells: concurrent `audit[0] += 1` on one cell can lose counts.
            self._lane_data = List([kd._replace(audit=np.zeros(1, np.int64)) for _ in range(B)])
            self._lane_sc = List(scratches)
        else:
            self._lane_data = [kd] * B
            self._lane_sc = scratches

    def _options(self) -> SDCAOptions:
        p = self.problem
        prm = self.params
        return SDCAOptions(
            lam_n=p.lam * p.n,
            rule=StepRule.NEWTON,
            start=Start[prm["start"].upper()],
            sub_precision=prm["sub_precision"],
            max_line_search=prm["max_line_search"],
            fixed_step=math.nan,
            theory_step=math.nan,
            tolerance=prm["tolerance"],
            refresh_every=0,
            tau=p.l1 / p.lam if p.l1 > 0 else 0.0,
        )

    def run_block(self, k: int) -> int:
        u = self._sampler.prepare(int(k) * self._B)
        p = self.problem
        st = self._state
        hits = int(st.cap_hits[0])
        done = _minibatch_block(
            p.data,
            self._lane_data,
            JIT_ENABLED,
            p.counters.array,
            self._lane_counts,
            st,
            self._sampler.state,
            u,
            int(k),
            self._B,
            self._sigma,
            self._opts,
            self._lane_sc,
            self._E_locs,
            self._trans_dirs,
        )
        if done < k:
            self.converged = True
        self._warn_cap_hits(hits)
        return done


_REF_MINIBATCH = "MJT15 (CoCoA+ adding, σ' = B); TBRS13; docs/algorithms.md §3.13"


_REF = "LPL18 Alg. 1-2, §5; docs/algorithms.md §3.1-3.3, §3.14 (σ > 0: prox-SDCA)"


@crfopt.hookimpl
def crfopt_register_optimizers() -> list[crfopt.OptimizerSpec]:
    def spec(name: str, cls: type[SDCA], summary: str, **defaults: object) -> crfopt.OptimizerSpec:
        return crfopt.OptimizerSpec(name, cls, defaults=defaults, summary=summary, reference=_REF)

    return [
        spec("sdca", SDCA, "SDCA, uniform sampling, Newton line search", sampler="uniform"),
        spec(
            "sdca-perm",
            SDCA,
            "SDCA, a fresh permutation every epoch (SSZ13 §6)",
            sampler="permutation",
        ),
        spec("sdca-cyclic", SDCA, "SDCA, one fixed random order (SSZ13 §8.5)", sampler="cyclic"),
        spec(
            "sdca-importance",
            SDCAAdaptive,
            "SDCA, sampling ∝ smoothness bounds L_i (ρ = 0.8)",
            sampler="importance",
            non_uniformity=0.8,
        ),
        spec(
            "sdca-gap",
            SDCAAdaptive,
            "SDCA, sampling ∝ stale duality gaps (ρ = 0.8) (LPL18)",
            sampler="gap",
            non_uniformity=0.8,
        ),
        spec(
            "sdca-gapimp",
            SDCAAdaptive,
            "SDCA, sampling ∝ gap × L_i (ρ = 0.8) (LPL18 App. F)",
            sampler="gapimp",
            non_uniformity=0.8,
        ),
        spec(
            "sdca-max",
            SDCAAdaptive,
            "SDCA, the largest stale gap (ρ = 0.8) (Dünner et al. 2017)",
            sampler="max",
            non_uniformity=0.8,
        ),
        spec(
            "sdca-edelta",
            SDCAEdelta,
            "SDCA, empirical-Δ sampling (ρ = 0.5) (VLZ15 Alg. 3)",
            sampler="edelta",
            non_uniformity=0.5,
        ),
        crfopt.OptimizerSpec(
            "sdca-minibatch",
            SDCAMinibatch,
            defaults={},
            summary=f"mini-batch SDCA, B = {DEFAULT_BATCH} in parallel, safe adding (σ' = B)",
            reference=_REF_MINIBATCH,
        ),
    ]
