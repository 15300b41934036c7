"""A scikit-learn style CRF on the sklearn-crfsuite input convention.

Users of sklearn-crfsuite switch with one line::

    # from sklearn_crfsuite import CRF
    from crfopt import CRF

    crf = CRF(optimizer="sdca-gap", max_passes=50)
    crf.fit(X_train, y_train)          # X: list of sentences, each a list of feature dicts
    y_pred = crf.predict(X_test)       # list of lists of labels

Feature dicts follow python-crfsuite's ``ItemSequence`` rules: ``{"k": 1.5}`` is
attribute ``k`` with value 1.5; ``{"k": True}`` is ``k`` with value 1 (``False`` is
absent); ``{"k": "v"}`` is attribute ``k=v``; ``{"k": {"a": ..., ...}}`` nests with the
prefix ``k:``; ``{"k": ["a", "b"]}`` gives ``k:a`` and ``k:b``; a token may also be a
plain list of attribute strings.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from crfopt.apps.model import Model
from crfopt.core.problem import CRFProblem
from crfopt.data.vocabulary import Vocabulary
from crfopt.kernels.arrays import Sequences


def item_attributes(item: Any, prefix: str = "") -> Iterable[tuple[str, float]]:
    """(attribute, value) pairs of one token in python-crfsuite's conventions."""
    if isinstance(item, Mapping):
        for key, value in item.items():
            name = f"{prefix}{key}"
            if isinstance(value, bool):
                if value:
                    yield name, 1.0
            elif isinstance(value, (int, float, np.integer, np.floating)):
                v = float(value)
                if not math.isfinite(v):
                    raise ValueError(f"feature {name!r} has a non-finite value {value!r}")
                if v != 0.0:
                    yield name, v
            elif isinstance(value, str):
                yield f"{name}={value}", 1.0
            elif isinstance(value, Mapping):
                yield from item_attributes(value, prefix=f"{name}:")
            elif isinstance(value, (list, tuple, set, frozenset)):
                for v in value:
                    if not isinstance(v, str):
                        raise TypeError(f"feature {name!r}: list entries must be strings")
                    yield f"{name}:{v}", 1.0
            else:
                raise TypeError(f"feature {name!r}: unsupported value type {type(value).__name__}")
    elif isinstance(item, (list, tuple, set, frozenset)):
        for v in item:
            if not isinstance(v, str):
                raise TypeError("a token given as a list must list attribute strings")
            yield f"{prefix}{v}", 1.0
    elif isinstance(item, str):
        yield f"{prefix}{item}", 1.0
    else:
        raise TypeError(f"unsupported token type {type(item).__name__}")


