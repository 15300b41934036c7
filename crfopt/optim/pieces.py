"""Compiled building blocks shared by stochastic primal optimizers (``crfopt.pieces``).

Plugins call these from their own :func:`crfopt.jit` loops, with ``problem.data`` and
``problem.counters.array`` as for :mod:`crfopt.kernels`. Every function follows
``CRFOPT_DISABLE_JIT`` (plain Python then).

Lazy scaled weights (Le Roux et al. 2012; SBA15 §4.1; docs/algorithms.md §3.4 "Lazy sparse
update", §5.7):
    :class:`LazyWeights` keeps w = s·u and a running sum S so that the dense update
    ``w ← c·w − β·d`` costs O(1): ``lazy_step`` sets s ← c·s, S ← S + β/s, and
    coordinates of u lag behind until ``catch_up_row`` / ``catch_up_transitions`` /
    ``catch_up_support`` / ``catch_up_all`` apply ``u_j ← u_j − d_j (S − last_row)``
    (exact while d_j stays constant). ``renormalize`` folds s into u when it gets tiny,
    ``materialize`` returns the dense w. ``scaled_scores`` gives the score tables of
    w = s·u on one sequence.
Local gradient (docs/algorithms.md §1.5, §3.4):
    ``local_gradient`` assembles ∇ℓ_i = E_ν F − F(x_i, y_i) on sequence i's support from
    its marginals and returns ‖∇ℓ_i‖².
Gradient scores for a line search (§3.4 ``lipschitz_ls``):
    ``gradient_scores`` gives ‖∇ℓ_i‖² and the scores θ(∇ℓ_i) that the trials of
    ``lipschitz_backtrack`` need. Where ``sequence_grams`` built the sequence's Gram
    matrix X_i X_iᵀ (T_i × T_i, once per run) it replaces the two products X_iᵀD and
    X_i(X_iᵀD) with the |A| × K gradient block.
Lipschitz backtracking (Beck & Teboulle 2009; SBA15 §4; docs/algorithms.md §3.4
``lipschitz_ls``):
    ``lipschitz_backtrack`` finds the first L = L₀·2^j with
    ℓ_i(w − g/L) ≤ ℓ_i(w) − ‖g‖²/(2L), each trial one counted forward call on score tables.
Local curvature (issue 16):
    ``local_curvature`` estimates λ_max(∇²ℓ_i(w)) = λ_max(Cov_ν F) by power iteration
    with differenced marginals (a lower estimate at w, not a bound over w; see its
    docstring); ``curvature_at`` is its Python entry point.
Chain scratch: ``chain_work(max_len, K)`` gives the :class:`ChainWork` that
    ``kernels.forward_scores``, ``kernels.oracle_sums_scores`` and
    ``lipschitz_backtrack`` accept as ``work``, so that they allocate nothing per call.
``truth_memory(data)``:
    the ground truth in SBA15's marginal-memory form (node marginals U, summed pairwise
    marginals P), the start of SAG's and SAGA's stored gradients.
``max_support(data)``:
    the largest number of distinct attributes of one sequence (the row count of the
    scratch tables that hold a local direction).
``soft_threshold(x, τ)``:
    S_τ(x), the prox of τ|·| on one number (ℓ1 methods, docs/algorithms.md §1.9).
``one_blas_thread()``:
    a context that holds every BLAS library to one thread, for the vector algebra of a
    batch optimizer's loop (two-loop recursion, line search; ``kernels.threads``).

Layout: the weight vector is A row blocks of K entries (emission + bias, row a at
``a·K``) followed by the K×K transition block; a :class:`LazyWeights` has A + 1 ``last``
entries, the last one for the transition block.
"""

from __future__ import annotations

import math
import warnings
from typing import Any, NamedTuple

import numpy as np

from crfopt import kernels
from crfopt.kernels.arrays import ChainWork, KernelData, chain_work
from crfopt.kernels.jit import JIT_ENABLED, jit
from crfopt.kernels.prefetch import prefetch_write
from crfopt.kernels.threads import one_blas_thread

