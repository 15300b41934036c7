"""The SAG family for CRFs: SAG, SAG-NUS, SAG-NUS* and SAGA-NUS.

SBA15; docs/algorithms.md §3.4–3.7.

Stochastic average gradient keeps the last gradient of every sequence and steps along
their average. For CRFs the stored gradients are kept in the *marginal-memory form*
(SBA15 §4.2): per sequence its node marginals U_i and its summed pairwise marginals
P_i, so memory is O(N·K + n·K²) and the stored gradient E_{U_i,P_i}F − F(x_i, y_i) stays
sparse. U_i and P_i start at the ground truth, which makes every stored gradient 0 as in
SAG's zero initialization.

The weights are kept as w = s·u with a scalar s absorbing the ℓ2 shrink; coordinates
(rows of the emission+bias block, and the transition block) catch up just in time from
a running sum S before they are read or their average-gradient entry changes (Le Roux et
al. 2012; SBA15 §4.1), so an iteration costs O(T a K + K²), not O(d).

Step sizes come from a Lipschitz line search on ℓ_i (Beck–Teboulle backtracking): trial
points w − g/L are evaluated by forward-only passes on the score tables θ(w) − θ(g)/L,
each counted as a forward call.

References
----------
SBA15: Schmidt, Babanezhad, Ahmed, Defazio, Clifton, Sarkar (2015), "Non-uniform
stochastic average gradient method for training conditional random fields", AISTATS.
SLRB13: Schmidt, Le Roux, Bach (2013/2017), "Minimizing finite sums with the stochastic
average gradient", §5.5 (adaptive non-uniform sampling).
Defazio, Bach, Lacoste-Julien (2014), SAGA.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

import crfopt
from crfopt import borrowed, jit, kernels, pieces, samplers

# a line search runs only when ‖∇ℓ_i‖² exceeds this (docs/algorithms.md §3.4)
_GN2_MIN = 1e-8

# ρ of SAG-NUS's three-way sampler (SLRB13 §5.5, BIGOPT sag_adaptive.c; the ``nus``
# sampler): a draw among the seen examples is ∝ L_i + λ with probability ρ, else uniform.
# Fixed by the paper, so not a parameter (SAG-NUS*'s own ρ is, §3.6).
SLRB13_NON_UNIFORMITY = 0.5


class SAGState(NamedTuple):
    """What SAG remembers between iterations (scalars as 1-element arrays: numba
    namedtuples are immutable, their arrays are not)."""

    w: pieces.LazyWeights  # w = s·u; d = Σ_i stored gradient_i
    U: np.ndarray  # (N, K) stored node marginals U_i
    P: np.ndarray  # (n, K, K) stored summed pairwise marginals P_i
    Li: np.ndarray  # (n,) per-example Lipschitz estimates
    seen: np.ndarray  # (n,) int8
    good: np.ndarray  # (n,) consecutive line searches without doubling, c_i (sag-nus-star)
    skip: np.ndarray  # (n,) visits left without a line search, k_i (sag-nus-star)
    L: np.ndarray  # (1,) the single L of sag
    L_max: np.ndarray  # (1,) max_i L_i, decayed (sag-nus)
    L_sum: np.ndarray  # (1,) Σ_seen L_i
    m: np.ndarray  # (1,) number of examples seen
    L_tree: (
        np.ndarray
    )  # max tree of the L_i seen; L_tree[1] = their maximum (sag-nus-star, saga-nus)


class Work(NamedTuple):
    """Scratch tables of one iteration (allocated once per optimizer)."""

    nodes: np.ndarray  # (T_max, K) node marginals of ν_i
    esum: np.ndarray  # (K, K) summed pairwise marginals of ν_i
    unary: np.ndarray  # (T_max, K) scores θ(w)
    trans: np.ndarray  # (K, K) transition scores of w
    E_g: np.ndarray  # (S_max, K) g = ∇ℓ_i(w) on the support
    g_trans: np.ndarray  # (K, K)
    E_d: np.ndarray  # (S_max, K) gdiff = E_ν F − E_{U_i,P_i} F on the support
    d_trans: np.ndarray  # (K, K)
    th_g: np.ndarray  # (T_max, K) scores θ(g)
    trial: np.ndarray  # (T_max, K) line-search trial scores
    trial_t: np.ndarray  # (K, K)
    weights: np.ndarray  # (T_max, K) node weights for expected_emission
    truth_t: np.ndarray  # (K, K) transition counts of y_i
    chain: pieces.ChainWork  # the oracle's and the line search's forward tables
    grams: pieces.SequenceGrams  # X_i X_iᵀ where it pays, for θ(g) (pieces.sequence_grams)


class Options(NamedTuple):
    lam: float
    n: int
    leaves: int  # sum/max tree leaves
    lazy: bool
    L0: float  # initial_lipschitz
    first_visit: float
    revisit: float
    skipping: bool
    max_doublings: int
    decay: float  # 2^(-1/n), the per-iteration decay of L (sag) and L_max (sag-nus)


def make_work(max_len: int, max_support: int, K: int, grams: pieces.SequenceGrams) -> Work:
    def tk() -> np.ndarray:
        return np.empty((max_len, K))

    def kk() -> np.ndarray:
        return np.empty((K, K))

    sk = (max_support, K)
    return Work(
        tk(), kk(), tk(), kk(), np.empty(sk), kk(), np.empty(sk), kk(), tk(), tk(), kk(), tk(),
        kk(), pieces.chain_work(max_len, K), grams,
    )  # fmt: skip


# Helpers are inlined into the blocks and bind the tuples' arrays to locals before their
# loops: a real call, or a tuple field read inside a loop, takes and releases a reference
# to every array at each access (measured 20 µs per OCR iteration for the catch-up alone).
# The blocks borrow their arguments (crfopt.borrowed), so what is left of that counting
# costs no atomic operation.


@jit(inline=True)
def _visit(data, counters, st, wk, i, lazy):
    """Catch up x_i's rows, run the oracle at w = s·u and form gdiff (§3.4).

    Returns ℓ_i(w); gdiff goes to wk.E_d/d_trans. The gradient g itself serves only the
    line search, so :func:`_gradient` forms what the search needs only when one will run.
    """
    lw = st.w
    u = lw.u
    if lazy:
        pieces.catch_up_support(data, u, lw.d, lw.last, i, lw.scale[1])
    nodes, esum, unary, trans = wk.nodes, wk.esum, wk.unary, wk.trans
    T = pieces.scaled_scores(data, i, u, lw.scale[0], unary, trans)
    _, f = kernels.oracle_sums_scores(data, counters, i, unary[:T], trans, nodes, esum, wk.chain)
    weights = wk.weights
    U, P, d_trans = st.U, st.P, wk.d_trans
    K = data.n_labels
    s0 = data.offsets[i]
    for t in range(T):
        for k in range(K):
            weights[t, k] = nodes[t, k] - U[s0 + t, k]
    kernels.difference_direction(data, i, weights, esum, P[i], 1.0, wk.E_d, d_trans)
    return f


@jit(inline=True)
def _gradient(data, wk, i):
    """g = ∇ℓ_i(w) from the visit's marginals: its transition block into wk.g_trans, its
    scores θ(g) into wk.th_g (the emission block itself only where no Gram matrices
    serve, ``pieces.gradient_scores``); returns ‖g‖²."""
    return pieces.gradient_scores(
        data, i, wk.grams, wk.nodes, wk.esum, wk.weights, wk.truth_t, wk.E_g, wk.g_trans,
        wk.th_g,
    )  # fmt: skip


@jit(inline=True)
def _line_search(data, counters, wk, i, f, gn2, L, max_doublings):
    """pieces.lipschitz_backtrack from L along g, whose scores θ(g) :func:`_gradient` formed."""
    return pieces.lipschitz_backtrack(
        data, counters, i, f, gn2, L, wk.unary, wk.trans, wk.th_g, wk.g_trans, wk.trial,
        wk.trial_t, max_doublings, wk.chain,
    )  # fmt: skip


@jit(inline=True)
def _first_visit(st, i):
    """Mark i seen: m += 1 and L_i joins Σ_seen L_i."""
    st.seen[i] = 1
    st.m[0] += 1.0
    st.L_sum[0] += st.Li[i]


@jit(inline=True)
def _add_then_step(dsum, u, add, shrink, coef):
    """d[j] += add[j], then u[j] ← shrink·u[j] − coef·d[j], in one sweep (each entry's
    step reads the d it has just received). The caller passes slices that start at the
    block: indices from 0 let the loop vectorize (_sag_update)."""
    for j in range(add.shape[0]):
        v = dsum[j] + add[j]
        dsum[j] = v
        u[j] = shrink * u[j] - coef * v


@jit(inline=True)
def _sag_update(data, st, wk, i, alpha, count, lam, lazy):
    """d += gdiff, then w ← (1 − αλ) w − (α/count) d with the new d (§3.4)."""
    lw = st.w
    u, dsum = lw.u, lw.d
    E_d, d_trans = wk.E_d, wk.d_trans
    K = data.n_labels
    t_off = data.n_kernel_attributes * K
    shrink = 1.0 - alpha * lam
    if data.dense and not lazy:
        # Dense rows: gdiff covers all of d in d's own order, so both updates go in one
        # sweep, each entry's step reading the d it just got, as the two sweeps below do
        # (bit for bit; 1.5 against 2.7 µs an OCR step).
        coef = alpha / count
        _add_then_step(dsum, u, E_d.reshape(-1), shrink, coef)
        _add_then_step(dsum[t_off:], u[t_off:], d_trans.reshape(-1), shrink, coef)
        return
    support = data.support
    lo, hi = kernels.support_bounds(data, i)
    # 2-D views of d: flat indices of unknown sign would keep the rows from vectorizing
    # (numba wraps negative indices per entry; pieces._catch_up_rows)
    D = kernels.emission_matrix(data, dsum)
    for j in range(hi - lo):
        a = support[lo + j]
        for k in range(K):
            D[a, k] += E_d[j, k]
    D_trans = kernels.transition_matrix(data, dsum)
    for k in range(K):
        for l in range(K):
            D_trans[k, l] += d_trans[k, l]
    if lazy:
        pieces.lazy_step(lw, shrink, alpha, count)
    else:
        coef = alpha / count
        for j in range(u.shape[0]):
            u[j] = shrink * u[j] - coef * dsum[j]


@jit(inline=True)
def _saga_update(data, st, wk, i, alpha, p_i, n, lam, lazy):
    """w ← w − α (gdiff/(n p_i) + d/n + λ w) with d before the update, then d += gdiff (§3.7)."""
    lw = st.w
    u, dsum = lw.u, lw.d
    E_d, d_trans = wk.E_d, wk.d_trans
    K = data.n_labels
    support = data.support
    lo, hi = kernels.support_bounds(data, i)
    corr = alpha / (n * p_i)
    shrink = 1.0 - alpha * lam
    if lazy:
        new_s, S_new = pieces.lazy_step(lw, shrink, alpha, n)
        # the rows about to change take the lazy d/n and λw terms first
        pieces.catch_up_support(data, u, dsum, lw.last, i, S_new)
        scale = corr / new_s
    else:
        coef = alpha / n
        for j in range(u.shape[0]):
            u[j] = shrink * u[j] - coef * dsum[j]
        scale = corr
    U, D = kernels.emission_matrix(data, u), kernels.emission_matrix(data, dsum)
    for j in range(hi - lo):
        a = support[lo + j]
        for k in range(K):
            U[a, k] -= scale * E_d[j, k]
            D[a, k] += E_d[j, k]
    U_trans, D_trans = kernels.transition_matrix(data, u), kernels.transition_matrix(data, dsum)
    for k in range(K):
        for l in range(K):
            U_trans[k, l] -= scale * d_trans[k, l]
            D_trans[k, l] += d_trans[k, l]


@jit(inline=True)
def _finish(data, counters, st, wk, i, lazy):
    """Store ν_i as example i's memory, renormalize a tiny scale, count the iteration."""
    U, P, nodes, esum = st.U, st.P, wk.nodes, wk.esum
    K = data.n_labels
    s0 = data.offsets[i]
    for t in range(data.offsets[i + 1] - s0):
        for k in range(K):
            U[s0 + t, k] = nodes[t, k]
    for k in range(K):
        for l in range(K):
            P[i, k, l] = esum[k, l]
    if lazy and st.w.scale[0] < pieces.RENORMALIZE_BELOW:
        pieces.renormalize(st.w, data.n_kernel_attributes, K)
    counters[kernels.UPDATES] += 1


