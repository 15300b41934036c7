"""Training one model: the single path behind ``crfopt train`` and :meth:`crfopt.CRF.fit`.

``target_gap`` has one meaning everywhere it reaches this function: it is **relative to
P(0)**, i.e. training stops at the first checkpoint whose true duality gap is
≤ ``target_gap`` · P(0), with P(0) = (N/n) log K the objective at w = 0. A relative
target is scale-free: the same setting means the same precision on a corpus of ten or
ten thousand tokens per sequence, and a user need not know P(0) to choose it. (The
runner's :class:`~crfopt.bench.budget.Budget` and ``crfopt compare --target-gap`` keep an
absolute gap; this function converts.)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from crfopt.apps.model import Model, check_label_names
from crfopt.bench.runner import Budget, RunResult, run
from crfopt.core.problem import CRFProblem
from crfopt.optim.contract import OptimizerSpec
from crfopt.optim.registry import Registry


class TrainingError(RuntimeError):
    """Training failed, diverged or was declined: there are no weights worth saving."""


@dataclass(frozen=True)
class Trained:
    """What :func:`train` produced: the saved-to-be model and the run behind it."""

    model: Model
    result: RunResult
    #: the absolute duality-gap target handed to the runner (``None``: no target)
    absolute_target_gap: float | None


def train(
    problem: CRFProblem,
    optimizer: str | OptimizerSpec,
    *,
    passes: float | None = 30.0,
    target_gap: float | None = None,
    seed: int = 0,
    params: Mapping[str, Any] | None = None,
    registry: Registry | None = None,
    on_checkpoint: Callable[[dict[str, Any]], None] | None = None,
    iterations: int | None = None,
    checkpoints: str | Sequence[float] = "default",
    metrics: Sequence[Any] | None = None,
    train_error: bool = True,
) -> Trained:
    """Train ``optimizer`` on ``problem`` and return the model with its run.

    Parameters
    ----------
    passes : float, optional
        Budget in effective passes of the iterations.
    target_gap : float, optional
        Stop once the true duality gap is ≤ ``target_gap`` · P(0) (relative to P(0), see
        the module docstring); only methods with a dual reach it.
    params : mapping, optional
        Overrides of the optimizer's parameters.
    iterations : int, optional
        Budget in the optimizer's iterations as well (whichever limit comes first);
        :class:`crfopt.CRF` maps CRFsuite's ``max_iterations`` of L-BFGS to it.
    checkpoints, metrics, train_error :
        As in :func:`crfopt.run`: when the state is evaluated (the target is checked
        only there), which metric columns are computed (``[]``: none) and whether the
        training error is.

    Raises
    ------
    ValueError
        An invalid budget (non-positive passes or target, or neither given).
    crfopt.ParameterError
        An unknown or ill-typed optimizer parameter.
    TrainingError
        The run failed or diverged.
    crfopt.ModelFormatError
        A label name with whitespace or a control character (``crfopt tag`` could not
        write it as a column).
    """
    if target_gap is not None and not target_gap > 0:
        raise ValueError(f"target_gap must be positive, got {target_gap!r}")
    if problem.label_names:  # refused before training, not after: the model could not hold them
        check_label_names(problem.label_names, "the problem's labels")
    absolute = None if target_gap is None else float(target_gap) * problem.primal_at_zero()
    if absolute == 0.0:
        # one label: P(0) = (N/n) log 1 = 0 = P* (every labeling is the truth), so a
        # relative target asks for a zero gap, which w = 0 has; the runner's budget takes
        # positive numbers only, and the smallest one asks exactly that
        absolute = math.ulp(0.0)
    budget = Budget(passes=passes, iterations=iterations, target_gap=absolute)
    result = run(
        problem,
        optimizer,
        seed=seed,
        params=dict(params or {}),
        budget=budget,
        registry=registry,
        on_checkpoint=on_checkpoint,
        checkpoints=checkpoints,
        metrics=metrics,
        train_error=train_error,
    )
    if result.status in ("failed", "diverged", "skipped") or result.w is None:
        # a skipped run says why (e.g. an ℓ2-only optimizer on a problem with σ > 0)
        why = (
            result.meta.get("error_summary")
            or result.meta.get("skip_reason")
            or "non-finite weights"
        )
        raise TrainingError(f"training {result.status}: {why}")
    info = {
        **result.summary(),
        "problem": problem.name,
        "lam": problem.lam,
        "l1": problem.l1,
        "target_gap_relative": target_gap,
    }
    return Trained(Model.from_problem(problem, result.w, info), result, absolute)
