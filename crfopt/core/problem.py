"""The CRF training problem (ALGORITHMS.md §1): data, feature map, λ, oracles, objectives.

:class:`CRFProblem` is what every optimizer works on and what every comparison counts
against. It is immutable after construction except for its work counters, which the
oracle kernels increment (§2).
"""

from __future__ import annotations

import contextlib
import hashlib
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from crfopt import kernels as _kernels
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
from crfopt.kernels.jit import JIT_ENABLED
from crfopt.kernels.threads import batch_threads

if JIT_ENABLED:
    from crfopt.kernels import _numba as _impl
else:
    from crfopt.kernels import _numpy as _impl


@dataclass(frozen=True)
class WeightBlocks:
    """Views of a flat weight vector in the paper's layout (ALGORITHMS.md §1.1).

    ``emission`` is K × A, ``bias`` K × 3 (count, first, last) or ``None`` when the
    problem has no bias block, ``transition`` K × K. Writing to a view writes to ``w``.
    """

    emission: np.ndarray
    bias: np.ndarray | None
    transition: np.ndarray


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
        E = g[: problem.n_kernel_attributes * K].reshape(-1, K)
        E[self.attributes] = self.emission
        g[problem.n_kernel_attributes * K :] = self.transition.ravel()
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


def _as_weights(w: Any, dim: int) -> np.ndarray:
    a = np.asarray(w, dtype=np.float64)
    if a.shape != (dim,):
        raise ValueError(f"weights must be a flat vector of length d={dim}, got shape {a.shape}")
    return np.ascontiguousarray(a)


def _hash_arrays(h: Any, *arrays: np.ndarray) -> None:
    for a in arrays:
        a = np.ascontiguousarray(a)
        h.update(str(a.dtype).encode())
        h.update(str(a.shape).encode())
        if a.size:
            h.update(memoryview(a).cast("B"))


