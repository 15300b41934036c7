"""SDCA for CRFs with adaptive sampling (LPL18 Alg. 1–2; LP17 §2.5; docs/algorithms.md §3.1–3.3).

Stochastic dual coordinate ascent over the marginal polytope of each sequence
(Prox-SDCA option II, SSZ13): the dual variables are the log-marginals μ_i of every
training sequence; an iteration picks a sequence i, asks the oracle for the model's
marginals ν_i = ν_i(w), and moves μ_i toward ν_i by the step γ ∈ [0, 1] that maximizes
the dual along that segment (a safeguarded Newton line search on the closed-form
derivative, LPL18 eq. 20). The primal weights are kept equal to ŵ(μ) by a sparse
update, w += γ v with v = (E_{μ_i}F - E_{ν_i}F)/(λn) (the corrected form of LPL18
Alg. 2, §1.4 erratum). The pre-step block gap g_i = D̃(μ_i ‖ ν_i) drives the gap
sampler and the gap estimate ĝ = mean of the stored gaps (LPL18 §5, §6.3).

With an ℓ1 weight σ > 0 (the elastic net, docs/algorithms.md §1.9) every variant is
prox-SDCA (§3.14): the state keeps u = z(μ)/λ and w = S_τ(u), τ = σ/λ, re-thresholded on
the block's support only, and the line search maximizes the piecewise-quadratic dual
exactly. At σ = 0 the ℓ2 arithmetic runs unchanged.

The numerics are crfopt's dual pieces (``crfopt.dual``: ``blocks`` load μ_i, ask the
oracle for ν_i and store μ_γ; ``search`` chooses γ; ``prox`` handles σ > 0; ``state``
holds μ, w and the running totals); this module is the algorithm that composes them.
The asynchronous parallel variant is ``plugins/sdca_passcode.py``.

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
from collections.abc import Mapping
from enum import IntEnum
from typing import Any, NamedTuple

import numpy as np

import crfopt
from crfopt import borrowed, dual, jit, kernels, pieces, samplers

blocks, search, prox, state = dual.blocks, dual.search, dual.prox, dual.state


class StepRule(IntEnum):
    """How γ is chosen (§3.2); ``line_search`` takes the lower-case member names."""

    NEWTON = 0  # safeguarded Newton on f' (the default)
    GOLDEN = 1  # golden-section search on f
    FIXED = 2  # γ = fixed_step (ablation)
    THEORY = 3  # γ = (1 + R/(λn))⁻¹, R = max_i R_i: the step of LPL18 App. F Thm. 1


LINE_SEARCHES = tuple(r.name.lower() for r in StepRule)
Start = search.Start
STARTS = search.STARTS
# Sampler families (§3.3): ρ only mixes a non-uniform part into the draw, so the uniform
# family has no non_uniformity; only empirical-Δ has a tree refresh policy.
UNIFORM_SAMPLERS = ("uniform", "permutation", "cyclic")
ADAPTIVE_SAMPLERS = ("importance", "gap", "gapimp", "max")
EDELTA_SAMPLERS = ("edelta",)
SAMPLERS = UNIFORM_SAMPLERS + ADAPTIVE_SAMPLERS + EDELTA_SAMPLERS


class SDCAOptions(NamedTuple):
    """Settings of the compiled loop, fixed for a run."""

    lam_n: float  # λn
    rule: StepRule
    start: int  # a search.Start
    sub_precision: float  # tolerance on γ of the Newton and golden searches
    max_line_search: int  # derivative evaluations before Newton gives up
    fixed_step: float  # γ of StepRule.FIXED (NaN otherwise: never read)
    theory_step: float  # γ of StepRule.THEORY (NaN otherwise: never read)
    tolerance: float  # stop when ĝ = Σ G_i / n falls below it
    refresh_every: int  # iterations between full gap refreshes (0: never)
    tau: float  # σ/λ, the threshold of w = S_τ(u) (0: the ℓ2 arithmetic, untouched)


@jit(inline=True)
def _refresh_gaps(data, counters, st, sampler, sc):
    """Recompute every stored gap (Osokin et al. 2016), charged n oracle calls as REF does."""
    n = data.offsets.shape[0] - 1
    K = data.n_labels
    for j in range(n):
        sj = data.offsets[j]
        Tj = data.offsets[j + 1] - sj
        blocks.load(st.mu_n, st.mu_e, sj, sj - j, Tj, K, sc)
        kernels.oracle_marginals(data, counters, j, st.w, sc.lnun, sc.lnue, sc.nun, sc.nue)
        gj = kernels.chain_kl_linlog(sc.mn, sc.me, sc.lmn, sc.lme, sc.lnun, sc.lnue, Tj, K)
        gj = gj if gj > 0.0 else 0.0
        st.gap_sum[0] += gj - st.gaps[j]
        st.gaps[j] = gj
        samplers.sampler_feedback(sampler, j, gj, 0.0)


@jit(inline=True)
def _newton_step_size(opts, counters, st, sc, i, T, K, g_i, r_i, a, seg, m):
    """γ by the safeguarded Newton search from ``opts.start`` (§3.2; the prox objective of
    §3.14 when τ > 0), its derivative evaluations counted."""
    gamma, evals, capped = search.newton_step(
        opts.start, st.last_step[i], opts.sub_precision, opts.max_line_search,
        g_i, r_i, a, opts.lam_n, sc, T, K, seg, m, opts.tau,
    )  # fmt: skip
    counters[kernels.LS_EVALS] += evals
    if capped:
        st.cap_hits[0] += 1
    return gamma


@jit(inline=True)
def _choose_step(opts, counters, st, sc, i, T, K, g_i, r_i, a, b, seg, m):
    """γ by the run's step rule (§3.2; the prox objective of §3.14 when τ > 0)."""
    rule = opts.rule
    if rule == StepRule.NEWTON:
        return _newton_step_size(opts, counters, st, sc, i, T, K, g_i, r_i, a, seg, m)
    if rule == StepRule.GOLDEN:
        gamma, evals = search.golden_line_search(
            opts.sub_precision, a, b, opts.lam_n, sc, T, K, seg, m, opts.tau
        )
        counters[kernels.LS_EVALS] += evals
        return gamma
    if rule == StepRule.FIXED:
        return opts.fixed_step
    return opts.theory_step


