"""Trained models: a documented, versioned and safe file format (no pickle).

A model file (conventionally ``*.crfopt``) is a NumPy ``.npz`` archive read with
``allow_pickle=False``:

=============== ============================== =========================================
key             type                           content
=============== ============================== =========================================
``meta``        uint8, UTF-8 JSON              ``{"format": "crfopt-model", "version": 1,
                                               "crfopt": ..., "bias": ..., "template":
                                               ..., "training": {...}}``
``labels``      uint8, UTF-8 JSON list         the K label names, in weight order
``attributes``  uint8, UTF-8 JSON list         the A attribute names, in weight order
``emission``    float64 (K, A)                 W_E
``bias``        float64 (K, 3)                 W_B (count, first, last); absent if no bias
``transition``  float64 (K, K)                 W_T (row: label at t, column: at t+1)
=============== ============================== =========================================

Text is stored as UTF-8 bytes rather than NumPy string arrays so that a million
attribute names cost their length, not a million times the longest one. The emission is
written attribute-major (``fortran_order`` in its ``.npy`` header), the order in which a
tagger reads it; files written row-major are read as well. :meth:`Model.save` leaves out
the attributes whose weights are all zero unless ``prune=False`` (:meth:`Model.pruned`).

Reading is bounded: before any entry is decompressed, the archive's entry names, the
uncompressed sizes it declares and each ``.npy`` header (dtype, shape) are checked
against the format, against each other (emission K×A with K labels and A attributes…)
and against a byte limit, and an entry is never read past its declared size. Label
names may not contain whitespace or control characters (``crfopt tag`` writes them
into columns of text lines). Anything malformed is a :class:`ModelFormatError` saying
what is wrong.
"""

from __future__ import annotations

import json
import math
import os
import struct
import unicodedata
import zipfile
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from crfopt._version import __version__
from crfopt.data.fileio import atomic_write

if TYPE_CHECKING:
    from crfopt.data.features import AttributeEncoder, TemplateEncoder
    from crfopt.data.vocabulary import Vocabulary

FORMAT = "crfopt-model"
VERSION = 1


class ModelFormatError(ValueError):
    """A model file that is not a crfopt model, is corrupted, or has another version."""


#: The entries of a model file: (dtype kind, item size, number of dimensions).
_ENTRIES: dict[str, tuple[str, int, int]] = {
    "meta": ("u", 1, 1),
    "labels": ("u", 1, 1),
    "attributes": ("u", 1, 1),
    "emission": ("f", 8, 2),
    "bias": ("f", 8, 2),
    "transition": ("f", 8, 2),
}
_REQUIRED = ("meta", "labels", "attributes", "emission", "transition")
#: Metadata and the label list are small (a template, a run summary, K names).
_MAX_SMALL_TEXT = 64 * 2**20
#: deflate reaches ~1000:1 only on runs of equal bytes; trained float64 weights barely
#: compress and name lists ~10:1, so a large entry beyond this is a zip bomb.
_MAX_RATIO = 200
_RATIO_FROM = 2**20  # tiny entries (an all-zero bias block) may compress further
#: Bytes decompressed at a time when an entry is read.
_READ_BLOCK = 2**20
#: Default limit on the uncompressed size of a model when the OS does not tell how much
#: memory is available.
_FALLBACK_MAX_BYTES = 16 * 2**30
#: Errors a damaged archive raises from zipfile, zlib and numpy's header parser.
_DAMAGE = (
    OSError,
    EOFError,
    ValueError,
    zipfile.BadZipFile,
    zlib.error,
    struct.error,
    NotImplementedError,  # an unknown compression method
    RuntimeError,  # an entry flagged as encrypted
    UnicodeDecodeError,
    KeyError,
    IndexError,
    OverflowError,
    SyntaxError,  # numpy's header parser (ast.literal_eval)
    TypeError,
)


