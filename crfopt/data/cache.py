"""The featurization cache: a problem built from raw files is stored once and reloaded.

Entries are ``.npz`` files (kernel arrays) with the dictionaries and metadata as UTF-8
JSON, under ``<cache>/problems/<name>-<key>.npz``. The key hashes what changes the
arrays — the raw files' checksums (:func:`crfopt.data.sources.verify`), the template,
the loader's parameters — plus :data:`CACHE_FORMAT` and
:data:`crfopt.data.features.FEATURIZER_VERSION`, never λ. Writes are atomic, so an
interrupted build never leaves a half-written entry, and a damaged entry is rebuilt.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from crfopt.core.problem import CRFProblem
from crfopt.data.features import FEATURIZER_VERSION
from crfopt.data.fileio import atomic_write
from crfopt.data.paths import cache_dir

#: Bump when the stored layout changes.
#: 2: text problems carry their template and corpus layout (for `crfopt tag`)
CACHE_FORMAT = 2


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
    path = cache_dir("problems") / f"{name}-{key}.npz"
    if path.exists() and not refresh:
        try:
            with np.load(path, allow_pickle=False) as z:
                arrays = {k: z[k] for k in z.files if k != "meta"}
                meta = json.loads(bytes(z["meta"]).decode("utf-8"))
            problem = CRFProblem.from_arrays(arrays, meta, lam=lam)
            return problem
        except (OSError, ValueError, KeyError, json.JSONDecodeError):
            path.unlink(missing_ok=True)  # a damaged entry is rebuilt, never trusted
    t0 = time.perf_counter()
    problem = build()
    seconds = time.perf_counter() - t0
    arrays, meta = problem.to_arrays()
    meta["metadata"] = {**meta["metadata"], "featurization_seconds": round(seconds, 3)}
    with atomic_write(path, suffix=".npz") as f:
        np.savez(f, meta=_text(meta), **arrays)
    if lam is not None and lam != problem.lam:
        problem = problem.with_lam(lam)
    return problem
