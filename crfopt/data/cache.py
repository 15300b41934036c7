"""The featurization cache: a problem built from raw files is stored once and reloaded.

Entries are ``.npz`` files (kernel arrays) with the dictionaries and metadata as UTF-8
JSON, under ``<cache>/problems/<name>-<key>.npz``. The key hashes what changes the
arrays — the raw files' checksums (:func:`crfopt.data.sources.verify`), the template,
the loader's parameters — plus :data:`CACHE_FORMAT` and
:data:`crfopt.data.features.FEATURIZER_VERSION`, never λ. Writes are atomic, so an
interrupted build never leaves a half-written entry.

Every entry is verified on load: it stores the SHA-256 of its arrays, and its label ids,
offsets and attribute ids are checked against the sizes in its metadata (so an edited
entry cannot index out of range in the kernels). An entry that fails (unreadable zip,
0 bytes, checksum mismatch, ids out of range) is deleted and rebuilt with a
:class:`CacheWarning`. A cache that cannot be written (full disk, read-only folder) is a
warning too: the problem is already built in memory.
"""

from __future__ import annotations

import hashlib
import json
import time
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from crfopt.core.problem import CRFProblem
from crfopt.data.features import FEATURIZER_VERSION
from crfopt.data.fileio import atomic_write, clean_stale_tmp
from crfopt.data.paths import cache_dir
from crfopt.kernels.arrays import kernel_attributes

#: Bump when the stored layout changes.
#: 2: text problems carry their template and corpus layout (for `crfopt tag`)
#: 3: the arrays' SHA-256 in the metadata
CACHE_FORMAT = 3


class CacheWarning(UserWarning):
    """A featurization cache entry was damaged (and rebuilt) or could not be stored."""


class DamagedEntryError(ValueError):
    """A cache entry that fails its checksum or its range checks."""


def arrays_digest(arrays: Mapping[str, np.ndarray]) -> str:
    """SHA-256 of named arrays: names, dtypes, shapes and bytes, in name order."""
    h = hashlib.sha256()
    for name in sorted(arrays):
        a = np.ascontiguousarray(arrays[name])
        h.update(json.dumps([name, a.dtype.str, list(a.shape)]).encode())
        h.update(a.tobytes())
    return h.hexdigest()


def _check_range(what: str, a: np.ndarray, hi: int, lo: int = 0) -> None:
    if a.size and (int(a.min()) < lo or int(a.max()) >= hi):
        raise DamagedEntryError(f"{what} outside {lo}..{hi - 1} ({int(a.min())}..{int(a.max())})")


def _check_monotone(what: str, a: np.ndarray, end: int) -> None:
    if a.size == 0 or int(a[0]) != 0 or int(a[-1]) != end or np.any(np.diff(a) < 0):
        raise DamagedEntryError(f"{what} is not a non-decreasing 0..{end} index")


