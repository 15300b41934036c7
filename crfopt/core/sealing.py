"""Sealed arrays and their digests: how a problem's data is made immutable and how the
runner sees that a run changed it (crfopt/core/problem.py, ``changed_data``).

An array whose ultimate base is a ``bytes`` object cannot be made writeable again, so a
plugin cannot rewrite data that every later run of the process shares; a sha256 of each
array's raw bytes tells what changed when something still did (forced attributes, λ).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from crfopt.kernels.arrays import KernelData

__all__ = ["FIELD_NAMES", "hash_arrays", "is_sealed", "readonly", "sealed", "sealed_data"]


def hash_arrays(h: Any, *arrays: np.ndarray) -> None:
    for a in arrays:
        a = np.ascontiguousarray(a)
        h.update(str(a.dtype).encode())
        h.update(str(a.shape).encode())
        if a.size:
            h.update(memoryview(a).cast("B"))


def readonly(a: Any, dtype: Any = None) -> np.ndarray:
    return sealed(np.ascontiguousarray(a, dtype=dtype))


def is_sealed(a: np.ndarray) -> bool:
    base: Any = a
    while isinstance(base, np.ndarray):
        base = base.base
    return isinstance(base, bytes) and not a.flags.writeable


def sealed(a: np.ndarray) -> np.ndarray:
    """``a`` as a read-only view of an immutable ``bytes`` copy.

    ``setflags(write=False)`` alone can be undone by anyone holding an array that owns
    its memory (``arr.setflags(write=True)``, also through ``arr.base``); an array whose
    ultimate base is ``bytes`` cannot be made writeable again, so a plugin cannot
    rewrite the data every later run of the process shares. One copy at construction.
    """
    if is_sealed(a):
        return a
    a = np.ascontiguousarray(a)
    out = np.frombuffer(a.tobytes(), dtype=a.dtype).reshape(a.shape)
    assert not out.flags.writeable
    return out


def sealed_data(kd: KernelData) -> KernelData:
    """Every data array of ``kd`` sealed (:func:`sealed`); the audit cell stays writable."""
    return kd._replace(
        **{
            name: sealed(value)
            for name, value in kd._asdict().items()
            if isinstance(value, np.ndarray) and name != "audit"
        }
    )


#: What the mutation report calls each kernel-data field.
FIELD_NAMES = {
    "y": "labels",
    "X": "features",
    "values": "features",
    "indices": "features",
    "indptr": "features",
    "local": "features",
    "offsets": "sequence boundaries",
    "support_ptr": "features",
    "support": "features",
}
