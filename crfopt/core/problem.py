"""The CRF training problem (docs/algorithms.md §1): data, sizes, counters, counted oracles.

:class:`CRFProblem` is what every optimizer works on and what every comparison counts
against. It is immutable after construction except for its work counters, which the
oracle kernels increment (§2). It holds only what an optimizer may use:

- the data and sizes, the ground-truth features, the radii R_i (§1.7);
- the counted oracles (``oracle``, ``forward``, ``oracle_scores``, ``forward_scores``) and
  the counted full passes (``primal``, ``gradient``, ``value_and_gradient``: n forward or
  oracle calls each), and ``initialization()``, which books a setup's calls apart;
- construction (from sequences, from saved arrays, with another λ — one path, and λ is
  validated in one place) and pickling, which goes through that same path.

What moved out, and why:

- what the oracles return → :mod:`crfopt.core.results`; sealing arrays and hashing them
  → :mod:`crfopt.core.sealing`; the problem as arrays and back, and the digests behind
  ``changed_data`` → :mod:`crfopt.core.snapshot`; the truth features and radii →
  :mod:`crfopt.core.derived`. What stays (about 750 lines) is the class itself: its
  members are short, and cutting it would spread the one counted surface over files;
- the weight layout → :mod:`crfopt.core.layout` (``zeros``/``pack``/``unpack`` stay as
  one-line delegates: README and docs/architecture.md name them on the problem);
- duality → :mod:`crfopt.core.duality`, functions of (problem, μ). ``dual(μ)`` and
  ``conjugate_weights(μ)`` stay as delegates (docs/architecture.md "Public surface";
  no inference, so nothing to count — dual optimizers use ŵ(μ⁰));
- *uncounted* evaluation (P, ∇P, gaps, ν(w) and Viterbi for the trace) → the benchmark's
  ``crfopt.bench.evaluator.Evaluator``, which the runner owns. An optimizer is handed the
  problem, so it is never handed an uncounted inference method; the audit cell of the
  kernel data stays as a second line of defence against imports of the free functions.

``duality_gap``, ``predict`` and ``error`` are in docs/architecture.md "Public surface",
so they stay, and they *count*: ``duality_gap`` pays its full pass (n forward calls with
μ, n oracle calls with w) and Viterbi costs what a forward pass does, so each decoded
sequence is one forward call, whatever the split. A user calling
``problem.error(w, "test")`` sees that in the counters; an optimizer that peeks at its
test error pays for it. The benchmark evaluates with the evaluator, which counts nothing.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from crfopt import kernels as _kernels
from crfopt.core import derived, duality, snapshot
from crfopt.core.duality import DualMarginals
from crfopt.core.layout import WeightBlocks, WeightLayout
from crfopt.core.results import ForwardResult, LocalGradient, OracleResult
from crfopt.core.sealing import hash_arrays, readonly, sealed, sealed_data
from crfopt.kernels.arrays import (
    KernelData,
    Sequences,
    Transpose,
    build_kernel_data,
    build_transpose,
)
from crfopt.kernels.counters import (
    FORWARD_CALLS,
    INIT_FORWARD_CALLS,
    INIT_ORACLE_CALLS,
    ORACLE_CALLS,
    Counters,
    new_counter_array,
)
from crfopt.kernels.threads import batch_threads
from crfopt.kernels.twin import impl as _impl

__all__ = [
    "CRFProblem",
    "DualMarginals",
    "ForwardResult",
    "LocalGradient",
    "OracleResult",
    "ProblemChangedError",
    "WeightBlocks",
    "decode",
]


def _validated_lam(lam: Any) -> float:
    """The one place λ is checked: every construction path ends here."""
    ok = isinstance(lam, (int, float, np.integer, np.floating)) and not isinstance(lam, bool)
    if not (ok and math.isfinite(lam) and lam > 0):
        raise ValueError(f"lam must be a positive finite number, got {lam!r}")
    return float(lam)


def _validated_l1(l1: Any) -> float:
    """The one place σ (the ℓ1 weight) is checked: finite and ≥ 0 (0 = pure ℓ2)."""
    ok = isinstance(l1, (int, float, np.integer, np.floating)) and not isinstance(l1, bool)
    if not (ok and math.isfinite(l1) and l1 >= 0):
        raise ValueError(f"l1 must be a finite number ≥ 0 (0 turns ℓ1 off), got {l1!r}")
    return float(l1)


class ProblemChangedError(RuntimeError):
    """A problem's data, λ or σ no longer match what it was built with (a plugin wrote to it)."""


