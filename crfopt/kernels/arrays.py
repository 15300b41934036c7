"""The array bundle that oracle kernels read: one split of a problem, ready for numba.

A :class:`KernelData` is a namedtuple of read-only arrays (plus one writable audit cell),
so numba compiles kernels against it like any other argument and plugins can pass
``problem.data`` straight into their own compiled loops.

Layout (docs/algorithms.md §1.1, with the bias block as three virtual attributes):

* tokens of all sequences are concatenated; sequence ``i`` owns tokens
  ``offsets[i]:offsets[i+1]`` and edges ``offsets[i]-i : offsets[i+1]-i-1``;
* attributes ``0..A-1`` are the embedding, ``A, A+1, A+2`` the bias block (always-on,
  first token, last token) when the problem has a bias; ``n_kernel_attributes`` counts
  both (the problem's ``n_attributes`` is A alone, its ``n_kernel_attributes`` this count);
* dense problems keep ``X`` (tokens × attributes); sparse ones a CSR matrix over tokens
  (``indptr``, ``indices``, ``values``) whose duplicate ids within a token were summed;
* ``support[support_ptr[i]:support_ptr[i+1]]`` are the sorted distinct attributes of
  sequence ``i`` and ``local[p]`` is the position of ``indices[p]`` in that list, so a
  per-sequence gradient is a small ``|S_i| × K`` matrix (docs/algorithms.md §1.5). Dense
  problems use the full range ``0..n_kernel_attributes-1`` for every sequence.
"""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

KernelData = namedtuple(
    "KernelData",
    [
        "offsets",  # int64 (n+1,)
        "y",  # int64 (N,)
        "dense",  # bool
        "X",  # float64 (N, n_kernel_attributes) if dense, else (0, 0)
        "indptr",  # int64 (N+1,) if sparse, else (1,)
        "indices",  # int32 (nnz,)
        "values",  # float64 (nnz,)
        "local",  # int32 (nnz,)
        "support_ptr",  # int64 (n+1,)
        "support",  # int32
        "n_labels",  # int64
        "n_kernel_attributes",  # int64, A + the 3 bias attributes (A without a bias)
        "max_len",  # int64
        "audit",  # int64 (1,): forward-backward executions, counted or not (writable)
    ],
)


ChainWork = namedtuple(
    "ChainWork",
    [
        "u",  # (max_len, K) exp(θ - m_t)
        "m",  # (max_len,) row maxima
        "E",  # (K, K) exp(W_T - max)
        "ET",  # (K, K) its transpose
        "alpha",  # (max_len, K) scaled forward messages
        "beta",  # (max_len, K) scaled backward messages
        "V",  # (max_len, K)
        "c",  # (max_len,) normalizers
        "S",  # (K, K) summed outer products
        "mT",  # (1,) max W_T
    ],
)
ChainWork.__doc__ = """Scratch tables of one chain's forward(-backward) pass (``chain_work``).

Offered as ``crfopt.pieces.ChainWork``. Passed as the optional ``work`` of
``kernels.forward_scores`` / ``oracle_sums_scores`` (and ``pieces.lipschitz_backtrack``),
it spares the kernel allocating its ten working arrays at every call, which an optimizer
that calls them once per iteration pays for: about 0.3 µs of OCR's 2.9 µs forward call.
Contents are overwritten by every call."""


def chain_work(max_len: int, n_labels: int) -> ChainWork:
    """A :class:`ChainWork` for chains of up to ``max_len`` tokens and ``n_labels`` labels."""
    T, K = int(max_len), int(n_labels)
    return ChainWork(
        np.empty((T, K)),
        np.empty(T),
        np.empty((K, K)),
        np.empty((K, K)),
        np.empty((T, K)),
        np.empty((T, K)),
        np.empty((T, K)),
        np.empty(T),
        np.empty((K, K)),
        np.empty(1),
    )


@dataclass(frozen=True)
class Sequences:
    """Labelled sequences as they come out of a reader, before the bias attributes.

    Parameters
    ----------
    lengths : int array (n,)
        Length of every sequence (all ≥ 1).
    labels : int array (N,)
        Label id of every token, in ``0..K-1``.
    dense : float array (N, A), optional
        Dense embeddings (OCR pixels).
    indptr, indices, values : arrays, optional
        Sparse embeddings as CSR over tokens; ``values`` defaults to ones.
    """

    lengths: np.ndarray
    labels: np.ndarray
    dense: np.ndarray | None = None
    indptr: np.ndarray | None = None
    indices: np.ndarray | None = None
    values: np.ndarray | None = None

    @property
    def n(self) -> int:
        return len(self.lengths)

    @property
    def n_tokens(self) -> int:
        return len(self.labels)


