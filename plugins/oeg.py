"""Online exponentiated gradient (OEG) for CRFs (Collins et al. 2008, as configured in SBA15
§6 fn. 9 and App. D; docs/algorithms.md §3.8).

OEG works on the same dual variables as SDCA — a chain-Markov distribution μ_i per
sequence — but parameterizes them by part scores θ_i (node tables T×K, edge tables
(T-1)×K×K) and takes exponentiated-gradient steps: the trial scores are the geometric
interpolation

    θ_i' = (1 - η_i) θ_i + η_i θ(w; x_i),          w = ŵ(μ)   (LPL18 §2.6)

between the current dual block and the model's own scores. A trial costs one counted
oracle call (the marginals μ' of θ_i'); it is accepted when the dual does not decrease,
and the per-example step η_i is halved on failure and grown by 1.05 on success.

The edge tables never need to be stored in full: they start as c on the ground truth,
and the model's edge scores are the same K×K table W_T at every position, so the edge
part is always ρ_i·c·E^truth_t + M_i with a scalar ρ_i and one K×K matrix M_i.

References
----------
Collins, Globerson, Koo, Carreras, Bartlett (2008), JMLR, "Exponentiated gradient
algorithms for conditional random fields and max-margin Markov networks".
SBA15 §6 fn. 9 and App. D (OEG-10 initialization, first-pass permutation).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np

import crfopt
from crfopt import borrowed, dual, jit, kernels, pieces, samplers, vmath


class OEGState(NamedTuple):
    """What the compiled loop reads and updates in place (one run's OEG state)."""

    w: np.ndarray  # (d,) = ŵ(μ)
    theta_n: np.ndarray  # (N, K) node part scores θ_i
    rho: np.ndarray  # (n,) edge part: ρ_i c E^truth_t + M_i
    M: np.ndarray  # (n, K, K)
    nodes: np.ndarray  # (N, K) node marginals of μ_i (linear)
    P: np.ndarray  # (n, K, K) Σ_t μ_i edge marginals (linear)
    H: np.ndarray  # (n,) entropies H̃(μ_i)
    eta: np.ndarray  # (n,) per-example step sizes
    iterations: np.ndarray  # (1,) int64, iterations done so far


class OEGOptions(NamedTuple):
    """Settings of the compiled loop, fixed for a run."""

    lam_n: float  # λn
    c_init: float  # c of the ground-truth initial edge scores
    trials_first: int  # trial cap in the first epoch
    trials_later: int  # trial cap afterwards
    grow: float  # η_i ← grow · η_i after an accepted trial
    shrink: float  # η_i ← shrink · η_i after a rejected one
    permute_first: bool  # draw the first epoch from a permutation (SBA15 App. D)
    linear: bool  # linear marginals from the kernel (the default; equal to rounding)


class OEGWork(NamedTuple):
    """Work arrays of one iteration (sized for the longest sequence)."""

    s_w: np.ndarray  # (L, K) θ(w; x_i) unary
    W_T: np.ndarray  # (K, K) θ(w; x_i)'s edge table, frozen while w changes
    t_n: np.ndarray  # (L, K) trial node scores
    t_base: np.ndarray  # (K, K) trial edge scores off the ground truth
    t_e: np.ndarray  # (L-1, K, K) trial edge scores (written by the oracle)
    ln: np.ndarray  # (L, K) trial log node marginals
    le: np.ndarray  # (L-1, K, K) trial log edge marginals
    nodes_new: np.ndarray  # (L, K) trial node marginals
    edges_lin: np.ndarray  # (L-1, K, K) trial edge marginals
    nodes_cur: np.ndarray  # (L, K) node marginals of the current μ_i, once per iteration
    P_new: np.ndarray  # (K, K) their sum over positions
    diff_n: np.ndarray  # (L, K) node part of the weight change
    E_loc: np.ndarray  # (max support, K) emission part of the weight change
    d_trans: np.ndarray  # (K, K) transition part of the weight change


def make_work(max_len: int, K: int, max_support: int) -> OEGWork:
    """Allocate the work arrays for sequences of up to ``max_len`` tokens."""
    L = max_len
    E = max(L - 1, 1)
    return OEGWork(
        s_w=np.empty((L, K)),
        W_T=np.empty((K, K)),
        t_n=np.empty((L, K)),
        t_base=np.empty((K, K)),
        t_e=np.empty((E, K, K)),
        ln=np.empty((L, K)),
        le=np.empty((E, K, K)),
        nodes_new=np.empty((L, K)),
        edges_lin=np.empty((E, K, K)),
        nodes_cur=np.empty((L, K)),
        P_new=np.empty((K, K)),
        diff_n=np.empty((L, K)),
        E_loc=np.empty((max_support, K)),
        d_trans=np.empty((K, K)),
    )


@jit(inline=True)
def _trial_scores(data, st, wk, i, T, K, keep, e_i):
    """θ_i' = (1-η) θ_i + η θ(w; x_i): the node scores into wk.t_n and the edge scores
    off the truth, (1-η) M_i + η W_T, into wk.t_base; returns the new ρ_i. The
    per-position edge tables, ρ_i' c higher on the truth, are written by the oracle
    (``kernels.oracle_scores_bonus``)."""
    s0 = data.offsets[i]
    # locals, not tuple fields, inside loops (each field read costs a reference count)
    t_n, t_base, s_w, W_T, M, theta_n = wk.t_n, wk.t_base, wk.s_w, wk.W_T, st.M, st.theta_n
    for t in range(T):
        for k in range(K):
            t_n[t, k] = keep * theta_n[s0 + t, k] + e_i * s_w[t, k]
    for k in range(K):
        for l in range(K):
            t_base[k, l] = keep * M[i, k, l] + e_i * W_T[k, l]
    return keep * st.rho[i]


@jit(inline=True)
def _trial_entropy(data, counters, wk, i, T, K, linear, bonus):
    """One counted oracle call on the trial scores (edge tables wk.t_base plus ``bonus``
    = ρ_i' c on the truth): fills the trial edge scores wk.t_e and marginals (wk.ln,
    wk.le, wk.nodes_new, wk.edges_lin, wk.P_new) and returns H' = log Z' - ⟨θ', μ'⟩.

    With ``linear`` (``linear_marginals``, the default since issue 47) the linear
    marginals come from the kernel, as products of its scaled messages: no exp at all.
    Without it they are exp of the log-marginals (vector exp for the edges, libm for the
    nodes), bit for bit what releases before issue 47 computed. The two agree to
    rounding, but the accept test ``gain >= 0`` is decided by rounding once a block has
    converged, so they accept different trials at ties; the per-pass convergence check
    (docs/algorithms.md §3.8) found no difference beyond 1e-12 on OCR, CoNLL-2000 and
    NER-nl. P' and ⟨θ', μ'⟩ share one sweep of the edges (same summation order as two
    sweeps).
    """
    t_n, t_e, ln, le, edges_lin, P_new = wk.t_n, wk.t_e, wk.ln, wk.le, wk.edges_lin, wk.P_new
    nodes_new = wk.nodes_new
    E = T - 1
    # the linear path reads no log-marginal: the oracle may skip them (logs = not linear)
    log_z = kernels.oracle_scores_bonus(
        data, counters, i, t_n[:T], wk.t_base, bonus, t_e, ln, le, nodes_new, edges_lin, linear,
        not linear,
    )  # fmt: skip
    if not linear:
        KK = K * K
        vmath.vexp(le.reshape(le.shape[0] * KK), edges_lin.reshape(edges_lin.shape[0] * KK), E * KK)
        for t in range(T):
            for k in range(K):
                nodes_new[t, k] = math.exp(ln[t, k])
    inner = 0.0
    for t in range(T):
        for k in range(K):
            inner += t_n[t, k] * nodes_new[t, k]
    for k in range(K):
        for l in range(K):
            P_new[k, l] = 0.0
    for t in range(E):
        for k in range(K):
            for l in range(K):
                p = edges_lin[t, k, l]
                P_new[k, l] += p
                inner += t_e[t, k, l] * p
    return log_z - inner


@jit(inline=True)
def _trial_gain(data, st, lam_n, wk, i, T, K, h_new, linear):
    """n × the dual change of the trial; leaves dw = (E_{μ_i}F - E_{μ'}F)/(λn) on the
    sequence's support in wk.E_loc, wk.d_trans. wk.nodes_cur holds μ_i's node marginals.

    With ``linear`` (the default, see :func:`_trial_entropy`), ⟨w, dw⟩'s emission part is
    ⟨θ(w; x_i), D⟩ with D the node-marginal difference (⟨W_E, Xᵀ D⟩ = ⟨X W_E, D⟩): T·K
    terms from the scores wk.s_w at hand instead of a gather of every support row of w;
    equal to rounding. Without it, the gather, as before issue 47.
    """
    diff_n, E_loc, d_trans, nodes_new, P_new = (
        wk.diff_n,
        wk.E_loc,
        wk.d_trans,
        wk.nodes_new,
        wk.P_new,
    )
    nodes_cur, s_w, W_T, P = wk.nodes_cur, wk.s_w, wk.W_T, st.P
    wdw = 0.0
    for t in range(T):
        for k in range(K):
            diff_n[t, k] = (nodes_cur[t, k] - nodes_new[t, k]) / lam_n
    kernels.difference_direction(data, i, diff_n, P[i], P_new, lam_n, E_loc, d_trans)
    sq = kernels.norm2_local(data, i, E_loc, d_trans)
    if linear:
        for t in range(T):
            for k in range(K):
                wdw += s_w[t, k] * diff_n[t, k]
        for k in range(K):
            for l in range(K):
                wdw += W_T[k, l] * d_trans[k, l]
    else:
        wdw = kernels.dot_local(data, i, st.w, E_loc, d_trans)
    return (h_new - st.H[i]) - 0.5 * lam_n * (2.0 * wdw + sq)


@jit(inline=True)
def _current_nodes(nodes, nodes_cur, s0, T, K):
    """nodes_cur[:T] = μ_i's node marginals (rows s0 … s0+T-1 of ``nodes``)."""
    for t in range(T):
        for k in range(K):
            nodes_cur[t, k] = nodes[s0 + t, k]


@jit(inline=True)
def _accept(data, st, wk, i, T, K, rho_new, h_new):
    """Make the trial the new dual block μ_i (scores, node marginals, sums) and move w by
    dw; the trial's edge part off the truth, wk.t_base, becomes M_i.

    μ_i's edge marginals are not stored: no iteration reads them, and the checkpoints
    recompute them from the scores θ_i, which determine them (:func:`_dual_marginals`).
    That store was 8–12 % of an epoch on OCR and CoNLL-2000."""
    s0 = data.offsets[i]
    kernels.add_local(data, i, st.w, 1.0, wk.E_loc, wk.d_trans)
    theta_n, nodes, M, P = st.theta_n, st.nodes, st.M, st.P
    t_n, nodes_new, t_base, P_new = wk.t_n, wk.nodes_new, wk.t_base, wk.P_new
    for t in range(T):
        for k in range(K):
            theta_n[s0 + t, k] = t_n[t, k]
            nodes[s0 + t, k] = nodes_new[t, k]
    st.rho[i] = rho_new
    for k in range(K):
        for l in range(K):
            M[i, k, l] = t_base[k, l]
            P[i, k, l] = P_new[k, l]
    st.H[i] = h_new


@jit
def _oeg_block(data, counters, st, first, later, uniforms, k_iters, opts, wk):
    """k_iters OEG iterations (§3.8) on ``st`` (OEGState) with ``opts`` (OEGOptions).

    ``first``/``later`` are the sampler states of the first epoch and of the rest;
    ``uniforms`` holds their two uniforms per iteration; ``wk`` is a :func:`make_work`.
    """
    data, counters, st, first, later, uniforms, wk = borrowed(
        (data, counters, st, first, later, uniforms, wk)
    )
    K = data.n_labels
    n = data.offsets.shape[0] - 1
    for it in range(k_iters):
        first_epoch = st.iterations[0] < n
        if first_epoch and opts.permute_first:
            i = samplers.sampler_draw(first, uniforms[it, 0], uniforms[it, 1])
        else:
            i = samplers.sampler_draw(later, uniforms[it, 0], uniforms[it, 1])
        T = data.offsets[i + 1] - data.offsets[i]
        kernels.unary_scores(data, i, st.w, wk.s_w)  # scores, not an oracle call
        wk.W_T[:, :] = kernels.transition_matrix(data, st.w)
        # μ_i's node marginals: fixed until a trial is accepted, so once per iteration
        _current_nodes(st.nodes, wk.nodes_cur, data.offsets[i], T, K)
        max_trials = opts.trials_first if first_epoch else opts.trials_later
        for _trial in range(max_trials):
            e_i = st.eta[i]
            keep = 1.0 - e_i
            rho_new = _trial_scores(data, st, wk, i, T, K, keep, e_i)
            h_new = _trial_entropy(data, counters, wk, i, T, K, opts.linear, rho_new * opts.c_init)
            gain = _trial_gain(data, st, opts.lam_n, wk, i, T, K, h_new, opts.linear)
            if gain >= 0.0:  # ties accepted: an optimal block stops burning oracle calls
                _accept(data, st, wk, i, T, K, rho_new, h_new)
                st.eta[i] = e_i * opts.grow
                counters[kernels.UPDATES] += 1
                break
            st.eta[i] = e_i * opts.shrink
        st.iterations[0] += 1
    return k_iters


class OEG(crfopt.Optimizer):
    """Online exponentiated gradient on the CRF dual (Collins et al. 2008; docs/algorithms.md §3.8).

    Parameters: ``initial_step`` η⁰ (0.5), ``init_score`` c of the ground-truth
    initialization (10 = SBA15's OEG-10; 0 = the uniform start of the egstra code),
    ``first_pass_permutation`` (SBA15 App. D), the trial caps of the first and later
    epochs (20 / 5) and the step growth and shrink factors (1.05 / 0.5) — all
    reconstructed defaults ([recon] in docs/algorithms.md §7.5).
    """

    parameters = {
        "initial_step": crfopt.Param(
            0.5, float, "η⁰ of every example (§3.8 [recon])", low=0.0, high=1.0
        ),
        "init_score": crfopt.Param(
            10.0, float, "c of the initial scores (SBA15 App. D OEG-10)", low=0.0
        ),
        "first_pass_permutation": crfopt.Param(
            True, bool, "visit the first epoch in a random order (SBA15 App. D)"
        ),
        "trials_first_epoch": crfopt.Param(20, int, "trial cap in the first epoch (§3.8)", low=1),
        "trials_later": crfopt.Param(5, int, "trial cap after the first epoch (§3.8)", low=1),
        "step_growth": crfopt.Param(1.05, float, "η_i ← growth · η_i after a success", low=1.0),
        "step_shrink": crfopt.Param(
            0.5, float, "η_i ← shrink · η_i after a failure", low=0.0, high=1.0
        ),
        "linear_marginals": crfopt.Param(
            True,
            bool,
            "trial marginals as products of the kernel's messages, not exp of logs: "
            "cheaper, equal to rounding (false: the exp, as before issue 47)",
        ),
    }
    capabilities = frozenset({"stochastic", "has_dual"})
    cost = crfopt.Cost(oracle_calls=(1, 20), updates=(0, 1), init_passes=1.0)  # gibbs μ⁰

    @classmethod
    def state_memory(cls, problem: crfopt.CRFProblem, params: Mapping[str, Any]) -> int:
        """Bytes of the state :meth:`setup` allocates, from the problem's shapes.

        float64 throughout: the dual log-marginals (N·K + (N-n)·K²: μ⁰, then the buffer
        :meth:`dual_state` refills), the node scores θ and node marginals (2·N·K), the
        per-sequence K×K tables M and P (2·n·K²), two weight vectors (w and ŵ(μ⁰)), the
        per-sequence scalars and the work arrays of one trial (about 3·(L-1)·K² + 6·L·K,
        plus the gibbs edge table of setup).
        """
        K, kd, n, N = problem.n_labels, problem.data, problem.n, problem.n_tokens
        L = int(kd.max_len)
        E = max(L - 1, 1)
        support = pieces.max_support(kd)
        work = 4 * E * K * K + 8 * L * K + 4 * K * K + support * K
        return int(
            problem.dual_memory(8)
            + 8 * (2 * N * K + 2 * n * K * K + 2 * problem.dim + 4 * n + work)
        )

    @classmethod
    def decline(
        cls, problem: crfopt.CRFProblem, params: Mapping[str, Any], limits: Any
    ) -> str | None:
        """Decline when the state (:meth:`state_memory`) exceeds the memory limit
        (the user's ``max_memory``, by default the machine's available memory)."""
        return limits.decline_memory(cls.state_memory(problem, params))

    def setup(self) -> None:
        p = self.problem
        prm = self.params
        K = p.n_labels
        kd = p.data
        c = prm["init_score"]
        mu = dual.initial_dual(p, "gibbs", c=c)  # μ⁰: one counted oracle_scores per sequence
        theta_n = np.zeros((p.n_tokens, K))
        L = int(kd.max_len)
        unary = np.zeros((L, K))
        edges = np.zeros((max(L - 1, 1), K, K))
        Psum = np.zeros((p.n, K, K))
        for i in range(p.n):
            s0, e0 = int(kd.offsets[i]), int(kd.offsets[i + 1])
            dual.gibbs_scores(kd, i, c, unary, edges)
            theta_n[s0:e0] = unary[: e0 - s0]
            _, le = mu.sequence(i)
            if len(le):
                Psum[i] = np.exp(le).sum(axis=0)
        self._state = OEGState(
            w=p.conjugate_weights(mu),
            theta_n=theta_n,
            rho=np.ones(p.n),
            M=np.zeros((p.n, K, K)),
            nodes=_exp_nodes(mu.log_nodes),
            P=Psum,
            H=dual.entropies(p, mu),
            eta=np.full(p.n, prm["initial_step"]),
            iterations=np.zeros(1, dtype=np.int64),
        )
        self._mu = mu
        self._first = crfopt.Sampler("permutation", p.n, self.rng)
        self._later = crfopt.Sampler("uniform", p.n, self.rng)
        max_support = pieces.max_support(kd)
        self._work = make_work(L, K, max_support)
        self._opts = OEGOptions(
            lam_n=p.lam * p.n,
            c_init=prm["init_score"],
            trials_first=prm["trials_first_epoch"],
            trials_later=prm["trials_later"],
            grow=prm["step_growth"],
            shrink=prm["step_shrink"],
            permute_first=prm["first_pass_permutation"],
            linear=prm["linear_marginals"],
        )

    @property
    def w(self) -> np.ndarray:
        return self._state.w

    def run_block(self, k: int) -> int:
        p = self.problem
        prm = self.params
        done_before = int(self._state.iterations[0])
        n_first = max(0, min(k, p.n - done_before)) if prm["first_pass_permutation"] else 0
        # the first epoch's draws come from the permutation sampler, later ones uniform;
        # each sampler prepares exactly the draws it will make, in order
        first = self._first.prepare(n_first)
        later = self._later.prepare(k - n_first)
        uniforms = np.concatenate([first, later]) if n_first else later
        return _oeg_block(
            p.data,
            p.counters.array,
            self._state,
            self._first.state,
            self._later.state,
            uniforms,
            int(k),
            self._opts,
            self._work,
        )

    def dual_state(self) -> crfopt.DualMarginals:
        """μ recomputed from the scores θ_i (:func:`_dual_marginals`) into one buffer kept
        between calls; before the first accepted trial, μ⁰ itself."""
        if int(self._state.iterations[0]) == 0:
            return self._mu
        mu = self._mu
        _dual_marginals(
            self.problem.data,
            np.zeros_like(self.problem.counters.array),
            self._state,
            self._opts.c_init,
            self._opts.linear,
            self._work,
            mu.log_nodes,
            mu.log_edges,
        )
        return mu

    def dual_value(self) -> float:
        p = self.problem
        w = self._state.w
        return float(self._state.H.mean() - 0.5 * p.lam * float(w @ w))


@jit
def _exp_nodes(log_nodes):
    """μ⁰'s node marginals through libm's exp, as a visit took them before issue 47 (and as
    the trials' are without ``linear``), so that path stays bit for bit as it was."""
    out = np.empty_like(log_nodes)
    for t in range(log_nodes.shape[0]):
        for k in range(log_nodes.shape[1]):
            out[t, k] = math.exp(log_nodes[t, k])
    return out


@jit
def _dual_marginals(data, scratch, st, c_init, linear, wk, log_nodes, log_edges):
    """μ_i's log-marginals for every i, from the scores θ_i that define them: the node
    scores θ_n and the edge tables M_i plus ρ_i·c on the truth, through the oracle the
    trials use, so an accepted block's are bit for bit its trial's. Counted in
    ``scratch``, a throwaway counter array: the checkpoints' evaluation, not the
    optimizer's work."""
    data, scratch, st, wk = borrowed((data, scratch, st, wk))
    n = data.offsets.shape[0] - 1
    for i in range(n):
        s0 = data.offsets[i]
        e0 = data.offsets[i + 1]
        kernels.oracle_scores_bonus(
            data, scratch, i, st.theta_n[s0:e0], st.M[i], st.rho[i] * c_init, wk.t_e,
            log_nodes[s0:e0], log_edges[s0 - i : e0 - i - 1], wk.nodes_new, wk.edges_lin,
            linear,
        )  # fmt: skip


_REF = "Collins et al. 2008; SBA15 §6 fn. 9, App. D; docs/algorithms.md §3.8"


@crfopt.hookimpl
def crfopt_register_optimizers() -> list[crfopt.OptimizerSpec]:
    return [
        crfopt.OptimizerSpec(
            "oeg", OEG, summary="online exponentiated gradient, OEG-10 start", reference=_REF
        ),
        crfopt.OptimizerSpec(
            "oeg-c0",
            OEG,
            defaults={"init_score": 0.0},
            summary="OEG from the uniform start of the egstra code (c = 0)",
            reference=_REF + "; LPL18 App. A.1",
        ),
        crfopt.OptimizerSpec(
            "oeg-norp",
            OEG,
            defaults={"first_pass_permutation": False},
            summary="OEG without the first-pass permutation (SBA15 App. D)",
            reference=_REF,
        ),
    ]
