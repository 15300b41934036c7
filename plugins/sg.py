"""Stochastic gradient baselines: SG, averaged SG and AdaGrad (SBA15 §6; docs/algorithms.md §3.10).

All start at w = 0, sample uniformly with replacement and make one counted oracle call
per iteration, and every iteration costs O(T a K + K²) on sparse data:

* ``sg``: w ← w - η_t (∇ℓ_i(w) + λ w) with η_t = η₀ / (1 + λ η₀ t) — Pegasos' 1/(λt) step
  asymptotically, with a tuned constant and no huge first steps; ``schedule="constant"``
  keeps η₀. The ℓ2 shrink is folded into a scalar: w = s·u.
* ``asg``: the same iterates and their uniform running average w̄ (reported as ``w``),
  accumulated lazily per attribute row from the running sum of the scales (exact; the
  sparse-data recursion in the spirit of Xu 2010).
* ``adagrad``: G_j += g_j², η_j = η/(ε + √G_j), proximal ℓ2 step
  w_j ← (w_j - η_j g_j)/(1 + λ η_j) with g = ∇ℓ_i (Duchi et al. 2011). Coordinates the
  example does not touch only shrink by 1/(1 + λ η_j) per iteration with a constant η_j,
  so m missed iterations are applied at once as (1 + λ η_j)^(-m) when the row is next
  read (exact).

* ``sg-nus``: SG with SBA15's non-uniform sampling (SBA15 §5 and fn. 10;
  docs/algorithms.md §3.11): half the draws uniform over all n, half ∝ L_i over the
  examples seen so far (the ``weighted`` sampler of SAG-NUS*, ρ = 0.5), L_i from the
  Lipschitz line search with SAG-NUS*'s rules (first visit ``first_visit``·L̄, revisit
  ``revisit``·L_i before the search; no skipping), and the importance-weighted step
  w ← (1 − η_tλ) w − η_t ∇ℓ_i(w) / (n p_i), p_i the probability i was drawn with, so the
  direction stays an unbiased estimate of ∇(1/n Σ_i ℓ_i) as in Needell et al. (2014).

The step constant is chosen post hoc from a grid (SBA15 lets the baselines "cheat"):
run ``crfopt compare --optimizers "sg[step_size=1],sg[step_size=0.1],sg[step_size=0.01]"``
and keep the best training objective.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

import crfopt
from crfopt import borrowed, jit, kernels, pieces, samplers


class SGState(NamedTuple):
    """Iterate, accumulators and counters (scalars as 1-element arrays)."""

    u: np.ndarray  # (d,) w / s (sg, asg) or w itself (adagrad)
    acc: np.ndarray  # (d,) asg: −Σ_k w_k (negated, see _asg_close); adagrad: Σ g²
    last: np.ndarray  # (A + 1,) asg: C at each row's last close; adagrad: last iteration
    s: np.ndarray  # (1,) scale of w = s·u (1 for adagrad)
    C: np.ndarray  # (1,) Σ_k s_k, the running sum of the scales (asg)
    t: np.ndarray  # (1,) iterations done


class Work(NamedTuple):
    unary: np.ndarray  # (T_max, K) scores of w
    trans: np.ndarray  # (K, K)
    nodes: np.ndarray  # (T_max, K) node marginals of ν_i
    esum: np.ndarray  # (K, K) summed pairwise marginals of ν_i
    weights: np.ndarray  # (T_max, K) scratch of pieces.local_gradient
    truth: np.ndarray  # (K, K) scratch of pieces.local_gradient
    g_loc: np.ndarray  # (S_max, K) ∇ℓ_i on the support
    g_trans: np.ndarray  # (K, K) ∇ℓ_i on the transitions
    chain: pieces.ChainWork  # the oracle's and the line search's forward tables


class Options(NamedTuple):
    lam: float
    eta0: float  # step_size
    constant: bool  # schedule == "constant" (sg, asg)
    eps: float  # AdaGrad's ε


class NUSState(NamedTuple):
    """sg-nus: per-example Lipschitz estimates and what the sampler was told."""

    Li: np.ndarray  # (n,) L_i of the examples seen (L₀ until then)
    seen: np.ndarray  # (n,) int8
    L_sum: np.ndarray  # (1,) Σ_seen L_i
    m: np.ndarray  # (1,) examples seen
    visits: np.ndarray  # (n,) draws of each example (a diagnostic: sampling frequencies)
    good: np.ndarray  # (n,) searches in a row without doubling, c_i (skipping)
    skip: np.ndarray  # (n,) visits left without a search (skipping)


class NUSWork(NamedTuple):
    """sg-nus: scratch of the Lipschitz line search (pieces.lipschitz_backtrack)."""

    th_g: np.ndarray  # (T_max, K) scores θ(g) of the direction
    trial: np.ndarray  # (T_max, K)
    trial_t: np.ndarray  # (K, K)


class NUSOptions(NamedTuple):
    L0: float  # initial_lipschitz: L̄ before any example is seen
    first_visit: float
    revisit: float
    max_doublings: int
    unbiased: bool  # weight ∇ℓ_i by 1/(n p_i)
    skipping: bool  # SBA15 §5.2's line-search skipping, as sag-nus-star


# a line search runs only when ‖∇ℓ_i‖² exceeds this (the SAG family's rule, §3.4)
_GN2_MIN = 1e-8


def make_work(max_len: int, max_support: int, K: int) -> Work:
    tk, kk = (max_len, K), (K, K)
    return Work(
        np.empty(tk), np.empty(kk), np.empty(tk), np.empty(kk), np.empty(tk), np.empty(kk),
        np.empty((max_support, K)), np.empty(kk), pieces.chain_work(max_len, K),
    )  # fmt: skip


@jit(inline=True)
def _gradient(data, counters, st, wk, i):
    """One counted oracle call at w = s·u; ∇ℓ_i into wk.g_loc / wk.g_trans, θ(w) left in
    wk.unary / wk.trans. Returns (ℓ_i(w), ‖∇ℓ_i‖²) (sg-nus' line search needs them)."""
    unary, trans, nodes, esum = wk.unary, wk.trans, wk.nodes, wk.esum
    T = pieces.scaled_scores(data, i, st.u, st.s[0], unary, trans)
    _, f = kernels.oracle_sums_scores(data, counters, i, unary[:T], trans, nodes, esum, wk.chain)
    gn2 = pieces.local_gradient(data, i, nodes, esum, wk.weights, wk.truth, wk.g_loc, wk.g_trans)
    return f, gn2


@jit(inline=True)
def _asg_close(data, st, i, C):
    """Add the iterates since each row of x_i last changed to the running sum.

    A row of u left alone since C_last contributes u_row·(C − C_last) to Σ_k s_k u_k —
    pieces' lazy catch-up with direction u, applied to acc = −Σ_k w_k (hence the sign).
    """
    pieces.catch_up_support(data, st.acc, st.u, st.last, i, C)


@jit(inline=True)
def _sg_update(data, st, wk, i, eta, lam, weight):
    """w ← (1 − ηλ) w − η·weight·∇ℓ_i(w) as s ← (1 − ηλ)s, u ← u − (η·weight/s) ∇ℓ_i on
    x_i's rows (weight = 1 but for sg-nus' importance weight 1/(n p_i); the ℓ2 term is
    exact, not sampled, so it is never weighted)."""
    g_loc, g_trans = wk.g_loc, wk.g_trans
    # 2-D views: flat indices of unknown sign would keep the rows from vectorizing
    # (pieces._catch_up_rows)
    U, U_trans = kernels.emission_matrix(data, st.u), kernels.transition_matrix(data, st.u)
    K = data.n_labels
    support = data.support
    lo, hi = kernels.support_bounds(data, i)
    s_new = st.s[0] * (1.0 - eta * lam)
    coef = eta * weight / s_new
    for j in range(hi - lo):
        a = support[lo + j]
        for k in range(K):
            U[a, k] -= coef * g_loc[j, k]
    for k in range(K):
        for l in range(K):
            U_trans[k, l] -= coef * g_trans[k, l]
    st.s[0] = s_new
    st.C[0] += s_new


@jit(inline=True)
def _fold_scale(st, A, K, average):
    """Fold a tiny s into u (docs/algorithms.md §5.7); asg closes every row first so the
    average stays exact."""
    if st.s[0] >= pieces.RENORMALIZE_BELOW:
        return
    u, last = st.u, st.last
    if average:
        pieces.catch_up_all(st.acc, u, last, A, K, st.C[0])
    s = st.s[0]
    for j in range(u.shape[0]):
        u[j] *= s
    st.s[0] = 1.0
    st.C[0] = 0.0
    for a in range(last.shape[0]):
        last[a] = 0.0


@jit
def _sg_block(data, counters, st, wk, sst, uniforms, k_iters, opts, average):
    """SG (average=False) or ASG (average=True), docs/algorithms.md §3.10."""
    data, counters, st, wk, sst, uniforms = borrowed((data, counters, st, wk, sst, uniforms))
    lam, eta0 = opts.lam, opts.eta0
    t = st.t
    for it in range(k_iters):
        i = samplers.sampler_draw(sst, uniforms[it, 0], uniforms[it, 1])
        _gradient(data, counters, st, wk, i)
        eta = eta0 if opts.constant else eta0 / (1.0 + lam * eta0 * t[0])
        if average:  # close the rows about to change with their old values
            _asg_close(data, st, i, st.C[0])
        _sg_update(data, st, wk, i, eta, lam, 1.0)
        _fold_scale(st, data.n_kernel_attributes, data.n_labels, average)
        t[0] += 1.0
        counters[kernels.UPDATES] += 1
    return k_iters


@jit(inline=True)
def _nus_lipschitz(data, counters, wk, lw, nst, i, f, gn2, nopts):
    """L_i by SAG-NUS*'s rules (SBA15 §5; docs/algorithms.md §3.6): first visit from
    first_visit·L̄ (L₀ before any), revisit from revisit·L_i, then the line search
    ℓ_i(w − g/L) ≤ ℓ_i(w) − ‖g‖²/(2L) when ‖g‖² > 1e-8; with ``skipping``, after c_i
    searches in a row without doubling the next 2^(c_i−1) visits keep L_i unsearched
    (SBA15 §5.2). Keeps Σ_seen L_i."""
    Lis, seen, L_sum, m = nst.Li, nst.seen, nst.L_sum, nst.m
    skip, good = nst.skip, nst.good
    was_seen = seen[i] != 0
    search = True
    if not was_seen:
        Li = nopts.first_visit * (L_sum[0] / m[0] if m[0] > 0.0 else nopts.L0)
    elif nopts.skipping and skip[i] > 0:
        skip[i] -= 1
        Li = Lis[i]
        search = False
    else:
        Li = nopts.revisit * Lis[i]
    if search and gn2 > _GN2_MIN:
        th_g = lw.th_g
        kernels.local_scores(data, i, wk.g_loc, th_g)
        Li, doublings = pieces.lipschitz_backtrack(
            data, counters, i, f, gn2, Li, wk.unary, wk.trans, th_g, wk.g_trans, lw.trial,
            lw.trial_t, nopts.max_doublings, wk.chain,
        )  # fmt: skip
        if nopts.skipping:
            if doublings == 0:
                good[i] += 1
                skip[i] = 2 ** (good[i] - 1)
            else:
                good[i] = 0
    if was_seen:
        L_sum[0] += Li - Lis[i]
    else:
        seen[i] = 1
        m[0] += 1.0
        L_sum[0] += Li
    Lis[i] = Li
    return Li


@jit
def _sg_nus_block(data, counters, st, wk, sst, uniforms, k_iters, opts, nst, lw, nopts):
    """SG-NUS (docs/algorithms.md §3.11): SG's step on ∇ℓ_i/(n p_i), i drawn half
    uniformly, half ∝ L_i over the seen examples."""
    data, counters, st, wk, sst, uniforms, nst, lw = borrowed(
        (data, counters, st, wk, sst, uniforms, nst, lw)
    )
    lam, eta0 = opts.lam, opts.eta0
    n = data.offsets.shape[0] - 1
    t = st.t
    visits = nst.visits
    for it in range(k_iters):
        i = samplers.sampler_draw(sst, uniforms[it, 0], uniforms[it, 1])
        # the probability i was drawn with, before this visit changes L_i: the weighted
        # gradient is unbiased only with the draw-time p_i (as SAGA-NUS, §3.7)
        p_i = samplers.sampler_probability(sst, i)
        visits[i] += 1.0
        f, gn2 = _gradient(data, counters, st, wk, i)
        Li = _nus_lipschitz(data, counters, wk, lw, nst, i, f, gn2, nopts)
        samplers.sampler_set_weight(sst, i, Li)
        eta = eta0 if opts.constant else eta0 / (1.0 + lam * eta0 * t[0])
        weight = 1.0 / (n * p_i) if nopts.unbiased else 1.0
        _sg_update(data, st, wk, i, eta, lam, weight)
        _fold_scale(st, data.n_kernel_attributes, data.n_labels, False)
        t[0] += 1.0
        counters[kernels.UPDATES] += 1
    return k_iters


@jit(inline=True)
def _ada_catch_up(u, G, last, base, n_entries, row, t, lam, eta, eps):
    """Apply the prox shrinks of the iterations since the row was last touched."""
    missed = t - last[row]
    if missed > 0.0:
        for j in range(n_entries):
            step = eta / (eps + math.sqrt(G[base + j]))
            u[base + j] *= math.exp(-missed * math.log1p(lam * step))
        last[row] = t


@jit(inline=True)
def _ada_rows(u, G, g, j0, n_entries, lam, eta0, eps):
    """G += g², then the proximal step u ← (u − η_j g)/(1 + λη_j) on n_entries coordinates."""
    for j in range(n_entries):
        gj = g[j]
        G[j0 + j] += gj * gj
        step = eta0 / (eps + math.sqrt(G[j0 + j]))
        u[j0 + j] = (u[j0 + j] - step * gj) / (1.0 + lam * step)


@jit
def _adagrad_block(data, counters, st, wk, sst, uniforms, k_iters, opts):
    """AdaGrad with a proximal ℓ2 step (Duchi et al. 2011; docs/algorithms.md §3.10)."""
    data, counters, st, wk, sst, uniforms = borrowed((data, counters, st, wk, sst, uniforms))
    K = data.n_labels
    A = data.n_kernel_attributes
    t_off = A * K
    lam, eta0, eps = opts.lam, opts.eta0, opts.eps
    u, G, last, tt = st.u, st.acc, st.last, st.t
    support = data.support
    g_loc, g_trans = wk.g_loc, wk.g_trans
    for it in range(k_iters):
        i = samplers.sampler_draw(sst, uniforms[it, 0], uniforms[it, 1])
        lo, hi = kernels.support_bounds(data, i)
        t = tt[0]
        for j in range(hi - lo):
            a = support[lo + j]
            _ada_catch_up(u, G, last, a * K, K, a, t, lam, eta0, eps)
        _ada_catch_up(u, G, last, t_off, K * K, A, t, lam, eta0, eps)
        _gradient(data, counters, st, wk, i)
        for j in range(hi - lo):
            a = support[lo + j]
            _ada_rows(u, G, g_loc[j], a * K, K, lam, eta0, eps)
            last[a] = t + 1.0
        _ada_rows(u, G, g_trans.reshape(K * K), t_off, K * K, lam, eta0, eps)
        last[A] = t + 1.0
        tt[0] = t + 1.0
        counters[kernels.UPDATES] += 1
    return k_iters


@jit
def _adagrad_w(st, A, K, lam, eta0, eps):
    u, G, last = st.u, st.acc, st.last
    t = st.t[0]
    for a in range(A):
        _ada_catch_up(u, G, last, a * K, K, a, t, lam, eta0, eps)
    _ada_catch_up(u, G, last, A * K, K * K, A, t, lam, eta0, eps)
    return u.copy()


@jit
def _asg_w(st, A, K):
    if st.t[0] == 0.0:
        return st.s[0] * st.u
    pieces.catch_up_all(st.acc, st.u, st.last, A, K, st.C[0])
    return -st.acc / st.t[0]


_PARAMS = {
    "step_size": crfopt.Param(
        0.1, float, "η₀, chosen post hoc from a grid {10^-k} (SBA15 §6)", low=0.0
    ),
    "schedule": crfopt.Param(
        "decaying",
        str,
        "η₀/(1 + λη₀t) (Pegasos-like) or constant",
        choices=("decaying", "constant"),
    ),
    "epsilon": crfopt.Param(1e-8, float, "AdaGrad's ε (§3.10 [choice])", low=0.0),
    # sg-nus: SBA15's NUS scheme, the SAG-NUS* defaults (plugins/sag.py, §3.6)
    "non_uniformity": crfopt.Param(
        0.5, float, "ρ: share of draws ∝ L_i over the seen examples (SBA15 §5)", low=0.0, high=1.0
    ),
    "first_visit": crfopt.Param(
        0.5, float, "first visit searches from first_visit·L̄ (§3.6 [recon])", low=0.0
    ),
    "revisit": crfopt.Param(
        0.9, float, "a revisit searches from revisit·L_i (§3.6 [recon])", low=0.0
    ),
    "initial_lipschitz": crfopt.Param(
        1.0, float, "L₀: the first example's search starts at first_visit·L₀", low=0.0
    ),
    "max_doublings": crfopt.Param(
        60, int, "line-search doublings before giving up (a failed run, not a hang)", low=1
    ),
    "unbiased": crfopt.Param(
        True, bool, "weight ∇ℓ_i by 1/(n p_i) (unbiased); false: the raw biased step"
    ),
    "skipping": crfopt.Param(
        False, bool, "SBA15 §5.2's line-search skipping (sag-nus-star's rule; §3.11)"
    ),
}


class _SGBase(crfopt.Optimizer):
    """Uniform sampling with replacement, one counted oracle call per iteration."""

    capabilities = frozenset({"stochastic"})

    def setup(self) -> None:
        p = self.problem
        prm = self.params
        self._state = SGState(
            u=np.zeros(p.dim),
            acc=np.zeros(p.dim),
            last=np.zeros(p.n_kernel_attributes + 1),
            s=np.ones(1),
            C=np.zeros(1),
            t=np.zeros(1),
        )
        self._work = make_work(int(p.data.max_len), pieces.max_support(p.data), p.n_labels)
        self._opts = Options(lam=float(p.lam), eta0=float(prm["step_size"]), **self._step_options())
        self._sampler = crfopt.Sampler("uniform", p.n, self.rng)

    def _step_options(self) -> dict[str, Any]:
        """The variant's own step options (:class:`Options`; unused ones stay neutral)."""
        return {"constant": False, "eps": 0.0}

    def _args(self, k: int) -> tuple[Any, ...]:
        uniforms = self._sampler.prepare(k)
        p = self.problem
        return (
            p.data,
            p.counters.array,
            self._state,
            self._work,
            self._sampler.state,
            uniforms,
            int(k),
        )


class SG(_SGBase):
    """SG: w ← w − η_t(∇ℓ_i(w) + λw), η_t = η₀/(1 + λη₀t) or constant (§3.10)."""

    parameters = {k: _PARAMS[k] for k in ("step_size", "schedule")}
    _average = False

    def setup(self) -> None:
        prm = self.params
        if prm["schedule"] == "constant" and prm["step_size"] * self.problem.lam >= 1.0:
            raise crfopt.ParameterError(
                f"{type(self).__name__.lower()}: a constant step_size must satisfy "
                f"step_size·λ < 1 (got {prm['step_size']} · {self.problem.lam:.3g})"
            )
        super().setup()

    def _step_options(self) -> dict[str, Any]:
        return {"constant": self.params["schedule"] == "constant", "eps": 0.0}

    @property
    def w(self) -> np.ndarray:
        return self._state.s[0] * self._state.u

    def run_block(self, k: int) -> int:
        return _sg_block(*self._args(k), self._opts, self._average)


class ASG(SG):
    """Averaged SG: SG's iterates, their uniform running average reported as w (§3.10)."""

    _average = True

    @property
    def w(self) -> np.ndarray:
        p = self.problem
        return _asg_w(self._state, p.n_kernel_attributes, p.n_labels)


class AdaGrad(_SGBase):
    """AdaGrad with a proximal ℓ2 step, per-coordinate η/(ε + √G_j) (Duchi et al. 2011)."""

    parameters = {k: _PARAMS[k] for k in ("step_size", "epsilon")}

    def _step_options(self) -> dict[str, Any]:
        return {"constant": False, "eps": float(self.params["epsilon"])}

    @property
    def w(self) -> np.ndarray:
        p = self.problem
        o = self._opts
        return _adagrad_w(self._state, p.n_kernel_attributes, p.n_labels, o.lam, o.eta0, o.eps)

    def run_block(self, k: int) -> int:
        return _adagrad_block(*self._args(k), self._opts)


class SGNUS(SG):
    """SG-NUS: SG with SBA15's non-uniform sampling ∝ L_i and the unbiased step (§3.11)."""

    parameters = {
        k: _PARAMS[k]
        for k in (
            "step_size",
            "schedule",
            "non_uniformity",
            "first_visit",
            "revisit",
            "initial_lipschitz",
            "max_doublings",
            "unbiased",
            "skipping",
        )
    }
    capabilities = frozenset({"stochastic", "line_search"})
    # one oracle call per iteration, plus the line search's counted forward calls
    cost = crfopt.Cost(oracle_calls=(1, 1), forward_calls=(0, None), updates=(1, 1))

    def setup(self) -> None:
        super().setup()
        p = self.problem
        prm = self.params
        L0 = float(prm["initial_lipschitz"])
        if not L0 > 0.0:
            raise crfopt.ParameterError(f"sg-nus: initial_lipschitz must be > 0 (got {L0})")
        self._nus = NUSState(
            Li=np.full(p.n, L0),
            seen=np.zeros(p.n, dtype=np.int8),
            L_sum=np.zeros(1),
            m=np.zeros(1),
            visits=np.zeros(p.n),
            good=np.zeros(p.n, dtype=np.int64),
            skip=np.zeros(p.n, dtype=np.int64),
        )
        K, T = p.n_labels, int(p.data.max_len)
        self._nus_work = NUSWork(np.empty((T, K)), np.empty((T, K)), np.empty((K, K)))
        self._nus_opts = NUSOptions(
            L0=L0,
            first_visit=float(prm["first_visit"]),
            revisit=float(prm["revisit"]),
            max_doublings=int(prm["max_doublings"]),
            unbiased=bool(prm["unbiased"]),
            skipping=bool(prm["skipping"]),
        )
        # SAG-NUS*'s sampler: uniform w.p. 1 − ρ, else ∝ L_i over the seen (unseen: 0)
        self._sampler = crfopt.Sampler(
            "weighted", p.n, self.rng, non_uniformity=float(prm["non_uniformity"])
        )

    def run_block(self, k: int) -> int:
        return _sg_nus_block(*self._args(k), self._opts, self._nus, self._nus_work, self._nus_opts)


_VARIANTS = {
    "sg": (SG, "stochastic gradient, step η₀/(1 + λη₀t) (Pegasos-like), uniform sampling"),
    "asg": (ASG, "averaged stochastic gradient: the running average of the SG iterates"),
    "adagrad": (AdaGrad, "AdaGrad with a proximal ℓ2 step (Duchi et al. 2011)"),
    "sg-nus": (
        SGNUS,
        "SG with SBA15's non-uniform sampling ∝ L_i (ρ = 0.5) and the unbiased 1/(n p_i) step",
    ),
}


@crfopt.hookimpl
def crfopt_register_optimizers() -> list[crfopt.OptimizerSpec]:
    return [
        crfopt.OptimizerSpec(
            name,
            cls,
            summary=summary,
            reference="SBA15 §5, fn. 10; docs/algorithms.md §3.11"
            if name == "sg-nus"
            else "SBA15 §6; docs/algorithms.md §3.10",
        )
        for name, (cls, summary) in _VARIANTS.items()
    ]