@jit
def _sag_block(data, counters, st, wk, sst, uniforms, k_iters, opts):
    """SAG (§3.4): uniform sampling, one L searched from its 2^(-1/n)-decayed value."""
    data, counters, st, wk, sst, uniforms = borrowed((data, counters, st, wk, sst, uniforms))
    L, m = st.L, st.m
    for it in range(k_iters):
        i = samplers.sampler_draw(sst, uniforms[it, 0], uniforms[it, 1])
        f = _visit(data, counters, st, wk, i, opts.lazy)
        gn2 = _gradient(data, wk, i)
        if gn2 > _GN2_MIN:
            L_new, _ = _line_search(data, counters, wk, i, f, gn2, L[0], opts.max_doublings)
            L[0] = L_new
        if st.seen[i] == 0:
            _first_visit(st, i)
        alpha = 1.0 / (L[0] + opts.lam)
        _sag_update(data, st, wk, i, alpha, m[0], opts.lam, opts.lazy)
        L[0] *= opts.decay
        _finish(data, counters, st, wk, i, opts.lazy)
    return k_iters


@jit
def _sag_nus_block(data, counters, st, wk, sst, uniforms, k_iters, opts):
    """SAG-NUS (§3.5): SLRB13's adaptive sampling (the ``nus`` sampler, weights L_i + λ),
    L_i halved on a revisit then searched."""
    data, counters, st, wk, sst, uniforms = borrowed((data, counters, st, wk, sst, uniforms))
    Lis, L_max, L_sum, m = st.Li, st.L_max, st.L_sum, st.m
    n, lam = opts.n, opts.lam
    for it in range(k_iters):
        i = samplers.sampler_draw(sst, uniforms[it, 0], uniforms[it, 1])
        f = _visit(data, counters, st, wk, i, opts.lazy)
        was_seen = st.seen[i] != 0
        Li = Lis[i] * 0.5 if was_seen else Lis[i]
        gn2 = _gradient(data, wk, i)
        if gn2 > _GN2_MIN:
            Li, _ = _line_search(data, counters, wk, i, f, gn2, Li, opts.max_doublings)
        if was_seen:
            L_sum[0] += Li - Lis[i]
        Lis[i] = Li
        if Li > L_max[0]:
            L_max[0] = Li
        if not was_seen:
            _first_visit(st, i)
        samplers.sampler_set_weight(sst, i, Lis[i] + lam)  # marks i seen in the sampler too
        mm = m[0]
        Lbar = L_sum[0] / mm
        Lmx = L_max[0]
        alpha = (n - mm) / n / (Lmx + lam) + (mm / n) * 0.5 * (
            1.0 / (Lmx + lam) + 1.0 / (Lbar + lam)
        )
        _sag_update(data, st, wk, i, alpha, mm, lam, opts.lazy)
        L_max[0] *= opts.decay
        _finish(data, counters, st, wk, i, opts.lazy)
    return k_iters


