"""The weight layout (docs/algorithms.md §1.1): where each block of w lives in the flat vector.

Weights are flat float64 vectors of length ``d = K (A_k + K)``, where ``A_k`` is the number
of stored emission rows: the A embedding attributes plus the three bias attributes
(count, first, last) when the problem has a bias block. The emission and bias blocks are
stored attribute-major — attribute ``a``'s K weights are contiguous, so one token's
scores read contiguous rows — followed by the K × K transition block. :class:`WeightLayout`
turns that into the paper's K × A, K × 3 and K × K views and back; it knows sizes only,
no data.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

#: bias attributes per label: count, first, last
N_BIAS = 3


@dataclass(frozen=True)
class WeightBlocks:
    """Views of a flat weight vector in the paper's layout (docs/algorithms.md §1.1).

    ``emission`` is K × A, ``bias`` K × 3 (count, first, last) or ``None`` when the
    problem has no bias block, ``transition`` K × K. Writing to a view writes to ``w``.
    """

    emission: np.ndarray
    bias: np.ndarray | None
    transition: np.ndarray


@dataclass(frozen=True)
class WeightLayout:
    """Sizes of the weight vector: K labels, A embedding attributes, bias block or not."""

    n_labels: int
    n_attributes: int
    bias: bool

    @property
    def n_kernel_attributes(self) -> int:
        """A plus the bias attributes: rows of the stored emission+bias block."""
        return self.n_attributes + (N_BIAS if self.bias else 0)

    @property
    def transition_offset(self) -> int:
        """Index of the first transition weight (the emission+bias block comes first)."""
        return self.n_kernel_attributes * self.n_labels

    @property
    def dim(self) -> int:
        """d = K (A + 3 + K), or K (A + K) without bias."""
        return self.transition_offset + self.n_labels**2

    def zeros(self) -> np.ndarray:
        """w = 0."""
        return np.zeros(self.dim)

    def check(self, w: Any) -> np.ndarray:
        """``w`` as a contiguous float64 vector of length d, or a clear error."""
        a = np.asarray(w, dtype=np.float64)
        if a.shape != (self.dim,):
            raise ValueError(
                f"weights must be a flat vector of length d={self.dim}, got shape {a.shape}"
            )
        return np.ascontiguousarray(a)

    def unpack(self, w: np.ndarray) -> WeightBlocks:
        """K × A emission, K × 3 bias and K × K transition views of ``w``."""
        if w.shape != (self.dim,):
            raise ValueError(f"expected a vector of length {self.dim}, got {w.shape}")
        K, A = self.n_labels, self.n_attributes
        EB = w[: self.transition_offset].reshape(self.n_kernel_attributes, K)
        return WeightBlocks(
            emission=EB[:A].T,
            bias=EB[A:].T if self.bias else None,
            transition=w[self.transition_offset :].reshape(K, K),
        )

    def pack(
        self, emission: np.ndarray, bias: np.ndarray | None, transition: np.ndarray
    ) -> np.ndarray:
        """Inverse of :meth:`unpack`."""
        w = self.zeros()
        blocks = self.unpack(w)
        blocks.emission[...] = emission
        if self.bias:
            if bias is None:
                raise ValueError("this problem has a bias block")
            blocks.bias[...] = bias  # type: ignore[index]
        elif bias is not None:
            raise ValueError("this problem has no bias block")
        blocks.transition[...] = transition
        return w