__all__ = [
    "GRAM_WORK_RATIO",
    "RENORMALIZE_BELOW",
    "ChainWork",
    "CurvatureWork",
    "LazyWeights",
    "SequenceGrams",
    "catch_up_all",
    "catch_up_row",
    "catch_up_support",
    "catch_up_transitions",
    "chain_work",
    "curvature_at",
    "curvature_work",
    "gradient_scores",
    "lazy_step",
    "lazy_weights",
    "lipschitz_backtrack",
    "local_curvature",
    "local_gradient",
    "materialize",
    "max_support",
    "one_blas_thread",
    "renormalize",
    "scaled_scores",
    "sequence_grams",
    "soft_threshold",
    "truth_memory",
]

#: fold the scale into u once s drops below this (docs/algorithms.md §5.7): s·u must not underflow
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


def lazy_weights(data: KernelData | int, n_rows: int | None = None) -> LazyWeights:
    """w = 0 with s = 1, S = 0, d = 0 for the attribute rows of ``data`` (``problem.data``:
    its ``n_kernel_attributes`` rows, bias included) plus the transitions.

    The older form ``lazy_weights(dim, n_rows)`` is deprecated: ``n_rows`` had to be the
    kernel data's row count, and ``problem.n_attributes`` (A, without the bias rows) gave
    a silently short ``last``. It is checked now: ``dim`` must be n_rows·K + K² for some K.
    """
    if n_rows is None:
        if isinstance(data, (int, np.integer)):
            raise TypeError("lazy_weights takes the kernel data (problem.data)")
        K, rows = int(data.n_labels), int(data.n_kernel_attributes)
        dim = rows * K + K * K
    else:
        warnings.warn(
            "lazy_weights(dim, n_rows) is deprecated; pass the kernel data: "
            "lazy_weights(problem.data)",
            DeprecationWarning,
            stacklevel=2,
        )
        dim, rows = int(data), int(n_rows)  # type: ignore[arg-type]
        K = (math.isqrt(rows * rows + 4 * dim) - rows) // 2  # dim = rows·K + K²
        if K < 1 or rows * K + K * K != dim:
            raise ValueError(
                f"lazy_weights: {dim} weights are not {rows} attribute rows of K labels plus "
                "K × K transitions; n_rows is the kernel data's row count, "
                "problem.n_kernel_attributes (bias rows included), not problem.n_attributes"
            )
    return LazyWeights(np.zeros(dim), np.zeros(dim), np.zeros(rows + 1), np.array([1.0, 0.0]))


@jit(inline=True)
def soft_threshold(x, tau):
    """S_τ(x) = sign(x) · max(|x| − τ, 0) of one number, the prox of τ|·| (docs/algorithms.md
    §1.9). Bit for bit the array form ``crfopt.core.duality.soft_threshold``."""
    if x > tau:
        return x - tau
    if x < -tau:
        return x + tau
    return 0.0


# How many rows ahead the catch-up of scattered rows prefetches them.
PREFETCH_ROWS = 8


@jit(inline=True)
def _prefetch_row(u, d, last, a, K):
    """Hint that attribute row a of u and d, and last[a], are about to be updated."""
    prefetch_write(last, a, 1)
    prefetch_write(u, a * K, K)
    prefetch_write(d, a * K, K)