def _encode(
    X: Sequence[Sequence[Any]], vocab: Vocabulary
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """CSR over tokens with the attribute values.

    An open ``vocab`` (fit) grows with new attributes; a frozen one (predict) drops
    unknown attributes, returned as the count of dropped occurrences.
    """
    lengths, indptr, indices, values = [], [0], [], []
    dropped_before = vocab.dropped
    for sent in X:
        if len(sent) == 0:
            raise ValueError("empty sentence: every sequence needs at least one token")
        lengths.append(len(sent))
        for item in sent:
            for name, value in item_attributes(item):
                j = vocab.lookup(name)
                if j is None:
                    continue
                indices.append(j)
                values.append(value)
            indptr.append(len(indices))
    return (
        np.asarray(lengths, dtype=np.int64),
        np.asarray(indptr, dtype=np.int64),
        np.asarray(indices, dtype=np.int64),
        np.asarray(values, dtype=np.float64),
        vocab.dropped - dropped_before,
    )


class CRF:
    """Linear-chain CRF trained by any crfopt optimizer (scikit-learn conventions).

    Parameters
    ----------
    optimizer : str
        A registered variant, e.g. ``"sdca-gap"`` (default), ``"lbfgs"``, ``"sag-nus-star"``.
    max_passes : float
        Budget in effective passes.
    target_gap : float, optional
        Stop at the first checkpoint whose true duality gap is ≤ ``target_gap`` · P(0),
        i.e. relative to the objective at w = 0, P(0) = (N/n) log K (methods with a
        dual). The same meaning as ``crfopt train --target-gap``: both train through
        :func:`crfopt.apps.train.train`.
    lam : float, optional
        ℓ2 regularization λ of P(w) = λ/2 ‖w‖² + (1/n) Σ ℓ_i(w); default 1/n.
    c2 : float, optional
        CRFsuite's c2 instead of λ (λ = 2 c2 / n); give at most one of ``lam``, ``c2``.
    bias : bool
        Include the per-label bias block (count, first, last).
    seed : int
    optimizer_params : dict, optional
        Overrides of the optimizer's parameters.
    plugin_dirs : sequence of str
        Where to find third-party optimizers.

    Attributes
    ----------
    classes_ : list of str
    attributes_ : list of str
    model_ : crfopt.apps.model.Model
    training_log_ : pandas.DataFrame
        The runner's trace (primal, duality gap, counters… per checkpoint).
    """

    def __init__(
        self,
        optimizer: str = "sdca-gap",
        max_passes: float = 50.0,
        target_gap: float | None = 1e-6,
        lam: float | None = None,
        c2: float | None = None,
        bias: bool = True,
        seed: int = 0,
        optimizer_params: Mapping[str, Any] | None = None,
        plugin_dirs: Sequence[str] = (),
    ) -> None:
        self.optimizer = optimizer
        self.max_passes = max_passes
        self.target_gap = target_gap
        self.lam = lam
        self.c2 = c2
        self.bias = bias
        self.seed = seed
        self.optimizer_params = optimizer_params
        self.plugin_dirs = plugin_dirs

    # scikit-learn's estimator protocol, without depending on scikit-learn
    def get_params(self, deep: bool = True) -> dict[str, Any]:
        return {
            k: getattr(self, k)
            for k in (
                "optimizer",
                "max_passes",
                "target_gap",
                "lam",
                "c2",
                "bias",
                "seed",
                "optimizer_params",
                "plugin_dirs",
            )
        }

    def set_params(self, **params: Any) -> CRF:
        valid = self.get_params()
        for k, v in params.items():
            if k not in valid:
                raise ValueError(f"invalid parameter {k!r}; valid: {', '.join(sorted(valid))}")
            setattr(self, k, v)
        return self

    def fit(self, X: Sequence[Sequence[Any]], y: Sequence[Sequence[str]]) -> CRF:
        """Train on sentences X (lists of feature dicts) with label sequences y.

        Raises ``crfopt.apps.train.TrainingError`` (a ``RuntimeError``) when the run
        fails or diverges.
        """
        from crfopt.apps.train import train
        from crfopt.optim.registry import get_registry

        if len(X) != len(y):
            raise ValueError(f"X has {len(X)} sentences but y has {len(y)}")
        if len(X) == 0:
            raise ValueError("no training sentences")
        if self.lam is not None and self.c2 is not None:
            raise ValueError("give lam or c2, not both")
        vocab = Vocabulary()
        lengths, indptr, indices, values, _ = _encode(X, vocab)
        labels = sorted({str(label) for seq in y for label in seq})
        label_id = {lab: k for k, lab in enumerate(labels)}
        flat = []
        for sent, seq in zip(X, y):
            if len(seq) != len(sent):
                raise ValueError(f"a sentence has {len(sent)} tokens but {len(seq)} labels")
            flat.extend(label_id[str(lab)] for lab in seq)
        n = len(X)
        lam = (
            self.lam
            if self.lam is not None
            else (2.0 * self.c2 / n if self.c2 is not None else 1.0 / n)
        )
        attributes = [None] * len(vocab)
        for name, j in vocab.items():
            attributes[j] = name
        problem = CRFProblem(
            Sequences(
                lengths=lengths,
                labels=np.asarray(flat, dtype=np.int64),
                indptr=indptr,
                indices=indices,
                values=values,
            ),
            n_labels=len(labels),
            n_attributes=len(vocab),
            lam=lam,
            bias=self.bias,
            label_names=labels,
            attribute_names=attributes,
            name="estimator",
        )
        trained = train(
            problem,
            self.optimizer,
            passes=self.max_passes,
            target_gap=self.target_gap,
            seed=self.seed,
            params=self.optimizer_params,
            registry=get_registry(self.plugin_dirs),
        )
        self.classes_ = labels
        self.attributes_ = attributes
        self.training_log_ = trained.result.trace
        self.model_ = trained.model
        return self

    def _check_fitted(self) -> Model:
        model = getattr(self, "model_", None)
        if model is None:
            raise RuntimeError("this CRF is not fitted yet: call fit(X, y) first")
        return model

    def predict(self, X: Sequence[Sequence[Any]]) -> list[list[str]]:
        """Most probable label sequence of every sentence (Viterbi)."""
        model = self._check_fitted()
        vocab = Vocabulary(model.attributes, frozen=True)
        lengths, indptr, indices, values, _ = _encode(X, vocab)
        ids = model.viterbi(indptr, indices, values, lengths)
        out, pos = [], 0
        for T in lengths:
            out.append([model.labels[k] for k in ids[pos : pos + T]])
            pos += int(T)
        return out

    def predict_single(self, xseq: Sequence[Any]) -> list[str]:
        return self.predict([xseq])[0]

    def score(self, X: Sequence[Sequence[Any]], y: Sequence[Sequence[str]]) -> float:
        """Per-token accuracy."""
        pred = self.predict(X)
        total = sum(len(s) for s in y)
        right = sum(p == t for ps, ts in zip(pred, y) for p, t in zip(ps, ts))
        return right / total

    def save(self, path: str | os.PathLike[str]) -> None:
        self._check_fitted().save(path)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> CRF:
        model = Model.load(path)
        crf = cls(optimizer=model.training.get("optimizer", "sdca-gap"))
        crf.model_ = model
        crf.classes_ = list(model.labels)
        crf.attributes_ = list(model.attributes)
        return crf