class CRFProblem:
    """An ℓ2-regularized linear-chain CRF training problem.

    P(w) = λ/2 ‖w‖² + (1/n) Σ_i [log Z_i(w) - s_w(x_i, y_i)]   (LPL18 eqs. 1–2)

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
    test : Sequences, optional
        The test split used by :meth:`error` with ``split="test"``. Evaluation splits may
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
        self._n_labels = int(n_labels)
        self._n_attributes = int(n_attributes)
        self._bias = bool(bias)
        self._data = build_kernel_data(train, self._n_labels, self._n_attributes, self._bias)
        n = len(self._data.offsets) - 1
        if lam is None:
            lam = 1.0 / n
        if not (isinstance(lam, (int, float, np.floating)) and math.isfinite(lam) and lam > 0):
            raise ValueError(f"lam must be a positive finite number, got {lam!r}")
        self._lam = float(lam)
        self._splits: dict[str, KernelData] = {}
        all_splits = dict(splits or {})
        if test is not None:
            all_splits["test"] = test
        for split_name, seqs in all_splits.items():
            if split_name == "train":
                raise ValueError("'train' is reserved for the training split")
            self._splits[split_name] = build_kernel_data(
                seqs, self._n_labels, self._n_attributes, self._bias, unseen_labels_ok=True
            )
        if label_names is not None and len(label_names) != self._n_labels:
            raise ValueError(f"{len(label_names)} label names for {self._n_labels} labels")
        self._label_names = tuple(label_names) if label_names is not None else None
        if attribute_names is not None and len(attribute_names) != self._n_attributes:
            raise ValueError(
                f"{len(attribute_names)} attribute names for {self._n_attributes} attributes"
            )
        self._attribute_names = tuple(attribute_names) if attribute_names is not None else None
        self._name = str(name)
        self._metadata = dict(metadata or {})
        self._counter_array = new_counter_array()
        self._counters = Counters(self._counter_array, n)
        self._truth = self._compute_truth_features()
        self._transpose: Transpose | None = None
        self._fingerprint: str | None = None
        self._radii: np.ndarray | None = None
        self._frozen = True

    # ---------------------------------------------------------------- immutability
    def __setattr__(self, key: str, value: Any) -> None:
        if self._frozen and not key.startswith("_cache"):
            raise AttributeError(f"CRFProblem is immutable (tried to set {key!r})")
        object.__setattr__(self, key, value)

    def _set_cache(self, key: str, value: Any) -> None:
        object.__setattr__(self, key, value)

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_transpose"] = None
        del state["_counters"]  # rebuilt around the counter array on unpickling
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        # Unpickled arrays come back writable: make the data read-only again.
        def freeze(kd: KernelData) -> KernelData:
            fields = {}
            for fname, value in kd._asdict().items():
                if isinstance(value, np.ndarray) and fname != "audit":
                    value = np.ascontiguousarray(value)
                    value.setflags(write=False)
                fields[fname] = value
            return KernelData(**fields)

        object.__setattr__(self, "__dict__", state)
        object.__setattr__(self, "_data", freeze(state["_data"]))
        object.__setattr__(self, "_splits", {k: freeze(v) for k, v in state["_splits"].items()})
        object.__setattr__(self, "_counters", Counters(state["_counter_array"], self.n))

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
        return int(self._data.n_attributes)

    @property
    def dim(self) -> int:
        """d = K (A + 3 + K), or K (A + K) without bias."""
        return self.n_kernel_attributes * self._n_labels + self._n_labels**2

    @property
    def lam(self) -> float:
        """λ, the ℓ2 regularization."""
        return self._lam

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
        """Work counters (ALGORITHMS.md §2); ``counters.array`` goes into compiled kernels."""
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
            f"lam={self._lam:.4g}, {'dense' if self.dense else 'sparse'})"
        )

    @property
    def fingerprint(self) -> str:
        """sha256 of the data, feature map and λ: the key of cached optima."""
        if self._fingerprint is None:
            h = hashlib.sha256()
            h.update(f"K={self._n_labels};A={self._n_attributes};bias={self._bias};".encode())
            h.update(f"lam={self._lam!r};".encode())
            for split, kd in [("train", self._data), *sorted(self._splits.items())]:
                h.update(split.encode())
                _hash_arrays(h, kd.offsets, kd.y, kd.X, kd.indptr, kd.indices, kd.values)
            self._set_cache("_fingerprint", h.hexdigest())
        return self._fingerprint  # type: ignore[return-value]

    # ---------------------------------------------------------------- serialization
    def to_arrays(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Everything needed to rebuild this problem without recomputation.

        Arrays (kernel data of every split, ground-truth features) and JSON-able
        metadata; :meth:`from_arrays` is the inverse. Used by the featurization cache.
        """
        arrays: dict[str, np.ndarray] = {"truth": np.asarray(self._truth)}
        splits = {"train": self._data, **self._splits}
        for split, kd in splits.items():
            for fname, value in kd._asdict().items():
                if isinstance(value, np.ndarray) and fname != "audit":
                    arrays[f"{split}.{fname}"] = value
        meta = {
            "n_labels": self._n_labels,
            "n_attributes": self._n_attributes,
            "bias": self._bias,
            "lam": self._lam,
            "name": self._name,
            "label_names": list(self._label_names) if self._label_names else None,
            "attribute_names": list(self._attribute_names) if self._attribute_names else None,
            "metadata": self._metadata,
            "splits": {
                split: {
                    "dense": bool(kd.dense),
                    "max_len": int(kd.max_len),
                    "n_attributes": int(kd.n_attributes),
                }
                for split, kd in splits.items()
            },
        }
        return arrays, meta

    @classmethod
    def from_arrays(
        cls, arrays: Mapping[str, np.ndarray], meta: Mapping[str, Any], *, lam: float | None = None
    ) -> CRFProblem:
        """Rebuild a problem saved with :meth:`to_arrays` (λ may be changed)."""
        problem = object.__new__(cls)
        set_ = problem._set_cache
        set_("_n_labels", int(meta["n_labels"]))
        set_("_n_attributes", int(meta["n_attributes"]))
        set_("_bias", bool(meta["bias"]))
        set_("_name", str(meta["name"]))
        names = meta.get("label_names")
        set_("_label_names", tuple(names) if names else None)
        attrs = meta.get("attribute_names")
        set_("_attribute_names", tuple(attrs) if attrs else None)
        set_("_metadata", dict(meta.get("metadata") or {}))
        kds = {}
        for split, info in meta["splits"].items():
            fields = {}
            for fname in KernelData._fields:
                if fname == "audit":
                    fields[fname] = np.zeros(1, dtype=np.int64)
                elif fname == "dense":
                    fields[fname] = bool(info["dense"])
                elif fname in ("n_labels",):
                    fields[fname] = np.int64(meta["n_labels"])
                elif fname == "n_attributes":
                    fields[fname] = np.int64(info["n_attributes"])
                elif fname == "max_len":
                    fields[fname] = np.int64(info["max_len"])
                else:
                    arr = np.ascontiguousarray(arrays[f"{split}.{fname}"])
                    arr.setflags(write=False)
                    fields[fname] = arr
            kds[split] = KernelData(**fields)
        set_("_data", kds.pop("train"))
        set_("_splits", kds)
        n = int(len(problem._data.offsets) - 1)
        value = float(meta["lam"]) if lam is None else float(lam)
        if not (math.isfinite(value) and value > 0):
            raise ValueError(f"lam must be a positive finite number, got {value!r}")
        set_("_lam", value)
        truth = np.ascontiguousarray(arrays["truth"], dtype=np.float64)
        truth.setflags(write=False)
        set_("_truth", truth)
        counter_array = new_counter_array()
        set_("_counter_array", counter_array)
        set_("_counters", Counters(counter_array, n))
        set_("_transpose", None)
        set_("_fingerprint", None)
        set_("_radii", None)
        set_("_frozen", True)
        return problem

    def with_lam(self, lam: float) -> CRFProblem:
        """The same data and feature map with another λ (fresh counters)."""
        clone = object.__new__(CRFProblem)
        state = self.__getstate__()
        state["_lam"] = float(lam)
        state["_counter_array"] = new_counter_array()
        state["_fingerprint"] = None
        clone.__setstate__(state)
        if not (math.isfinite(lam) and lam > 0):
            raise ValueError(f"lam must be a positive finite number, got {lam!r}")
        return clone

    # ---------------------------------------------------------------- weights
    def zeros(self) -> np.ndarray:
        """w = 0, the starting point of the primal methods."""
        return np.zeros(self.dim)

    def unpack(self, w: np.ndarray) -> WeightBlocks:
        """K × A emission, K × 3 bias and K × K transition views of ``w``."""
        if w.shape != (self.dim,):
            raise ValueError(f"expected a vector of length {self.dim}, got {w.shape}")
        K, A = self._n_labels, self._n_attributes
        A_tot = self.n_kernel_attributes
        EB = w[: A_tot * K].reshape(A_tot, K)
        return WeightBlocks(
            emission=EB[:A].T,
            bias=EB[A:].T if self._bias else None,
            transition=w[A_tot * K :].reshape(K, K),
        )

    def pack(
        self, emission: np.ndarray, bias: np.ndarray | None, transition: np.ndarray
    ) -> np.ndarray:
        """Inverse of :meth:`unpack`."""
        w = self.zeros()
        blocks = self.unpack(w)
        blocks.emission[...] = emission
        if self._bias:
            if bias is None:
                raise ValueError("this problem has a bias block")
            blocks.bias[...] = bias  # type: ignore[index]
        elif bias is not None:
            raise ValueError("this problem has no bias block")
        blocks.transition[...] = transition
        return w

    # ---------------------------------------------------------------- counted oracles
    def _seq_len(self, i: int) -> int:
        if not 0 <= i < self.n:
            raise IndexError(f"sequence index {i} out of range 0..{self.n - 1}")
        return int(self._data.offsets[i + 1] - self._data.offsets[i])

    def oracle(self, i: int, w: np.ndarray, *, gradient: bool = False) -> OracleResult:
        """Counted oracle on sequence ``i`` (1 oracle call, ALGORITHMS.md §1.5).

        Returns log Z_i, ℓ_i(w) and log-marginals of ν_i(w); with ``gradient=True`` also
        ∇ℓ_i(w) on the sequence's active attributes.
        """
        T = self._seq_len(i)
        w = _as_weights(w, self.dim)
        K = self._n_labels
        log_nodes = np.empty((T, K))
        log_edges = np.empty((max(T - 1, 0), K, K))
        log_z, nll = _kernels.oracle(self._data, self._counter_array, i, w, log_nodes, log_edges)
        grad = None
        if gradient:
            grad = self._local_gradient(i, np.exp(log_nodes), np.exp(log_edges).sum(axis=0))
        return OracleResult(float(log_z), float(nll), log_nodes, log_edges, grad)

    def _local_gradient(self, i: int, nodes: np.ndarray, edge_sum: np.ndarray) -> LocalGradient:
        s = int(self._data.offsets[i])
        T = nodes.shape[0]
        weights = nodes.copy()
        weights[np.arange(T), self._data.y[s : s + T]] -= 1.0
        lo, hi = _kernels.support_bounds(self._data, i)
        E_loc = np.empty((hi - lo, self._n_labels))
        _kernels.expected_emission(self._data, i, weights, E_loc)
        truth = np.empty((self._n_labels, self._n_labels))
        _kernels.truth_transitions(self._data, i, truth)
        return LocalGradient(np.asarray(self._data.support[lo:hi]), E_loc, edge_sum - truth)

    def forward(self, i: int, w: np.ndarray) -> ForwardResult:
        """Counted forward-only call on sequence ``i`` (1 forward call)."""
        self._seq_len(i)
        w = _as_weights(w, self.dim)
        log_z, nll = _kernels.forward(self._data, self._counter_array, i, w)
        return ForwardResult(float(log_z), float(nll))

    def unary_scores(self, i: int, w: np.ndarray) -> np.ndarray:
        """θ(w; x_i), T × K (uncounted: a linear map, not inference)."""
        T = self._seq_len(i)
        out = np.empty((T, self._n_labels))
        _kernels.unary_scores(self._data, i, _as_weights(w, self.dim), out)
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
        """Counted P(w): n forward calls."""
        return self._value_grad(w, want_grad=False, counted=True)[0]

    def gradient(self, w: np.ndarray) -> np.ndarray:
        """Counted ∇P(w): n oracle calls."""
        return self._value_grad(w, want_grad=True, counted=True)[1]

    def value_and_gradient(self, w: np.ndarray) -> tuple[float, np.ndarray]:
        """Counted (P(w), ∇P(w)): n oracle calls (what L-BFGS pays per evaluation)."""
        value, grad = self._value_grad(w, want_grad=True, counted=True)
        return value, grad

    def _value_grad(
        self, w: np.ndarray, *, want_grad: bool, counted: bool
    ) -> tuple[float, np.ndarray]:
        w = _as_weights(w, self.dim)
        n = self.n
        grad = np.empty(self.dim) if want_grad else np.empty(0)
        with batch_threads():
            total = _impl.batch_value_grad(self._data, self._get_transpose(), w, want_grad, grad)
        if counted:
            self._counter_array[ORACLE_CALLS if want_grad else FORWARD_CALLS] += n
        value = 0.5 * self._lam * float(w @ w) + total / n
        if want_grad:
            grad -= self._truth
            grad /= n
            grad += self._lam * w
        return value, grad

    def _get_transpose(self) -> Transpose:
        if self._transpose is None:
            self._set_cache("_transpose", build_transpose(self._data))
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

    # ---------------------------------------------------------------- uncounted evaluation
    @property
    def uncounted(self) -> UncountedEvaluation:
        """Uncounted twins of the full-batch quantities, for trace evaluation only."""
        return UncountedEvaluation(self)

    def primal_at_zero(self) -> float:
        """P(0) = (N/n) log K (LPL18 App. A.1), computed in closed form."""
        return self.n_tokens / self.n * math.log(self._n_labels)

    def new_dual(self, dtype: Any = np.float64) -> DualMarginals:
        """Uninitialized dual storage of the right shape."""
        K = self._n_labels
        return DualMarginals(
            np.empty((self.n_tokens, K), dtype=dtype),
            np.empty((self.n_tokens - self.n, K, K), dtype=dtype),
            self._data.offsets,
        )

    def model_marginals(self, w: np.ndarray) -> tuple[DualMarginals, np.ndarray]:
        """ν(w) = α̂(w) for every sequence and the log-partitions (uncounted)."""
        w = _as_weights(w, self.dim)
        mu = self.new_dual()
        log_z = np.empty(self.n)
        with batch_threads():
            _impl.batch_log_marginals(self._data, w, mu.log_nodes, mu.log_edges, log_z)
        return mu, log_z

    def _check_dual(self, mu: DualMarginals) -> tuple[np.ndarray, np.ndarray]:
        K = self._n_labels
        # float32 storage is read as is (no float64 copy of a multi-GiB dual).
        dtype = np.float32 if mu.log_nodes.dtype == np.float32 else np.float64
        ln = np.ascontiguousarray(mu.log_nodes, dtype=dtype)
        le = np.ascontiguousarray(mu.log_edges, dtype=dtype)
        if ln.shape != (self.n_tokens, K) or le.shape != (self.n_tokens - self.n, K, K):
            raise ValueError("dual marginals do not match this problem's shape")
        return ln, le

    def expected_features(self, mu: DualMarginals) -> np.ndarray:
        """Σ_i E_{μ_i}[F] as a d-vector."""
        ln, le = self._check_dual(mu)
        out = np.empty(self.dim)
        with batch_threads():
            _impl.batch_expected_features(self._data, self._get_transpose(), ln, le, out)
        return out

    def conjugate_weights(self, mu: DualMarginals) -> np.ndarray:
        """ŵ(μ) = (1/λ)(F̄ - (1/n) Σ_i E_{μ_i}[F])  (LPL18 eq. 16)."""
        return (self._truth - self.expected_features(mu)) / (self._lam * self.n)

    def entropies(self, mu: DualMarginals) -> np.ndarray:
        """H̃(μ_i) for every sequence (eq. 18, chain-rule form of §5.3)."""
        ln, le = self._check_dual(mu)
        out = np.empty(self.n)
        _impl.batch_entropy(self._data, ln, le, out)
        return out

    def dual(self, mu: DualMarginals) -> float:
        """D(μ) = (1/n) Σ_i H̃(μ_i) - λ/2 ‖ŵ(μ)‖²  (LPL18 eqs. 3, 16, 18)."""
        w_hat = self.conjugate_weights(mu)
        return float(self.entropies(mu).mean() - 0.5 * self._lam * float(w_hat @ w_hat))

    def example_gaps(self, mu: DualMarginals, w: np.ndarray | None = None) -> np.ndarray:
        """g_i = D̃(μ_i ‖ ν_i(w)) with w = ŵ(μ) by default (LPL18 eqs. 10–11)."""
        if w is None:
            w = self.conjugate_weights(mu)
        nu, _ = self.model_marginals(w)
        ln, le = self._check_dual(mu)
        out = np.empty(self.n)
        _impl.batch_kl(self._data, ln, le, nu.log_nodes, nu.log_edges, out)
        # Rounding can leave tiny negative KLs; anything worse is a bug (§5.6).
        bad = out < -1e-8 * np.maximum(1.0, np.abs(out).max(initial=0.0))
        if np.any(bad):
            raise FloatingPointError(f"negative block gaps for sequences {np.flatnonzero(bad)[:5]}")
        return np.maximum(out, 0.0)

    def duality_gap(self, w: np.ndarray | None = None, *, mu: DualMarginals | None = None) -> float:
        """True duality gap (uncounted).

        With ``mu``: P(ŵ(μ)) - D(μ) = mean block gap (G3). With only ``w``: the primal gap
        P(w) - D(ν(w)) = ‖∇P(w)‖² / (2λ) (G2).
        """
        if mu is not None:
            w_hat = self.conjugate_weights(mu)
            return float(self.uncounted.primal(w_hat) - self.dual(mu))
        if w is None:
            raise ValueError("give w (primal gap) or mu (dual gap)")
        return self.primal_gap(w)

    def primal_gap(self, w: np.ndarray) -> float:
        """gap_P(w) = ‖∇P(w)‖² / (2λ) = P(w) - D(ν(w))  (LPL18 eqs. 7–8)."""
        g = self.uncounted.gradient(w)
        return float(g @ g) / (2.0 * self._lam)

    def predict(self, w: np.ndarray, split: str = "test") -> np.ndarray:
        """Viterbi labels of every token of ``split`` (uncounted)."""
        kd = self.split_data(split)
        out = np.empty(len(kd.y), dtype=np.int64)
        with batch_threads():
            _impl.batch_viterbi(kd, _as_weights(w, self.dim), out)
        return out

    def errors(self, w: np.ndarray, split: str = "test") -> dict[str, float]:
        """Per-token (Hamming) and per-sequence 0/1 error rates on ``split`` (§1.6)."""
        kd = self.split_data(split)
        pred = self.predict(w, split)
        wrong = pred != kd.y
        per_seq = np.add.reduceat(wrong, kd.offsets[:-1]) > 0
        return {"token": float(wrong.mean()), "sequence": float(per_seq.mean())}

    def error(self, w: np.ndarray, split: str = "test") -> float:
        """Per-token test error of Viterbi predictions (ALGORITHMS.md §1.6)."""
        return self.errors(w, split)["token"]

    # ---------------------------------------------------------------- derived data
    def _compute_truth_features(self) -> np.ndarray:
        kd = self._data
        K = self._n_labels
        A_tot = int(kd.n_attributes)
        out = np.empty(self.dim)
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

    def radii(self) -> np.ndarray:
        """R_i = ‖F(x_i, y_i) - F(x_i, z^{T_i})‖² with the §1.7 candidate labeling z."""
        if self._radii is None:
            kd = self._data
            K = self._n_labels
            R = np.empty(self.n)
            trans_truth = np.empty((K, K))
            for i in range(self.n):
                s, e = int(kd.offsets[i]), int(kd.offsets[i + 1])
                y = kd.y[s:e]
                T = e - s
                counts = np.bincount(y, minlength=K)
                absent = np.flatnonzero(counts == 0)
                z = int(absent[0]) if len(absent) else int(np.argmin(counts))
                weights = np.zeros((T, K))
                weights[np.arange(T), y] += 1.0
                weights[:, z] -= 1.0
                lo, hi = _kernels.support_bounds(kd, i)
                E_loc = np.empty((hi - lo, K))
                _kernels.expected_emission(kd, i, weights, E_loc)
                _kernels.truth_transitions(kd, i, trans_truth)
                trans_truth[z, z] -= T - 1
                R[i] = float(np.sum(E_loc**2) + np.sum(trans_truth**2))
            R.setflags(write=False)
            self._set_cache("_radii", R)
        return self._radii  # type: ignore[return-value]


class UncountedEvaluation:
    """P, ∇P and ν(w) without touching the counters: for the runner's trace evaluation.

    Optimizers must not use these; the conformance suite checks (through the audit cell
    of :class:`~crfopt.kernels.arrays.KernelData`) that an optimizer's inference is all counted.
    """

    __slots__ = ("_p",)

    def __init__(self, problem: CRFProblem) -> None:
        self._p = problem

    def primal(self, w: np.ndarray) -> float:
        return self._p._value_grad(w, want_grad=False, counted=False)[0]

    def gradient(self, w: np.ndarray) -> np.ndarray:
        return self._p._value_grad(w, want_grad=True, counted=False)[1]

    def value_and_gradient(self, w: np.ndarray) -> tuple[float, np.ndarray]:
        return self._p._value_grad(w, want_grad=True, counted=False)
