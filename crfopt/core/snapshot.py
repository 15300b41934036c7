"""A problem as arrays and back, and the digests that show whether a run changed it.

:meth:`CRFProblem.to_arrays` / :meth:`~CRFProblem.from_arrays` (the featurization cache,
pickling, ``with_regularization``) and :meth:`~CRFProblem.data_digests` /
:meth:`~CRFProblem.changed_data` (the runner's isolation check) delegate here. Everything
is read through the problem's public surface; the arrays come back sealed
(crfopt/core/sealing.py).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from crfopt.core.sealing import FIELD_NAMES, hash_arrays, readonly
from crfopt.kernels.arrays import KernelData, kernel_attributes

if TYPE_CHECKING:
    from crfopt.core.problem import CRFProblem

__all__ = ["changed", "digests", "kernel_data", "to_arrays"]


def to_arrays(problem: CRFProblem) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """(arrays, JSON-able metadata) from which :func:`kernel_data` and the problem's
    constructor rebuild ``problem`` without recomputation."""
    arrays: dict[str, np.ndarray] = {"truth": np.asarray(problem.truth_features)}
    splits = {split: problem.split_data(split) for split in problem.splits}
    for split, kd in splits.items():
        for fname, value in kd._asdict().items():
            if isinstance(value, np.ndarray) and fname != "audit":
                arrays[f"{split}.{fname}"] = value
    names = problem.attribute_names
    meta = {
        "n_labels": problem.n_labels,
        "n_attributes": problem.n_attributes,
        "bias": problem.bias,
        "lam": problem.lam,
        "l1": problem.l1,
        "name": problem.name,
        "label_names": list(problem.label_names) if problem.label_names else None,
        "attribute_names": list(names) if names else None,
        "metadata": problem.metadata,
        "splits": {
            split: {
                "dense": bool(kd.dense),
                "max_len": int(kd.max_len),
                "n_kernel_attributes": int(kd.n_kernel_attributes),
            }
            for split, kd in splits.items()
        },
    }
    return arrays, meta


def kernel_data(arrays: Mapping[str, np.ndarray], meta: Mapping[str, Any]) -> dict[str, KernelData]:
    """The kernel data of every split saved by :func:`to_arrays`, sealed, with fresh
    audit cells."""
    K = int(meta["n_labels"])
    out = {}
    for split, info in meta["splits"].items():
        fields: dict[str, Any] = {}
        for fname in KernelData._fields:
            if fname == "audit":
                fields[fname] = np.zeros(1, dtype=np.int64)
            elif fname == "dense":
                fields[fname] = bool(info["dense"])
            elif fname == "n_labels":
                fields[fname] = np.int64(K)
            elif fname == "max_len":
                fields[fname] = np.int64(info[fname])
            elif fname == "n_kernel_attributes":
                fields[fname] = np.int64(kernel_attributes(info))
            else:
                fields[fname] = readonly(arrays[f"{split}.{fname}"])
        out[split] = KernelData(**fields)
    return out


def digests(
    problem: CRFProblem,
    derived: Mapping[str, np.ndarray | None],
    memo: dict[int, str] | None = None,
) -> dict[str, str]:
    """A digest of every data array of ``problem`` and of ``derived`` (those built so
    far), of λ and of σ, by name (see :meth:`CRFProblem.data_digests`)."""
    out = {
        "λ": repr(problem.lam),
        "σ (l1)": repr(problem.l1),
        "sizes": f"K={problem.n_labels};A={problem.n_attributes};bias={problem.bias};"
        f"dim={problem.dim}",
    }
    arrays = [(k, v) for k, v in derived.items() if v is not None]
    for split in problem.splits:
        kd = problem.split_data(split)
        out[f"{split}.sizes"] = (
            f"{bool(kd.dense)};{int(kd.n_labels)};{int(kd.n_kernel_attributes)};{int(kd.max_len)}"
        )
        arrays.extend(
            (f"{split}.{k}", v)
            for k, v in kd._asdict().items()
            if isinstance(v, np.ndarray) and k != "audit"
        )
    memo = {} if memo is None else memo  # one hash per array object (copies share)
    for key, a in arrays:
        if id(a) not in memo:
            h = hashlib.sha256()
            hash_arrays(h, a)
            memo[id(a)] = h.hexdigest()
        out[key] = memo[id(a)]
    return out


def changed(reference: Mapping[str, str], now: Mapping[str, str]) -> list[str]:
    """What differs between two :func:`digests`, named for a report."""
    out = []
    for key in sorted(set(reference) | set(now)):
        if key in reference and key in now and reference[key] != now[key]:
            label = FIELD_NAMES.get(key.partition(".")[2])
            out.append(f"{label} ({key})" if label else key)
        elif key not in now:  # a derived array can only appear, never vanish
            out.append(key)
    return out