@jit(fastmath=True, inline=True)
def _catch_up_rows(u, d, last, rows, lo, hi, K, S):
    """catch_up_row for the attribute rows rows[lo:hi] (rows lo … hi-1 if ``rows`` is
    None), the row loop inside: an inlined helper called per row takes and releases a
    reference to each of its arrays at every call (numba's inlining keeps the argument
    reference counts), 4 atomic operations per row that cost more than catching up an
    up-to-date row (3 µs of a 31 µs OCR SAG step).

    Scattered rows (``rows`` given) are prefetched PREFETCH_ROWS rows ahead: on sparse
    problems u, d and ``last`` are far larger than the caches, and the loop otherwise
    waits on each row's misses in turn (kernels.prefetch)."""
    # 2-D views: a flat index a·K + k of unknown sign takes numba's negative-index
    # wrap-around per entry, which keeps LLVM from vectorizing the row (2.2× slower)
    A = last.shape[0] - 1
    U = u[: A * K].reshape((A, K))
    D = d[: A * K].reshape((A, K))
    if rows is not None:
        for j in range(lo, min(lo + PREFETCH_ROWS, hi)):
            _prefetch_row(u, d, last, rows[j], K)
    for j in range(lo, hi):
        if rows is not None and j + PREFETCH_ROWS < hi:
            _prefetch_row(u, d, last, rows[j + PREFETCH_ROWS], K)
        a = j if rows is None else rows[j]
        delta = S - last[a]
        if delta != 0.0:
            for k in range(K):
                U[a, k] -= D[a, k] * delta
            last[a] = S


@jit(fastmath=True, inline=True)
def catch_up_row(u, d, last, a, K, S):
    """Bring attribute row a up to date: u_a ← u_a − d_a (S − last_a), last_a ← S."""
    _catch_up_rows(u, d, last, None, a, a + 1, K, S)


@jit(fastmath=True, inline=True)
def catch_up_transitions(u, d, last, A, K, S):
    """Bring the K×K transition block (row A of ``last``) up to date."""
    delta = S - last[A]
    if delta != 0.0:
        off = A * K
        ut = u[off : off + K * K]  # indices from 0 vectorize (_catch_up_rows)
        dt = d[off : off + K * K]
        for j in range(K * K):
            ut[j] -= dt[j] * delta
        last[A] = S


@jit(inline=True)
def catch_up_support(data, u, d, last, i, S):
    """Catch up every row sequence i reads (its support and the transitions)."""
    K = data.n_labels
    lo, hi = kernels.support_bounds(data, i)
    _catch_up_rows(u, d, last, data.support, lo, hi, K, S)
    catch_up_transitions(u, d, last, data.n_kernel_attributes, K, S)


@jit
def catch_up_all(u, d, last, A, K, S):
    """Catch up all A attribute rows and the transitions (before reading the whole w)."""
    _catch_up_rows(u, d, last, None, 0, A, K, S)
    catch_up_transitions(u, d, last, A, K, S)