@jit
def _sdca_block(data, counters, st, sampler, uniforms, k_iters, opts, sc, E_loc, trans_loc, seg):
    """k_iters iterations of LPL18 Alg. 1 on ``st`` (``dual.state.DualState``) with
    ``opts`` (SDCAOptions).

    Returns the number done (fewer if ĝ < tolerance). ``uniforms`` holds the sampler's
    two draws per iteration; ``sc`` is a ``dual.blocks.Scratch``; (``E_loc``,
    ``trans_loc``) has room for the largest sequence support; ``seg`` (3 × the largest
    support's coordinates) receives the prox segment when τ > 0 (§3.14).
    """
    data, counters, st, sampler, uniforms, sc, E_loc, trans_loc, seg = borrowed(
        (data, counters, st, sampler, uniforms, sc, E_loc, trans_loc, seg)
    )
    n = data.offsets.shape[0] - 1
    K = data.n_labels
    refresh_every = opts.refresh_every
    done = 0
    for it in range(k_iters):
        t_done = st.iterations[0]
        if refresh_every > 0 and t_done > 0 and t_done % refresh_every == 0:
            _refresh_gaps(data, counters, st, sampler, sc)
        # sample i ∝ the sampler's scores (gaps G_i for sdca-gap, Alg. 2)
        i = samplers.sampler_draw(sampler, uniforms[it, 0], uniforms[it, 1])
        T = data.offsets[i + 1] - data.offsets[i]
        # ν_i = ν_i(w) from the oracle, g_i = D̃(μ_i‖ν_i): the pre-step block gap
        g_i, r_i = blocks.block_gaps(data, counters, st.mu_n, st.mu_e, st.w, sc, i, T, K)
        # the primal direction v of the block, a = ‖v‖², b = ⟨w, v⟩
        a, b = blocks.block_direction(data, st.w, opts.lam_n, sc, i, T, K, E_loc, trans_loc)
        m = 0
        if opts.tau > 0.0:
            m = prox.pack_segment(data, i, st.u, opts.tau, E_loc, trans_loc, seg)
        # γ = argmax over [0, 1] of the block dual (line search, eq. 20)
        gamma = _choose_step(opts, counters, st, sc, i, T, K, g_i, r_i, a, b, seg, m)
        st.last_step[i] = gamma
        # μ_i ← μ_i + γ(ν_i − μ_i), w ← w + γv
        state.commit(data, st, sc, i, T, K, gamma, a, b, E_loc, trans_loc, opts.tau)
        st.gap_sum[0] += g_i - st.gaps[i]
        st.gaps[i] = g_i
        samplers.sampler_feedback(sampler, i, g_i, gamma * math.sqrt(a))
        counters[kernels.UPDATES] += 1
        st.iterations[0] += 1
        done += 1
        if st.gap_sum[0] / n < opts.tolerance:
            break
    return done


def _sampler_param(default: str, kinds: tuple[str, ...]) -> crfopt.Param:
    return crfopt.Param(default, str, f"sampling scheme (§3.3): {', '.join(kinds)}", choices=kinds)


_SHARED = state.PARAMETERS  # initialization, line search, storage, stopping (crfopt.dual)

