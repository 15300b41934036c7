"""Mini-batch SDCA with CoCoA+ safe aggregation: both cores for one run (docs/algorithms.md §3.13).

Each step draws B sequences (uniformly, as ``sdca``) and, in parallel over the batch,
asks each for ν_i(w) at the *same* w, forms its direction v_i and chooses its own step
γ_i by the SDCA Newton line search on the block objective with the quadratic term
scaled by σ' (Ma et al. 2015, "Adding vs. averaging in distributed primal-dual
optimization", the local subproblem with σ' = B):

    f_i(γ) = H̃(μ_i + γδ_i) - λn (γ b_i + σ' γ² a_i / 2),   a_i = ‖v_i‖², b_i = ⟨w, v_i⟩,

so the search of ``crfopt_plugins.sdca`` is reused with ``lna = σ'·λn·a_i``. Then all
updates are *added*: μ_i ← μ_i + γ_i δ_i for each drawn i, w += Σ_i γ_i v_i. Since
‖Σ_i u_i‖² ≤ B Σ_i ‖u_i‖², the dual after the step is at least the sum of the B
σ'-scaled block gains, each ≥ 0 (γ = 0 is feasible for every block): with σ' = B a
step never decreases the dual, whatever the overlap of the B supports.

Work is counted by the ordinary rules (docs/algorithms.md §2): a step is one iteration
with B oracle calls and B updates (fewer when the draw repeats a sequence: a repeat is
dropped, as two moves of the same block from the same μ_i would not be a feasible
mixture). With B = 1 the method is ``sdca`` with uniform sampling, iterate for iterate.

References
----------
MJT15: Ma, Smith, Jaggi, Jordan, Richtárik, Takáč (2015), "Adding vs. averaging in
distributed primal-dual optimization", ICML (CoCoA+, σ' = K adding).
TBRS13: Takáč, Bijral, Richtárik, Srebro (2013), "Mini-batch primal and dual methods
for SVMs", ICML (mini-batch SDCA, safe step by the ESO).
LPL18: Le Priol, Piché, Lacoste-Julien (2018), SDCA for CRFs (the block pieces).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np

import crfopt
from crfopt import jit, kernels, samplers
from crfopt.kernels.jit import JIT_ENABLED, prange
from crfopt_plugins.sdca import (
    _PARAMETERS,
    SDCA,
    SDCAOptions,
    Start,
    StepRule,
    _block_gaps,
    _commit_fused,
    _commit_tables,
    _direction,
    _newton_line_search,
    make_scratch,
)

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

    The adapter around ``sdca._commit``: that one also adds γv to w and the running
    totals, which the lanes must not do concurrently; here only μ_i is committed
    (``_commit_fused``/``_commit_tables``, the same two paths) and the caller applies
    the rest in draw order.
    """
    g_i, r_i = _block_gaps(data, counters, st, sc, i, T, K)
    # ⟨w, v_i⟩ is taken again when v_i is added (w has moved by the lanes before it)
    a, _ = _direction(data, st.w, opts.lam_n, sc, i, T, K, E_loc, trans_dir)
    lna = sigma * opts.lam_n * a
    start = opts.start
    if start == Start.PREVIOUS:
        x0 = st.last_step[i]
    elif start == Start.CHORD:
        x0 = (g_i + r_i) / (g_i + r_i + lna) if g_i + r_i + lna > 0.0 else 0.5
    else:
        x0 = 0.5
    if not (0.0 < x0 < 1.0):
        x0 = 0.5
    gamma, evals, capped = _newton_line_search(
        x0, opts.sub_precision, opts.max_line_search, g_i + r_i, lna, sc, T, K
    )
    counters[kernels.LS_EVALS] += evals
    s = data.offsets[i]
    es = s - i
    # exactly sdca._commit's μ part (same call, same arguments; test_batch_of_one_is_sdca
    # holds the two together bit for bit)
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
            if gamma != 0.0:
                kernels.add_local(data, i, st.w, gamma, E_locs[j], trans_dirs[j])
            st.w_sq[0] += gamma * gamma * a + 2.0 * gamma * b
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
        if st.cap_hits[0] > hits:
            warnings.warn(
                f"SDCA line search hit its cap of {self._opts.max_line_search} evaluations "
                f"{int(st.cap_hits[0]) - hits} time(s); returned the last iterate (§7.9)",
                RuntimeWarning,
                stacklevel=2,
            )
        return done


_REF = "MJT15 (CoCoA+ adding, σ' = B); TBRS13; docs/algorithms.md §3.13"


@crfopt.hookimpl
def crfopt_register_optimizers() -> list[crfopt.OptimizerSpec]:
    return [
        crfopt.OptimizerSpec(
            "sdca-minibatch",
            SDCAMinibatch,
            defaults={},
            summary=f"mini-batch SDCA, B = {DEFAULT_BATCH} in parallel, safe adding (σ' = B)",
            reference=_REF,
        )
    ]


__all__ = ["DEFAULT_BATCH", "SDCAMinibatch"]