def check_entry(arrays: Mapping[str, np.ndarray], meta: Mapping[str, Any]) -> None:
    """Raise :class:`DamagedEntryError` unless the entry's arrays match its checksum and
    every id the kernels index with is in range (labels, offsets, attributes)."""
    expected = meta.get("arrays_sha256")
    if expected is None or arrays_digest(arrays) != expected:
        raise DamagedEntryError("arrays checksum mismatch")
    K = int(meta["n_labels"])
    for split, info in meta["splits"].items():
        A = kernel_attributes(info)
        y = arrays[f"{split}.y"]
        # an evaluation split may hold labels the training split never had: id -1, always
        # an error (features.py); the training split's ids index the kernels' tables
        _check_range(f"{split} label ids", y, K, lo=0 if split == "train" else -1)
        _check_monotone(f"{split} offsets", arrays[f"{split}.offsets"], len(y))
        if info["dense"]:
            if arrays[f"{split}.X"].shape != (len(y), A):
                raise DamagedEntryError(f"{split} X does not have {len(y)} x {A} entries")
            continue
        indices = arrays[f"{split}.indices"]
        _check_monotone(f"{split} indptr", arrays[f"{split}.indptr"], len(indices))
        _check_range(f"{split} attribute ids", indices, A)
        support = arrays[f"{split}.support"]
        _check_range(f"{split} support", support, A)
        ptr = arrays[f"{split}.support_ptr"]
        _check_monotone(f"{split} support_ptr", ptr, len(support))
        if len(ptr) != len(arrays[f"{split}.offsets"]):
            raise DamagedEntryError(f"{split} support_ptr and offsets differ in length")
        local = arrays[f"{split}.local"]
        if len(local) != len(indices):
            raise DamagedEntryError(f"{split} local and indices differ in length")
        # local[p] is where indices[p] sits in its sequence's support list
        token_seq = np.repeat(np.arange(len(ptr) - 1), np.diff(arrays[f"{split}.offsets"]))
        nnz_seq = np.repeat(token_seq, np.diff(arrays[f"{split}.indptr"]))
        width = np.diff(ptr)[nnz_seq]
        if np.any(local < 0) or np.any(local >= width):
            raise DamagedEntryError(f"{split} local ids outside their sequence's support")
        if not np.array_equal(support[ptr[:-1][nnz_seq] + local], indices):
            raise DamagedEntryError(f"{split} local ids do not point at their attributes")


def _text(obj: Any) -> np.ndarray:
    """JSON as a uint8 array (``np.savez`` without pickles)."""
    return np.frombuffer(json.dumps(obj, ensure_ascii=False).encode("utf-8"), dtype=np.uint8)


def cache_key(parts: Mapping[str, Any]) -> str:
    """The entry key of a problem described by ``parts`` (JSON-able)."""
    payload = {"cache_format": CACHE_FORMAT, "featurizer": FEATURIZER_VERSION, **parts}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:24]


def cached_problem(
    name: str,
    key_parts: Mapping[str, Any],
    build: Callable[[], CRFProblem],
    *,
    lam: float | None = None,
    refresh: bool = False,
) -> CRFProblem:
    """The problem stored under ``key_parts``, or ``build()`` it and store it.

    The cache holds the processed kernel arrays, so a cached load does no work beyond
    reading the file; λ is applied after loading (it is not part of the key).
    """
    key = cache_key(key_parts)
    folder = cache_dir("problems")
    clean_stale_tmp(folder)  # left by a build killed mid-write
    path = folder / f"{name}-{key}.npz"
    if path.exists() and not refresh:
        try:
            return _load_entry(path, lam)
        except Exception as exc:
            reason = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            warnings.warn(
                f"featurization cache entry {path} is damaged ({reason}); deleted and rebuilt",
                CacheWarning,
                stacklevel=2,
            )
            path.unlink(missing_ok=True)
    t0 = time.perf_counter()
    problem = build()
    seconds = time.perf_counter() - t0
    arrays, meta = problem.to_arrays()
    meta["metadata"] = {**meta["metadata"], "featurization_seconds": round(seconds, 3)}
    meta["arrays_sha256"] = arrays_digest(arrays)
    try:
        with atomic_write(path, suffix=".npz") as f:
            np.savez(f, meta=_text(meta), **arrays)
    except OSError as exc:  # full disk, read-only cache: the problem is built, keep going
        warnings.warn(
            f"could not store the featurization cache entry {path} ({exc}); the problem "
            "will be featurized again next time",
            CacheWarning,
            stacklevel=2,
        )
    if lam is not None and lam != problem.lam:
        problem = problem.with_lam(lam)
    return problem


def _load_entry(path: Any, lam: float | None) -> CRFProblem:
    with np.load(path, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files if k != "meta"}
        meta = json.loads(bytes(z["meta"]).decode("utf-8"))
    check_entry(arrays, meta)
    return CRFProblem.from_arrays(arrays, meta, lam=lam)