# Every variant's parameters, in display order; each class keeps the ones that act on it.
_PARAMETERS = {
    "non_uniformity": crfopt.Param(
        0.8,
        float,
        "ρ, weight of the non-uniform sampler part (LPL18 §6.3)",
        low=0.0,
        high=1.0,
    ),
    "initial_gap": _SHARED["initial_gap"],
    "sub_precision": _SHARED["sub_precision"],
    "line_search": crfopt.Param(
        "newton",
        str,
        "step rule (§3.2): newton, golden, fixed (γ = fixed_step), "
        "theory (γ = (1 + R/(λn))⁻¹, R = max_i R_i, LPL18 App. F Thm. 1)",
        choices=LINE_SEARCHES,
    ),
    "fixed_step": crfopt.Param(
        None,
        float,
        "γ of line_search='fixed' (ablation); unset means 0.5, refused with other rules",
        allow_none=True,
        low=0.0,
        high=1.0,
    ),
    **{
        k: _SHARED[k]
        for k in ("start", "max_line_search", "init", "init_score", "init_epsilon", "tolerance")
    },
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
    "dtype": _SHARED["dtype"],
}


def _parameters(sampler: crfopt.Param, *drop: str) -> dict[str, crfopt.Param]:
    out = {"sampler": sampler}
    out.update((k, v) for k, v in _PARAMETERS.items() if k not in drop)
    return out


