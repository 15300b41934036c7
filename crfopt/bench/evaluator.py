"""Uncounted evaluation of weights and duals: what the trace reports at checkpoints.

:class:`Evaluator` holds a problem and computes P(w), ∇P(w), the gaps, D(μ) and Viterbi
errors *without touching its counters* (docs/algorithms.md §2: evaluation for the trace is
neither counted nor timed). It lives in the benchmark layer, next to the runner that owns
it, because an optimizer is only ever handed the problem: the problem's own ``primal``,
``gradient``, ``duality_gap``, ``predict`` and ``error`` all count, so "optimizers must not
evaluate for free" holds by construction. The reference optimum, the conformance suite,
the report and the apps (tagging, the estimator) evaluate through this class too.

Metric plugins (``crfopt_register_metrics``, docs/plugins.md "Adding a metric") are
evaluated here as well: :meth:`Evaluator.metrics` hands each due metric a
:class:`Checkpoint` (the problem, read-only weights, predictions decoded once per
checkpoint for all metrics) and collects one float per metric. A metric that raises gets
a null and its error is reported, never propagated: a broken metric must not fail the run
it measures.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from crfopt.core import duality
from crfopt.core.duality import DualMarginals
from crfopt.core.problem import CRFProblem, decode


class MetricWarning(UserWarning):
    """A metric plugin failed in a run; its cells are null, the run is unaffected."""


class Evaluator:
    """P, ∇P, gaps, D(μ) and Viterbi errors of ``problem``, counting nothing."""

    __slots__ = ("problem",)

    def __init__(self, problem: CRFProblem) -> None:
        self.problem = problem

    def __repr__(self) -> str:
        return f"Evaluator({self.problem!r})"

    # ---------------------------------------------------------------- primal
    # P and ∇P reuse the problem's last pass when it was at this very w (duality.objective)
    def primal(self, w: np.ndarray) -> float:
        """P(w)."""
        return duality.objective(self.problem, w, reuse=True)[0]

    def gradient(self, w: np.ndarray) -> np.ndarray:
        """∇P(w)."""
        return duality.objective(self.problem, w, gradient=True, reuse=True)[1]

    def value_and_gradient(self, w: np.ndarray) -> tuple[float, np.ndarray]:
        """(P(w), ∇P(w)) from one batch pass."""
        return duality.objective(self.problem, w, gradient=True, reuse=True)

    def primal_gap(self, w: np.ndarray) -> float:
        """‖∇P(w)‖² / (2λ) = P(w) - D(ν(w))  (LPL18 eqs. 7–8)."""
        return self.primal_and_gap(w)[1]

    def primal_and_gap(self, w: np.ndarray) -> tuple[float, float]:
        """(P(w), P(w) - D(ν(w))) from one batch pass."""
        value, grad = self.value_and_gradient(w)
        return value, duality.gap_from_gradient(self.problem, w, grad)

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

    # ---------------------------------------------------------------- metrics
    def metrics(
        self,
        w: np.ndarray,
        specs: Iterable[Any],
        *,
        checkpoint: int,
        final: bool,
    ) -> tuple[dict[str, float], dict[str, str]]:
        """The metrics of ``specs`` due at checkpoint number ``checkpoint`` of a run.

        ``specs`` are :class:`crfopt.MetricSpec`; one is computed when
        ``spec.due(checkpoint, final)`` (cheap: always; expensive: every k-th and the
        last checkpoint). Returns ``({name: value}, {name: error})``: a metric that is
        not due is absent (its column stays null), one that raised or returned a
        non-number is absent from the values and named in the errors.
        """
        point = Checkpoint(self, w, checkpoint, final)
        values: dict[str, float] = {}
        errors: dict[str, str] = {}
        for spec in specs:
            if not spec.due(checkpoint, final):
                continue
            try:
                value = spec.compute(point)
                if isinstance(value, (bool, np.bool_)) or not isinstance(
                    value, (int, float, np.integer, np.floating)
                ):
                    raise TypeError(f"compute() returned {type(value).__name__}, expected a float")
                values[spec.name] = float(value)
            except Exception as exc:  # a broken metric must not fail the run
                errors[spec.name] = f"{type(exc).__name__}: {exc}"
        return values, errors


class Checkpoint:
    """What a metric sees at one checkpoint, uncounted and read-only.

    Attributes
    ----------
    problem : CRFProblem
        The run's problem (use only uncounted access: ``split_data``, ``label_names``,
        ``splits``; its ``primal``/``oracle``/``predict`` count).
    w : ndarray
        The weights at this checkpoint, read-only (a view: the optimizer's state cannot
        be changed through it).
    index : int
        The checkpoint's number in the run (0 = the starting point).
    final : bool
        Whether this is the run's last checkpoint.
    evaluator : Evaluator
        For P(w), gaps and the like, uncounted.
    """

    __slots__ = ("_predictions", "evaluator", "final", "index", "problem", "w")

    def __init__(self, evaluator: Evaluator, w: np.ndarray, index: int, final: bool) -> None:
        view = np.asarray(w).view()
        view.flags.writeable = False
        self.evaluator = evaluator
        self.problem = evaluator.problem
        self.w = view
        self.index = int(index)
        self.final = bool(final)
        self._predictions: dict[str, np.ndarray] = {}

    def __repr__(self) -> str:
        return f"Checkpoint(index={self.index}, final={self.final}, problem={self.problem.name!r})"

    def predict(self, split: str = "test") -> np.ndarray:
        """Viterbi labels of every token of ``split`` (decoded once per checkpoint)."""
        if split not in self._predictions:
            labels = self.evaluator.predict(self.w, split)
            labels.flags.writeable = False
            self._predictions[split] = labels
        return self._predictions[split]

    def gold(self, split: str = "test") -> np.ndarray:
        """True labels of every token of ``split`` (-1: a label unseen in training)."""
        return self.problem.split_data(split).y

    def offsets(self, split: str = "test") -> np.ndarray:
        """Sequence boundaries of ``split``: sequence i is tokens offsets[i]:offsets[i+1]."""
        return self.problem.split_data(split).offsets