@jit(inline=True)
def _nus_star_lipschitz(data, counters, st, wk, sst, i, f, opts):
    """L_i of SAG-NUS* / SAGA-NUS (§3.6): first_visit·L̄ on a first visit, revisit·L_i
    before a revisit's search; after c_i searches in a row without doubling, the next
    2^(c_i−1) visits skip it (SBA15 §5.2). Updates Σ L_i, the max tree and the sampler."""
    Lis, skip, good, L_sum = st.Li, st.skip, st.good, st.L_sum
    was_seen = st.seen[i] != 0
    search = True
    if not was_seen:
        m = st.m[0]
        Li = opts.first_visit * (L_sum[0] / m if m > 0 else opts.L0)
    elif opts.skipping and skip[i] > 0:
        skip[i] -= 1
        Li = Lis[i]
        search = False
    else:
        Li = opts.revisit * Lis[i]
    gn2 = _gradient(data, wk, i) if search else 0.0
    if gn2 > _GN2_MIN:
        Li, doublings = _line_search(data, counters, wk, i, f, gn2, Li, opts.max_doublings)
        if opts.skipping:
            if doublings == 0:
                good[i] += 1
                skip[i] = 2 ** (good[i] - 1)
            else:
                good[i] = 0
    if was_seen:
        L_sum[0] += Li - Lis[i]
    Lis[i] = Li
    samplers.maxtree_update(st.L_tree, opts.leaves, i, Li)
    if not was_seen:
        _first_visit(st, i)
    samplers.sampler_set_weight(sst, i, Lis[i])