def decode(problem: CRFProblem, w: np.ndarray, split: str = "test") -> np.ndarray:
    """Viterbi labels of every token of ``split``, counting nothing (the evaluator's).

    :meth:`CRFProblem.predict` is the counted twin.
    """
    kd = problem.split_data(split)
    out = np.empty(len(kd.y), dtype=np.int64)
    # Always a writable array, as every other kernel gets: numba compiles one
    # specialization per writability, and a checkpoint's frozen w compiled Viterbi's call
    # tree (and the unary scores it shares with the oracle) a second time in a first
    # `compare`. Copying a frozen w costs d doubles, little beside decoding a split.
    w = problem.layout.check(w)
    if not w.flags.writeable:
        w = w.copy()
    with batch_threads():
        _impl.batch_viterbi(kd, w, out)
    return out


def _restore(
    arrays: Mapping[str, np.ndarray], meta: Mapping[str, Any], counts: np.ndarray
) -> CRFProblem:
    """Unpickling: the problem rebuilt by :meth:`CRFProblem.from_arrays`, counters kept."""
    problem = CRFProblem.from_arrays(arrays, meta)
    problem.counters.array[:] = counts
    return problem


class CRFProblem:
    """An ℓ2- (or elastic-net-) regularized linear-chain CRF training problem.

    P(w) = (1/n) Σ_i [log Z_i(w) - s_w(x_i, y_i)] + λ/2 ‖w‖² + σ ‖w‖₁
    (LPL18 eqs. 1–2 for σ = 0; the elastic net of docs/algorithms.md §1.9 for σ > 0)

    Parameters
    ----------
    train : Sequences
        Training sequences with dense or sparse token embeddings.
    n_labels : int
        K; labels are ``0..K-1``.
    n_attributes : int
        A, the embedding size (bias attributes not included).
    lam : float, optional
        λ; default ``1/n`` (LPL18 §6.1, SBA15 §6).
    l1 : float
        σ, the ℓ1 weight over every weight (emission, bias and transition blocks, as
        CRFsuite's c1: σ = c1/n); default 0 (pure ℓ2). Only optimizers that declare
        ``"l1"`` in their ``regularizers`` accept σ > 0 (docs/plugins.md).
    test : Sequences, optional
        The held-out split evaluated as ``"test"``. Evaluation splits may
        carry label -1 for tokens whose label never occurs in training (always an error).
    splits : mapping of str to Sequences, optional
        Further evaluation splits (e.g. NER's ``testa``).
    bias : bool
        Include the K × 3 bias block (count, first, last); ``False`` turns it off, e.g. to
        match CRFsuite's feature set.
    label_names, attribute_names : sequences of str, optional
        For display and for tagging new text.
    name : str
        Registered problem name (``"ocr"``, ``"synthetic"``, …).
    metadata : mapping, optional
        Provenance (source files, checksums, template), shown by ``crfopt info``.

    Notes
    -----
    Weights are flat float64 vectors of length ``d = K (A + 3 + K)`` (``K (A + K)``
    without bias). The emission and bias blocks are stored attribute-major: attribute
    ``a``'s K weights are contiguous, so one token's scores read contiguous rows (the
    flat order is (a, k) rather than (k, a); :meth:`unpack` gives the K × A, K × 3 and
    K × K views of the paper's layout).
    """

    _frozen = False

    def __init__(
        self,
        train: Sequences,
        *,
        n_labels: int,
        n_attributes: int,
        lam: float | None = None,
        l1: float = 0.0,
        test: Sequences | None = None,
        splits: Mapping[str, Sequences] | None = None,
        bias: bool = True,
        label_names: list[str] | None = None,
        attribute_names: list[str] | None = None,
        name: str = "custom",
        metadata: Mapping[str, Any] | None = None,
    ) -> None:
        if n_labels < 1:
            raise ValueError("n_labels must be at least 1")
        if n_attributes < 0:
            raise ValueError("n_attributes must be non-negative")
        K, A, bias = int(n_labels), int(n_attributes), bool(bias)
        data = build_kernel_data(train, K, A, bias)
        all_splits = dict(splits or {})
        if test is not None:
            all_splits["test"] = test
        if "train" in all_splits:
            raise ValueError("'train' is reserved for the training split")
        held_out = {
            split_name: build_kernel_data(seqs, K, A, bias, unseen_labels_ok=True)
            for split_name, seqs in all_splits.items()
        }
        self._assemble(
            layout=WeightLayout(K, A, bias),
            data=data,
            splits=held_out,
            lam=1.0 / (len(data.offsets) - 1) if lam is None else lam,
            l1=l1,
            truth=None,
            label_names=label_names,
            attribute_names=attribute_names,
            name=name,
            metadata=metadata,
        )

    def _assemble(
        self,
        *,
        layout: WeightLayout,
        data: KernelData,
        splits: dict[str, KernelData],
        lam: Any,
        l1: Any,
        truth: np.ndarray | None,
        label_names: Any,
        attribute_names: Any,
        name: str,
        metadata: Mapping[str, Any] | None,
    ) -> None:
        """Set every field once; both construction paths (and so pickling and
        :meth:`with_regularization`) end here, so the checks below are the only ones."""
        set_ = self._set_cache
        K, A = layout.n_labels, layout.n_attributes
        if int(data.n_kernel_attributes) != layout.n_kernel_attributes:
            raise ValueError(
                f"kernel data has {int(data.n_kernel_attributes)} attribute rows, the layout "
                f"{layout.n_kernel_attributes}"
            )
        if label_names is not None and len(label_names) != K:
            raise ValueError(f"{len(label_names)} label names for {K} labels")
        if attribute_names is not None and len(attribute_names) != A:
            raise ValueError(f"{len(attribute_names)} attribute names for {A} attributes")
        set_("_layout", layout)
        set_("_n_labels", K)
        set_("_n_attributes", A)
        set_("_bias", layout.bias)
        set_("_data", sealed_data(data))
        set_("_splits", {k: sealed_data(v) for k, v in splits.items()})
        set_("_lam", _validated_lam(lam))
        set_("_l1", _validated_l1(l1))
        set_("_label_names", tuple(label_names) if label_names else None)
        set_("_attribute_names", tuple(attribute_names) if attribute_names else None)
        set_("_name", str(name))
        set_("_metadata", dict(metadata or {}))
        counter_array = new_counter_array()
        set_("_counter_array", counter_array)
        set_("_counters", Counters(counter_array, int(len(data.offsets) - 1)))
        set_("_transpose", None)
        set_("_fingerprint", None)
        set_("_radii", None)
        set_(
            "_truth",
            sealed(derived.truth_features(self._data, self.dim) if truth is None else truth),
        )
        set_("_digests", None)  # reference digests (data_digests) taken at the first run
        set_("_origin", None)  # the problem a for_run() copy was made from
        set_("_frozen", True)

    # ---------------------------------------------------------------- immutability
    def __setattr__(self, key: str, value: Any) -> None:
        if self._frozen and not key.startswith("_cache"):
            raise AttributeError(f"CRFProblem is immutable (tried to set {key!r})")
        object.__setattr__(self, key, value)

    def _set_cache(self, key: str, value: Any) -> None:
        object.__setattr__(self, key, value)

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # Pickling is to_arrays → from_arrays (the featurization cache's path): the copy
        # gets read-only data, a fresh audit cell and caches, and the counts so far.
        arrays, meta = self.to_arrays()
        return _restore, (arrays, meta, self._counter_array.copy())

    # ---------------------------------------------------------------- sizes
    @property
    def name(self) -> str:
        return self._name

    @property
    def n(self) -> int:
        """Number of training sequences."""
        return int(len(self._data.offsets) - 1)

    @property
    def n_tokens(self) -> int:
        """N, total training tokens."""
        return len(self._data.y)

    @property
    def n_labels(self) -> int:
        """K."""
        return self._n_labels

    @property
    def n_attributes(self) -> int:
        """A, the embedding size (without the three bias attributes)."""
        return self._n_attributes

    @property
    def n_kernel_attributes(self) -> int:
        """A plus the bias attributes: rows of the stored emission+bias block."""
        return self._layout.n_kernel_attributes

    @property
    def dim(self) -> int:
        """d = K (A + 3 + K), or K (A + K) without bias."""
        return self._layout.dim

    @property
    def layout(self) -> WeightLayout:
        """Where each block of w lives (:mod:`crfopt.core.layout`)."""
        return self._layout

    @property
    def lam(self) -> float:
        """λ, the ℓ2 regularization."""
        return self._lam

    @property
    def l1(self) -> float:
        """σ, the ℓ1 weight (0: pure ℓ2). P adds σ‖w‖₁ over every weight; the
        gradients (``gradient``, ``value_and_gradient``) stay the smooth part's."""
        return self._l1

    @property
    def regularizers(self) -> tuple[str, ...]:
        """The penalties in P: ``("l2",)``, or ``("l2", "l1")`` when σ > 0."""
        return ("l2", "l1") if self._l1 > 0 else ("l2",)

    @property
    def bias(self) -> bool:
        return self._bias

    @property
    def dense(self) -> bool:
        return bool(self._data.dense)

    @property
    def max_active(self) -> int:
        """a, the largest number of active embedding attributes of a token."""
        if self.dense:
            return self._n_attributes
        kd = self._data
        if len(kd.indices) == 0:
            return 0
        # count the embedding entries only (tokens carry 1 to 3 bias attributes)
        embedding = (kd.indices < self._n_attributes).astype(np.int64)
        per_token = np.add.reduceat(embedding, kd.indptr[:-1]) * (np.diff(kd.indptr) > 0)
        return int(per_token.max())

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self._data.offsets)

    @property
    def labels(self) -> np.ndarray:
        """Ground-truth labels of all training tokens (read-only)."""
        return self._data.y

    @property
    def label_names(self) -> tuple[str, ...] | None:
        return self._label_names

    @property
    def attribute_names(self) -> tuple[str, ...] | None:
        return self._attribute_names

    @property
    def metadata(self) -> dict[str, Any]:
        return dict(self._metadata)

    @property
    def splits(self) -> tuple[str, ...]:
        """Names of the evaluation splits: ``"train"`` and any held-out ones."""
        return ("train", *self._splits)

    @property
    def data(self) -> KernelData:
        """Kernel arrays of the training split, for compiled plugin loops."""
        return self._data

    def split_data(self, split: str) -> KernelData:
        if split == "train":
            return self._data
        try:
            return self._splits[split]
        except KeyError:
            raise KeyError(
                f"problem {self._name!r} has no split {split!r}; splits: {', '.join(self.splits)}"
            ) from None

    @property
    def counters(self) -> Counters:
        """Work counters (docs/algorithms.md §2); ``counters.array`` goes into compiled kernels."""
        return self._counters

    @property
    def truth_features(self) -> np.ndarray:
        """Σ_i F(x_i, y_i), the ground-truth feature sum (n F̄), read-only."""
        return self._truth

    def dual_memory(self, itemsize: int = 8) -> int:
        """Bytes of the dual log-marginals (N·K node + (N-n)·K² edge entries)."""
        K = self._n_labels
        return int(itemsize * (self.n_tokens * K + (self.n_tokens - self.n) * K * K))

    def info(self) -> dict[str, Any]:
        """Sizes as in LPL18 Table 1, plus the splits and provenance."""
        out: dict[str, Any] = {
            "name": self._name,
            "n": self.n,
            "tokens": self.n_tokens,
            "labels": self._n_labels,
            "attributes": self._n_attributes,
            "max_active": self.max_active,
            "dim": self.dim,
            "lam": self._lam,
            "l1": self._l1,
            "bias": self._bias,
            "embedding": "dense" if self.dense else "sparse",
            "P(0)": self.primal_at_zero(),
            "dual_memory_float64": self.dual_memory(8),
            "dual_memory_float32": self.dual_memory(4),
        }
        for split, kd in self._splits.items():
            out[f"{split}_n"] = int(len(kd.offsets) - 1)
            out[f"{split}_tokens"] = len(kd.y)
        out.update({f"meta.{k}": v for k, v in self._metadata.items()})
        return out

    def __repr__(self) -> str:
        return (
            f"CRFProblem({self._name!r}, n={self.n}, tokens={self.n_tokens}, "
            f"labels={self._n_labels}, attributes={self._n_attributes}, dim={self.dim}, "
            f"lam={self._lam:.4g}, {f'l1={self._l1:.4g}, ' if self._l1 else ''}"
            f"{'dense' if self.dense else 'sparse'})"
        )

    @property
    def fingerprint(self) -> str:
        """sha256 of the data, feature map, λ and σ: the key of cached optima."""
        if self._fingerprint is None:
            h = hashlib.sha256()
            h.update(f"K={self._n_labels};A={self._n_attributes};bias={self._bias};".encode())
            h.update(f"lam={self._lam!r};".encode())
            if self._l1:
                # only when σ > 0: the pure-ℓ2 fingerprints (the shipped optima.json, every
                # user's cached P*) stay what they were before ℓ1 existed
                h.update(f"l1={self._l1!r};".encode())
            for split, kd in [("train", self._data), *sorted(self._splits.items())]:
                h.update(split.encode())
                hash_arrays(h, kd.offsets, kd.y, kd.X, kd.indptr, kd.indices, kd.values)
            self._set_cache("_fingerprint", h.hexdigest())
        return self._fingerprint  # type: ignore[return-value]

    # ---------------------------------------------------------------- run isolation
    def data_digests(self, _memo: dict[int, str] | None = None) -> dict[str, str]:
        """A digest of every data array, of λ and of σ, by name, computed now (not cached).

        What the runner compares before and after each run to see whether the run
        changed the problem (:meth:`changed_data`). sha256 of the raw bytes: on OCR (50 MB
        of kernel data) about 0.07 s, against seconds to minutes for a run. Derived
        arrays built on demand (radii, the attribute-major transpose) are included
        once they exist.
        """
        origin = self._origin if self._origin is not None else self
        derived = {"truth_features": self._truth, "radii": origin._radii}
        if origin._transpose is not None:
            derived.update({f"transpose.{k}": v for k, v in origin._transpose._asdict().items()})
        return snapshot.digests(self, derived, _memo)

    def changed_data(self, _memo: dict[int, str] | None = None) -> list[str]:
        """What differs from the digests taken at this problem's first check, by name.

        ``[]`` when nothing changed; otherwise e.g. ``["labels (train.y)", "λ"]``. The
        first call (the runner's, before the first run) takes the reference digests;
        copies made by :meth:`for_run` share them.
        """
        origin = self._origin if self._origin is not None else self
        if origin._digests is None:
            origin._set_cache("_digests", origin.data_digests())
        reference: dict[str, str] = origin._digests  # type: ignore[assignment]
        return snapshot.changed(reference, self.data_digests(_memo))

    def for_run(self) -> CRFProblem:
        """A copy for one run: the same (sealed, shared) data, its own counters.

        The runner hands this copy, not the problem itself, to the optimizer of one
        run. When the run ends the copy is dropped: a thread the run left behind keeps
        counting into the copy's counters, which nobody reads any more, never into the
        next run's; attributes forced onto the copy (``object.__setattr__(p, "_lam",
        …)``) stay on it. Derived arrays (transpose, radii) are built once, on the
        original problem.
        """
        copy = object.__new__(CRFProblem)
        state = dict(self.__dict__)
        counter_array = new_counter_array()
        state.update(
            _splits=dict(self._splits),
            _metadata=dict(self._metadata),
            _counter_array=counter_array,
            _counters=Counters(counter_array, self.n),
            _origin=self._origin if self._origin is not None else self,
        )
        copy.__dict__.update(state)
        return copy

    # ---------------------------------------------------------------- serialization
    def to_arrays(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Everything needed to rebuild this problem without recomputation.

        Arrays (kernel data of every split, ground-truth features) and JSON-able
        metadata; :meth:`from_arrays` is the inverse. Used by the featurization cache.
        """
        return snapshot.to_arrays(self)

    @classmethod
    def from_arrays(
        cls,
        arrays: Mapping[str, np.ndarray],
        meta: Mapping[str, Any],
        *,
        lam: float | None = None,
        l1: float | None = None,
    ) -> CRFProblem:
        """Rebuild a problem saved with :meth:`to_arrays` (λ and σ may be changed), no
        recomputation. Metadata saved before ℓ1 existed has no ``l1``: σ = 0."""
        kds = snapshot.kernel_data(arrays, meta)
        K = int(meta["n_labels"])
        problem = object.__new__(cls)
        problem._assemble(
            layout=WeightLayout(K, int(meta["n_attributes"]), bool(meta["bias"])),
            data=kds.pop("train"),
            splits=kds,
            lam=meta["lam"] if lam is None else lam,
            l1=meta.get("l1", 0.0) if l1 is None else l1,
            truth=readonly(arrays["truth"], np.float64),
            label_names=meta.get("label_names"),
            attribute_names=meta.get("attribute_names"),
            name=meta["name"],
            metadata=meta.get("metadata"),
        )
        return problem

    def with_lam(self, lam: float) -> CRFProblem:
        """The same data, feature map and σ with another λ (fresh counters)."""
        return self.with_regularization(lam=lam)

    def with_regularization(
        self, *, lam: float | None = None, l1: float | None = None
    ) -> CRFProblem:
        """The same data and feature map with another λ and/or σ (fresh counters);
        what is not given is kept."""
        arrays, meta = self.to_arrays()
        return CRFProblem.from_arrays(arrays, meta, lam=lam, l1=l1)

    # ---------------------------------------------------------------- weights
    def zeros(self) -> np.ndarray:
        """w = 0, the starting point of the primal methods."""
        return self._layout.zeros()

    def unpack(self, w: np.ndarray) -> WeightBlocks:
        """K × A emission, K × 3 bias and K × K transition views of ``w``."""
        return self._layout.unpack(w)

    def pack(
        self, emission: np.ndarray, bias: np.ndarray | None, transition: np.ndarray
    ) -> np.ndarray:
        """Inverse of :meth:`unpack`."""
        return self._layout.pack(emission, bias, transition)

    # ---------------------------------------------------------------- counted oracles
    def _seq_len(self, i: int) -> int:
        if not 0 <= i < self.n:
            raise IndexError(f"sequence index {i} out of range 0..{self.n - 1}")
        return int(self._data.offsets[i + 1] - self._data.offsets[i])

    def oracle(self, i: int, w: np.ndarray, *, gradient: bool = False) -> OracleResult:
        """Counted oracle on sequence ``i`` (1 oracle call, docs/algorithms.md §1.5).

        Returns log Z_i, ℓ_i(w) and log-marginals of ν_i(w); with ``gradient=True`` also
        ∇ℓ_i(w) on the sequence's active attributes.
        """
        T = self._seq_len(i)
        w = self._layout.check(w)
        K = self._n_labels
        log_nodes = np.empty((T, K))
        log_edges = np.empty((max(T - 1, 0), K, K))
        log_z, nll = _kernels.oracle(self._data, self._counter_array, i, w, log_nodes, log_edges)
        grad = None
        if gradient:
            grad = self._local_gradient(i, np.exp(log_nodes), np.exp(log_edges).sum(axis=0))
        return OracleResult(float(log_z), float(nll), log_nodes, log_edges, grad)

    def _local_gradient(self, i: int, nodes: np.ndarray, edge_sum: np.ndarray) -> LocalGradient:
        K = self._n_labels
        lo, hi = _kernels.support_bounds(self._data, i)
        E_loc = np.empty((hi - lo, K))
        trans = np.empty((K, K))
        _kernels.local_gradient(
            self._data, i, nodes, edge_sum, np.empty_like(nodes), np.empty((K, K)), E_loc, trans
        )
        return LocalGradient(np.asarray(self._data.support[lo:hi]), E_loc, trans)

    def forward(self, i: int, w: np.ndarray) -> ForwardResult:
        """Counted forward-only call on sequence ``i`` (1 forward call)."""
        self._seq_len(i)
        w = self._layout.check(w)
        log_z, nll = _kernels.forward(self._data, self._counter_array, i, w)
        return ForwardResult(float(log_z), float(nll))

    def unary_scores(self, i: int, w: np.ndarray) -> np.ndarray:
        """θ(w; x_i), T × K (uncounted: a linear map, not inference)."""
        T = self._seq_len(i)
        out = np.empty((T, self._n_labels))
        _kernels.unary_scores(self._data, i, self._layout.check(w), out)
        return out

    def oracle_scores(self, i: int, unary: np.ndarray, pairwise: np.ndarray) -> OracleResult:
        """Counted oracle on score tables: unary T × K, pairwise (T-1) × K × K.

        ``nll`` of the result is ``log Z(θ)`` minus the ground truth's score under θ.
        """
        T = self._seq_len(i)
        K = self._n_labels
        unary = np.ascontiguousarray(unary, dtype=np.float64)
        pairwise = np.ascontiguousarray(pairwise, dtype=np.float64)
        if unary.shape != (T, K) or pairwise.shape != (max(T - 1, 0), K, K):
            raise ValueError(
                f"sequence {i} needs unary ({T}, {K}) and pairwise ({max(T - 1, 0)}, {K}, {K})"
            )
        log_nodes = np.empty((T, K))
        log_edges = np.empty((max(T - 1, 0), K, K))
        log_z = _kernels.oracle_scores(
            self._data, self._counter_array, i, unary, pairwise, log_nodes, log_edges
        )
        s = int(self._data.offsets[i])
        y = self._data.y[s : s + T]
        truth = unary[np.arange(T), y].sum() + pairwise[np.arange(T - 1), y[:-1], y[1:]].sum()
        return OracleResult(float(log_z), float(log_z - truth), log_nodes, log_edges)

    def forward_scores(self, i: int, unary: np.ndarray, transition: np.ndarray) -> float:
        """Counted forward-only call on score tables with shared K × K transitions."""
        T = self._seq_len(i)
        K = self._n_labels
        unary = np.ascontiguousarray(unary, dtype=np.float64)
        transition = np.ascontiguousarray(transition, dtype=np.float64)
        if unary.shape != (T, K) or transition.shape != (K, K):
            raise ValueError(f"sequence {i} needs unary ({T}, {K}) and transition ({K}, {K})")
        return float(_kernels.forward_scores(self._data, self._counter_array, i, unary, transition))

    def primal(self, w: np.ndarray) -> float:
        """Counted P(w), σ‖w‖₁ included: n forward calls."""
        value = duality.objective(self, w)[0]
        self._counter_array[FORWARD_CALLS] += self.n
        return value

    def gradient(self, w: np.ndarray) -> np.ndarray:
        """Counted gradient of the smooth part, ∇(L + λ/2‖·‖²)(w): n oracle calls (= ∇P(w)
        when σ = 0; σ‖w‖₁ has no gradient and is the optimizer's, e.g. OWL-QN's)."""
        return self.value_and_gradient(w)[1]

    def value_and_gradient(self, w: np.ndarray) -> tuple[float, np.ndarray]:
        """Counted (P(w), ∇(L + λ/2‖·‖²)(w)): n oracle calls (what L-BFGS pays per evaluation).

        The value includes σ‖w‖₁; the gradient is the smooth part's only (what OWL-QN's
        pseudo-gradient is built from; equal to ∇P(w) when σ = 0)."""
        value, grad = duality.objective(self, w, gradient=True)
        self._counter_array[ORACLE_CALLS] += self.n
        return value, grad

    @property
    def transpose(self) -> Transpose:
        """The training split by attribute (CSC: ``col_ptr``, ``col_token``, ``col_value``;
        empty for dense data), built on first use and shared by copies of the problem.

        What the full-batch kernels scatter the emission gradient with, race-free across
        threads; no inference, nothing counted.
        """
        if self._origin is not None:
            return self._origin.transpose
        if self._transpose is None:
            t = build_transpose(self._data)
            self._set_cache("_transpose", type(t)(*(sealed(a) for a in t)))
        return self._transpose  # type: ignore[return-value]

    @contextlib.contextmanager
    def initialization(self) -> Iterator[None]:
        """Charge the oracle work done inside the block to the ``init_*`` counters.

        The runner builds optimizers inside this block, so a dual initialization by
        ``oracle_scores`` is reported separately and kept off the axes (§2 [choice]).
        """
        before_o = int(self._counter_array[ORACLE_CALLS])
        before_f = int(self._counter_array[FORWARD_CALLS])
        try:
            yield
        finally:
            d_o = int(self._counter_array[ORACLE_CALLS]) - before_o
            d_f = int(self._counter_array[FORWARD_CALLS]) - before_f
            self._counter_array[ORACLE_CALLS] -= d_o
            self._counter_array[FORWARD_CALLS] -= d_f
            self._counter_array[INIT_ORACLE_CALLS] += d_o
            self._counter_array[INIT_FORWARD_CALLS] += d_f

    # ---------------------------------------------------------------- duality (delegates)
    def primal_at_zero(self) -> float:
        """P(0) = (N/n) log K (LPL18 App. A.1), computed in closed form."""
        return self.n_tokens / self.n * math.log(self._n_labels)

    def conjugate_weights(self, mu: DualMarginals) -> np.ndarray:
        """ŵ(μ) = S_σ(F̄ - (1/n) Σ_i E_{μ_i}[F]) / λ  (LPL18 eq. 16 when σ = 0); no inference."""
        return duality.conjugate_weights(self, mu)

    def dual(self, mu: DualMarginals) -> float:
        """D(μ) = (1/n) Σ_i H̃(μ_i) - ‖S_σ(z(μ))‖²/(2λ); no inference, nothing counted."""
        return duality.dual(self, mu)

    def duality_gap(self, w: np.ndarray | None = None, *, mu: DualMarginals | None = None) -> float:
        """Counted duality gap.

        With ``mu``: P(ŵ(μ)) - D(μ) (n forward calls). With only ``w``: the primal gap
        P(w) - D(ν(w)) (n oracle calls; ‖∇P(w)‖² / (2λ) when σ = 0,
        :func:`crfopt.core.duality.gap_from_gradient`). The uncounted twin is
        :func:`crfopt.core.duality.duality_gap`.
        """
        if mu is not None:
            return float(self.primal(self.conjugate_weights(mu)) - self.dual(mu))
        if w is None:
            raise ValueError("give w (primal gap) or mu (dual gap)")
        w = self._layout.check(w)
        return duality.gap_from_gradient(self, w, self.gradient(w))

    # ---------------------------------------------------------------- prediction (counted)
    def predict(self, w: np.ndarray, split: str = "test") -> np.ndarray:
        """Viterbi labels of every token of ``split``; one forward call per sequence."""
        labels = decode(self, w, split)
        self._counter_array[FORWARD_CALLS] += len(self.split_data(split).offsets) - 1
        return labels

    def error(self, w: np.ndarray, split: str = "test") -> float:
        """Per-token error of Viterbi predictions on ``split`` (§1.6), counted as
        :meth:`predict`; evaluation without counting: ``crfopt.bench.evaluator``."""
        return float(np.mean(self.predict(w, split) != self.split_data(split).y))

    # ---------------------------------------------------------------- derived data
    def radii(self) -> np.ndarray:
        """R_i = ‖F(x_i, y_i) - F(x_i, z^{T_i})‖² with the §1.7 candidate labeling z."""
        if self._origin is not None:
            return self._origin.radii()
        if self._radii is None:
            R = derived.radii(self._data)
            self._set_cache("_radii", sealed(R))
        return self._radii  # type: ignore[return-value]
