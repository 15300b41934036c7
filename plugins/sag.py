"""The SAG family for CRFs: SAG, SAG-NUS, SAG-NUS* and SAGA-NUS (SBA15; ALGORITHMS.md §3.4–3.7).

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

import math
from collections import namedtuple

import numpy as np

import crfopt
from crfopt import jit, kernels, samplers

VARIANTS = ("sag", "sag-nus", "sag-nus-star", "saga-nus")
SAG, SAG_NUS, SAG_NUS_STAR, SAGA_NUS = range(4)

State = namedtuple(
    "State",
    [
        "u",  # (d,) weights divided by the scale s
        "dsum",  # (d,) Σ_i stored gradient_i (d in SBA15)
        "last",  # (A_tot + 1,) value of S when each row (last entry: transitions) caught up
        "U",  # (N, K) stored node marginals
        "P",  # (n, K, K) stored summed pairwise marginals
        "Li",  # (n,) per-example Lipschitz estimates
        "seen",  # (n,) int8
        "good",  # (n,) int64 consecutive line searches without doubling (c_i)
        "skip",  # (n,) int64 visits left to skip (k_i)
        "scal",  # [s, S, L, L_max, Σ_seen L_i, m, ...]
        "t_unseen",  # sum tree of unseen indicators (sag-nus)
        "t_seen",  # sum tree of seen indicators (sag-nus)
        "t_L",  # sum tree of L_i + λ over seen (sag-nus)
        "t_max",  # max tree of L_i over seen (sag-nus-star, saga-nus)
    ],
)
_S, _SUM, _L, _LMAX, _LSUM, _M = range(6)


# The helpers take arrays, not the State tuple: reading a tuple's array field inside a
# loop makes numba take and release a reference to it at every access (measured 20 µs
# per OCR iteration for the 131-row catch-up alone).


@jit(fastmath=True, inline=True)
def _catch_up(u, dsum, last, a, K, S):
    """Bring row a of u up to date: u_a -= d_a (S - last_a) (d_a constant since)."""
    delta = S - last[a]
    if delta != 0.0:
        base = a * K
        for k in range(K):
            u[base + k] -= dsum[base + k] * delta
        last[a] = S


@jit(fastmath=True, inline=True)
def _catch_up_transitions(u, dsum, last, A_tot, K, S):
    delta = S - last[A_tot]
    if delta != 0.0:
        off = A_tot * K
        for j in range(K * K):
            u[off + j] -= dsum[off + j] * delta
        last[A_tot] = S


@jit
def _catch_up_all(st, A_tot, K):
    u, dsum, last = st.u, st.dsum, st.last
    S = st.scal[_SUM]
    for a in range(A_tot):
        _catch_up(u, dsum, last, a, K, S)
    _catch_up_transitions(u, dsum, last, A_tot, K, S)


@jit
def _renormalize(st, A_tot, K):
    """Fold s into u when it gets tiny (§5.7): catch up everything, u *= s, s = 1, S = 0."""
    _catch_up_all(st, A_tot, K)
    s = st.scal[_S]
    for j in range(st.u.shape[0]):
        st.u[j] *= s
    st.scal[_S] = 1.0
    st.scal[_SUM] = 0.0
    for a in range(st.last.shape[0]):
        st.last[a] = 0.0


@jit
def _lipschitz_search(
    data,
    counters,
    i,
    T,
    K,
    f,
    gn2,
    L,
    unary,
    trans,
    th_g,
    g_trans,
    trial,
    trial_t,
    max_doublings,
):
    """Smallest tried L = L₀ 2^j with ℓ_i(w - g/L) ≤ ℓ_i(w) - ‖g‖²/(2L) (§3.4).

    Each trial is one counted forward pass. Returns (L, number of doublings).
    """
    # the ground truth's score is linear in the scores: score(θ - θ_g/L) = truth - truth_g/L
    truth = kernels.truth_score(data, i, unary, trans)
    truth_g = kernels.truth_score(data, i, th_g, g_trans)
    for doublings in range(max_doublings + 1):
        inv = 1.0 / L
        for t in range(T):
            for k in range(K):
                trial[t, k] = unary[t, k] - th_g[t, k] * inv
        for k in range(K):
            for l in range(K):
                trial_t[k, l] = trans[k, l] - g_trans[k, l] * inv
        log_z = kernels.forward_scores(data, counters, i, trial[:T], trial_t)
        f_new = log_z - (truth - truth_g * inv)
        if not math.isfinite(f_new):
            raise FloatingPointError("SAG line search: non-finite objective at a trial point")
        if f_new <= f - 0.5 * gn2 * inv:
            return L, doublings
        L *= 2.0
    raise FloatingPointError("SAG line search: no sufficient decrease after 60 doublings")


@jit(inline=True)
def _draw_sag_nus(m, t_unseen, t_seen, t_L, n, P, u1, u2):
    """SLRB13 §5.5: unseen w.p. (n - m)/n; else half uniform over seen, half ∝ L_i + λ."""
    a = (n - m) / n
    if u1 < a:
        return samplers.tree_sample(t_unseen, P, u2)
    r = (u1 - a) / (1.0 - a)  # a fresh uniform, given u1 ≥ a
    if r < 0.5:
        return samplers.tree_sample(t_seen, P, u2)
    return samplers.tree_sample(t_L, P, u2)


@jit
def _sag_block(
    data,
    counters,
    st,
    sst,
    u_rand,
    k_iters,
    variant,
    lam,
    n,
    P_leaves,
    lazy,
    first_factor,
    revisit_factor,
    skipping,
    max_doublings,
    L0,
    max_support,
):
    K = data.n_labels
    A_tot = data.n_attributes
    Lmax_len = data.max_len
    u, dsum, last, U, P = st.u, st.dsum, st.last, st.U, st.P
    Lis, seen, good, skip, scal = st.Li, st.seen, st.good, st.skip, st.scal
    t_unseen, t_seen, t_L, t_max = st.t_unseen, st.t_seen, st.t_L, st.t_max
    support = data.support
    y_all = data.y
    nodes = np.empty((Lmax_len, K))
    unary = np.empty((Lmax_len, K))
    trial = np.empty((Lmax_len, K))
    th_g = np.empty((Lmax_len, K))
    weights = np.empty((Lmax_len, K))
    E_g = np.empty((max_support, K))
    E_d = np.empty((max_support, K))
    esum = np.empty((K, K))
    trans = np.empty((K, K))
    trial_t = np.empty((K, K))
    g_trans = np.empty((K, K))
    d_trans = np.empty((K, K))
    truth_t = np.empty((K, K))
    decay = 2.0 ** (-1.0 / n)
    t_off = A_tot * K
    for it in range(k_iters):
        # ---- which example (§3.4–3.7)
        if variant == SAG_NUS:
            i = _draw_sag_nus(
                scal[_M], t_unseen, t_seen, t_L, n, P_leaves, u_rand[it, 0], u_rand[it, 1]
            )
        else:
            i = samplers.sampler_draw(sst, u_rand[it, 0], u_rand[it, 1])
        p_i = samplers.sampler_probability(sst, i) if variant == SAGA_NUS else 0.0
        s0 = data.offsets[i]
        T = data.offsets[i + 1] - s0
        lo, hi = kernels.support_bounds(data, i)
        s = scal[_S]
        S = scal[_SUM]
        # ---- catch up the coordinates x_i reads, then score with w = s·u
        if lazy:
            for j in range(hi - lo):
                _catch_up(u, dsum, last, support[lo + j], K, S)
            _catch_up_transitions(u, dsum, last, A_tot, K, S)
        kernels.unary_scores(data, i, u, unary)
        for t in range(T):
            for k in range(K):
                unary[t, k] *= s
        for k in range(K):
            for l in range(K):
                trans[k, l] = s * u[t_off + k * K + l]
        _, f = kernels.oracle_sums_scores(data, counters, i, unary[:T], trans, nodes, esum)
        # ---- g = ∇ℓ_i(w) = E_ν F - F(x_i, y_i) and gdiff = E_ν F - E_{U_i,P_i} F
        for t in range(T):
            y = y_all[s0 + t]
            for k in range(K):
                weights[t, k] = nodes[t, k]
            weights[t, y] -= 1.0
        kernels.expected_emission(data, i, weights, E_g)
        kernels.truth_transitions(data, i, truth_t)
        gn2 = 0.0
        for j in range(hi - lo):
            for k in range(K):
                gn2 += E_g[j, k] * E_g[j, k]
        for k in range(K):
            for l in range(K):
                g_trans[k, l] = esum[k, l] - truth_t[k, l]
                gn2 += g_trans[k, l] * g_trans[k, l]
                d_trans[k, l] = esum[k, l] - P[i, k, l]
        for t in range(T):
            for k in range(K):
                weights[t, k] = nodes[t, k] - U[s0 + t, k]
        kernels.expected_emission(data, i, weights, E_d)
        # ---- Lipschitz estimates
        was_seen = seen[i] != 0
        if gn2 > 1e-8:
            kernels.local_scores(data, i, E_g, th_g)
        if variant == SAG:
            if gn2 > 1e-8:
                L, _ = _lipschitz_search(
                    data,
                    counters,
                    i,
                    T,
                    K,
                    f,
                    gn2,
                    scal[_L],
                    unary,
                    trans,
                    th_g,
                    g_trans,
                    trial,
                    trial_t,
                    max_doublings,
                )
                scal[_L] = L
        elif variant == SAG_NUS:
            Li = Lis[i] * 0.5 if was_seen else Lis[i]
            if gn2 > 1e-8:
                Li, _ = _lipschitz_search(
                    data,
                    counters,
                    i,
                    T,
                    K,
                    f,
                    gn2,
                    Li,
                    unary,
                    trans,
                    th_g,
                    g_trans,
                    trial,
                    trial_t,
                    max_doublings,
                )
            if was_seen:
                scal[_LSUM] += Li - Lis[i]
            Lis[i] = Li
            if Li > scal[_LMAX]:
                scal[_LMAX] = Li
        else:  # sag-nus-star, saga-nus (§3.6)
            if not was_seen:
                m = scal[_M]
                Li = first_factor * (scal[_LSUM] / m if m > 0 else L0)
                search = True
            elif skipping and skip[i] > 0:
                skip[i] -= 1
                Li = Lis[i]
                search = False
            else:
                Li = revisit_factor * Lis[i]
                search = True
            if search and gn2 > 1e-8:
                Li, doublings = _lipschitz_search(
                    data,
                    counters,
                    i,
                    T,
                    K,
                    f,
                    gn2,
                    Li,
                    unary,
                    trans,
                    th_g,
                    g_trans,
                    trial,
                    trial_t,
                    max_doublings,
                )
                if skipping:
                    if doublings == 0:
                        good[i] += 1
                        skip[i] = 2 ** (good[i] - 1)
                    else:
                        good[i] = 0
            if was_seen:
                scal[_LSUM] += Li - Lis[i]
            Lis[i] = Li
            samplers.maxtree_update(t_max, P_leaves, i, Li)
        if not was_seen:
            seen[i] = 1
            scal[_M] += 1.0
            scal[_LSUM] += Lis[i]
            if variant == SAG_NUS:
                samplers.tree_update(t_unseen, P_leaves, i, 0.0)
                samplers.tree_update(t_seen, P_leaves, i, 1.0)
        if variant == SAG_NUS:
            samplers.tree_update(t_L, P_leaves, i, Lis[i] + lam)
        elif variant != SAG:
            samplers.sampler_set_weight(sst, i, Lis[i])
        m = scal[_M]
        Lbar = scal[_LSUM] / m
        # ---- step size
        if variant == SAG:
            alpha = 1.0 / (scal[_L] + lam)
        elif variant == SAG_NUS:
            Lmx = scal[_LMAX]
            alpha = (n - m) / n / (Lmx + lam) + (m / n) * 0.5 * (
                1.0 / (Lmx + lam) + 1.0 / (Lbar + lam)
            )
        elif variant == SAG_NUS_STAR:
            Lmx = t_max[1]
            alpha = 0.5 * (1.0 / (Lmx + lam) + 1.0 / (Lbar + lam))
        else:
            alpha = 1.0 / (3.0 * (2.0 * Lbar + lam))
        shrink = 1.0 - alpha * lam
        # ---- update the average gradient and w
        if variant != SAGA_NUS:
            # d += gdiff, then w ← (1 - αλ) w - (α/m) d with the new d
            for j in range(hi - lo):
                base = support[lo + j] * K
                for k in range(K):
                    dsum[base + k] += E_d[j, k]
            for k in range(K):
                for l in range(K):
                    dsum[t_off + k * K + l] += d_trans[k, l]
            if lazy:
                scal[_S] = s * shrink
                scal[_SUM] = S + alpha / (m * scal[_S])
            else:
                coef = alpha / m
                for j in range(u.shape[0]):
                    u[j] = shrink * u[j] - coef * dsum[j]
        else:
            # w ← w - α (gdiff/(n p_i) + d/n + λ w) with d before the update (§3.7)
            corr = alpha / (n * p_i)
            if lazy:
                new_s = s * shrink
                scal[_S] = new_s
                S_new = S + alpha / (n * new_s)
                scal[_SUM] = S_new
                for j in range(hi - lo):
                    _catch_up(u, dsum, last, support[lo + j], K, S_new)
                _catch_up_transitions(u, dsum, last, A_tot, K, S_new)
                scale = corr / new_s
            else:
                coef = alpha / n
                for j in range(u.shape[0]):
                    u[j] = shrink * u[j] - coef * dsum[j]
                scale = corr
            for j in range(hi - lo):
                base = support[lo + j] * K
                for k in range(K):
                    u[base + k] -= scale * E_d[j, k]
                    dsum[base + k] += E_d[j, k]
            for k in range(K):
                for l in range(K):
                    u[t_off + k * K + l] -= scale * d_trans[k, l]
                    dsum[t_off + k * K + l] += d_trans[k, l]
        # ---- store ν_i as the new memory of example i
        for t in range(T):
            for k in range(K):
                U[s0 + t, k] = nodes[t, k]
        for k in range(K):
            for l in range(K):
                P[i, k, l] = esum[k, l]
        if variant == SAG:
            scal[_L] *= decay
        elif variant == SAG_NUS:
            scal[_LMAX] *= decay
        if lazy and scal[_S] < 1e-100:
            _renormalize(st, A_tot, K)
        counters[kernels.ITERATIONS] += 1
        counters[kernels.UPDATES] += 1
    return k_iters


class SAGFamily(crfopt.Optimizer):
    """SAG with a Lipschitz line search and its non-uniform variants (SBA15).

    ``variant`` selects the rules of ALGORITHMS.md: ``sag`` (§3.4: uniform sampling, one
    L), ``sag-nus`` (§3.5: SLRB13's adaptive sampling over unseen/seen examples, L_i
    halved on revisits), ``sag-nus-star`` (§3.6: ρ-mixed sampling ∝ L_i, first-visit
    L_i = 0.5 L̄, revisit 0.9 L_i, line searches skipped after success), ``saga-nus``
    (§3.7: SAGA's unbiased step with the same sampler).
    """

    parameters = {
        "variant": crfopt.Param("sag", str, "rule set (§3.4-3.7)", choices=VARIANTS),
        "initial_lipschitz": crfopt.Param(
            1.0, float, "L₀, initial Lipschitz estimate (§7.4 [choice])", low=0.0
        ),
        "non_uniformity": crfopt.Param(
            0.5, float, "ρ of sag-nus-star / saga-nus sampling (§3.6)", low=0.0, high=1.0
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
            True, bool, "just-in-time sparse updates with w = s·u (§3.4); False: dense O(d)"
        ),
        "max_doublings": crfopt.Param(
            60, int, "line-search doublings before giving up (§5.7)", low=1
        ),
    }
    capabilities = frozenset({"stochastic", "line_search"})
    cost = crfopt.Cost(oracle_calls=(1, 1), forward_calls=(0, None), updates=(1, 1))

    def setup(self) -> None:
        p = self.problem
        prm = self.params
        kd = p.data
        K = p.n_labels
        A_tot = p.n_kernel_attributes
        n = p.n
        self._variant = VARIANTS.index(prm["variant"])
        # ground-truth marginals make every stored gradient exactly 0
        U = np.zeros((p.n_tokens, K))
        U[np.arange(p.n_tokens), kd.y] = 1.0
        P = np.zeros((n, K, K))
        truth = np.zeros((K, K))
        for i in range(n):
            kernels.truth_transitions(kd, i, truth)
            P[i] = truth
        leaves = samplers.leaves_for(n)
        t_unseen = np.zeros(2 * leaves)
        samplers.tree_build(t_unseen, leaves, np.ones(n))
        t_max = np.zeros(2 * leaves)
        samplers.maxtree_build(t_max, leaves, np.full(n, -np.inf))
        L0 = prm["initial_lipschitz"]
        self._state = State(
            u=np.zeros(p.dim),
            dsum=np.zeros(p.dim),
            last=np.zeros(A_tot + 1),
            U=U,
            P=P,
            Li=np.full(n, L0),
            seen=np.zeros(n, dtype=np.int8),
            good=np.zeros(n, dtype=np.int64),
            skip=np.zeros(n, dtype=np.int64),
            scal=np.array([1.0, 0.0, L0, L0, 0.0, 0.0]),
            t_unseen=t_unseen,
            t_seen=np.zeros(2 * leaves),
            t_L=np.zeros(2 * leaves),
            t_max=t_max,
        )
        kind = "uniform" if self._variant in (SAG, SAG_NUS) else "weighted"
        self._sampler = crfopt.Sampler(kind, n, self.rng, non_uniformity=prm["non_uniformity"])
        self._leaves = leaves
        self._max_support = A_tot if kd.dense else int(np.diff(kd.support_ptr).max())

    @property
    def w(self) -> np.ndarray:
        st = self._state
        p = self.problem
        if self.params["lazy"]:
            _catch_up_all(st, p.n_kernel_attributes, p.n_labels)
        return st.scal[_S] * st.u

    def run_block(self, k: int) -> int:
        p = self.problem
        prm = self.params
        u = self._sampler.prepare(k)
        return _sag_block(
            p.data,
            p.counters.array,
            self._state,
            self._sampler.state,
            u,
            int(k),
            self._variant,
            p.lam,
            p.n,
            self._leaves,
            prm["lazy"],
            prm["first_visit"],
            prm["revisit"],
            prm["skipping"],
            prm["max_doublings"],
            prm["initial_lipschitz"],
            self._max_support,
        )

    def step(self) -> None:
        self.run_block(1)


_REF = {
    "sag": "SBA15 §4, Alg. 1-2; ALGORITHMS.md §3.4",
    "sag-nus": "SLRB13 §5.5 (BIGOPT sag_adaptive.c); ALGORITHMS.md §3.5",
    "sag-nus-star": "SBA15 §5, §5.2; ALGORITHMS.md §3.6",
    "saga-nus": "SBA15 §5.1; Defazio et al. 2014; ALGORITHMS.md §3.7",
}
_SUMMARY = {
    "sag": "SAG, uniform sampling, Lipschitz line search (marginal memory, lazy updates)",
    "sag-nus": "SAG with adaptive non-uniform sampling ∝ L_i (SLRB13)",
    "sag-nus-star": "SAG-NUS*: ρ = 0.5 mixed sampling ∝ L_i, line-search skipping",
    "saga-nus": "SAGA-NUS: unbiased SAGA step, SAG-NUS* sampling and L_i rules",
}


@crfopt.hookimpl
def crfopt_register_optimizers() -> list[crfopt.OptimizerSpec]:
    return [
        crfopt.OptimizerSpec(
            v, SAGFamily, defaults={"variant": v}, summary=_SUMMARY[v], reference=_REF[v]
        )
        for v in VARIANTS
    ]
