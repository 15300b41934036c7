"""Data a problem derives from its training split once: the ground-truth features
Σ_i F(x_i, y_i) (docs/algorithms.md §1.3) and the radii R_i of §1.7."""

from __future__ import annotations

import numpy as np

from crfopt import kernels
from crfopt.kernels.arrays import KernelData

__all__ = ["radii", "truth_features"]


def truth_features(kd: KernelData, dim: int) -> np.ndarray:
    """Σ_i F(x_i, y_i) over the sequences of ``kd`` (a read-only vector of length ``dim``)."""
    K = int(kd.n_labels)
    A_tot = int(kd.n_kernel_attributes)
    out = np.empty(dim)
    if kd.dense:
        onehot = np.zeros((len(kd.y), K))
        onehot[np.arange(len(kd.y)), kd.y] = 1.0
        out[: A_tot * K] = (kd.X.T @ onehot).ravel()
    else:
        # Σ_i F(x_i, y_i), emission block: each stored entry adds its value at
        # (attribute, label of its token) — one bincount over the flat (a, k) index.
        token_label = np.repeat(kd.y, np.diff(kd.indptr))
        flat = kd.indices.astype(np.int64) * K + token_label
        out[: A_tot * K] = np.bincount(flat, weights=kd.values, minlength=A_tot * K)
    trans = np.zeros((K, K))
    same = np.ones(len(kd.y) - 1, dtype=bool)
    same[kd.offsets[1:-1] - 1] = False  # no edge across sequence boundaries
    np.add.at(trans, (kd.y[:-1][same], kd.y[1:][same]), 1.0)
    out[A_tot * K :] = trans.ravel()
    out.setflags(write=False)
    return out


def radii(kd: KernelData) -> np.ndarray:
    """R_i = ‖F(x_i, y_i) − F(x_i, z^{T_i})‖² of every sequence, with §1.7's candidate
    labeling z (the first label absent from y_i, else its rarest)."""
    K = int(kd.n_labels)
    n = len(kd.offsets) - 1
    R = np.empty(n)
    trans_truth = np.empty((K, K))
    for i in range(n):
        s, e = int(kd.offsets[i]), int(kd.offsets[i + 1])
        y = kd.y[s:e]
        T = e - s
        counts = np.bincount(y, minlength=K)
        absent = np.flatnonzero(counts == 0)
        z = int(absent[0]) if len(absent) else int(np.argmin(counts))
        weights = np.zeros((T, K))
        weights[np.arange(T), y] += 1.0
        weights[:, z] -= 1.0
        lo, hi = kernels.support_bounds(kd, i)
        E_loc = np.empty((hi - lo, K))
        kernels.expected_emission(kd, i, weights, E_loc)
        kernels.truth_transitions(kd, i, trans_truth)
        trans_truth[z, z] -= T - 1
        R[i] = float(np.sum(E_loc**2) + np.sum(trans_truth**2))
    return R