@jit(inline=True)
def lazy_step(lw, shrink, alpha, count):
    """Apply w ← shrink·w − (alpha/count)·d in O(1) (docs/algorithms.md §3.4).

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
    """Fold s into u (docs/algorithms.md §5.7): catch up everything, u ← s·u, s = 1, S = 0."""
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
    T = kernels.unary_scores(data, i, u, unary)
    for t in range(T):
        for k in range(K):
            unary[t, k] *= s
    W = kernels.transition_matrix(data, u)
    for k in range(K):
        for l in range(K):
            trans[k, l] = s * W[k, l]
    return T


#: ∇ℓ_i on sequence i's support and ‖∇ℓ_i‖² (§1.5, §3.4): the kernel
#: ``crfopt.kernels.local_gradient`` (the problem's own ``oracle(..., gradient=True)`` uses it
#: too, and core may not import this layer), offered here beside the other pieces.
local_gradient = kernels.local_gradient


class SequenceGrams(NamedTuple):
    """G_i = X_i X_iᵀ of the sequences where it pays (:func:`sequence_grams`).

    Sequence i's T_i × T_i matrix is ``values[ptr[i]:ptr[i + 1]]`` in row-major order; an
    empty range means it was not built. Both arrays are empty when none was.
    """

    ptr: np.ndarray  # (n + 1,) int64, or (0,) when none was built
    values: np.ndarray  # (Σ T_i² over the built ones,) float64


#: a Gram matrix is built when T_i² ≤ this × the sequence's nonzero features
GRAM_WORK_RATIO = 2


def sequence_grams(data: KernelData) -> SequenceGrams:
    """The Gram matrices X_i X_iᵀ that make :func:`gradient_scores` cheaper.

    With G_i the scores of a gradient direction cost T_i²·K multiply-adds of a dense
    T_i × T_i product instead of two products with the |A| × K gradient block, about
    2·nnz_i·K scattered ones (nnz_i: the sequence's nonzero features). G_i is built when
    T_i² ≤ 2·nnz_i, so the matrices never take more than twice the memory of X's values.
    Measured per searched step: OCR (dense, T ≈ 8, |A| = 131) 0.8 µs against 5.8 µs;
    CoNLL-2000 (sparse, T ≈ 24, nnz_i ≈ 450) 2.4 µs against 9.7 µs.

    Sparse matrices are built by a compiled loop (0.06 s on CoNLL-2000); without the JIT
    (``CRFOPT_DISABLE_JIT``) only dense ones are, and the sparse sequences keep the
    product path, equal to rounding.
    """
    none = SequenceGrams(np.zeros(0, dtype=np.int64), np.zeros(0))
    if not data.dense and not JIT_ENABLED:
        return none
    offsets = np.asarray(data.offsets, dtype=np.int64)
    lengths = np.diff(offsets)
    if data.dense:
        nnz = lengths * int(data.n_kernel_attributes)
    else:
        indptr = np.asarray(data.indptr, dtype=np.int64)
        nnz = indptr[offsets[1:]] - indptr[offsets[:-1]]
    sizes = lengths**2
    built = sizes <= GRAM_WORK_RATIO * nnz
    if not built.any():
        return none
    ptr = np.zeros(lengths.shape[0] + 1, dtype=np.int64)
    np.cumsum(np.where(built, sizes, 0), out=ptr[1:])
    values = np.empty(int(ptr[-1]))
    if data.dense:
        X = np.asarray(data.X)
        for i in np.flatnonzero(built):
            rows = X[offsets[i] : offsets[i + 1]]
            values[ptr[i] : ptr[i + 1]] = (rows @ rows.T).ravel()
    else:
        _sparse_grams(data, ptr, values, np.zeros(int(data.n_kernel_attributes)))
    return SequenceGrams(ptr, values)


@jit
def _sparse_grams(data, ptr, values, row):
    """Fill the sparse sequences' X_i X_iᵀ: scatter row t into the dense ``row`` (zero on
    entry and exit), then gather each later row of the sequence against it."""
    indptr, indices, vals = data.indptr, data.indices, data.values
    for i in range(ptr.shape[0] - 1):
        base = ptr[i]
        if ptr[i + 1] == base:
            continue
        s = data.offsets[i]
        T = data.offsets[i + 1] - s
        for t in range(T):
            for p in range(indptr[s + t], indptr[s + t + 1]):
                row[indices[p]] += vals[p]
            for u in range(t, T):
                acc = 0.0
                for q in range(indptr[s + u], indptr[s + u + 1]):
                    acc += vals[q] * row[indices[q]]
                values[base + t * T + u] = acc
                values[base + u * T + t] = acc
            for p in range(indptr[s + t], indptr[s + t + 1]):
                row[indices[p]] = 0.0


@jit(inline=True)
def gradient_scores(data, i, grams, nodes, edge_sum, work, truth, E_loc, trans_loc, th):
    """‖∇ℓ_i‖² and the unary scores θ(∇ℓ_i) into ``th[:T]`` (§1.5, §3.4 ``lipschitz_ls``).

    Arguments as for :func:`local_gradient`, plus ``grams`` (a :class:`SequenceGrams`)
    and ``th`` (≥ T × K). With D = ν_nodes − onehot(y_i) (into ``work``), the emission
    block of ∇ℓ_i is X_iᵀD, so its scores are X_i X_iᵀ D = G_i D and its squared norm is
    ⟨D, G_i D⟩: where G_i was built neither product with the |A| × K block is formed and
    ``E_loc`` is left as it was (the caller must not read it). Elsewhere this is
    :func:`local_gradient` then ``kernels.local_scores``. ``trans_loc`` receives the
    transition block either way. The two paths agree up to rounding.
    """
    if grams.ptr.shape[0] == 0 or grams.ptr[i + 1] == grams.ptr[i]:
        gn2 = kernels.local_gradient(data, i, nodes, edge_sum, work, truth, E_loc, trans_loc)
        kernels.local_scores(data, i, E_loc, th)
        return gn2
    K = data.n_labels
    T = kernels.node_residual(data, i, nodes, work)
    G = grams.values[grams.ptr[i] : grams.ptr[i + 1]].reshape((T, T))
    np.dot(G, work[:T], th[:T])
    emission = 0.0
    for t in range(T):
        for k in range(K):
            emission += th[t, k] * work[t, k]
    kernels.truth_transitions(data, i, truth)
    transitions = 0.0
    for k in range(K):
        for l in range(K):
            v = edge_sum[k, l] - truth[k, l]
            trans_loc[k, l] = v
            transitions += v * v
    return emission + transitions


@jit
def lipschitz_backtrack(
    data,
    counters,
    i,
    f,
    gn2,
    L,
    unary,
    trans,
    g_unary,
    g_trans,
    trial,
    trial_t,
    max_doublings,
    work=None,
):
    """Smallest tried L = L₀·2^j with ℓ_i(w − g/L) ≤ ℓ_i(w) − ‖g‖²/(2L) (Beck–Teboulle).

    The sufficient-decrease test of SAG's line search (SBA15 §4; docs/algorithms.md §3.4
    ``lipschitz_ls``, §5.7): ``unary[:T]``/``trans`` are the scores θ(w), ``g_unary[:T]``/
    ``g_trans`` the scores θ(g) of the direction g (``kernels.local_scores``), ``f`` =
    ℓ_i(w), ``gn2`` = ‖g‖². Each trial is one counted forward call on θ(w) − θ(g)/L;
    ``trial`` (≥ T×K) and ``trial_t`` (K×K) are scratch, and so is ``work`` (a
    :class:`ChainWork` for the forward calls, or None). Returns (L, doublings); raises
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
        log_z = kernels.forward_scores(data, counters, i, trial[:T], trial_t, work)
        f_new = log_z - (truth - truth_g * inv)
        if not math.isfinite(f_new):
            raise FloatingPointError("Lipschitz line search: non-finite objective at a trial point")
        if f_new <= f - 0.5 * gn2 * inv:
            return L, doublings
        L *= 2.0
    raise FloatingPointError(
        "Lipschitz line search: no sufficient decrease after max_doublings doublings"
    )


