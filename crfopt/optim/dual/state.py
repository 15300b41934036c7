"""The state of a dual coordinate ascent method (docs/algorithms.md §3.1, §3.13, §3.14).

What SDCA and its variants (mini-batch, parallel) keep between iterations, and the moves
that change it, so that each variant's file holds its algorithm only:

- :class:`DualState`: the dual storage μ, the weights w = ŵ(μ) kept up to date by
  sparse moves (with u = z(μ)/λ beside them when σ > 0), every sequence's stored block
  gap, entropy and previous step, and running totals (Σ gaps, ‖w‖², Σ entropies) that
  make the gap estimate ĝ and the dual value O(1);
- :func:`initial_state`: μ⁰ (counted, :func:`crfopt.dual.initial_dual`) and the state
  built from it with no further oracle call;
- :func:`commit`: one block's step, μ_i ← μ_i + γ(ν_i − μ_i) and w += γv; :func:`move_w`
  the w part alone (ℓ2: w += γv; prox, τ = σ/λ > 0: u += γv and w = S_τ(u) on v's
  support, §3.14);
- :data:`PARAMETERS`: the parameters of these pieces (initialization, line search,
  storage, stopping), declared once for every method built on them.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np

from crfopt import kernels
from crfopt.core.duality import DualMarginals, dual_direction, entropies, soft_threshold
from crfopt.core.problem import CRFProblem
from crfopt.kernels.jit import jit
from crfopt.optim import pieces
from crfopt.optim.contract import Param
from crfopt.optim.dual import blocks, prox
from crfopt.optim.dual.initialization import INITIALIZATIONS, initial_dual
from crfopt.optim.dual.search import STARTS

__all__ = [
    "PARAMETERS",
    "DualState",
    "block_work",
    "commit",
    "dual_value",
    "gap_estimate",
    "initial_state",
    "move_w",
    "state_memory",
    "warn_cap_hits",
]


class DualState(NamedTuple):
    """What the compiled loop reads and updates in place (one run's state).

    The running totals are 1-element arrays so that compiled code can update them.
    """

    w: np.ndarray  # (d,) = ŵ(μ)
    u: np.ndarray  # (d,) z(μ)/λ, unthresholded (w = S_τ(u), τ = σ/λ); the same array as w at σ = 0
    mu_n: np.ndarray  # (N, K) log node marginals of μ_i (float64 or float32)
    mu_e: np.ndarray  # (N - n, K, K) log edge marginals of μ_i
    gaps: np.ndarray  # (n,) stored pre-step block gaps G_i
    entropies: np.ndarray  # (n,) H̃(μ_i)
    last_step: np.ndarray  # (n,) the example's previous γ (Newton start "previous")
    gap_sum: np.ndarray  # (1,) Σ_i G_i
    w_sq: np.ndarray  # (1,) ‖w‖², kept by ‖w + γv‖² = ‖w‖² + γ²a + 2γb
    entropy_sum: np.ndarray  # (1,) Σ_i H̃(μ_i)
    cap_hits: np.ndarray  # (1,) int64, Newton searches that hit max_line_search
    iterations: np.ndarray  # (1,) int64, iterations done so far (a refresh schedule's clock)


#: The parameters of the shared pieces, in display order (docs/algorithms.md §3.1–3.2).
PARAMETERS: dict[str, Param] = {
    "initial_gap": Param(
        100.0, float, "initial stored gap G_i, the start of ĝ (LPL18 fn. 5)", low=0.0
    ),
    "sub_precision": Param(
        1e-3, float, "newton/golden tolerance on the step γ (LPL18 §6.2)", low=0.0
    ),
    "start": Param(
        "chord",
        str,
        "first Newton point: the root of the chord of f' between 0 and 1 (issue 47), "
        "0.5 (LPL18's) or the example's previous step (LPL18 fn. 4)",
        choices=STARTS,
    ),
    "max_line_search": Param(
        100, int, "derivative evaluations before the line search gives up (§3.2)", low=1
    ),
    "init": Param("gibbs", str, "dual initialization (§3.1, §7.2)", choices=INITIALIZATIONS),
    "init_score": Param(
        10.0, float, "c of the gibbs initialization (REF, = SBA15's OEG-10)", low=0.0
    ),
    "init_epsilon": Param(
        1e-6, float, "ε of the mixture initialization (§7.2 [choice])", low=0.0, high=1.0
    ),
    "tolerance": Param(1e-7, float, "stop when the gap estimate ĝ falls below this (REF)", low=0.0),
    "dtype": Param(
        "float64",
        str,
        "storage of the dual log-marginals (float32 for large K)",
        choices=("float64", "float32"),
    ),
}


def threshold_of(problem: CRFProblem) -> float:
    """τ = σ/λ, the threshold of w = S_τ(u) (0 when the problem has no ℓ1 weight)."""
    return problem.l1 / problem.lam if problem.l1 > 0 else 0.0


def initial_state(
    problem: CRFProblem, params: Mapping[str, Any]
) -> tuple[DualMarginals, DualState]:
    """μ⁰ by ``params["init"]`` (its oracle calls counted) and the state built from it.

    w⁰ = ŵ(μ⁰) and the entropies H̃(μ⁰_i) need no oracle call; with σ > 0,
    u⁰ = z(μ⁰)/λ and w⁰ = S_τ(u⁰) (§3.14). Every stored gap starts at
    ``params["initial_gap"]``, every previous step at 0.5.
    """
    p = problem
    dtype = np.float32 if params["dtype"] == "float32" else np.float64
    mu = initial_dual(
        p, params["init"], c=params["init_score"], epsilon=params["init_epsilon"], dtype=dtype
    )
    tau = threshold_of(p)
    if tau > 0.0:
        u = dual_direction(p, mu) / p.lam
        w = soft_threshold(u, tau)
    else:
        w = p.conjugate_weights(mu)
        u = w  # never read at σ = 0
    gaps = np.full(p.n, params["initial_gap"])
    h = entropies(p, mu)
    state = DualState(
        w=w,
        u=u,
        mu_n=mu.log_nodes,
        mu_e=mu.log_edges,
        gaps=gaps,
        entropies=h,
        last_step=np.full(p.n, 0.5),
        gap_sum=np.array([gaps.sum()]),
        w_sq=np.array([float(w @ w)]),
        entropy_sum=np.array([h.sum()]),
        cap_hits=np.zeros(1, dtype=np.int64),
        iterations=np.zeros(1, dtype=np.int64),
    )
    return mu, state


def block_work(data: Any, K: int) -> int:
    """Float64 entries of one block's work arrays: a :class:`~crfopt.dual.blocks.Scratch`
    of the longest sequence and a direction (E_loc, trans_loc) on the largest support."""
    L = int(data.max_len)
    tables = blocks.SCRATCH_TABLES * (L * K + max(L - 1, 1) * K * K) + 2 * K * K
    return tables + pieces.max_support(data) * K + K * K


def state_memory(problem: CRFProblem, params: Mapping[str, Any], lanes: int = 1) -> int:
    """Bytes that :func:`initial_state` and ``lanes`` blocks' work arrays take.

    The dual log-marginals (N·K node + (N-n)·K² edge entries, LPL18 Table 1: 1.5 GB for
    POS-WSJ in float64) dominate; then two weight vectors (w and ŵ(μ⁰) while it is
    built), the per-sequence arrays (gaps, entropies, steps, a sampler's) and, with
    σ > 0, u and the prox segment.
    """
    itemsize = 4 if params["dtype"] == "float32" else 8
    K, kd = problem.n_labels, problem.data
    support = pieces.max_support(kd)
    segment = problem.dim + 3 * (support * K + K * K) if problem.l1 > 0 else 0
    work = lanes * block_work(kd, K)
    return int(
        problem.dual_memory(itemsize) + 8 * (2 * problem.dim + 8 * problem.n + work + segment)
    )


def gap_estimate(problem: CRFProblem, state: DualState) -> float:
    """ĝ = Σ_i G_i / n, the mean stored block gap (LPL18 §5)."""
    return float(state.gap_sum[0] / problem.n)


def dual_value(problem: CRFProblem, state: DualState) -> float:
    """D_inc = mean H̃(μ_i) - λ/2 ‖w‖², kept up to date in O(1) (REF MonitorDualObjective)."""
    return float(state.entropy_sum[0] / problem.n - 0.5 * problem.lam * state.w_sq[0])


def warn_cap_hits(owner: str, state: DualState, before: int, cap: int) -> None:
    """Warn when Newton searches hit their cap of ``cap`` evaluations since the count
    ``before`` (docs/algorithms.md §7.9: the search returns its last iterate)."""
    hits = int(state.cap_hits[0])
    if hits > before:
        warnings.warn(
            f"{owner} line search hit its cap of {cap} evaluations "
            f"{hits - before} time(s); returned the last iterate (§7.9)",
            RuntimeWarning,
            stacklevel=3,
        )


@jit(inline=True)
def move_w(data, st, i, gamma, a, b, E_loc, trans_loc, tau):
    """w += γv and ‖w‖² += γ²a + 2γb (ℓ2); with τ > 0, u += γv and w = S_τ(u) on v's
    support, ‖w‖² updated by the change there (§3.14): sparse, no O(d) work."""
    if tau > 0.0:
        if gamma != 0.0:
            kernels.add_local(data, i, st.u, gamma, E_loc, trans_loc)
            st.w_sq[0] += prox.threshold_local(data, i, st.u, st.w, tau)
        return
    if gamma != 0.0:
        kernels.add_local(data, i, st.w, gamma, E_loc, trans_loc)
    st.w_sq[0] += gamma * gamma * a + 2.0 * gamma * b


@jit(inline=True)
def commit(data, st, sc, i, T, K, gamma, a, b, E_loc, trans_loc, tau):
    """μ_i ← (1-γ) μ_i + γ ν_i (stored as logs, exact at γ ∈ {0, 1}), w += γv, totals."""
    s = data.offsets[i]
    h_new = blocks.store_mixture(st.mu_n, st.mu_e, sc, s, s - i, T, K, gamma)
    move_w(data, st, i, gamma, a, b, E_loc, trans_loc, tau)
    st.entropy_sum[0] += h_new - st.entropies[i]
    st.entropies[i] = h_new