def _readonly(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    a.setflags(write=False)
    return a


def merge_duplicates(
    indptr: np.ndarray, indices: np.ndarray, values: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sort ids within each token and sum duplicates (docs/algorithms.md §1.1 [choice]).

    Values are summed so that an attribute listed twice counts as multiplicity 2 in the
    scores and in the features alike.
    """
    n_rows = len(indptr) - 1
    if len(indices) == 0:
        return indptr.astype(np.int64), indices.astype(np.int32), values.astype(np.float64)
    # Featurizers usually emit each token's ids sorted and distinct: check that in O(nnz)
    # and skip the sort, which dominates the construction of large problems otherwise.
    step = np.diff(indices)
    row_start = np.zeros(len(indices), dtype=bool)
    row_start[indptr[:-1][np.diff(indptr) > 0]] = True
    if np.all((step > 0) | row_start[1:]):
        return indptr.astype(np.int64), indices.astype(np.int32), values.astype(np.float64)
    row = np.repeat(np.arange(n_rows, dtype=np.int64), np.diff(indptr))
    order = np.lexsort((indices, row))
    row, idx, val = row[order], indices[order], values[order]
    keep = np.ones(len(idx), dtype=bool)
    keep[1:] = (row[1:] != row[:-1]) | (idx[1:] != idx[:-1])
    group = np.cumsum(keep) - 1
    merged = np.zeros(int(keep.sum()), dtype=np.float64)
    np.add.at(merged, group, val)
    new_row = row[keep]
    new_ptr = np.zeros(n_rows + 1, dtype=np.int64)
    np.add.at(new_ptr, new_row + 1, 1)
    return np.cumsum(new_ptr), idx[keep].astype(np.int32), merged


def checked_rows(
    indptr: Any, indices: Any, values: Any, n_rows: int, n_attributes: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A CSR over ``n_rows`` tokens as (int64, int64, float64) arrays, refused with the
    reason unless well formed: ids in 0..n_attributes-1, finite values (None: all 1)."""
    indptr = np.asarray(indptr, dtype=np.int64)
    indices = np.asarray(indices, dtype=np.int64)
    values = (
        np.ones(len(indices), dtype=np.float64)
        if values is None
        else np.asarray(values, dtype=np.float64)
    )
    if indptr.shape != (n_rows + 1,) or indptr[0] != 0 or np.any(np.diff(indptr) < 0):
        raise ValueError("indptr must be non-decreasing, start at 0 and have N+1 entries")
    if indptr[-1] != len(indices) or len(values) != len(indices):
        raise ValueError("indptr[-1], len(indices) and len(values) must agree")
    if len(indices) and (indices.min() < 0 or indices.max() >= n_attributes):
        raise ValueError(f"attribute ids must lie in 0..{n_attributes - 1}")
    if not np.all(np.isfinite(values)):
        raise ValueError("attribute values must be finite")
    return indptr, indices, values


def build_kernel_data(
    seqs: Sequences,
    n_labels: int,
    n_attributes: int,
    bias: bool,
    *,
    unseen_labels_ok: bool = False,
) -> KernelData:
    """Validate ``seqs`` and build the kernel arrays, appending the bias attributes.

    With ``unseen_labels_ok`` (evaluation splits) label -1 marks a token whose label does
    not exist in training: no prediction can match it, so it always counts as an error.
    """
    lengths = np.asarray(seqs.lengths, dtype=np.int64)
    if lengths.ndim != 1 or len(lengths) == 0:
        raise ValueError("a problem needs at least one sequence")
    if np.any(lengths < 1):
        raise ValueError("every sequence must have at least one token")
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    N = int(offsets[-1])
    y = np.asarray(seqs.labels, dtype=np.int64)
    if y.shape != (N,):
        raise ValueError(f"labels has shape {y.shape}, expected ({N},) = total tokens")
    lowest = -1 if unseen_labels_ok else 0
    if N and (y.min() < lowest or y.max() >= n_labels):
        allowed = f"0..{n_labels - 1}" + (" or -1 (unseen in training)" if unseen_labels_ok else "")
        raise ValueError(f"labels must lie in {allowed}")
    A = int(n_attributes)
    A_tot = A + (3 if bias else 0)
    first = offsets[:-1]
    last = offsets[1:] - 1

    if seqs.dense is not None:
        X0 = np.asarray(seqs.dense, dtype=np.float64)
        if X0.shape != (N, A):
            raise ValueError(f"dense embeddings have shape {X0.shape}, expected ({N}, {A})")
        if not np.all(np.isfinite(X0)):
            raise ValueError("dense embeddings must be finite")
        X = np.zeros((N, A_tot), dtype=np.float64)
        X[:, :A] = X0
        if bias:
            X[:, A] = 1.0
            X[first, A + 1] = 1.0
            X[last, A + 2] = 1.0
        n = len(lengths)
        return KernelData(
            offsets=_readonly(offsets),
            y=_readonly(y),
            dense=True,
            X=_readonly(X),
            indptr=_readonly(np.zeros(1, dtype=np.int64)),
            indices=_readonly(np.zeros(0, dtype=np.int32)),
            values=_readonly(np.zeros(0, dtype=np.float64)),
            local=_readonly(np.zeros(0, dtype=np.int32)),
            support_ptr=_readonly(np.zeros(n + 1, dtype=np.int64)),
            support=_readonly(np.arange(A_tot, dtype=np.int32)),
            n_labels=np.int64(n_labels),
            n_kernel_attributes=np.int64(A_tot),
            max_len=np.int64(lengths.max()),
            audit=np.zeros(1, dtype=np.int64),
        )

    if seqs.indptr is None or seqs.indices is None:
        raise ValueError("sequences need dense embeddings or a sparse (indptr, indices) pair")
    indptr, indices, values = checked_rows(seqs.indptr, seqs.indices, seqs.values, N, A)

    if bias:
        # Append the virtual attributes token by token: always-on, first, last.
        counts = np.diff(indptr)
        extra = np.ones(N, dtype=np.int64)
        extra[first] += 1
        extra[last] += 1
        new_ptr = np.zeros(N + 1, dtype=np.int64)
        np.cumsum(counts + extra, out=new_ptr[1:])
        new_idx = np.empty(int(new_ptr[-1]), dtype=np.int64)
        new_val = np.empty(int(new_ptr[-1]), dtype=np.float64)
        row = np.repeat(np.arange(N), counts)
        pos_in_row = np.arange(len(indices)) - indptr[row]
        dest = new_ptr[row] + pos_in_row
        new_idx[dest] = indices
        new_val[dest] = values
        cursor = new_ptr[:-1] + counts
        new_idx[cursor] = A
        new_val[cursor] = 1.0
        cursor = cursor + 1
        new_idx[cursor[first]] = A + 1
        new_val[cursor[first]] = 1.0
        cursor[first] += 1
        new_idx[cursor[last]] = A + 2
        new_val[cursor[last]] = 1.0
        indptr, indices, values = new_ptr, new_idx, new_val
    indptr, indices32, values = merge_duplicates(indptr, indices, values)

    # Per-sequence supports: distinct attributes of each sequence and the local index
    # of every stored entry (docs/algorithms.md §1.5, gradient restricted to active columns).
    n = len(lengths)
    tok_seq = np.repeat(np.arange(n, dtype=np.int64), lengths)
    entry_seq = np.repeat(tok_seq, np.diff(indptr))
    key = entry_seq * A_tot + indices32.astype(np.int64)
    uniq, inverse = np.unique(key, return_inverse=True)
    useq = uniq // A_tot
    support = (uniq % A_tot).astype(np.int32)
    support_ptr = np.zeros(n + 1, dtype=np.int64)
    np.add.at(support_ptr, useq + 1, 1)
    support_ptr = np.cumsum(support_ptr)
    local = (inverse - support_ptr[entry_seq]).astype(np.int32)

    return KernelData(
        offsets=_readonly(offsets),
        y=_readonly(y),
        dense=False,
        X=_readonly(np.zeros((0, 0), dtype=np.float64)),
        indptr=_readonly(indptr),
        indices=_readonly(indices32),
        values=_readonly(values),
        local=_readonly(local),
        support_ptr=_readonly(support_ptr),
        support=_readonly(support),
        n_labels=np.int64(n_labels),
        n_kernel_attributes=np.int64(A_tot),
        max_len=np.int64(lengths.max()),
        audit=np.zeros(1, dtype=np.int64),
    )


def kernel_attributes(split_meta: Mapping[str, Any]) -> int:
    """A split's attribute-row count from its saved metadata (``CRFProblem.to_arrays``):
    the key is ``n_kernel_attributes``; files written before the field had its own name
    call it ``n_attributes`` (the same A + 3 rows)."""
    if "n_kernel_attributes" in split_meta:
        return int(split_meta["n_kernel_attributes"])
    return int(split_meta["n_attributes"])


Transpose = namedtuple("Transpose", ["col_ptr", "col_token", "col_value"])


def build_transpose(data: KernelData) -> Transpose:
    """CSC copy of a sparse split (attribute-major), for race-free parallel gradients."""
    N = len(data.y)
    if data.dense:
        return Transpose(
            _readonly(np.zeros(1, dtype=np.int64)),
            _readonly(np.zeros(0, dtype=np.int64)),
            _readonly(np.zeros(0, dtype=np.float64)),
        )
    A = int(data.n_kernel_attributes)
    rows = np.repeat(np.arange(N, dtype=np.int64), np.diff(data.indptr))
    order = np.argsort(data.indices, kind="stable")
    col_ptr = np.zeros(A + 1, dtype=np.int64)
    np.add.at(col_ptr, data.indices.astype(np.int64) + 1, 1)
    return Transpose(
        _readonly(np.cumsum(col_ptr)),
        _readonly(rows[order]),
        _readonly(data.values[order]),
    )
