"""The ℓ1 part of a dual block step: prox-SDCA's segment (docs/algorithms.md §1.9, §3.14).

With an ℓ1 weight σ the primal map is ∇g*(z) = S_σ(z)/λ: a dual method keeps
u = z(μ)/λ (= w when σ = 0) and w = S_τ(u), τ = σ/λ, re-thresholded on the block's
support only (:func:`threshold_local`). Along a block's segment the quadratic part of
n·D becomes -λn/2 ‖S_τ(u + γv)‖², piecewise quadratic in γ; only the coordinates of v's
support whose segment [u_j, u_j + v_j] leaves [-τ, τ] contribute, and
:func:`pack_segment` packs them into ``seg`` (rows: u_j, v_j, S_τ(u_j)) once per step,
so that each evaluation of :func:`segment_slope` / :func:`segment_value` costs
O(their number). The line searches of :mod:`crfopt.dual.search` take the segment.
"""

from __future__ import annotations

from crfopt import kernels
from crfopt.kernels.jit import jit
from crfopt.optim.pieces import soft_threshold

__all__ = ["pack_segment", "segment_slope", "segment_value", "threshold_local"]


@jit(inline=True)
def _pack_one(x, v, tau, seg, m):
    # a coordinate whose whole segment stays in [-τ, τ] has S_τ ≡ 0 on it: no part in f
    if v == 0.0 or (abs(x) <= tau and abs(x + v) <= tau):
        return m
    seg[0, m] = x
    seg[1, m] = v
    seg[2, m] = soft_threshold(x, tau)
    return m + 1


@jit
def pack_segment(data, i, u, tau, E_loc, trans_loc, seg):
    """Pack the coordinates of v = (E_loc, trans_loc) on sequence i's support where
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
            m = _pack_one(W[k, l], trans_loc[k, l], tau, seg, m)
    return m


@jit(fastmath=True)
def segment_slope(gamma, seg, m, tau):
    """(φ(γ), φ'(γ)) with φ(γ) = ⟨S_τ(u + γv) - S_τ(u), v⟩ over the packed coordinates:
    f'(γ) = ⟨δ, log ν - log μ_γ⟩_tree - λn φ(γ), f''(γ) = -Fisher - λn φ'(γ); φ' = the
    Σ v_j² over the coordinates active (|u_j + γv_j| > τ) at γ, so f'' jumps at kinks."""
    phi = 0.0
    curv = 0.0
    for j in range(m):
        v = seg[1, j]
        x = seg[0, j] + gamma * v
        phi += v * (soft_threshold(x, tau) - seg[2, j])
        curv += v * v if abs(x) > tau else 0.0
    return phi, curv


@jit(fastmath=True)
def segment_value(gamma, seg, m, tau):
    """ψ(γ) = ½(‖S_τ(u + γv)‖² - ‖S_τ(u)‖²) over the packed coordinates (ψ' = φ)."""
    psi = 0.0
    for j in range(m):
        s0 = seg[2, j]
        s1 = soft_threshold(seg[0, j] + gamma * seg[1, j], tau)
        psi += 0.5 * (s1 - s0) * (s1 + s0)
    return psi


@jit
def threshold_local(data, i, u, w, tau):
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
            new = soft_threshold(U[a, k], tau)
            Wm[a, k] = new
            change += (new - old) * (new + old)
    Ut = kernels.transition_matrix(data, u)
    Wt = kernels.transition_matrix(data, w)
    for k in range(K):
        for l in range(K):
            old = Wt[k, l]
            new = soft_threshold(Ut[k, l], tau)
            Wt[k, l] = new
            change += (new - old) * (new + old)
    return change