@jit
def _sag_nus_star_block(data, counters, st, wk, sst, uniforms, k_iters, opts):
    """SAG-NUS* (§3.6): ρ-mixed sampling ∝ L_i, α = ½(1/(L_max + λ) + 1/(L̄ + λ))."""
    data, counters, st, wk, sst, uniforms = borrowed((data, counters, st, wk, sst, uniforms))
    L_tree, L_sum, m = st.L_tree, st.L_sum, st.m
    lam = opts.lam
    for it in range(k_iters):
        i = samplers.sampler_draw(sst, uniforms[it, 0], uniforms[it, 1])
        f = _visit(data, counters, st, wk, i, opts.lazy)
        _nus_star_lipschitz(data, counters, st, wk, sst, i, f, opts)
        mm = m[0]
        Lbar = L_sum[0] / mm
        alpha = 0.5 * (1.0 / (L_tree[1] + lam) + 1.0 / (Lbar + lam))
        _sag_update(data, st, wk, i, alpha, mm, lam, opts.lazy)
        _finish(data, counters, st, wk, i, opts.lazy)
    return k_iters


@jit
def _saga_nus_block(data, counters, st, wk, sst, uniforms, k_iters, opts):
    """SAGA-NUS (§3.7): SAG-NUS*'s sampler and L_i, unbiased step α = 1/(3(2L̄ + λ))."""
    data, counters, st, wk, sst, uniforms = borrowed((data, counters, st, wk, sst, uniforms))
    L_sum, m = st.L_sum, st.m
    lam = opts.lam
    for it in range(k_iters):
        i = samplers.sampler_draw(sst, uniforms[it, 0], uniforms[it, 1])
        p_i = samplers.sampler_probability(sst, i)  # at draw time: the step stays unbiased
        f = _visit(data, counters, st, wk, i, opts.lazy)
        _nus_star_lipschitz(data, counters, st, wk, sst, i, f, opts)
        Lbar = L_sum[0] / m[0]
        alpha = 1.0 / (3.0 * (2.0 * Lbar + lam))
        _saga_update(data, st, wk, i, alpha, p_i, opts.n, lam, opts.lazy)
        _finish(data, counters, st, wk, i, opts.lazy)
    return k_iters