def truth_memory(data: KernelData) -> tuple[np.ndarray, np.ndarray]:
    """The ground truth as marginal memory (SBA15 §4.2; docs/algorithms.md §3.4).

    Returns U (N × K), one-hot at each token's label, and P (n × K × K), each sequence's
    transition counts: the marginals that make every stored gradient E_{U_i,P_i}F −
    F(x_i, y_i) exactly 0, SAG's zero initialization. P is filled by one scatter over
    the tokens rather than a call per sequence (OCR: 9 against 27 ms, allocation included).
    """
    K = int(data.n_labels)
    y = np.asarray(data.y, dtype=np.int64)
    offsets = np.asarray(data.offsets, dtype=np.int64)
    n = offsets.shape[0] - 1
    U = np.zeros((y.shape[0], K))
    U[np.arange(y.shape[0]), y] = 1.0
    P = np.zeros((n, K, K))
    seq = np.repeat(np.arange(n), np.diff(offsets))
    inside = seq[:-1] == seq[1:]  # token t and t + 1 in one sequence: a transition
    np.add.at(P, (seq[:-1][inside], y[:-1][inside], y[1:][inside]), 1.0)
    return U, P


def max_support(data: KernelData) -> int:
    """Most distinct attributes any one sequence has (all of them on dense data).

    The row count of scratch tables that hold a local direction (``E_loc``).
    """
    if data.dense:
        return int(data.n_kernel_attributes)
    ptr = np.asarray(data.support_ptr)
    return int(np.diff(ptr).max()) if ptr.shape[0] > 1 else 0


