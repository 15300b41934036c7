"""Uncounted evaluation of weights and duals: what the trace reports at checkpoints.

:class:`Evaluator` holds a problem and computes P(w), ∇P(w), the gaps, D(μ) and Viterbi
errors *without touching its counters* (docs/algorithms.md §2: evaluation for the trace is
neither counted nor timed). It lives in the benchmark layer, next to the runner that owns
it, because an optimizer is only ever handed the problem: the problem's own ``primal``,
``gradient``, ``duality_gap``, ``predict`` and ``error`` all count, so "optimizers must not
evaluate for free" holds by construction. The reference optimum, the conformance suite,
the report and the apps (tagging, the estimator) evaluate through this class too.
"""

from __future__ import annotations

import numpy as np

from crfopt.core import duality
from crfopt.core.duality import DualMarginals
from crfopt.core.problem import CRFProblem, decode


class Evaluator:
    """P, ∇P, gaps, D(μ) and Viterbi errors of ``problem``, counting nothing."""

    __slots__ = ("problem",)

    def __init__(self, problem: CRFProblem) -> None:
        self.problem = problem

    def __repr__(self) -> str:
        return f"Evaluator({self.problem!r})"

    # ---------------------------------------------------------------- primal
    def primal(self, w: np.ndarray) -> float:
        """P(w)."""
        return duality.objective(self.problem, w)[0]

    def gradient(self, w: np.ndarray) -> np.ndarray:
        """∇P(w)."""
        return duality.objective(self.problem, w, gradient=True)[1]

    def value_and_gradient(self, w: np.ndarray) -> tuple[float, np.ndarray]:
        """(P(w), ∇P(w)) from one batch pass."""
        return duality.objective(self.problem, w, gradient=True)

    def primal_gap(self, w: np.ndarray) -> float:
        """‖∇P(w)‖² / (2λ) = P(w) - D(ν(w))  (LPL18 eqs. 7–8)."""
        return duality.primal_gap(self.problem, w)

    # ---------------------------------------------------------------- dual
    def dual(self, mu: DualMarginals) -> float:
        """D(μ)."""
        return duality.dual(self.problem, mu)

    def duality_gap(self, w: np.ndarray | None = None, *, mu: DualMarginals | None = None) -> float:
        """P(ŵ(μ)) - D(μ) with ``mu``, else the primal gap of ``w``."""
        return duality.duality_gap(self.problem, w, mu=mu)

    def example_gaps(self, mu: DualMarginals, w: np.ndarray | None = None) -> np.ndarray:
        """Block gaps g_i = D̃(μ_i ‖ ν_i(w)), w = ŵ(μ) by default."""
        return duality.example_gaps(self.problem, mu, w)

    def model_marginals(self, w: np.ndarray) -> tuple[DualMarginals, np.ndarray]:
        """ν(w) for every sequence and the log-partitions."""
        return duality.model_marginals(self.problem, w)

    # ---------------------------------------------------------------- prediction
    def predict(self, w: np.ndarray, split: str = "test") -> np.ndarray:
        """Viterbi labels of every token of ``split``."""
        return decode(self.problem, w, split)

    def errors(self, w: np.ndarray, split: str = "test") -> dict[str, float]:
        """Per-token (Hamming) and per-sequence 0/1 error rates on ``split`` (§1.6).

        Evaluation splits may carry label -1 (a label never seen in training): always wrong.
        """
        kd = self.problem.split_data(split)
        wrong = self.predict(w, split) != kd.y
        per_seq = np.add.reduceat(wrong, kd.offsets[:-1]) > 0
        return {"token": float(wrong.mean()), "sequence": float(per_seq.mean())}

    def error(self, w: np.ndarray, split: str = "test") -> float:
        """Per-token error of Viterbi predictions on ``split``."""
        return self.errors(w, split)["token"]