_PARAMS = {
    "initial_lipschitz": crfopt.Param(
        1.0, float, "L₀, initial Lipschitz estimate (§7.4 [choice])", low=0.0
    ),
    "non_uniformity": crfopt.Param(
        0.5, float, "ρ of the mixed sampling ∝ L_i (§3.6)", low=0.0, high=1.0
    ),
    "first_visit": crfopt.Param(
        0.5, float, "L_i = first_visit · L̄ on a first visit (§3.6 [recon])", low=0.0
    ),
    "revisit": crfopt.Param(
        0.9, float, "L_i ← revisit · L_i before a line search (§3.6 [recon])", low=0.0
    ),
    "skipping": crfopt.Param(
        True, bool, "skip line searches after successes, 2^(c_i-1) visits (SBA15 §5.2)"
    ),
    "lazy": crfopt.Param(
        None,
        bool,
        "just-in-time sparse updates with w = s·u (§3.4); False: dense O(d); "
        "none: lazy unless the embeddings are dense",
        allow_none=True,
    ),
    "max_doublings": crfopt.Param(60, int, "line-search doublings before giving up (§5.7)", low=1),
}


_BASE_PARAMS = ("initial_lipschitz", "lazy", "max_doublings")
_NUS_STAR_PARAMS = ("non_uniformity", "first_visit", "revisit", "skipping")


