"""SDCA for CRFs with adaptive sampling (LPL18 Alg. 1–2; LP17 §2.5; ALGORITHMS.md §3.1–3.3).

Stochastic dual coordinate ascent over the marginal polytope of each sequence
(Prox-SDCA option II, SSZ13): the dual variables are the log-marginals μ_i of every
training sequence; an iteration picks a sequence i, asks the oracle for the model's
marginals ν_i = ν_i(w), and moves μ_i toward ν_i by the step γ ∈ [0, 1] that maximizes
the dual along that segment (a safeguarded Newton line search on the closed-form
derivative, LPL18 eq. 20). The primal weights are kept equal to ŵ(μ) by a sparse
update, w += γ v with v = (E_{μ_i}F - E_{ν_i}F)/(λn) (the corrected form of LPL18
Alg. 2, §1.4 erratum). The pre-step block gap g_i = D̃(μ_i ‖ ν_i) drives the gap
sampler and the gap estimate ĝ = mean of the stored gaps (LPL18 §5, §6.3).

References
----------
LPL18: Le Priol, Piché, Lacoste-Julien (2018), "Adaptive stochastic dual coordinate
ascent for conditional random fields", UAI.
LP17: Le Priol (2017), technical report, §2.5 (line search derivatives).
SSZ13: Shalev-Shwartz & Zhang (2013), JMLR, §3, §6, §8.5.
VLZ15: Vainsencher, Liu, Zhang (2015), Alg. 3 (empirical-Δ sampling).
"""

from __future__ import annotations

import math
import warnings
from collections import namedtuple

import numpy as np

import crfopt
from crfopt import jit, kernels, samplers
from crfopt.dual import initial_dual
from crfopt.vmath import vexp, vlog

SAMPLERS = ("uniform", "permutation", "cyclic", "importance", "gap", "gapimp", "max", "edelta")
LINE_SEARCHES = ("newton", "golden", "fixed", "theory")

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


@jit(fastmath=True)
def _kl(pn, pe, lpn, lpe, lqn, lqe, T, K):
    """D̃(p ‖ q) in the chain-rule form (§5.3) from linear p and the logs of p and q.

    Node log-marginals supply the conditionals, so no transcendental function is needed.
    """
    total = 0.0
    for k in range(K):
        if pn[0, k] > 0.0:
            total += pn[0, k] * (lpn[0, k] - lqn[0, k])
    for t in range(T - 1):
        for k in range(K):
            rp = lpn[t, k]
            rq = lqn[t, k]
            for l in range(K):
                p = pe[t, k, l]
                if p > 0.0:
                    total += p * ((lpe[t, k, l] - rp) - (lqe[t, k, l] - rq))
    return total


@jit(fastmath=True)
def _entropy(xn, xe, lxn, lxe, T, K):
    """H̃ of marginals given linear and log values (chain-rule form, 0 log 0 = 0)."""
    H = 0.0
    for k in range(K):
        if xn[0, k] > 0.0:
            H -= xn[0, k] * lxn[0, k]
    for t in range(T - 1):
        for k in range(K):
            r = lxn[t, k]
            for l in range(K):
                p = xe[t, k, l]
                if p > 0.0:
                    H -= p * (lxe[t, k, l] - r)
    return H


@jit(inline=True)
def _mix(gamma, sc, T, K):
    """x = μ + γδ and log x for the nodes and edges of the current sequence."""
    _mix_table(sc.mn_f, sc.dn_f, sc.lmn_f, sc.lnun_f, sc.xn_f, sc.lxn_f, T * K, gamma)
    _mix_table(sc.me_f, sc.de_f, sc.lme_f, sc.lnue_f, sc.xe_f, sc.lxe_f, (T - 1) * K * K, gamma)


@jit(fastmath=True, inline=True)
def _derivatives(gamma, sc, T, K, lna):
    """f'(γ) and f''(γ) of the block objective f(γ) = H̃(μ_γ) - λn/2 (γ²a + 2γb).

    f'(γ) = ⟨δ, log ν - log μ_γ⟩_tree - λnγa and f''(γ) = -(Fisher information of μ_γ
    along δ) - λna (LPL18 eq. 20, App. A.3). The curvature uses the non-negative
    chain-rule form Σ δ_1²/μ_1 + Σ_t Σ_kl (δ_kl - δ_k μ_kl/μ_k)²/μ_kl (§5.4), which
    never subtracts separator terms from clique terms.
    """
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