class CurvatureWork(NamedTuple):
    """Scratch tables of :func:`local_curvature` (allocate once with :func:`curvature_work`)."""

    nodes: np.ndarray  # (T_max, K) node marginals at θ + εθ(v)
    esum: np.ndarray  # (K, K)
    nodes_m: np.ndarray  # (T_max, K) node marginals at θ − εθ(v)
    esum_m: np.ndarray  # (K, K)
    trial: np.ndarray  # (T_max, K) perturbed scores
    trial_t: np.ndarray  # (K, K)
    th_v: np.ndarray  # (T_max, K) scores θ(v) of the direction
    v_E: np.ndarray  # (S_max, K) direction v on the support (unit norm)
    v_T: np.ndarray  # (K, K)
    h_E: np.ndarray  # (S_max, K) H v on the support
    h_T: np.ndarray  # (K, K)


def curvature_work(data: KernelData) -> CurvatureWork:
    """Scratch for :func:`local_curvature` on any sequence of ``data``."""
    K = int(data.n_labels)
    T, S = int(data.max_len), max_support(data)
    return CurvatureWork(
        *(np.zeros(shape) for shape in [(T, K), (K, K), (T, K), (K, K), (T, K), (K, K)]),
        *(np.zeros(shape) for shape in [(T, K), (S, K), (K, K), (S, K), (K, K)]),
    )


@jit(inline=True)
def _perturbed_marginals(
    data, counters, i, T, unary, trans, th_v, v_T, eps, trial, trial_t, nodes, esum
):
    K = data.n_labels
    for t in range(T):
        for k in range(K):
            trial[t, k] = unary[t, k] + eps * th_v[t, k]
    for k in range(K):
        for l in range(K):
            trial_t[k, l] = trans[k, l] + eps * v_T[k, l]
    kernels.oracle_sums_scores(data, counters, i, trial[:T], trial_t, nodes, esum)


