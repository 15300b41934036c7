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
attribute names cost their length, not a million times the longest one.
"""

from __future__ import annotations

import json
import os
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from crfopt._version import __version__
from crfopt.data.fileio import atomic_write

FORMAT = "crfopt-model"
VERSION = 1


class ModelFormatError(ValueError):
    """A model file that is not a crfopt model, is corrupted, or has another version."""


def _text(obj: Any) -> np.ndarray:
    return np.frombuffer(json.dumps(obj, ensure_ascii=False).encode("utf-8"), dtype=np.uint8)


def _untext(arr: np.ndarray, path: str, key: str) -> Any:
    try:
        return json.loads(bytes(arr.astype(np.uint8)).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ModelFormatError(f"{path}: entry {key!r} is not valid UTF-8 JSON ({exc})") from None


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
        K, A = len(self.labels), len(self.attributes)
        self.emission = np.asarray(self.emission, dtype=np.float64)
        self.transition = np.asarray(self.transition, dtype=np.float64)
        if self.bias is not None:
            self.bias = np.asarray(self.bias, dtype=np.float64)
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

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the model atomically (temporary file + rename)."""
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
    def load(cls, path: str | os.PathLike[str]) -> Model:
        """Read a model file; anything unexpected is a :class:`ModelFormatError`."""
        p = os.fspath(path)
        try:
            with np.load(p, allow_pickle=False) as z:
                data = {k: z[k] for k in z.files}
        except FileNotFoundError:
            raise
        except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
            raise ModelFormatError(f"{p}: not a readable crfopt model file ({exc})") from None
        missing = {"meta", "labels", "attributes", "emission", "transition"} - set(data)
        if missing:
            raise ModelFormatError(f"{p}: missing entries {sorted(missing)}")
        meta = _untext(data["meta"], p, "meta")
        if not isinstance(meta, dict) or meta.get("format") != FORMAT:
            raise ModelFormatError(
                f"{p}: not a crfopt model (format {meta.get('format')!r})"
                if isinstance(meta, dict)
                else f"{p}: bad metadata"
            )
        if meta.get("version") != VERSION:
            raise ModelFormatError(
                f"{p}: model format version {meta.get('version')!r}; this crfopt "
                f"({__version__}) reads version {VERSION}"
            )
        bias = data.get("bias") if meta.get("bias") else None
        if meta.get("bias") and bias is None:
            raise ModelFormatError(f"{p}: metadata says there is a bias block but none is stored")
        return cls(
            labels=[str(x) for x in _untext(data["labels"], p, "labels")],
            attributes=[str(x) for x in _untext(data["attributes"], p, "attributes")],
            emission=data["emission"],
            bias=bias,
            transition=data["transition"],
            template=meta.get("template"),
            training=meta.get("training") or {},
        )

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
            emission=blocks.emission.copy(),
            bias=None if blocks.bias is None else blocks.bias.copy(),
            transition=blocks.transition.copy(),
            template=meta.get("template_spec"),
            training=info,
        )

    # ------------------------------------------------------------------ inference
    def weights_for(self, problem: Any) -> np.ndarray:
        """The flat weight vector of a problem built with this model's dictionaries."""
        return problem.pack(self.emission, self.bias, self.transition)

    def viterbi(
        self, indptr: np.ndarray, indices: np.ndarray, values: np.ndarray, lengths: np.ndarray
    ) -> np.ndarray:
        """Viterbi labels (ids) of sequences given as a CSR over their tokens."""
        from crfopt.bench.evaluator import Evaluator
        from crfopt.core.problem import CRFProblem
        from crfopt.kernels.arrays import Sequences

        N = int(np.sum(lengths))
        problem = CRFProblem(
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
        return Evaluator(problem).predict(self.weights_for(problem), "train")