@jit
def _newton_line_search(x0, sub_precision, max_iter, u0, lna, sc, T, K, out):
    """Safeguarded Newton–bisection on f' over [0, 1] (Press et al. §9.4 "rtsafe", §3.2).

    The root is bracketed: f'(0) = g_i + r_i ≥ 0 and f'(1) = -λna ≤ 0. Returns γ;
    ``out[0]`` gets the number of derivative evaluations, ``out[1]`` 1 if the
    iteration cap was hit.
    """
    out[0] = 0.0
    out[1] = 0.0
    if u0 <= 0.0:
        return 0.0
    if lna <= 0.0:
        return 1.0
    lo = 1.0  # f'(lo) < 0
    hi = 0.0  # f'(hi) > 0
    x = x0
    dx_prev2 = 1.0
    dx_prev = 1.0
    u, curv = _derivatives(x, sc, T, K, lna)
    out[0] += 1.0
    # Tighten the bracket with the first evaluation too (rtsafe does not; it only saves
    # a re-evaluation at the midpoint when the first Newton step is rejected).
    if u < 0.0:
        lo = x
    else:
        hi = x
    newton = u / curv
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
            return x
        u, curv = _derivatives(x, sc, T, K, lna)
        out[0] += 1.0
        if u < 0.0:
            lo = x
        else:
            hi = x
        newton = u / curv
    out[1] = 1.0
    return x


@jit(inline=True)
def _block_value(gamma, a, b, lam_n, sc, T, K):
    """f(γ) = H̃(μ_γ) - λn/2 (γ² a + 2γ b) (LPL18 eq. 20), for the golden-section search."""
    _mix(gamma, sc, T, K)
    H = _entropy(sc.xn, sc.xe, sc.lxn, sc.lxe, T, K)
    return H - 0.5 * lam_n * (gamma * gamma * a + 2.0 * gamma * b)


@jit
def _golden_line_search(sub_precision, a, b, lam_n, sc, T, K, out):
    """Golden-section maximization of the concave f on [0, 1] to ``sub_precision``."""
    gr = 0.5 * (math.sqrt(5.0) - 1.0)
    lo = 0.0
    hi = 1.0
    c = hi - gr * (hi - lo)
    d = lo + gr * (hi - lo)
    fc = _block_value(c, a, b, lam_n, sc, T, K)
    fd = _block_value(d, a, b, lam_n, sc, T, K)
    out[0] = 2.0
    out[1] = 0.0
    while hi - lo > sub_precision:
        if fc > fd:
            hi = d
            d = c
            fd = fc
            c = hi - gr * (hi - lo)
            fc = _block_value(c, a, b, lam_n, sc, T, K)
        else:
            lo = c
            c = d
            fc = fd
            d = lo + gr * (hi - lo)
            fd = _block_value(d, a, b, lam_n, sc, T, K)
        out[0] += 1.0
    return 0.5 * (lo + hi)


@jit(inline=True)
def _load(src_n, src_e, s, es, T, K, sc):
    """Copy μ_i from storage (float64 or float32) and exponentiate it."""
    ln = sc.lmn_f
    le = sc.lme_f
    KK = K * K
    for t in range(T):
        for k in range(K):
            ln[t * K + k] = src_n[s + t, k]
    for t in range(T - 1):
        for k in range(K):
            for l in range(K):
                le[t * KK + k * K + l] = src_e[es + t, k, l]
    vexp(ln, sc.mn_f, T * K)
    vexp(le, sc.me_f, (T - 1) * KK)


