"""Compiled building blocks shared by stochastic primal optimizers (``crfopt.pieces``).

Plugins call these from their own :func:`crfopt.jit` loops, with ``problem.data`` and
``problem.counters.array`` as for :mod:`crfopt.kernels`. Every function follows
``CRFOPT_DISABLE_JIT`` (plain Python then).

Lazy scaled weights (Le Roux et al. 2012; SBA15 §4.1; ALGORITHMS.md §3.4 "Lazy sparse
update", §5.7):
    :class:`LazyWeights` keeps w = s·u and a running sum S so that the dense update
    ``w ← c·w − β·d`` costs O(1): ``lazy_step`` sets s ← c·s, S ← S + β/s, and
    coordinates of u lag behind until ``catch_up_row`` / ``catch_up_transitions`` /
    ``catch_up_support`` / ``catch_up_all`` apply ``u_j ← u_j − d_j (S − last_row)``
    (exact while d_j stays constant). ``renormalize`` folds s into u when it gets tiny,
    ``materialize`` returns the dense w. ``scaled_scores`` gives the score tables of
    w = s·u on one sequence.
Local gradient (ALGORITHMS.md §1.5, §3.4):
    ``local_gradient`` assembles ∇ℓ_i = E_ν F − F(x_i, y_i) on sequence i's support from
    its marginals and returns ‖∇ℓ_i‖².
Lipschitz backtracking (Beck & Teboulle 2009; SBA15 §4; ALGORITHMS.md §3.4
``lipschitz_ls``):
    ``lipschitz_backtrack`` finds the first L = L₀·2^j with
    ℓ_i(w − g/L) ≤ ℓ_i(w) − ‖g‖²/(2L), each trial one counted forward call on score tables.
``max_support(data)``:
    the largest number of distinct attributes of one sequence (the row count of the
    scratch tables that hold a local direction).

Layout: the weight vector is A row blocks of K entries (emission + bias, row a at
``a·K``) followed by the K×K transition block; a :class:`LazyWeights` has A + 1 ``last``
entries, the last one for the transition block.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from crfopt import kernels
from crfopt.kernels.arrays import KernelData
from crfopt.kernels.jit import jit

__all__ = [
    "RENORMALIZE_BELOW",
    "LazyWeights",
    "catch_up_all",
    "catch_up_row",
    "catch_up_support",
    "catch_up_transitions",
    "lazy_step",
    "lazy_weights",
    "lipschitz_backtrack",
    "local_gradient",
    "materialize",
    "max_support",
    "renormalize",
    "scaled_scores",
]

#: fold the scale into u once s drops below this (ALGORITHMS.md §5.7): s·u must not underflow
RENORMALIZE_BELOW = 1e-100


class LazyWeights(NamedTuple):
    """w = s·u with coordinates that catch up just in time (SBA15 §4.1).

    The represented weights are w = s·(u − d·(S − last_row)) coordinate-wise: every row
    of u owes the lazily applied multiple (S − last_row) of the direction d.
    """

    u: np.ndarray  # (dim,) weights divided by s, rows lagging behind
    d: np.ndarray  # (dim,) the direction applied lazily (SAG: Σ_i stored gradient_i)
    last: np.ndarray  # (A + 1,) S when each row (last entry: transitions) caught up
    scale: np.ndarray  # (2,) [s, S]


def lazy_weights(dim: int, n_rows: int) -> LazyWeights:
    """w = 0 with s = 1, S = 0, d = 0 for ``n_rows`` attribute rows plus the transitions."""
    return LazyWeights(np.zeros(dim), np.zeros(dim), np.zeros(n_rows + 1), np.array([1.0, 0.0]))


@jit(fastmath=True, inline=True)
def catch_up_row(u, d, last, a, K, S):
    """Bring attribute row a up to date: u_a ← u_a − d_a (S − last_a), last_a ← S."""
    delta = S - last[a]
    if delta != 0.0:
        base = a * K
        for k in range(K):
            u[base + k] -= d[base + k] * delta
        last[a] = S


@jit(fastmath=True, inline=True)
def catch_up_transitions(u, d, last, A, K, S):
    """Bring the K×K transition block (row A of ``last``) up to date."""
    delta = S - last[A]
    if delta != 0.0:
        off = A * K
        for j in range(K * K):
            u[off + j] -= d[off + j] * delta
        last[A] = S


@jit(inline=True)
def catch_up_support(data, u, d, last, i, S):
    """Catch up every row sequence i reads (its support and the transitions)."""
    K = data.n_labels
    support = data.support
    lo, hi = kernels.support_bounds(data, i)
    for j in range(hi - lo):
        catch_up_row(u, d, last, support[lo + j], K, S)
    catch_up_transitions(u, d, last, data.n_attributes, K, S)


@jit
def catch_up_all(u, d, last, A, K, S):
    """Catch up all A attribute rows and the transitions (before reading the whole w)."""
    for a in range(A):
        catch_up_row(u, d, last, a, K, S)
    catch_up_transitions(u, d, last, A, K, S)


@jit(inline=True)
def lazy_step(lw, shrink, alpha, count):
    """Apply w ← shrink·w − (alpha/count)·d in O(1) (ALGORITHMS.md §3.4).

    s ← shrink·s and S ← S + alpha/(count·s_new); rows pay the d-part at catch-up.
    Returns the new (s, S).
    """
    s_new = lw.scale[0] * shrink
    S_new = lw.scale[1] + alpha / (count * s_new)
    lw.scale[0] = s_new
    lw.scale[1] = S_new
    return s_new, S_new


@jit
def renormalize(lw, A, K):
    """Fold s into u (ALGORITHMS.md §5.7): catch up everything, u ← s·u, s = 1, S = 0."""
    u, d, last = lw.u, lw.d, lw.last
    catch_up_all(u, d, last, A, K, lw.scale[1])
    s = lw.scale[0]
    for j in range(u.shape[0]):
        u[j] *= s
    lw.scale[0] = 1.0
    lw.scale[1] = 0.0
    for a in range(last.shape[0]):
        last[a] = 0.0


@jit
def materialize(lw, A, K):
    """The dense w = s·u after catching up every row (a new array)."""
    catch_up_all(lw.u, lw.d, lw.last, A, K, lw.scale[1])
    return lw.scale[0] * lw.u


@jit(inline=True)
def scaled_scores(data, i, u, s, unary, trans):
    """Score tables of w = s·u on sequence i: θ_t = s·θ_t(u) into ``unary[:T]``, s·W_T into
    ``trans`` (the scores are linear in w, §1.1). Returns T. Rows read must be caught up."""
    K = data.n_labels
    t_off = data.n_attributes * K
    T = kernels.unary_scores(data, i, u, unary)
    for t in range(T):
        for k in range(K):
            unary[t, k] *= s
    for k in range(K):
        for l in range(K):
            trans[k, l] = s * u[t_off + k * K + l]
    return T


@jit(inline=True)
def local_gradient(data, i, nodes, edge_sum, work, truth, E_loc, trans_loc):
    """∇ℓ_i = E_ν F − F(x_i, y_i) on sequence i's support; returns ‖∇ℓ_i‖² (§1.5, §3.4).

    ``nodes[:T]`` / ``edge_sum`` are ν_i's node marginals and summed pairwise marginals
    (as from ``kernels.oracle_sums``); the emission+bias part goes to ``E_loc``
    (|S_i|×K, rows ``data.support[lo:hi]``), the transition part to ``trans_loc`` (K×K).
    ``work`` (≥ T×K) and ``truth`` (K×K) are scratch; ``nodes`` is left unchanged.
    """
    K = data.n_labels
    s0 = data.offsets[i]
    T = data.offsets[i + 1] - s0
    y = data.y
    for t in range(T):
        for k in range(K):
            work[t, k] = nodes[t, k]
        work[t, y[s0 + t]] -= 1.0
    kernels.expected_emission(data, i, work, E_loc)
    kernels.truth_transitions(data, i, truth)
    lo, hi = kernels.support_bounds(data, i)
    gn2 = 0.0
    for j in range(hi - lo):
        for k in range(K):
            gn2 += E_loc[j, k] * E_loc[j, k]
    for k in range(K):
        for l in range(K):
            trans_loc[k, l] = edge_sum[k, l] - truth[k, l]
            gn2 += trans_loc[k, l] * trans_loc[k, l]
    return gn2


@jit
def lipschitz_backtrack(
    data, counters, i, f, gn2, L, unary, trans, g_unary, g_trans, trial, trial_t, max_doublings
):
    """Smallest tried L = L₀·2^j with ℓ_i(w − g/L) ≤ ℓ_i(w) − ‖g‖²/(2L) (Beck–Teboulle).

    The sufficient-decrease test of SAG's line search (SBA15 §4; ALGORITHMS.md §3.4
    ``lipschitz_ls``, §5.7): ``unary[:T]``/``trans`` are the scores θ(w), ``g_unary[:T]``/
    ``g_trans`` the scores θ(g) of the direction g (``kernels.local_scores``), ``f`` =
    ℓ_i(w), ``gn2`` = ‖g‖². Each trial is one counted forward call on θ(w) − θ(g)/L;
    ``trial`` (≥ T×K) and ``trial_t`` (K×K) are scratch. Returns (L, doublings); raises
    FloatingPointError on a non-finite trial value or after ``max_doublings`` doublings.
    """
    K = data.n_labels
    T = data.offsets[i + 1] - data.offsets[i]
    # the ground truth's score is linear in the scores: score(θ − θ_g/L) = truth − truth_g/L
    truth = kernels.truth_score(data, i, unary, trans)
    truth_g = kernels.truth_score(data, i, g_unary, g_trans)
    for doublings in range(max_doublings + 1):
        inv = 1.0 / L
        for t in range(T):
            for k in range(K):
                trial[t, k] = unary[t, k] - g_unary[t, k] * inv
        for k in range(K):
            for l in range(K):
                trial_t[k, l] = trans[k, l] - g_trans[k, l] * inv
        log_z = kernels.forward_scores(data, counters, i, trial[:T], trial_t)
        f_new = log_z - (truth - truth_g * inv)
        if not math.isfinite(f_new):
            raise FloatingPointError("Lipschitz line search: non-finite objective at a trial point")
        if f_new <= f - 0.5 * gn2 * inv:
            return L, doublings
        L *= 2.0
    raise FloatingPointError(
        "Lipschitz line search: no sufficient decrease after max_doublings doublings"
    )


def max_support(data: KernelData) -> int:
    """Most distinct attributes any one sequence has (all of them on dense data).

    The row count of scratch tables that hold a local direction (``E_loc``).
    """
    if data.dense:
        return int(data.n_attributes)
    ptr = np.asarray(data.support_ptr)
    return int(np.diff(ptr).max()) if ptr.shape[0] > 1 else 0