class SDCA(crfopt.Optimizer):
    """SDCA for CRFs with a Newton line search, uniform-family sampling (LPL18 Alg. 1–2).

    The subclasses :class:`SDCAAdaptive` and :class:`SDCAEdelta` add the sampler
    parameters that only act there; a parameter that does not act on a variant is
    refused (``crfopt.ParameterError`` naming the valid ones).

    Parameters (all overridable)
    ----------------------------
    sampler : which example to visit next (§3.3): uniform, permutation, cyclic.
    sub_precision : line-search tolerance on γ (LPL18 §6.2: 1e-3).
    line_search : newton (safeguarded Newton on f', §3.2), golden (section search on f),
        fixed (γ = fixed_step), theory (the fixed γ = (1 + R/(λn))⁻¹ with R = max_i R_i
        under which LPL18 App. F Thm. 1 / SSZ13 prove linear convergence; tiny, ablation).
    """

    parameters = _parameters(
        _sampler_param("uniform", UNIFORM_SAMPLERS), "non_uniformity", "edelta_refresh"
    )
    capabilities = frozenset({"stochastic", "has_dual", "gap_estimate", "line_search"})
    cost = crfopt.Cost(init_passes=1.0)  # the gibbs μ⁰: one oracle_scores per sequence
    # σ > 0 is prox-SDCA (SSZ13's ℓ1 + ℓ2 case, §3.14): the same method with the primal
    # map S_σ(z)/λ, identical to the ℓ2 arithmetic at σ = 0, so every variant takes it.
    regularizers = ("l2", "l1")

    @classmethod
    def state_memory(cls, problem: crfopt.CRFProblem, params: Mapping[str, Any]) -> int:
        """Bytes of the state :meth:`setup` allocates (``dual.state.state_memory``)."""
        return state.state_memory(problem, params)

    @classmethod
    def decline(
        cls, problem: crfopt.CRFProblem, params: Mapping[str, Any], limits: Any
    ) -> str | None:
        """Decline when the state (:meth:`state_memory`) exceeds the memory limit.

        The limit is the user's ``max_memory`` or, by default, the machine's available
        memory: allocating the dual is what would fail or swap, late and without a word.
        """
        hint = "" if params["dtype"] == "float32" else "dtype=float32 halves the dual"
        return limits.decline_memory(cls.state_memory(problem, params), hint)

    def setup(self) -> None:
        p = self.problem
        self._mu, self._state = state.initial_state(p, self.params)  # μ⁰ counted, w⁰ = ŵ(μ⁰)
        self._sampler = self._make_sampler()
        self._opts = self._options()
        K = p.n_labels
        support = pieces.max_support(p.data)
        self._E_loc = np.zeros((support, K))
        self._trans_loc = np.zeros((K, K))
        self._scratch = blocks.make_scratch(int(p.data.max_len), K)
        self._segment = np.zeros((3, support * K + K * K if self._opts.tau > 0.0 else 0))

    def _make_sampler(self, **extra: Any) -> crfopt.Sampler:
        p = self.problem
        importance = None
        if self.params["sampler"] in ("importance", "gapimp"):
            importance = p.lam + p.radii() / p.n  # L_i = λ + R_i/n (§1.7)
        return crfopt.Sampler(
            self.params["sampler"],
            p.n,
            self.rng,
            initial_gap=self.params["initial_gap"],
            importance=importance,
            **extra,
        )

    def _options(self) -> SDCAOptions:
        p = self.problem
        prm = self.params
        return SDCAOptions(
            lam_n=p.lam * p.n,
            start=Start[prm["start"].upper()],
            sub_precision=prm["sub_precision"],
            max_line_search=prm["max_line_search"],
            tolerance=prm["tolerance"],
            tau=state.threshold_of(p),
            **self._step_rule(),
        )

    def _step_rule(self) -> dict[str, Any]:
        """The options of ``line_search`` and the gap refresh (:class:`SDCAOptions`)."""
        p = self.problem
        prm = self.params
        rule = StepRule[prm["line_search"].upper()]
        fixed = prm["fixed_step"]
        if fixed is not None and rule != StepRule.FIXED:
            raise crfopt.ParameterError(
                f"{type(self).__name__}: parameter 'fixed_step' applies only to "
                f"line_search='fixed', not {prm['line_search']!r}"
            )
        theory = math.nan
        if rule == StepRule.THEORY:
            theory = 1.0 / (1.0 + float(np.max(p.radii())) / (p.lam * p.n))
        refresh = prm["refresh_period"]
        return {
            "rule": rule,
            "fixed_step": (0.5 if fixed is None else fixed) if rule == StepRule.FIXED else math.nan,
            "theory_step": theory,
            "refresh_every": 0 if refresh is None else int(refresh) * p.n,
        }

    @property
    def w(self) -> np.ndarray:
        return self._state.w

    def run_block(self, k: int) -> int:
        uniforms = self._sampler.prepare(k)
        st = self._state
        hits = int(st.cap_hits[0])
        p = self.problem
        done = _sdca_block(
            p.data,
            p.counters.array,
            st,
            self._sampler.state,
            uniforms,
            int(k),
            self._opts,
            self._scratch,
            self._E_loc,
            self._trans_loc,
            self._segment,
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

    @property
    def sampler(self) -> crfopt.Sampler:
        return self._sampler


class SDCAAdaptive(SDCA):
    """SDCA with a non-uniform sampler mixed with uniform draws by ``non_uniformity`` ρ:
    importance (∝ L_i), gap (∝ G_i), gapimp (∝ G_i L_i) or max (argmax G_i) (§3.3)."""

    parameters = _parameters(_sampler_param("gap", ADAPTIVE_SAMPLERS), "edelta_refresh")

    def _make_sampler(self, **extra: Any) -> crfopt.Sampler:
        return super()._make_sampler(non_uniformity=self.params["non_uniformity"], **extra)


class SDCAEdelta(SDCAAdaptive):
    """SDCA with empirical-Δ sampling (VLZ15 Alg. 3) mixed with uniform draws by ρ."""

    parameters = _parameters(_sampler_param("edelta", EDELTA_SAMPLERS))

    def _make_sampler(self, **extra: Any) -> crfopt.Sampler:
        return super()._make_sampler(refresh=self.params["edelta_refresh"], **extra)


_REF = "LPL18 Alg. 1-2, §5; docs/algorithms.md §3.1-3.3, §3.14 (σ > 0: prox-SDCA)"


@crfopt.hookimpl
def crfopt_register_optimizers() -> list[crfopt.OptimizerSpec]:
    def spec(name: str, cls: type[SDCA], summary: str, **defaults: object) -> crfopt.OptimizerSpec:
        return crfopt.OptimizerSpec(name, cls, defaults=defaults, summary=summary, reference=_REF)

    return [
        spec("sdca", SDCA, "SDCA, uniform sampling, Newton line search", sampler="uniform"),
        spec(
            "sdca-perm",
            SDCA,
            "SDCA, a fresh permutation every epoch (SSZ13 §6)",
            sampler="permutation",
        ),
        spec("sdca-cyclic", SDCA, "SDCA, one fixed random order (SSZ13 §8.5)", sampler="cyclic"),
        spec(
            "sdca-importance",
            SDCAAdaptive,
            "SDCA, sampling ∝ smoothness bounds L_i (ρ = 0.8)",
            sampler="importance",
            non_uniformity=0.8,
        ),
        spec(
            "sdca-gap",
            SDCAAdaptive,
            "SDCA, sampling ∝ stale duality gaps (ρ = 0.8) (LPL18)",
            sampler="gap",
            non_uniformity=0.8,
        ),
        spec(
            "sdca-gapimp",
            SDCAAdaptive,
            "SDCA, sampling ∝ gap × L_i (ρ = 0.8) (LPL18 App. F)",
            sampler="gapimp",
            non_uniformity=0.8,
        ),
        spec(
            "sdca-max",
            SDCAAdaptive,
            "SDCA, the largest stale gap (ρ = 0.8) (Dünner et al. 2017)",
            sampler="max",
            non_uniformity=0.8,
        ),
        spec(
            "sdca-edelta",
            SDCAEdelta,
            "SDCA, empirical-Δ sampling (ρ = 0.5) (VLZ15 Alg. 3)",
            sampler="edelta",
            non_uniformity=0.5,
        ),
    ]