@jit
def _sdca_block(
    data,
    counters,
    w,
    mu_n,
    mu_e,
    G,
    H,
    last_step,
    acc,
    ints,
    st,
    u,
    k_iters,
    lam_n,
    ls_kind,
    sub_precision,
    fixed_step,
    start_kind,
    tolerance,
    refresh_every,
    max_ls,
    sc,
    E_loc,
):
    """k_iters SDCA iterations (§3.1). Returns the number done (fewer if ĝ < tolerance).

    acc = [Σ_i G_i, ‖w‖², Σ_i H_i, line-search cap hits]; ints = [iterations so far].
    """
    n = data.offsets.shape[0] - 1
    K = data.n_labels
    KK = K * K
    # locals, not tuple fields, inside loops (each field read costs a reference count)
    mn_f, me_f, nun_f, nue_f, dn_f, de_f, xn_f = (
        sc.mn_f,
        sc.me_f,
        sc.nun_f,
        sc.nue_f,
        sc.dn_f,
        sc.de_f,
        sc.xn_f,
    )
    mn, me, lmn, lme, nun, nue, lnun, lnue = (
        sc.mn,
        sc.me,
        sc.lmn,
        sc.lme,
        sc.nun,
        sc.nue,
        sc.lnun,
        sc.lnue,
    )
    de, xn, xe, lxn, lxe = sc.de, sc.xn, sc.xe, sc.lxn, sc.lxe
    trans_dir = np.empty((K, K))
    ls_out = np.zeros(2)
    done = 0
    for it in range(k_iters):
        if refresh_every > 0 and ints[0] > 0 and ints[0] % refresh_every == 0:
            # Optional full refresh of the stored gaps (Osokin et al. 2016), charged n
            # oracle calls as REF does.
            for j in range(n):
                sj = data.offsets[j]
                Tj = data.offsets[j + 1] - sj
                _load(mu_n, mu_e, sj, sj - j, Tj, K, sc)
                kernels.oracle_marginals(data, counters, j, w, lnun, lnue, nun, nue)
                gj = _kl(mn, me, lmn, lme, lnun, lnue, Tj, K)
                gj = gj if gj > 0.0 else 0.0
                acc[0] += gj - G[j]
                G[j] = gj
                samplers.sampler_feedback(st, j, gj, 0.0)
        i = samplers.sampler_draw(st, u[it, 0], u[it, 1])
        s = data.offsets[i]
        T = data.offsets[i + 1] - s
        es = s - i
        _load(mu_n, mu_e, s, es, T, K, sc)
        kernels.oracle_marginals(data, counters, i, w, lnun, lnue, nun, nue)
        for j in range(T * K):
            dn_f[j] = nun_f[j] - mn_f[j]
        for j in range((T - 1) * KK):
            de_f[j] = nue_f[j] - me_f[j]
        g_i = _kl(mn, me, lmn, lme, lnun, lnue, T, K)  # pre-step gap
        r_i = _kl(nun, nue, lnun, lnue, lmn, lme, T, K)  # for f'(0)
        if g_i < 0.0:
            g_i = 0.0
        if r_i < 0.0:
            r_i = 0.0
        # v = (E_μ F - E_ν F)/(λn) on the sequence's support
        lo, hi = kernels.support_bounds(data, i)
        for j in range(T * K):
            xn_f[j] = -dn_f[j]
        kernels.expected_emission(data, i, xn, E_loc)
        inv = 1.0 / lam_n
        a = 0.0
        for j in range(hi - lo):
            for k in range(K):
                E_loc[j, k] *= inv
                a += E_loc[j, k] * E_loc[j, k]
        for k in range(K):
            for l in range(K):
                acc_t = 0.0
                for t in range(T - 1):
                    acc_t -= de[t, k, l]
                trans_dir[k, l] = acc_t * inv
                a += trans_dir[k, l] * trans_dir[k, l]
        b = kernels.dot_local(data, i, w, E_loc, trans_dir)
        lna = lam_n * a
        if ls_kind == 0:
            if start_kind == 1:
                x0 = last_step[i]
            elif start_kind == 2:
                # root of the chord of f' between its closed-form end values
                x0 = (g_i + r_i) / (g_i + r_i + lna) if g_i + r_i + lna > 0.0 else 0.5
            else:
                x0 = 0.5
            if not (0.0 < x0 < 1.0):
                x0 = 0.5
            gamma = _newton_line_search(x0, sub_precision, max_ls, g_i + r_i, lna, sc, T, K, ls_out)
            counters[kernels.LS_EVALS] += int(ls_out[0])
            acc[3] += ls_out[1]
        elif ls_kind == 1:
            gamma = _golden_line_search(sub_precision, a, b, lam_n, sc, T, K, ls_out)
            counters[kernels.LS_EVALS] += int(ls_out[0])
        else:
            gamma = fixed_step
        last_step[i] = gamma
        # μ_i ← (1-γ) μ_i + γ ν_i, stored as logs (exact at γ ∈ {0, 1})
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
        if gamma != 0.0:
            kernels.add_local(data, i, w, gamma, E_loc, trans_dir)
        acc[1] += gamma * gamma * a + 2.0 * gamma * b
        h_new = _entropy(xn, xe, lxn, lxe, T, K)
        acc[2] += h_new - H[i]
        H[i] = h_new
        acc[0] += g_i - G[i]
        G[i] = g_i
        samplers.sampler_feedback(st, i, g_i, gamma * math.sqrt(a))
        counters[kernels.ITERATIONS] += 1
        counters[kernels.UPDATES] += 1
        ints[0] += 1
        done += 1
        if acc[0] / n < tolerance:
            break
    return done


