"""Primal and dual objectives of a problem as functions of (problem, w) and (problem, μ).

docs/algorithms.md §1.3, LPL18 eqs. 3, 7–18: the dual variables μ (:class:`DualMarginals`), the
conjugate maps ŵ(μ) and α̂(w) = ν(w), the dual D(μ), the block gaps g_i and the duality
gaps. None of these counts work: they are what the benchmark evaluates at checkpoints
(``crfopt.bench.evaluator.Evaluator``) and what tests check against.

Two kinds live here, and the difference matters for fair comparisons:

- no inference (linear maps and entropies of given marginals): :func:`new_dual`,
  :func:`expected_features`, :func:`conjugate_weights`, :func:`entropies`, :func:`dual`.
  Dual optimizers use these freely — ŵ(μ⁰) and H̃(μ⁰) of an initial dual cost no oracle
  call — and ``CRFProblem.conjugate_weights`` / ``CRFProblem.dual`` delegate here.
- uncounted inference (full forward–backward or full-batch sums): :func:`objective`,
  :func:`model_marginals`, :func:`example_gaps`, :func:`primal_gap`,
  :func:`duality_gap`. They are *not* reachable from the problem object an optimizer
  is handed; the evaluator uses them, and an optimizer that imports them anyway is
  caught by the audit cell of the kernel data (``crfopt.testing``'s counting check).
  The problem's own ``primal``/``gradient``/``duality_gap`` add their charge to
  :func:`objective`.

With an ℓ1 weight σ > 0 (the elastic net, docs/algorithms.md §1.9) the regularizer is
g(w) = λ/2‖w‖² + σ‖w‖₁, whose conjugate is g*(z) = ‖S_σ(z)‖²/(2λ) with S_σ the soft
threshold; so ŵ(μ) = S_σ(z(μ))/λ and D(μ) = (1/n)ΣH̃(μ_i) − ‖S_σ(z(μ))‖²/(2λ), with
z(μ) = (1/n)(Σ F(x_i, y_i) − Σ E_{μ_i}F). σ = 0 takes the pure-ℓ2 code path unchanged
(bit for bit: the seeded traces of tests/test_epoch_traces.py depend on it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from crfopt.kernels.threads import batch_threads, one_blas_thread
from crfopt.kernels.twin import impl as _impl

if TYPE_CHECKING:  # the problem module imports this one
    from crfopt.core.problem import CRFProblem


@dataclass
class DualMarginals:
    """Log-marginals μ_i of every training sequence: the dual variables of §1.3.

    ``log_nodes`` has one row per token (N × K); ``log_edges`` one K × K table per edge
    ((N - n) × K × K), sequence ``i`` owning ``offsets[i]-i : offsets[i+1]-i-1``.
    """

    log_nodes: np.ndarray
    log_edges: np.ndarray
    offsets: np.ndarray = field(repr=False)

    def sequence(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """Views (log node T×K, log edge (T-1)×K×K) of sequence ``i``."""
        s, e = int(self.offsets[i]), int(self.offsets[i + 1])
        return self.log_nodes[s:e], self.log_edges[s - i : e - i - 1]

    def copy(self) -> DualMarginals:
        return DualMarginals(self.log_nodes.copy(), self.log_edges.copy(), self.offsets)

    @property
    def nbytes(self) -> int:
        return int(self.log_nodes.nbytes + self.log_edges.nbytes)


# ------------------------------------------------------------------ no inference
def new_dual(problem: CRFProblem, dtype: Any = np.float64) -> DualMarginals:
    """Uninitialized dual storage of the right shape."""
    K = problem.n_labels
    return DualMarginals(
        np.empty((problem.n_tokens, K), dtype=dtype),
        np.empty((problem.n_tokens - problem.n, K, K), dtype=dtype),
        problem.data.offsets,
    )


def _check_dual(problem: CRFProblem, mu: DualMarginals) -> tuple[np.ndarray, np.ndarray]:
    K = problem.n_labels
    # float32 storage is read as is (no float64 copy of a multi-GiB dual).
    dtype = np.float32 if mu.log_nodes.dtype == np.float32 else np.float64
    ln = np.ascontiguousarray(mu.log_nodes, dtype=dtype)
    le = np.ascontiguousarray(mu.log_edges, dtype=dtype)
    if ln.shape != (problem.n_tokens, K) or le.shape != (problem.n_tokens - problem.n, K, K):
        raise ValueError("dual marginals do not match this problem's shape")
    return ln, le


def expected_features(problem: CRFProblem, mu: DualMarginals) -> np.ndarray:
    """Σ_i E_{μ_i}[F] as a d-vector."""
    ln, le = _check_dual(problem, mu)
    out = np.empty(problem.dim)
    with batch_threads():
        _impl.batch_expected_features(problem.data, problem.transpose, ln, le, out)
    return out


def soft_threshold(z: np.ndarray, sigma: float) -> np.ndarray:
    """S_σ(z) = sign(z) · max(|z| − σ, 0), entrywise (a new array)."""
    return np.sign(z) * np.maximum(np.abs(z) - sigma, 0.0)


def dual_direction(problem: CRFProblem, mu: DualMarginals) -> np.ndarray:
    """z(μ) = (1/n)(Σ_i F(x_i, y_i) − Σ_i E_{μ_i}[F]); ŵ(μ) = S_σ(z)/λ."""
    return (problem.truth_features - expected_features(problem, mu)) / problem.n


def conjugate_weights(problem: CRFProblem, mu: DualMarginals) -> np.ndarray:
    """ŵ(μ) = S_σ(F̄ - (1/n) Σ_i E_{μ_i}[F]) / λ  (LPL18 eq. 16 when σ = 0)."""
    if problem.l1 == 0:  # the ℓ2 expression as it always was (bit-identical traces)
        return (problem.truth_features - expected_features(problem, mu)) / (problem.lam * problem.n)
    return soft_threshold(dual_direction(problem, mu), problem.l1) / problem.lam


def entropies(problem: CRFProblem, mu: DualMarginals) -> np.ndarray:
    """H̃(μ_i) for every sequence (eq. 18, chain-rule form of §5.3)."""
    ln, le = _check_dual(problem, mu)
    out = np.empty(problem.n)
    _impl.batch_entropy(problem.data, ln, le, out)
    return out


def dual(problem: CRFProblem, mu: DualMarginals) -> float:
    """D(μ) = (1/n) Σ_i H̃(μ_i) - λ/2 ‖ŵ(μ)‖²  (LPL18 eqs. 3, 16, 18).

    With σ > 0, λ/2 ‖ŵ(μ)‖² = ‖S_σ(z(μ))‖²/(2λ) = g*(z(μ)): the same expression.
    """
    w_hat = conjugate_weights(problem, mu)
    with one_blas_thread():  # a 2-thread dot at every checkpoint: kernels/threads.py
        norm2 = float(w_hat @ w_hat)
    return float(entropies(problem, mu).mean() - 0.5 * problem.lam * norm2)


# ------------------------------------------------------------------ uncounted inference
def objective(
    problem: CRFProblem, w: np.ndarray, *, gradient: bool = False, reuse: bool = False
) -> tuple[float, np.ndarray]:
    """(P(w), ∇(L + λ/2‖·‖²)(w)) by one full batch, counting nothing.

    The value includes σ‖w‖₁; the gradient (empty unless asked) is the smooth part's
    only, ∇P(w) when σ = 0 (σ‖·‖₁ has no gradient; OWL-QN builds its pseudo-gradient
    from this one, docs/algorithms.md §3.12).

    ``reuse``: return the last pass with a gradient over this problem's data instead
    of computing it again, when it was at exactly this ``w`` with the same λ and σ (the
    numbers are the same: same function, same input). A batch method's last counted
    pass is at its iterate, so the runner's checkpoint after one of its iterations
    costs no pass (it was a fifth of a 700-sentence ℓ1 fit's time). Only uncounted
    evaluation reuses: a counted pass always computes, so the optimizer's time is
    never shortened by work the evaluation did.
    """
    w = problem.layout.check(w)
    if reuse:
        last = _last_pass(problem, w)
        if last is not None:
            value, grad = last
            return value, grad.copy() if gradient else np.empty(0)
    n = problem.n
    grad = np.empty(problem.dim) if gradient else np.empty(0)
    with batch_threads():
        total = _impl.batch_value_grad(problem.data, problem.transpose, w, gradient, grad)
        # w @ w under the same one-thread BLAS limit: a 2-thread ddot left OpenBLAS's
        # pool spinning on both cores while the parallel kernels ran next (CoNLL-2000's
        # 2-thread pass: 190 ms, 136 ms with this dot product held to one thread)
        value = 0.5 * problem.lam * float(w @ w) + total / n
    if problem.l1:
        value += problem.l1 * float(np.abs(w).sum())
    if gradient:  # (grad - truth)/n + λw, in parallel (a tenth of a pass on CoNLL-2000)
        _impl.finish_gradient(grad, problem.truth_features, w, problem.lam, n)
        _remember_pass(problem, w, value, grad)
    return value, grad


def _pass_owner(problem: CRFProblem) -> CRFProblem:
    """The problem whose data a run's copy shares (the runner evaluates the original)."""
    return problem._origin if problem._origin is not None else problem


def _remember_pass(problem: CRFProblem, w: np.ndarray, value: float, grad: np.ndarray) -> None:
    # one tuple, replaced whole: a reader in another thread sees an old or a new entry
    entry = (problem.lam, problem.l1, w.copy(), value, grad.copy())
    _pass_owner(problem)._set_cache("_last_pass", entry)


def _last_pass(problem: CRFProblem, w: np.ndarray) -> tuple[float, np.ndarray] | None:
    entry = getattr(_pass_owner(problem), "_last_pass", None)
    if entry is None:
        return None
    lam, l1, w_then, value, grad = entry
    if lam != problem.lam or l1 != problem.l1 or not np.array_equal(w_then, w):
        return None
    return value, grad


def model_marginals(problem: CRFProblem, w: np.ndarray) -> tuple[DualMarginals, np.ndarray]:
    """α̂(w) = ν(w) for every sequence and the log-partitions (uncounted)."""
    w = problem.layout.check(w)
    mu = new_dual(problem)
    log_z = np.empty(problem.n)
    with batch_threads():
        _impl.batch_log_marginals(problem.data, w, mu.log_nodes, mu.log_edges, log_z)
    return mu, log_z


def example_gaps(problem: CRFProblem, mu: DualMarginals, w: np.ndarray | None = None) -> np.ndarray:
    """g_i = D̃(μ_i ‖ ν_i(w)) with w = ŵ(μ) by default (LPL18 eqs. 10–11)."""
    if w is None:
        w = conjugate_weights(problem, mu)
    nu, _ = model_marginals(problem, w)
    ln, le = _check_dual(problem, mu)
    out = np.empty(problem.n)
    _impl.batch_kl(problem.data, ln, le, nu.log_nodes, nu.log_edges, out)
    # Rounding can leave tiny negative KLs; anything worse is a bug (§5.6).
    bad = out < -1e-8 * np.maximum(1.0, np.abs(out).max(initial=0.0))
    if np.any(bad):
        raise FloatingPointError(f"negative block gaps for sequences {np.flatnonzero(bad)[:5]}")
    return np.maximum(out, 0.0)


def gap_from_gradient(problem: CRFProblem, w: np.ndarray, grad: np.ndarray) -> float:
    """gap_P(w) = P(w) − D(ν(w)) from w and the smooth gradient at w (no inference).

    With ∇L = grad − λw the loss gradient, ν(w) has z(ν(w)) = −∇L, and
    (1/n)ΣH̃(ν_i(w)) = L(w) − ⟨w, ∇L⟩, so

        gap_P(w) = ⟨w, ∇L⟩ + λ/2‖w‖² + σ‖w‖₁ + ‖S_σ(−∇L)‖²/(2λ).

    Computed as the equal sum of non-negative terms (v = −∇L, clip to [−σ, σ])

        ‖λw − S_σ(v)‖²/(2λ) + Σ_j (σ|w_j| − w_j · clip(v_j)),

    which has no cancellation between large terms near the optimum (where the first
    form loses the gap to rounding) and is never negative. The first term is
    λ/2 ‖w − ŵ(ν(w))‖². σ = 0 gives ‖∇P(w)‖²/(2λ) (LPL18 eqs. 7–8), computed as always.
    """
    lam, sigma = problem.lam, problem.l1
    if sigma == 0:
        with one_blas_thread():  # the checkpoint's only dot: 2 threads made it 10× slower
            return float(grad @ grad) / (2.0 * lam)
    # the same arithmetic as λw − S_σ(v) and σ|w| − w·clip(v), in four buffers instead
    # of a dozen temporaries (it is a checkpoint's whole cost when the pass is reused)
    lam_w = lam * w
    v = lam_w - grad  # −∇L
    t = np.abs(v)
    t -= sigma
    np.maximum(t, 0.0, out=t)
    np.copysign(t, v, out=t)  # S_σ(v)
    lam_w -= t  # r
    np.clip(v, -sigma, sigma, out=v)
    v *= w
    np.abs(w, out=t)
    t *= sigma
    t -= v  # σ|w_j| − w_j·clip(v_j) ≥ 0
    with one_blas_thread():  # 16 ms on 2 threads against 1.2 ms on 1 (68k entries, load 6)
        norm2 = float(lam_w @ lam_w)
    return norm2 / (2.0 * lam) + float(t.sum())


def primal_gap(problem: CRFProblem, w: np.ndarray) -> float:
    """gap_P(w) = P(w) - D(ν(w)) (LPL18 eqs. 7–8; ‖∇P(w)‖² / (2λ) when σ = 0), uncounted."""
    w = problem.layout.check(w)
    g = objective(problem, w, gradient=True)[1]
    return gap_from_gradient(problem, w, g)


def duality_gap(
    problem: CRFProblem, w: np.ndarray | None = None, *, mu: DualMarginals | None = None
) -> float:
    """True duality gap (uncounted).

    With ``mu``: P(ŵ(μ)) - D(μ) (the mean block gap (G3) when σ = 0). With only ``w``:
    the primal gap P(w) - D(ν(w)) (‖∇P(w)‖² / (2λ) when σ = 0, G2).
    """
    if mu is not None:
        w_hat = conjugate_weights(problem, mu)
        return float(objective(problem, w_hat)[0] - dual(problem, mu))
    if w is None:
        raise ValueError("give w (primal gap) or mu (dual gap)")
    return primal_gap(problem, w)
