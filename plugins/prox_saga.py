"""Prox-SAGA for the elastic net, with sparse lazy updates (docs/algorithms.md §3.15).

Defazio, Bach & Lacoste-Julien (2014): SAGA with its proximal step, on
P(w) = (1/n)Σᵢ ℓᵢ(w) + g(w), g = λ/2‖·‖² + σ‖·‖₁ (§1.9). Iteration r draws i uniformly,

    v ← w − η_r (∇ℓᵢ(w) − αᵢ + ᾱ),    w ← prox_{η_r g}(v) = S_{η_r σ}(v) / (1 + η_r λ),

then αᵢ ← ∇ℓᵢ(w_old); αᵢ is sequence i's stored loss gradient, ᾱ = (1/n)Σⱼ αⱼ before the
update. **[choice]** All of g, ℓ2 included, is in the prox: the smooth part is the loss
alone, so its Lipschitz constant needs no λ, and a coordinate's per-step map is a
1/(1 + ηλ)-contraction for any step.

Step: η_r = step_factor / L_r (SAGA's 1/(3L)). By default L_r is SAG's Lipschitz estimate
(§3.4): a backtracking search on ℓᵢ along ∇ℓᵢ from the previous L, decayed by 2^(−1/n)
per iteration. The worst-case constant L_max = maxᵢ Rᵢ (§1.7, ``line_search=False``) is
valid but far too cautious on CRFs (on the conformance problem maxᵢ Rᵢ = 420 where the
curvature met is about 12), so the searched step is the default.

Memory is SAGA-NUS's marginal form (§3.4, §3.7): per sequence its node marginals Uᵢ and
summed edge marginals Pᵢ, started at the ground truth (every αᵢ = 0), and d = Σᵢ αᵢ.

Lazy updates. Outside sequence i's support ∇ℓᵢ − αᵢ = 0, so a coordinate j there takes
x ← S_{η_r σ}(x − η_r c)/(1 + η_r λ) with c = d_j/n constant until a visited sequence reads
j again. Attribute rows are left alone while no sampled sequence reads them and, when
one does, caught up with the exact composition of the skipped steps (:func:`_catch_up`).
The map is monotone and piecewise affine, so an orbit runs along one affine branch,
takes at most one step into the zero region, then stays at 0 for good (|c| ≤ σ) or runs
along the other branch. Reflected to y > 0 with β = ±c + σ, a branch step is
y ← ρ_r (y − η_r β) with ρ_r = 1/(1 + η_r λ); with the prefix products Π_r = ∏_{q<r} ρ_q and
sums S_r = Σ_{q<r} η_q/Π_q kept for the current epoch, y_t = Π_t (y_r/Π_r − β (S_t − S_r)), and
step q stays on the branch iff y_r/Π_r + β S_r > β S_{q+1}: S is increasing, so the exit is
found by bisection. Every n iterations (or when Π gets tiny) all rows are caught up and the
prefix arrays restart, so their memory is O(n) and the amortized cost O(d/n) per
iteration.

The bias and transition blocks are read by every sequence and so updated eagerly. One
oracle call per iteration plus the line search's forward calls, all counted by the kernels.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

import crfopt
from crfopt import borrowed, jit, kernels, pieces, samplers

# a line search runs only when ‖∇ℓᵢ‖² exceeds this (as SAG, docs/algorithms.md §3.4)
_GN2_MIN = 1e-8
# restart the prefix products before they can underflow (docs/algorithms.md §5.7)
_PI_MIN = 1e-100


class ProxState(NamedTuple):
    """What prox-SAGA keeps between iterations (scalars as arrays: see plugins/sag.py)."""

    x: np.ndarray  # (dim,) w; attribute row a is current as of epoch step last[a]
    d: np.ndarray  # (dim,) Σᵢ αᵢ, the sum of the stored loss gradients
    last: np.ndarray  # (A + 1,) int64 epoch step each row (last: transitions) is current at
    pi: np.ndarray  # (n + 1,) Π_r of the epoch (Π_0 = 1)
    S: np.ndarray  # (n + 1,) S_r of the epoch (S_0 = 0)
    eta: np.ndarray  # (n,) η_r of the epoch's steps
    pos: np.ndarray  # (1,) int64 steps done in the current epoch
    L: np.ndarray  # (1,) Lipschitz estimate
    U: np.ndarray  # (N, K) stored node marginals
    P: np.ndarray  # (n, K, K) stored summed edge marginals


class Work(NamedTuple):
    nodes: np.ndarray  # (T_max, K) node marginals of νᵢ
    esum: np.ndarray  # (K, K) summed edge marginals of νᵢ
    unary: np.ndarray  # (T_max, K) scores θ(w)
    trans: np.ndarray  # (K, K)
    weights: np.ndarray  # (T_max, K) node weights for expected_emission
    truth_t: np.ndarray  # (K, K)
    E_g: np.ndarray  # (S_max, K) ∇ℓᵢ(w) on the support
    g_trans: np.ndarray  # (K, K)
    E_d: np.ndarray  # (S_max, K) ∇ℓᵢ(w) − αᵢ on the support
    th_g: np.ndarray  # (T_max, K) scores θ(∇ℓᵢ)
    trial: np.ndarray  # (T_max, K) line-search trial scores
    trial_t: np.ndarray  # (K, K)
    chain: pieces.ChainWork  # the oracle's and the line search's forward tables
    grams: pieces.SequenceGrams  # X_i X_iᵀ where it pays, for θ(∇ℓᵢ) (pieces.sequence_grams)


class Options(NamedTuple):
    lam: float
    sigma: float
    n: int
    step_factor: float
    L_fixed: float  # maxᵢ Rᵢ, the constant L without line search
    line_search: bool
    max_doublings: int
    decay: float  # 2^(−1/n)


@jit(inline=True)
def _catch_up(x, c, sigma, r, r1, pi, S, eta):
    """x after the epoch steps r .. r1 − 1 of x ← S_{η σ}(x − η c)/(1 + η λ), exactly.

    λ enters through the prefix arrays only (Π, S of the module docstring).
    """
    while r < r1:
        e = eta[r]
        if x - e * c > e * sigma:
            sgn = 1.0
        elif x - e * c < -e * sigma:
            sgn = -1.0
        else:  # the zero region: this step lands on 0
            r += 1
            if abs(c) <= sigma:
                return 0.0  # and 0 is a fixed point of every later step
            x = 0.0
            continue
        beta = sgn * c + sigma
        u = sgn * x / pi[r]
        lhs = u + beta * S[r]  # step q stays on the branch iff lhs > β S_{q+1}
        if beta <= 0.0 or lhs > beta * S[r1]:
            stop = r1  # on the branch to the end
        else:  # first m in (r, r1] with lhs ≤ β S_m: steps r .. m − 2 are on the branch
            lo, hi = r + 1, r1
            while lo < hi:
                mid = (lo + hi) // 2
                if lhs > beta * S[mid]:
                    lo = mid + 1
                else:
                    hi = mid
            stop = max(lo - 1, r + 1)  # step r is on it (tested directly above)
        x = sgn * pi[stop] * (u - beta * (S[stop] - S[r]))
        r = stop
    return x


@jit(inline=True)
def _catch_up_row(x, d, base, width, r, r1, inv_n, sigma, pi, S, eta):
    if r < r1:
        for j in range(base, base + width):
            x[j] = _catch_up(x[j], d[j] * inv_n, sigma, r, r1, pi, S, eta)


@jit(inline=True)
def _step_coordinate(x, d, j, g, e, inv_n, a, shrink):
    """One eager prox-SAGA step on coordinate j with ∇ℓᵢ − αᵢ = g (uniform pᵢ = 1/n):
    x ← S_a(x − e (g + d_j/n)) · shrink, a = eσ, shrink = 1/(1 + eλ); then d_j += g."""
    x[j] = pieces.soft_threshold(x[j] - e * (g + d[j] * inv_n), a) * shrink
    d[j] += g


@jit
def _catch_up_all(x, d, last, r1, A, K, o, pi, S, eta):
    inv_n = 1.0 / o.n
    for a_row in range(A):
        _catch_up_row(x, d, a_row * K, K, last[a_row], r1, inv_n, o.sigma, pi, S, eta)
    _catch_up_row(x, d, A * K, K * K, last[A], r1, inv_n, o.sigma, pi, S, eta)


@jit
def _prox_saga_block(data, counters, st, wk, sst, uniforms, k_iters, o):
    """k_iters prox-SAGA iterations (§3.15)."""
    data, counters, st, wk, sst, uniforms = borrowed((data, counters, st, wk, sst, uniforms))
    x, d, last, pi, S, eta, pos, L = st.x, st.d, st.last, st.pi, st.S, st.eta, st.pos, st.L
    U, P = st.U, st.P
    nodes, esum, unary, trans, weights = wk.nodes, wk.esum, wk.unary, wk.trans, wk.weights
    E_d, E_g, g_trans, th_g = wk.E_d, wk.E_g, wk.g_trans, wk.th_g
    K = data.n_labels
    A = data.n_kernel_attributes
    t_off = A * K
    support = data.support
    inv_n = 1.0 / o.n
    lam, sigma = o.lam, o.sigma
    for it in range(k_iters):
        i = samplers.sampler_draw(sst, uniforms[it, 0], uniforms[it, 1])
        r = pos[0]
        lo, hi = kernels.support_bounds(data, i)
        for jj in range(hi - lo):  # the rows sequence i reads, brought to step r
            a_row = support[lo + jj]
            _catch_up_row(x, d, a_row * K, K, last[a_row], r, inv_n, sigma, pi, S, eta)
            last[a_row] = r
        _catch_up_row(x, d, t_off, K * K, last[A], r, inv_n, sigma, pi, S, eta)
        last[A] = r
        T = pieces.scaled_scores(data, i, x, 1.0, unary, trans)
        _, f = kernels.oracle_sums_scores(
            data, counters, i, unary[:T], trans, nodes, esum, wk.chain
        )
        if o.line_search:
            gn2 = pieces.gradient_scores(
                data, i, wk.grams, nodes, esum, weights, wk.truth_t, E_g, g_trans, th_g
            )
            if gn2 > _GN2_MIN:
                L[0], _ = pieces.lipschitz_backtrack(
                    data, counters, i, f, gn2, L[0], unary, trans, th_g, g_trans,
                    wk.trial, wk.trial_t, o.max_doublings, wk.chain,
                )  # fmt: skip
            e = o.step_factor / L[0]
        else:
            e = o.step_factor / o.L_fixed
        # ∇ℓᵢ(w) − αᵢ = E_ν F − E_{Uᵢ,Pᵢ} F (the ground-truth terms cancel)
        s0 = data.offsets[i]
        for tt in range(T):
            for k in range(K):
                weights[tt, k] = nodes[tt, k] - U[s0 + tt, k]
        kernels.expected_emission(data, i, weights, E_d)
        shrink = 1.0 / (1.0 + e * lam)
        a = e * sigma
        for jj in range(hi - lo):
            base = support[lo + jj] * K
            for k in range(K):
                _step_coordinate(x, d, base + k, E_d[jj, k], e, inv_n, a, shrink)
            last[support[lo + jj]] = r + 1
        for k in range(K):
            for l in range(K):
                g = esum[k, l] - P[i, k, l]
                _step_coordinate(x, d, t_off + k * K + l, g, e, inv_n, a, shrink)
        last[A] = r + 1
        for tt in range(T):
            for k in range(K):
                U[s0 + tt, k] = nodes[tt, k]
        for k in range(K):
            for l in range(K):
                P[i, k, l] = esum[k, l]
        # the untouched rows owe this step: record it in the epoch's prefix arrays
        eta[r] = e
        S[r + 1] = S[r] + e / pi[r]
        pi[r + 1] = pi[r] * shrink
        pos[0] = r + 1
        if r + 1 == eta.shape[0] or pi[r + 1] < _PI_MIN:  # end of the epoch
            _catch_up_all(x, d, last, r + 1, A, K, o, pi, S, eta)
            for a_row in range(A + 1):
                last[a_row] = 0
            pos[0] = 0
        L[0] *= o.decay
        counters[kernels.UPDATES] += 1
    return k_iters


@jit
def _materialize(st, A, K, o):
    """The current w as a new array, every row caught up on the copy: the state is left
    as it is, so reading w never changes later iterates, not even in rounding."""
    w = st.x.copy()
    _catch_up_all(w, st.d, st.last, st.pos[0], A, K, o, st.pi, st.S, st.eta)
    return w


class ProxSAGA(crfopt.Optimizer):
    """Prox-SAGA (Defazio et al. 2014) on the elastic net, lazy sparse updates (§3.15)."""

    parameters = {
        "step_factor": crfopt.Param(
            1.0 / 3.0, float, "η = step_factor / L (SAGA's 1/(3L); §3.15)", low=0.0
        ),
        "line_search": crfopt.Param(
            True,
            bool,
            "L from SAG's Lipschitz line search (§3.4); False: L = maxᵢ Rᵢ (§1.7), constant",
        ),
        "initial_lipschitz": crfopt.Param(
            1.0, float, "L₀, initial Lipschitz estimate (§7.4 [choice])", low=0.0
        ),
        "max_doublings": crfopt.Param(
            60, int, "line-search doublings before giving up (§5.7)", low=1
        ),
    }
    capabilities = frozenset({"stochastic", "line_search"})
    regularizers = ("l2", "l1")
    cost = crfopt.Cost(oracle_calls=(1, 1), forward_calls=(0, None), updates=(1, 1))

    def setup(self) -> None:
        p = self.problem
        prm = self.params
        for name in ("step_factor", "initial_lipschitz"):
            if not prm[name] > 0.0:  # η = step_factor / L must be a positive finite step
                raise crfopt.ParameterError(
                    f"prox-saga: parameter {name!r} must be > 0, got {prm[name]}"
                )
        kd = p.data
        K, n = p.n_labels, p.n
        U, P = pieces.truth_memory(kd)  # every stored gradient starts at exactly 0
        A = p.n_kernel_attributes
        self._state = ProxState(
            x=np.zeros(p.dim),
            d=np.zeros(p.dim),
            last=np.zeros(A + 1, dtype=np.int64),
            pi=np.ones(n + 1),
            S=np.zeros(n + 1),
            eta=np.zeros(n),
            pos=np.zeros(1, dtype=np.int64),
            L=np.array([float(prm["initial_lipschitz"])]),
            U=U,
            P=P,
        )
        T_max, S_max = int(kd.max_len), pieces.max_support(kd)
        self._work = Work(
            nodes=np.empty((T_max, K)),
            esum=np.empty((K, K)),
            unary=np.empty((T_max, K)),
            trans=np.empty((K, K)),
            weights=np.empty((T_max, K)),
            truth_t=np.empty((K, K)),
            E_g=np.empty((S_max, K)),
            g_trans=np.empty((K, K)),
            E_d=np.empty((S_max, K)),
            th_g=np.empty((T_max, K)),
            trial=np.empty((T_max, K)),
            trial_t=np.empty((K, K)),
            chain=pieces.chain_work(T_max, K),
            grams=pieces.sequence_grams(kd),
        )
        L_fixed = 1.0
        if not prm["line_search"]:
            L_fixed = float(np.max(p.radii()))
            if not (math.isfinite(L_fixed) and L_fixed > 0.0):
                raise ValueError(
                    f"prox-saga: line_search=False needs L = maxᵢ Rᵢ > 0 (§1.7), but the "
                    f"feature radii give {L_fixed!r}"
                )
        self._opts = Options(
            lam=float(p.lam),
            sigma=float(p.l1),
            n=int(n),
            step_factor=float(prm["step_factor"]),
            L_fixed=L_fixed,
            line_search=bool(prm["line_search"]),
            max_doublings=int(prm["max_doublings"]),
            decay=2.0 ** (-1.0 / n),
        )
        self._sampler = crfopt.Sampler("uniform", n, self.rng)

    @property
    def w(self) -> np.ndarray:
        p = self.problem
        return _materialize(self._state, p.n_kernel_attributes, p.n_labels, self._opts)

    def run_block(self, k: int) -> int:
        uniforms = self._sampler.prepare(k)
        return _prox_saga_block(
            self.problem.data,
            self.problem.counters.array,
            self._state,
            self._work,
            self._sampler.state,
            uniforms,
            int(k),
            self._opts,
        )


@crfopt.hookimpl
def crfopt_register_optimizers() -> list[crfopt.OptimizerSpec]:
    return [
        crfopt.OptimizerSpec(
            "prox-saga",
            ProxSAGA,
            summary="prox-SAGA on the elastic net: step 1/(3L) from SAG's line search, "
            "exact lazy catch-up of the skipped prox steps, marginal memory",
            reference="Defazio, Bach & Lacoste-Julien 2014; docs/algorithms.md §3.15",
        )
    ]