class SDCA(crfopt.Optimizer):
    """SDCA for CRFs with a Newton line search and adaptive sampling (LPL18 Alg. 1–2).

    Parameters (all overridable)
    ----------------------------
    sampler : which example to visit next (§3.3): uniform, permutation, cyclic,
        importance, gap, gapimp, max, edelta.
    non_uniformity : ρ, weight of the non-uniform part of the sampler (LPL18 §6.3: 0.8).
    sub_precision : line-search tolerance on γ (LPL18 §6.2: 1e-3).
    line_search : newton (safeguarded Newton on f', §3.2), golden (section search on f),
        fixed (γ = fixed_step), theory (γ = (1 + R/(λn))⁻¹, LPL18 App. F Thm. 1).
    """

    parameters = {
        "sampler": crfopt.Param("uniform", str, "sampling scheme (§3.3)", choices=SAMPLERS),
        "non_uniformity": crfopt.Param(
            0.8,
            float,
            "ρ, weight of the non-uniform sampler part (LPL18 §6.3)",
            low=0.0,
            high=1.0,
        ),
        "initial_gap": crfopt.Param(100.0, float, "initial stored gap G_i (LPL18 fn. 5)", low=0.0),
        "sub_precision": crfopt.Param(
            1e-3, float, "line-search tolerance on the step γ (LPL18 §6.2)", low=0.0
        ),
        "line_search": crfopt.Param(
            "newton",
            str,
            "step rule (§3.2): newton, golden, fixed, theory",
            choices=LINE_SEARCHES,
        ),
        "fixed_step": crfopt.Param(
            0.5, float, "γ when line_search='fixed' (ablation)", low=0.0, high=1.0
        ),
        "start": crfopt.Param(
            "half",
            str,
            "first Newton point: 0.5, the example's previous step (LPL18 fn. 4) "
            "or the root of the chord of f' between 0 and 1",
            choices=("half", "previous", "chord"),
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
    capabilities = frozenset({"stochastic", "has_dual", "gap_estimate", "line_search"})
    cost = crfopt.Cost(init_passes=1.0)  # the gibbs μ⁰: one oracle_scores per sequence

    def setup(self) -> None:
        p = self.problem
        prm = self.params
        dtype = np.float32 if prm["dtype"] == "float32" else np.float64
        self._mu = initial_dual(
            p, prm["init"], c=prm["init_score"], epsilon=prm["init_epsilon"], dtype=dtype
        )
        self._w = p.conjugate_weights(self._mu)  # w⁰ = ŵ(μ⁰), no oracle call
        n = p.n
        self._G = np.full(n, prm["initial_gap"])
        self._H = p.entropies(self._mu)
        self._acc = np.array([self._G.sum(), float(self._w @ self._w), self._H.sum(), 0.0])
        self._ints = np.zeros(2, dtype=np.int64)
        self._last_step = np.full(n, 0.5)
        importance = None
        if prm["sampler"] in ("importance", "gapimp"):
            importance = p.lam + p.radii() / n  # L_i = λ + R_i/n (§1.7)
        self._sampler = crfopt.Sampler(
            prm["sampler"],
            n,
            self.rng,
            non_uniformity=prm["non_uniformity"],
            initial_gap=prm["initial_gap"],
            importance=importance,
            refresh=prm["edelta_refresh"],
        )
        ls = prm["line_search"]
        self._ls_kind = {"newton": 0, "golden": 1, "fixed": 2, "theory": 2}[ls]
        self._step = prm["fixed_step"]
        if ls == "theory":
            self._step = 1.0 / (1.0 + float(np.max(p.radii())) / (p.lam * n))
        kd = p.data
        max_support = int(kd.n_attributes) if kd.dense else int(np.diff(kd.support_ptr).max())
        self._E_loc = np.zeros((max_support, p.n_labels))
        self._scratch = make_scratch(int(kd.max_len), p.n_labels)

    @property
    def w(self) -> np.ndarray:
        return self._w

    def run_block(self, k: int) -> int:
        p = self.problem
        prm = self.params
        u = self._sampler.prepare(k)
        hits = self._acc[3]
        refresh = prm["refresh_period"]
        done = _sdca_block(
            p.data,
            p.counters.array,
            self._w,
            self._mu.log_nodes,
            self._mu.log_edges,
            self._G,
            self._H,
            self._last_step,
            self._acc,
            self._ints,
            self._sampler.state,
            u,
            int(k),
            p.lam * p.n,
            self._ls_kind,
            prm["sub_precision"],
            self._step,
            ("half", "previous", "chord").index(prm["start"]),
            prm["tolerance"],
            0 if refresh is None else int(refresh) * p.n,
            prm["max_line_search"],
            self._scratch,
            self._E_loc,
        )
        if done < k:
            self.converged = True
        if self._acc[3] > hits:
            warnings.warn(
                f"SDCA line search hit its cap of {prm['max_line_search']} evaluations "
                f"{int(self._acc[3] - hits)} time(s); returned the last iterate (§7.9)",
                RuntimeWarning,
                stacklevel=2,
            )
        return done

    def step(self) -> None:
        self.run_block(1)

    def dual_state(self) -> crfopt.DualMarginals:
        return self._mu

    def gap_estimate(self) -> float:
        return float(self._acc[0] / self.problem.n)

    def dual_value(self) -> float:
        """D_inc = mean H̃(μ_i) - λ/2 ‖w‖², kept up to date in O(1) (REF MonitorDualObjective)."""
        p = self.problem
        return float(self._acc[2] / p.n - 0.5 * p.lam * self._acc[1])

    @property
    def sampler(self) -> crfopt.Sampler:
        return self._sampler


_REF = "LPL18 Alg. 1-2, §5; ALGORITHMS.md §3.1-3.3"


@crfopt.hookimpl
def crfopt_register_optimizers() -> list[crfopt.OptimizerSpec]:
    def spec(name: str, summary: str, **defaults: object) -> crfopt.OptimizerSpec:
        return crfopt.OptimizerSpec(name, SDCA, defaults=defaults, summary=summary, reference=_REF)

    return [
        spec("sdca", "SDCA, uniform sampling, Newton line search", sampler="uniform"),
        spec(
            "sdca-perm", "SDCA, a fresh permutation every epoch (SSZ13 §6)", sampler="permutation"
        ),
        spec("sdca-cyclic", "SDCA, one fixed random order (SSZ13 §8.5)", sampler="cyclic"),
        spec(
            "sdca-importance",
            "SDCA, sampling ∝ smoothness bounds L_i (ρ = 0.8)",
            sampler="importance",
            non_uniformity=0.8,
        ),
        spec(
            "sdca-gap",
            "SDCA, sampling ∝ stale duality gaps (ρ = 0.8) (LPL18)",
            sampler="gap",
            non_uniformity=0.8,
        ),
        spec(
            "sdca-gapimp",
            "SDCA, sampling ∝ gap × L_i (ρ = 0.8) (LPL18 App. F)",
            sampler="gapimp",
            non_uniformity=0.8,
        ),
        spec(
            "sdca-max",
            "SDCA, the largest stale gap (ρ = 0.8) (Dünner et al. 2017)",
            sampler="max",
            non_uniformity=0.8,
        ),
        spec(
            "sdca-edelta",
            "SDCA, empirical-Δ sampling (ρ = 0.5) (VLZ15 Alg. 3)",
            sampler="edelta",
            non_uniformity=0.5,
        ),
    ]
