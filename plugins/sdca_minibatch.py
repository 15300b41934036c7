"""Mini-batch SDCA with CoCoA+ safe adding (docs/algorithms.md §3.13; TBRS13, MJT15).

B sequences are drawn per step and their blocks solved in a parallel loop, all at the
same w: each sequence chooses its own γ_i on its block objective with the quadratic term
scaled by σ' = B,

    f_i(γ) = H̃(μ_i + γδ_i) - λn (γ b_i + σ' γ² a_i / 2),   a_i = ‖v_i‖², b_i = ⟨w, v_i⟩,

(``dual.search.newton_line_search`` with ``lna = σ'·λn·a_i``), and then every update is
*added* (CoCoA+). As ‖Σ_i u_i‖² ≤ B Σ_i ‖u_i‖², such a step never decreases the dual.
A step is one iteration with B oracle calls and B updates (a sequence drawn twice in
one step is dropped: two moves of one block from the same μ_i are not a feasible
mixture); with B = 1 it is ``sdca``, iterate for iterate. Built from the same dual
pieces as ``plugins/sdca.py`` (``crfopt.dual``).

References
----------
TBRS13: Takáč, Bijral, Richtárik, Srebro (2013), "Mini-batch primal and dual methods
for SVMs", ICML (mini-batch SDCA).
MJT15: Ma, Smith, Jaggi, Jordan, Richtárik, Takáč (2015), "Adding vs. averaging in
distributed primal-dual optimization", ICML (CoCoA+, σ' = K adding).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np

import crfopt
from crfopt import JIT_ENABLED, borrowed, dual, jit, kernels, pieces, prange, samplers

blocks, search, state = dual.blocks, dual.search, dual.state

# The default batch: B = 8 whatever the machine. A step's dual gain is guaranteed only
# for the σ' = B-damped steps, so B trades parallel work per step against step length;
# 8 keeps 2–8 cores busy (4 sequences per core on the 2-core reference machine, enough to
# even out unequal lengths) while the damping stays mild (a measured step is about the
# undamped one when supports barely overlap, as on CoNLL-2000). A default that followed
# the thread count would make the same command compute different iterates on another
# machine; B is a parameter, so results depend only on it and the seed.
DEFAULT_BATCH = 8


class MinibatchOptions(NamedTuple):
    """Settings of the compiled loop, fixed for a run."""

    lam_n: float  # λn
    start: int  # a dual.search.Start
    sub_precision: float  # tolerance on γ of the Newton search
    max_line_search: int  # derivative evaluations before Newton gives up
    tolerance: float  # stop when ĝ = Σ G_i / n falls below it
    tau: float  # σ/λ (0: the ℓ2 arithmetic)


@jit(inline=True)
def _lane_step(data, counters, st, opts, sigma, sc, i, T, K, E_loc, trans_loc):
    """One drawn sequence at the step's w: ν_i, δ_i, v_i, γ_i (σ'-scaled search) and the
    new μ_i stored (its rows are this lane's alone). Returns (g_i, a_i, γ_i, H̃(μ_i new)).

    Not ``dual.state.commit``: that one also adds γv to w and the running totals, which
    the lanes must not do concurrently; here only μ_i is stored (``blocks.store_mixture``,
    as ``commit`` does) and the caller applies the rest in draw order.
    """
    # here, not in the caller: numba cannot lower a prange body using tuples borrowed outside
    data, counters, st, sc, E_loc, trans_loc = borrowed((data, counters, st, sc, E_loc, trans_loc))
    g_i, r_i = blocks.block_gaps(data, counters, st.mu_n, st.mu_e, st.w, sc, i, T, K)
    # ⟨w, v_i⟩ is taken again when v_i is added (w has moved by the lanes before it)
    a, _ = blocks.block_direction(data, st.w, opts.lam_n, sc, i, T, K, E_loc, trans_loc)
    lna = sigma * opts.lam_n * a
    x0 = search.newton_start(opts.start, st.last_step[i], g_i, r_i, lna)
    gamma, evals, capped = search.newton_line_search(
        x0, opts.sub_precision, opts.max_line_search, g_i + r_i, lna, sc, T, K
    )
    counters[kernels.LS_EVALS] += evals
    s = data.offsets[i]
    h_new = blocks.store_mixture(st.mu_n, st.mu_e, sc, s, s - i, T, K, gamma)  # commit's μ part
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
    uniforms,
    k_steps,
    B,
    sigma,
    opts,
    lane_sc,
    E_locs,
    trans_locs,
):
    """k_steps mini-batch steps; returns the number done (fewer if ĝ < tolerance).

    ``uniforms`` holds two per draw (B per step). Lane j works on ``lane_sc[j]``,
    ``E_locs[j]``, ``trans_locs[j]`` and counts into ``lane_counts[j]`` and
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
            i = samplers.sampler_draw(sampler, uniforms[step * B + j, 0], uniforms[step * B + j, 1])
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
                trans_locs[j],
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
            b = kernels.dot_local(data, i, st.w, E_locs[j], trans_locs[j])
            state.move_w(data, st, i, gamma, a, b, E_locs[j], trans_locs[j], opts.tau)
            st.entropy_sum[0] += hn[j] - st.entropies[i]
            st.entropies[i] = hn[j]
            st.last_step[i] = gamma
            st.gap_sum[0] += g[j] - st.gaps[i]
            st.gaps[i] = g[j]
            st.cap_hits[0] += cap[j]
            samplers.sampler_feedback(sampler, i, g[j], gamma * math.sqrt(a))
            counters[kernels.UPDATES] += 1
        st.iterations[0] += 1
        done += 1
        if st.gap_sum[0] / n < opts.tolerance:
            break
    return done


class SDCAMinibatch(crfopt.Optimizer):
    """Mini-batch SDCA, B sequences per step in parallel, CoCoA+ adding with σ' = B.

    Parameters (all overridable)
    ----------------------------
    batch_size : B, sequences drawn per step (default 8, see DEFAULT_BATCH).
    sigma : σ', the scale of each block's quadratic term; unset means B, the safe value
        (every step a dual ascent). Smaller values take longer steps without that
        guarantee (ablation; σ' = 1 is plain "adding").
    The shared dual parameters (``dual.state.PARAMETERS``): Newton line search, uniform
    sampling.
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
        **state.PARAMETERS,
    }
    capabilities = frozenset({"stochastic", "has_dual", "gap_estimate", "line_search"})
    # one iteration = one step: B oracle calls and B updates (fewer on a repeated draw)
    cost = crfopt.Cost(oracle_calls=(1, None), updates=(1, None), init_passes=1.0)
    regularizers = ("l2", "l1")  # prox-SDCA's blocks at σ > 0, as in plugins/sdca.py

    @classmethod
    def state_memory(cls, problem: crfopt.CRFProblem, params: Mapping[str, Any]) -> int:
        """The dual state plus B lanes of line-search tables and direction scratch."""
        return state.state_memory(problem, params, lanes=int(params["batch_size"]))

    @classmethod
    def decline(
        cls, problem: crfopt.CRFProblem, params: Mapping[str, Any], limits: Any
    ) -> str | None:
        """Decline when the state (:meth:`state_memory`) exceeds the memory limit."""
        hint = "" if params["dtype"] == "float32" else "dtype=float32 halves the dual"
        return limits.decline_memory(cls.state_memory(problem, params), hint)

    def setup(self) -> None:
        p = self.problem
        prm = self.params
        self._mu, self._state = state.initial_state(p, prm)
        self._sampler = crfopt.Sampler("uniform", p.n, self.rng, initial_gap=prm["initial_gap"])
        self._opts = MinibatchOptions(
            lam_n=p.lam * p.n,
            start=search.Start[prm["start"].upper()],
            sub_precision=prm["sub_precision"],
            max_line_search=prm["max_line_search"],
            tolerance=prm["tolerance"],
            tau=state.threshold_of(p),
        )
        B = int(prm["batch_size"])
        sigma = prm["sigma"]
        self._B = B
        self._sigma = float(B if sigma is None else sigma)
        kd = p.data
        L, K = int(kd.max_len), p.n_labels
        self._E_locs = np.zeros((B, pieces.max_support(kd), K))
        self._trans_locs = np.zeros((B, K, K))
        self._lane_counts = np.zeros((B, len(p.counters.array)), dtype=np.int64)
        scratches = [blocks.make_scratch(L, K) for _ in range(B)]
        if JIT_ENABLED:
            from numba.typed import List

            # Private audit cells: concurrent `audit[0] += 1` on one cell can lose counts.
            self._lane_data = List([kd._replace(audit=np.zeros(1, np.int64)) for _ in range(B)])
            self._lane_sc = List(scratches)
        else:
            self._lane_data = [kd] * B
            self._lane_sc = scratches

    @property
    def w(self) -> np.ndarray:
        return self._state.w

    def run_block(self, k: int) -> int:
        uniforms = self._sampler.prepare(int(k) * self._B)
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
            uniforms,
            int(k),
            self._B,
            self._sigma,
            self._opts,
            self._lane_sc,
            self._E_locs,
            self._trans_locs,
        )
        if done < k:
            self.converged = True
        state.warn_cap_hits("SDCA", st, hits, self._opts.max_line_search)
        return done

    def dual_state(self) -> crfopt.DualMarginals:
        return self._mu

    def gap_estimate(self) -> float:
        return state.gap_estimate(self.problem, self._state)

    def dual_value(self) -> float:
        return state.dual_value(self.problem, self._state)


@crfopt.hookimpl
def crfopt_register_optimizers() -> list[crfopt.OptimizerSpec]:
    return [
        crfopt.OptimizerSpec(
            "sdca-minibatch",
            SDCAMinibatch,
            defaults={},
            summary=f"mini-batch SDCA, B = {DEFAULT_BATCH} in parallel, safe adding (σ' = B)",
            reference="MJT15 (CoCoA+ adding, σ' = B); TBRS13; docs/algorithms.md §3.13",
        )
    ]