def check_label_names(labels: Sequence[Any], where: str = "labels") -> list[str]:
    """The labels as a list of str, refused if a name could not be written back safely.

    ``crfopt tag`` appends each predicted label to a text line as one column, so a name
    must be non-empty, unique and free of whitespace and control characters (a newline
    would inject lines, a tab or space extra columns, ESC terminal sequences).
    """
    if isinstance(labels, (str, bytes)) or not isinstance(labels, Sequence):
        raise ModelFormatError(f"{where}: expected a list of label names")
    if not labels:
        raise ModelFormatError(f"{where}: no labels")
    for k, name in enumerate(labels):
        if not isinstance(name, str):
            raise ModelFormatError(f"{where}: label {k} is a {type(name).__name__}, not a string")
        if not name:
            raise ModelFormatError(f"{where}: label {k} is empty")
        for ch in name:
            if ch.isspace() or unicodedata.category(ch) in ("Cc", "Cs", "Zl", "Zp"):
                raise ModelFormatError(
                    f"{where}: label {k} ({name!r}) contains U+{ord(ch):04X} "
                    f"({unicodedata.name(ch, 'a control character')}); label names may not "
                    "contain whitespace or control characters"
                )
    if len(set(labels)) != len(labels):
        dup = next(x for j, x in enumerate(labels) if x in labels[:j])
        raise ModelFormatError(f"{where}: label {dup!r} occurs more than once")
    return list(labels)


def _check_attribute_names(attributes: Any, where: str) -> list[str]:
    if isinstance(attributes, (str, bytes)) or not isinstance(attributes, Sequence):
        raise ModelFormatError(f"{where}: expected a list of attribute names")
    if not all(isinstance(a, str) for a in attributes):
        raise ModelFormatError(f"{where}: attribute names must all be strings")
    if len(set(attributes)) != len(attributes):
        raise ModelFormatError(f"{where}: attribute names are not unique")
    return list(attributes)


def default_max_bytes() -> int:
    """The default limit of :meth:`Model.load`: the memory available now (else 16 GiB)."""
    from crfopt.optim.contract import available_memory

    return available_memory() or _FALLBACK_MAX_BYTES


def _text(obj: Any) -> np.ndarray:
    return np.frombuffer(json.dumps(obj, ensure_ascii=False).encode("utf-8"), dtype=np.uint8)


