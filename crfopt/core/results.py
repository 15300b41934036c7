"""What the counted oracles return (docs/algorithms.md §1.5, §2): one oracle call's
log-partition, loss and log-marginals, a forward call's, and a sequence's local gradient."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from crfopt.core.problem import CRFProblem

__all__ = ["ForwardResult", "LocalGradient", "OracleResult"]


@dataclass(frozen=True)
class LocalGradient:
    """∇ℓ_i(w) restricted to the attributes active in sequence ``i`` (§1.5).

    ``emission[j]`` is the gradient row of attribute ``attributes[j]`` (bias attributes
    included, as ids ``A, A+1, A+2``), ``transition`` the K × K block.
    """

    attributes: np.ndarray
    emission: np.ndarray
    transition: np.ndarray

    def to_dense(self, problem: CRFProblem) -> np.ndarray:
        g = np.zeros(problem.dim)
        K = problem.n_labels
        E = g[: problem.layout.transition_offset].reshape(-1, K)
        E[self.attributes] = self.emission
        g[problem.layout.transition_offset :] = self.transition.ravel()
        return g


@dataclass(frozen=True)
class OracleResult:
    """What one oracle call returns: log Z_i, ℓ_i(w) and the log-marginals of ν_i(w)."""

    log_partition: float
    nll: float
    log_unary: np.ndarray
    log_pairwise: np.ndarray
    gradient: LocalGradient | None = None

    @property
    def unary(self) -> np.ndarray:
        """Node marginal probabilities, T × K."""
        return np.exp(self.log_unary)

    @property
    def pairwise(self) -> np.ndarray:
        """Edge marginal probabilities, (T-1) × K × K; entry (t, k, l) is P(y_t=k, y_{t+1}=l)."""
        return np.exp(self.log_pairwise)


@dataclass(frozen=True)
class ForwardResult:
    """What one forward-only call returns."""

    log_partition: float
    nll: float