class _SAGBase(crfopt.Optimizer):
    """Marginal memory, lazy w = s·u and the Lipschitz line search shared by the family.

    A variant is one subclass: its registered ``name``, ``summary`` and ``reference``,
    its ``parameters``, its compiled ``_block`` and the sampler it draws with.
    """

    name: str = ""
    summary: str = ""
    reference: str = ""
    parameters = {k: _PARAMS[k] for k in _BASE_PARAMS}
    capabilities = frozenset({"stochastic", "line_search"})
    cost = crfopt.Cost(oracle_calls=(1, 1), forward_calls=(0, None), updates=(1, 1))
    _block: Any = None  # the compiled block function of the variant

    def _make_sampler(self) -> crfopt.Sampler:
        return crfopt.Sampler("uniform", self.problem.n, self.rng)

    def _nus_star_options(self) -> dict[str, Any]:
        """The L_i rules of SAG-NUS* (§3.6); unused by the variants without them."""
        return {"first_visit": 0.0, "revisit": 0.0, "skipping": False}

    def setup(self) -> None:
        p = self.problem
        prm = self.params
        kd = p.data
        K, n = p.n_labels, p.n
        U, P = pieces.truth_memory(kd)  # every stored gradient starts at exactly 0
        leaves = samplers.leaves_for(n)
        L_tree = np.zeros(2 * leaves)
        samplers.maxtree_build(L_tree, leaves, np.full(n, -np.inf))
        L0 = prm["initial_lipschitz"]
        self._state = SAGState(
            w=pieces.lazy_weights(p.data),
            U=U,
            P=P,
            Li=np.full(n, L0),
            seen=np.zeros(n, dtype=np.int8),
            good=np.zeros(n, dtype=np.int64),
            skip=np.zeros(n, dtype=np.int64),
            L=np.array([L0]),
            L_max=np.array([L0]),
            L_sum=np.zeros(1),
            m=np.zeros(1),
            L_tree=L_tree,
        )
        self._work = make_work(
            int(kd.max_len), pieces.max_support(kd), K, pieces.sequence_grams(kd)
        )
        self._opts = Options(
            lam=float(p.lam),
            n=int(n),
            leaves=int(leaves),
            # every sequence of dense embeddings reads every row: catching rows up then
            # only adds work to the O(d) update (OCR epoch 11 % slower lazy)
            lazy=bool(not p.dense if prm["lazy"] is None else prm["lazy"]),
            L0=float(L0),
            max_doublings=int(prm["max_doublings"]),
            decay=2.0 ** (-1.0 / n),
            **self._nus_star_options(),
        )
        self._sampler = self._make_sampler()

    @property
    def w(self) -> np.ndarray:
        p = self.problem
        return pieces.materialize(self._state.w, p.n_kernel_attributes, p.n_labels)

    def run_block(self, k: int) -> int:
        uniforms = self._sampler.prepare(k)
        block = type(self)._block
        return block(
            self.problem.data,
            self.problem.counters.array,
            self._state,
            self._work,
            self._sampler.state,
            uniforms,
            int(k),
            self._opts,
        )


class SAG(_SAGBase):
    """SAG (§3.4): uniform sampling, one L from a line search, α = 1/(L + λ)."""

    name = "sag"
    summary = "SAG, uniform sampling, Lipschitz line search (marginal memory, lazy updates)"
    reference = "SBA15 §4, Alg. 1-2; docs/algorithms.md §3.4"
    _block = _sag_block


class SAGNUS(_SAGBase):
    """SAG-NUS (§3.5): SLRB13's adaptive sampling over unseen/seen examples, L_i halved on
    revisits."""

    name = "sag-nus"
    summary = "SAG with adaptive non-uniform sampling ∝ L_i (SLRB13)"
    reference = "SLRB13 §5.5 (BIGOPT sag_adaptive.c); docs/algorithms.md §3.5"
    _block = _sag_nus_block

    def _make_sampler(self) -> crfopt.Sampler:
        return crfopt.Sampler("nus", self.problem.n, self.rng, non_uniformity=SLRB13_NON_UNIFORMITY)


class SAGNUSStar(_SAGBase):
    """SAG-NUS* (§3.6): ρ-mixed sampling ∝ L_i, first-visit L_i = first_visit · L̄,
    revisit revisit · L_i, line searches skipped after successes."""

    name = "sag-nus-star"
    summary = "SAG-NUS*: ρ = 0.5 mixed sampling ∝ L_i, line-search skipping"
    reference = "SBA15 §5, §5.2; docs/algorithms.md §3.6"
    parameters = {k: _PARAMS[k] for k in _PARAMS if k in _BASE_PARAMS + _NUS_STAR_PARAMS}
    _block = _sag_nus_star_block

    def _make_sampler(self) -> crfopt.Sampler:
        return crfopt.Sampler(
            "weighted", self.problem.n, self.rng, non_uniformity=self.params["non_uniformity"]
        )

    def _nus_star_options(self) -> dict[str, Any]:
        prm = self.params
        return {
            "first_visit": float(prm["first_visit"]),
            "revisit": float(prm["revisit"]),
            "skipping": bool(prm["skipping"]),
        }


class SAGANUS(SAGNUSStar):
    """SAGA-NUS (§3.7): SAGA's unbiased step with SAG-NUS*'s sampler and L_i rules."""

    name = "saga-nus"
    summary = "SAGA-NUS: unbiased SAGA step, SAG-NUS* sampling and L_i rules"
    reference = "SBA15 §5.1; Defazio et al. 2014; docs/algorithms.md §3.7"
    _block = _saga_nus_block


@crfopt.hookimpl
def crfopt_register_optimizers() -> list[crfopt.OptimizerSpec]:
    return [
        crfopt.OptimizerSpec(cls.name, cls, summary=cls.summary, reference=cls.reference)
        for cls in (SAG, SAGNUS, SAGNUSStar, SAGANUS)
    ]