def _untext(arr: np.ndarray, path: str, key: str) -> Any:
    try:
        return json.loads(bytes(arr.astype(np.uint8)).decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        # ValueError covers JSONDecodeError and the int-digit limit of huge numbers
        raise ModelFormatError(f"{path}: entry {key!r} is not valid UTF-8 JSON ({exc})") from None


class _Entry:
    """One ``.npy`` member of the archive, its header read and checked, data not yet."""

    def __init__(self, zf: zipfile.ZipFile, info: zipfile.ZipInfo, key: str, path: str):
        self.zf, self.info, self.key, self.path = zf, info, key, path
        kind, itemsize, ndim = _ENTRIES[key]
        where = f"{path}: entry {key!r}"
        with zf.open(info) as f:
            version = np.lib.format.read_magic(f)
            if version not in ((1, 0), (2, 0)):
                raise ModelFormatError(f"{where}: unsupported .npy version {version}")
            read_header = getattr(np.lib.format, f"read_array_header_{version[0]}_0")
            try:
                shape, fortran, dtype = read_header(f)
            except (zipfile.BadZipFile, zlib.error, EOFError):
                raise  # damage of the archive itself, reported as such by load()
            except Exception as exc:  # numpy's parser of the header dict
                # (ast.literal_eval + tokenize) raises SyntaxError, TokenError,
                # ValueError, RecursionError… on garbage; all mean the same here
                raise ModelFormatError(
                    f"{where}: unreadable .npy header ({type(exc).__name__}: {exc})"
                ) from None
            self.offset = f.tell()
        if dtype.kind != kind or dtype.itemsize != itemsize or dtype.hasobject:
            raise ModelFormatError(
                f"{where}: dtype {dtype.str}, expected {'uint8' if kind == 'u' else 'float64'}"
            )
        if len(shape) != ndim or any(d < 0 for d in shape):
            raise ModelFormatError(f"{where}: shape {shape}, expected {ndim} dimension(s)")
        self.shape, self.fortran, self.dtype = tuple(shape), bool(fortran), dtype
        self.nbytes = math.prod(shape) * itemsize
        if info.file_size != self.offset + self.nbytes:
            raise ModelFormatError(
                f"{where}: the archive declares {info.file_size:,} bytes but its header "
                f"{shape} {dtype.str} makes {self.offset + self.nbytes:,}"
            )

    def read(self) -> np.ndarray:
        """The array, reading exactly the declared bytes (the CRC is checked at the end).

        Read in blocks straight into the array's memory: a tagger's peak memory holds
        the weights once, not the decompressed bytes and a copy beside them.
        """
        flat = np.empty(self.nbytes, dtype=np.uint8)
        with self.zf.open(self.info) as f:
            f.read(self.offset)
            done = 0
            while done < self.nbytes:
                block = f.read(min(_READ_BLOCK, self.nbytes - done))
                if not block:
                    break
                flat[done : done + len(block)] = np.frombuffer(block, dtype=np.uint8)
                done += len(block)
            if done != self.nbytes or f.read(1):
                raise ModelFormatError(f"{self.path}: entry {self.key!r} is truncated")
        arr = flat.view(self.dtype).reshape(self.shape, order="F" if self.fortran else "C")
        native = self.dtype.newbyteorder("=")
        return arr if arr.dtype == native else arr.astype(native)


def _entries(zf: zipfile.ZipFile, path: str, max_bytes: int) -> dict[str, _Entry]:
    """The archive's members checked against the format and the limits, headers read."""
    infos: dict[str, zipfile.ZipInfo] = {}
    unexpected = []
    for info in zf.infolist():
        key = info.filename[:-4] if info.filename.endswith(".npy") else None
        if key not in _ENTRIES:
            unexpected.append(info.filename)
        elif key in infos:
            raise ModelFormatError(f"{path}: entry {info.filename!r} occurs twice")
        else:
            infos[key] = info
    missing = [k for k in _REQUIRED if k not in infos]
    if missing:  # first: it says "not a model" of an .npz with other content
        raise ModelFormatError(f"{path}: missing entries {missing}")
    if unexpected:
        raise ModelFormatError(f"{path}: unexpected entry {unexpected[0]!r} in a model file")
    total = sum(i.file_size for i in infos.values())
    if total > max_bytes:
        raise ModelFormatError(
            f"{path}: the entries declare {total:,} bytes uncompressed, over the limit of "
            f"{max_bytes:,} (max_bytes)"
        )
    for key, info in infos.items():
        if key in ("meta", "labels") and info.file_size > _MAX_SMALL_TEXT:
            raise ModelFormatError(
                f"{path}: entry {key!r} declares {info.file_size:,} bytes; at most "
                f"{_MAX_SMALL_TEXT:,} are expected"
            )
        if info.file_size > _RATIO_FROM and info.file_size > _MAX_RATIO * info.compress_size:
            raise ModelFormatError(
                f"{path}: entry {key!r} expands {info.compress_size:,} compressed bytes to "
                f"{info.file_size:,} (over {_MAX_RATIO}:1): not model weights"
            )
    return {key: _Entry(zf, info, key, path) for key, info in infos.items()}


def _check_shapes(entries: dict[str, _Entry], path: str) -> tuple[int, int]:
    """(K, A) from the weight blocks' declared shapes, which must agree with each other."""
    K, A = entries["emission"].shape
    expected = {"emission": (K, A), "transition": (K, K), "bias": (K, 3)}
    for key, shape in expected.items():
        if key in entries and entries[key].shape != shape:
            raise ModelFormatError(
                f"{path}: {key} has shape {entries[key].shape}, expected {shape} "
                f"(emission is {K}×{A})"
            )
    return K, A


def _check_meta(meta: Any, path: str) -> dict[str, Any]:
    if not isinstance(meta, dict):
        raise ModelFormatError(
            f"{path}: bad metadata (a JSON {type(meta).__name__}, not an object)"
        )
    if meta.get("format") != FORMAT:
        raise ModelFormatError(f"{path}: not a crfopt model (format {meta.get('format')!r})")
    if meta.get("version") != VERSION or isinstance(meta.get("version"), bool):
        raise ModelFormatError(
            f"{path}: model format version {meta.get('version')!r}; this crfopt "
            f"({__version__}) reads version {VERSION}"
        )
    if not isinstance(meta.get("bias"), bool):
        raise ModelFormatError(f"{path}: metadata 'bias' must be true or false")
    training = meta.get("training")
    if training is not None and not isinstance(training, dict):
        raise ModelFormatError(f"{path}: metadata 'training' must be an object")
    corpus = (training or {}).get("corpus")
    if corpus is not None:
        ok = (
            isinstance(corpus, dict)
            and corpus.get("format", "conll") in ("conll", "conllu")
            and isinstance(corpus.get("columns") or [], list)
            and all(isinstance(c, str) for c in corpus.get("columns") or [])
            and isinstance(corpus.get("label"), (str, type(None)))
        )
        if not ok:
            raise ModelFormatError(f"{path}: metadata 'training.corpus' is malformed")
    template = meta.get("template")
    if template is not None:
        from crfopt.data.template_files import template_from_spec

        try:
            template_from_spec(template)
        except (ValueError, TypeError, AttributeError, KeyError) as exc:
            raise ModelFormatError(f"{path}: metadata 'template' is invalid ({exc})") from None
    return meta


@dataclass
class Model:
    """Weights in the paper's layout plus everything needed to tag new text."""

    labels: list[str]
    attributes: list[str]
    emission: np.ndarray
    bias: np.ndarray | None
    transition: np.ndarray
    template: Any = None
    training: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.labels = check_label_names(self.labels)
        self.attributes = _check_attribute_names(self.attributes, "attributes")
        K, A = len(self.labels), len(self.attributes)
        # attribute-major in memory (emission.T is C-contiguous): the decode kernels read
        # one attribute's K weights per occurrence, one cache line instead of K
        self.emission = np.asfortranarray(self.emission, dtype=np.float64)
        self.transition = np.ascontiguousarray(self.transition, dtype=np.float64)
        if self.bias is not None:
            self.bias = np.ascontiguousarray(self.bias, dtype=np.float64)
        if self.emission.shape != (K, A):
            raise ModelFormatError(f"emission has shape {self.emission.shape}, expected {(K, A)}")
        if self.transition.shape != (K, K):
            raise ModelFormatError(
                f"transition has shape {self.transition.shape}, expected {(K, K)}"
            )
        if self.bias is not None and self.bias.shape != (K, 3):
            raise ModelFormatError(f"bias has shape {self.bias.shape}, expected {(K, 3)}")
        for name, arr in (
            ("emission", self.emission),
            ("transition", self.transition),
            ("bias", self.bias),
        ):
            if arr is not None and not np.all(np.isfinite(arr)):
                raise ModelFormatError(f"{name} weights are not all finite")

    @property
    def n_labels(self) -> int:
        return len(self.labels)

    def __getstate__(self) -> dict[str, Any]:
        # the lookup tables are rebuilt on first use rather than pickled beside the model
        return {k: v for k, v in self.__dict__.items() if k != "_lookup_cache"}

    def _cached(self, what: str, build: Callable[[], Any]) -> Any:
        """``build()``, kept while the attribute list and template are the same objects
        of the same length. The lookup tables of a large dictionary take a good part of a
        second to build; a tagger called once per sentence must not pay that per call.
        (Edit a model by building a new one, not by editing its lists in place.)
        """
        cache = self.__dict__.setdefault("_lookup_cache", {})
        hit = cache.get(what)
        if (
            hit is None
            or hit[0] is not self.attributes
            or hit[1] != len(self.attributes)
            or hit[2] is not self.template
        ):
            # the objects themselves are kept (not their ids, which a new list could reuse)
            hit = cache[what] = (self.attributes, len(self.attributes), self.template, build())
        return hit[3]

    def vocabulary(self) -> Vocabulary:
        """The attribute dictionary, frozen (unknown attributes are dropped), for encoding
        new sequences as training did; built once per model."""
        from crfopt.data.vocabulary import Vocabulary

        return self._cached("vocabulary", lambda: Vocabulary(self.attributes, frozen=True))

    def text_encoder(self) -> TemplateEncoder | AttributeEncoder:
        """The encoder of text into this model's columns through its template (built
        once per model); a :class:`ValueError` for a model without a text template."""
        from crfopt.data.template_files import template_from_spec

        if not self.template:
            raise ValueError("this model has no text template")

        def build() -> TemplateEncoder | AttributeEncoder:
            return template_from_spec(self.template).encoder(self.attributes)

        return self._cached("text_encoder", build)

    def pruned(self) -> Model:
        """The model without the attributes whose emission weights are all zero.

        Such an attribute adds nothing to any score, and a tagger drops an attribute
        missing from the dictionary as it drops any unknown one, so the pruned model
        gives the same predictions and marginals. ℓ1 regularization leaves many of them
        (attributes seen too rarely to earn a weight); CRFsuite likewise writes only
        its non-zero features. ``training["pruned_attributes"]`` counts those removed
        (added up over repeated pruning). Returns ``self`` when there is nothing to prune.
        """
        keep = np.any(self.emission != 0.0, axis=0)
        dropped = int(keep.size - np.count_nonzero(keep))
        if dropped == 0:
            return self
        training = dict(self.training)
        training["pruned_attributes"] = int(training.get("pruned_attributes", 0)) + dropped
        return Model(
            labels=list(self.labels),
            attributes=[a for a, k in zip(self.attributes, keep.tolist()) if k],
            emission=self.emission.T[keep].T,  # stays attribute-major: no copy to reorder
            bias=self.bias,
            transition=self.transition,
            template=self.template,
            training=training,
        )

    def save(self, path: str | os.PathLike[str], *, prune: bool = True) -> Path:
        """Write the model atomically (temporary file + rename).

        ``prune`` (default) leaves out the attributes whose weights are all zero
        (:meth:`pruned`: the same predictions from a smaller file); ``prune=False``
        writes the whole dictionary.
        """
        if prune:
            return self.pruned().save(path, prune=False)
        path = Path(path)
        meta = {
            "format": FORMAT,
            "version": VERSION,
            "crfopt": __version__,
            "bias": self.bias is not None,
            "template": self.template,
            "training": self.training,
        }
        arrays = {
            "meta": _text(meta),
            "labels": _text(list(self.labels)),
            "attributes": _text(list(self.attributes)),
            "emission": self.emission,
            "transition": self.transition,
        }
        if self.bias is not None:
            arrays["bias"] = self.bias
        with atomic_write(path, suffix=".npz") as f:
            np.savez_compressed(f, **arrays)
        return path

    @classmethod
    def load(cls, path: str | os.PathLike[str], *, max_bytes: int | None = None) -> Model:
        """Read a model file; anything unexpected is a :class:`ModelFormatError`.

        ``max_bytes`` bounds the uncompressed size the archive may declare (default:
        the memory available now); it is checked, with the entry names, their declared
        sizes and ``.npy`` headers and the weight shapes, before anything is
        decompressed. A missing file is ``FileNotFoundError``, as for any file.
        """
        p = os.fspath(path)
        limit = default_max_bytes() if max_bytes is None else int(max_bytes)
        with open(p, "rb") as fh:
            try:
                with zipfile.ZipFile(fh) as zf:
                    return cls._read(zf, p, limit)
            except ModelFormatError:
                raise
            except _DAMAGE as exc:
                raise ModelFormatError(
                    f"{p}: not a readable crfopt model file ({type(exc).__name__}: {exc})"
                ) from None

    @classmethod
    def _read(cls, zf: zipfile.ZipFile, p: str, limit: int) -> Model:
        entries = _entries(zf, p, limit)
        K, A = _check_shapes(entries, p)
        meta = _check_meta(_untext(entries["meta"].read(), p, "meta"), p)
        if meta["bias"] != ("bias" in entries):
            raise ModelFormatError(
                f"{p}: metadata says bias={str(meta['bias']).lower()} but the bias block is "
                f"{'absent' if meta['bias'] else 'present'}"
            )
        try:
            labels = check_label_names(_untext(entries["labels"].read(), p, "labels"))
        except ModelFormatError as exc:
            raise ModelFormatError(f"{p}: {exc}") from None
        if len(labels) != K:
            raise ModelFormatError(f"{p}: {len(labels)} label names for {K} weight rows")
        if entries["attributes"].nbytes < (3 * A + 1 if A else 2):  # [""] + ,"" per name
            raise ModelFormatError(f"{p}: the attribute list is too short for {A} names")
        attributes = _check_attribute_names(
            _untext(entries["attributes"].read(), p, "attributes"), f"{p}: attributes"
        )
        if len(attributes) != A:
            raise ModelFormatError(f"{p}: {len(attributes)} attribute names for {A} columns")
        try:
            return cls(
                labels=labels,
                attributes=attributes,
                emission=entries["emission"].read(),
                bias=entries["bias"].read() if meta["bias"] else None,
                transition=entries["transition"].read(),
                template=meta.get("template"),
                training=meta.get("training") or {},
            )
        except ModelFormatError as exc:
            raise ModelFormatError(f"{p}: {exc}") from None

    @classmethod
    def from_problem(
        cls, problem: Any, w: np.ndarray, training: dict[str, Any] | None = None
    ) -> Model:
        """The model of weights ``w`` of ``problem``, with its dictionaries and template.

        Text problems carry their feature template and column layout in their metadata
        (so ``crfopt tag`` can featurize new text); other problems get generic names.
        """
        blocks = problem.unpack(np.asarray(w, dtype=np.float64))
        labels = problem.label_names or [str(k) for k in range(problem.n_labels)]
        attributes = problem.attribute_names or [f"x{j}" for j in range(problem.n_attributes)]
        meta = problem.metadata
        info = dict(training or {})
        if meta.get("corpus"):
            info.setdefault("corpus", meta["corpus"])
        return cls(
            labels=list(labels),
            attributes=list(attributes),
            emission=blocks.emission.copy(order="F"),
            bias=None if blocks.bias is None else blocks.bias.copy(),
            transition=blocks.transition.copy(),
            template=meta.get("template_spec"),
            training=info,
        )

    # ------------------------------------------------------------------ inference
    def weights_for(self, problem: Any) -> np.ndarray:
        """The flat weight vector of a problem built with this model's dictionaries."""
        return problem.pack(self.emission, self.bias, self.transition)

    def problem_for(
        self, indptr: np.ndarray, indices: np.ndarray, values: np.ndarray, lengths: np.ndarray
    ) -> Any:
        """Sequences given as a CSR over their tokens (attribute ids of this model's
        dictionary) as a problem with this model's sizes; labels are placeholders (0)."""
        from crfopt.core.problem import CRFProblem
        from crfopt.kernels.arrays import Sequences

        N = int(np.sum(lengths))
        return CRFProblem(
            Sequences(
                lengths=lengths,
                labels=np.zeros(N, dtype=np.int64),
                indptr=indptr,
                indices=indices,
                values=values,
            ),
            n_labels=self.n_labels,
            n_attributes=len(self.attributes),
            bias=self.bias is not None,
        )

    def _decode_inputs(
        self, indptr: np.ndarray, indices: np.ndarray, values: np.ndarray, lengths: np.ndarray
    ) -> tuple[np.ndarray, ...]:
        """The CSR decode kernels' arguments (``csr_viterbi``, ``csr_node_marginals``:
        crfopt/kernels/_numba/decode.py and the NumPy twin) for sequences given as a
        CSR over their tokens, checked as a problem would check them."""
        from crfopt.kernels.arrays import checked_rows, merge_duplicates

        lengths = np.asarray(lengths, dtype=np.int64)
        if len(lengths) and lengths.min() < 1:
            raise ValueError("every sequence must have at least one token")
        offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        N, A = int(offsets[-1]), len(self.attributes)
        indptr, indices, values = checked_rows(indptr, indices, values, N, A)
        # an attribute listed twice in a token counts once with the summed value, as in
        # a problem's kernel data (so both decode the same scores)
        indptr, indices, values = merge_duplicates(indptr, indices, values)
        bias = np.zeros((self.n_labels, 0)) if self.bias is None else self.bias
        return (offsets, indptr, indices, values, self.emission.T, bias, self.transition)

    def viterbi(
        self, indptr: np.ndarray, indices: np.ndarray, values: np.ndarray, lengths: np.ndarray
    ) -> np.ndarray:
        """Viterbi labels (ids) of sequences given as a CSR over their tokens (attribute
        ids of this model's dictionary), decoded as :meth:`crfopt.CRFProblem.predict`
        decodes them; a batch of ``PARALLEL_FROM`` tokens or more (4096, the compiled
        kernel's) uses every numba thread (``numba.set_num_threads`` limits them)."""
        from crfopt.kernels.twin import impl

        args = self._decode_inputs(indptr, indices, values, lengths)
        out = np.empty(len(args[1]) - 1, dtype=np.int64)
        impl.csr_viterbi(*args, out)
        return out

    def node_marginals(
        self, indptr: np.ndarray, indices: np.ndarray, values: np.ndarray, lengths: np.ndarray
    ) -> np.ndarray:
        """P(y_t = k | x) of every token (N × K) of sequences given as in :meth:`viterbi`."""
        from crfopt.kernels.twin import impl

        args = self._decode_inputs(indptr, indices, values, lengths)
        nodes = np.empty((len(args[1]) - 1, self.n_labels))
        impl.csr_node_marginals(*args, nodes)
        return nodes


def split_labels(ids: np.ndarray, lengths: np.ndarray, labels: Sequence[Any]) -> list[list[Any]]:
    """Label ids of consecutive sequences (``lengths`` tokens each) as one list of
    labels per sequence."""
    names = np.empty(len(labels), dtype=object)
    names[:] = list(labels)
    flat = names[ids].tolist()
    ends = np.cumsum(lengths).tolist()
    return [flat[a:b] for a, b in zip([0, *ends[:-1]], ends)]