@jit
def local_curvature(data, counters, i, unary, trans, iterations, wk):
    """Power-iteration estimate of λ_max(∇²ℓ_i(w)), the curvature of ℓ_i at w.

    ∇²ℓ_i(w) = Cov_{ν_i(w)}[F(x_i, Y)] (ν_i the model's distribution of the labels of
    sequence i at w; docs/algorithms.md §1.3), a PSD matrix living on sequence i's support
    and the transition block. Each power step forms H v as the central difference
    (E_{θ+εθ(v)}F − E_{θ−εθ(v)}F)/(2ε) of expected features on the score tables θ = θ(w)
    (``unary[:T]``, ``trans``; scores are linear in w, §1.1), which is two **counted**
    oracle calls, with ε chosen so that ε·max_y |⟨v, F(x_i, y)⟩| = 1e-4 (relative error of
    H v ≈ 1e-8). The start vector is a fixed pseudo-random one, so the result is
    deterministic.

    What it is: the Rayleigh quotient vᵀHv of the last unit iterate, hence a **lower**
    estimate of the local curvature λ_max(∇²ℓ_i(w)) at this w (never above it, up to the
    1e-8 differencing error), increasing towards it with ``iterations``. It is **not** a
    bound over all w: sup_w λ_max(∇²ℓ_i(w)) is of the order of the radius R_i (the
    covariance of a two-point distribution on y_i and the farthest labeling is R_i/4),
    which is what the worst-case Lipschitz constant λ + R_i/n pays for everywhere.
    Use it where a step size needs the curvature actually met near w (e.g. to start a
    Lipschitz line search), not as a global guarantee. Returns 0.0 when the support is
    empty and the transitions are the only coordinates and ν_i is a point mass.
    """
    K = data.n_labels
    T = data.offsets[i + 1] - data.offsets[i]
    lo, hi = kernels.support_bounds(data, i)
    S = hi - lo
    v_E, v_T, h_E, h_T, th_v = wk.v_E, wk.v_T, wk.h_E, wk.h_T, wk.th_v
    nodes, esum, nodes_m, esum_m = wk.nodes, wk.esum, wk.nodes_m, wk.esum_m
    # fixed pseudo-random start (golden-ratio sequence), centred and normalized
    nrm = 0.0
    for j in range(S):
        for k in range(K):
            x = ((j * K + k + 1) * 0.6180339887498949) % 1.0 - 0.5
            v_E[j, k] = x
            nrm += x * x
    for k in range(K):
        for l in range(K):
            x = ((S * K + k * K + l + 1) * 0.6180339887498949) % 1.0 - 0.5
            v_T[k, l] = x
            nrm += x * x
    lam_max = 0.0
    for _ in range(iterations):
        inv = 1.0 / math.sqrt(nrm)
        for j in range(S):
            for k in range(K):
                v_E[j, k] *= inv
        for k in range(K):
            for l in range(K):
                v_T[k, l] *= inv
        kernels.local_scores(data, i, v_E, th_v)
        # |⟨v, F(y)⟩| ≤ Σ_t max_k |θ_t(v)_k| + (T − 1) max |v_T|
        bound = 0.0
        for t in range(T):
            mx = 0.0
            for k in range(K):
                mx = max(mx, abs(th_v[t, k]))
            bound += mx
        mt = 0.0
        for k in range(K):
            for l in range(K):
                mt = max(mt, abs(v_T[k, l]))
        bound += (T - 1) * mt
        eps = 1e-4 / bound if bound > 0.0 else 1e-4
        _perturbed_marginals(
            data, counters, i, T, unary, trans, th_v, v_T, eps, wk.trial, wk.trial_t, nodes, esum
        )
        _perturbed_marginals(
            data, counters, i, T, unary, trans, th_v, v_T, -eps, wk.trial, wk.trial_t,
            nodes_m, esum_m,
        )  # fmt: skip
        inv2 = 0.5 / eps
        for t in range(T):
            for k in range(K):
                nodes[t, k] = (nodes[t, k] - nodes_m[t, k]) * inv2
        kernels.expected_emission(data, i, nodes, h_E)
        rq = 0.0
        nrm = 0.0
        for j in range(S):
            for k in range(K):
                rq += v_E[j, k] * h_E[j, k]
                nrm += h_E[j, k] * h_E[j, k]
        for k in range(K):
            for l in range(K):
                h = (esum[k, l] - esum_m[k, l]) * inv2
                h_T[k, l] = h
                rq += v_T[k, l] * h
                nrm += h * h
        lam_max = rq
        if not nrm > 0.0:
            return 0.0
        for j in range(S):
            for k in range(K):
                v_E[j, k] = h_E[j, k]
        for k in range(K):
            for l in range(K):
                v_T[k, l] = h_T[k, l]
    return lam_max


def curvature_at(problem: Any, i: int, w: np.ndarray, iterations: int = 10) -> float:
    """:func:`local_curvature` of sequence ``i`` at the dense weights ``w`` (counted:
    2·``iterations`` oracle calls on ``problem``). For diagnostics and tests; compiled
    loops call :func:`local_curvature` with their own score tables and scratch."""
    if iterations < 1:
        raise ValueError("iterations must be at least 1")
    data = problem.data
    K = int(data.n_labels)
    w = np.ascontiguousarray(w, dtype=float)
    if w.shape != (problem.dim,):
        raise ValueError(f"w has shape {w.shape}, expected ({problem.dim},)")
    unary = np.zeros((int(data.max_len), K))
    kernels.unary_scores(data, int(i), w, unary)
    t_off = int(data.n_kernel_attributes) * K
    trans = np.ascontiguousarray(w[t_off : t_off + K * K].reshape(K, K))
    wk = curvature_work(data)
    T = int(data.offsets[i + 1] - data.offsets[i])
    return float(
        local_curvature(data, problem.counters.array, int(i), unary[:T], trans, int(iterations), wk)
    )
