"""A scikit-learn estimator for linear-chain CRFs, a drop-in for sklearn-crfsuite's ``CRF``.

Users of sklearn-crfsuite switch with one line::

    # from sklearn_crfsuite import CRF
    from crfopt import CRF

    crf = CRF(algorithm="lbfgs", c2=0.1, max_iterations=100, all_possible_transitions=True)
    crf.fit(X_train, y_train)          # X: list of sentences, each a list of feature dicts
    y_pred = crf.predict(X_test)       # np.array(..., dtype=object) of label lists

The mapping of sklearn-crfsuite's arguments is in docs/api/estimator.md.

Tokens are python-crfsuite items (feature dicts, attribute lists or strings), named
and valued by its rules: crfopt/apps/items.py.

The module is a little over 700 lines because it is one class with sklearn-crfsuite's
whole surface (its constructor arguments, fit, the predict family, scoring, the attribute
views); the item encoding already lives in items.py, and cutting the class further would
split one public surface over files.
"""

from __future__ import annotations

import inspect
import math
import os
import sys
import tempfile
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from crfopt.apps.auto import AUTO, choose
from crfopt.apps.items import as_sentences, encode_items
from crfopt.apps.model import Model, split_labels
from crfopt.core.problem import CRFProblem
from crfopt.data.vocabulary import Vocabulary
from crfopt.kernels.arrays import Sequences
from crfopt.kernels.threads import one_blas_thread

try:  # scikit-learn is optional (extra "sklearn"): without it CRF keeps its own protocol
    from sklearn.base import BaseEstimator as _Base
    from sklearn.exceptions import NotFittedError
except ImportError:  # pragma: no cover - exercised only where scikit-learn is absent

    class NotFittedError(ValueError, AttributeError):  # type: ignore[no-redef]
        """The estimator is used before ``fit`` (scikit-learn's exception when installed)."""

    class _Base:  # type: ignore[no-redef]
        """get_params/set_params over the constructor's arguments, as BaseEstimator's."""

        @classmethod
        def _get_param_names(cls) -> list[str]:
            sig = inspect.signature(cls.__init__)
            return sorted(p for p in sig.parameters if p != "self")

        def get_params(self, deep: bool = True) -> dict[str, Any]:
            return {k: getattr(self, k) for k in self._get_param_names()}

        def set_params(self, **params: Any) -> Any:
            valid = self._get_param_names()
            for k, v in params.items():
                if k not in valid:
                    raise ValueError(
                        f"invalid parameter {k!r} for estimator {type(self).__name__}; "
                        f"valid parameters: {', '.join(valid)}"
                    )
                setattr(self, k, v)
            return self


#: sklearn-crfsuite's ``algorithm`` → crfopt's optimizer (docs/api/estimator.md).
#: CRFsuite's l2sgd is SGD with the decaying step 1/(λ(t₀ + t)); crfopt's ``sg`` is the
#: same method (η₀/(1 + λη₀t)), so the name keeps its meaning; the faster stochastic
#: methods (sag-nus-star, sdca-gap) are given by ``optimizer``.
ALGORITHMS: dict[str, str] = {"lbfgs": "lbfgs", "l2sgd": "sg"}
#: CRFsuite's algorithms crfopt has no counterpart of (perceptron-like, no objective).
UNSUPPORTED_ALGORITHMS = ("ap", "pa", "arow")
#: Checkpoint spacing (passes) when nothing is monitored but a target gap must be
#: checked: each check costs about one pass, so checking every 5 passes keeps it near
#: a fifth of the work while the stop comes at most 5 passes after the target is met.
UNMONITORED_EVERY = 5.0


class TrainingLog(pd.DataFrame):
    """The runner's trace (one row per checkpoint) with sklearn-crfsuite's log accessors.

    ``iterations`` lists one dict per checkpoint and ``last_iteration`` is the last one:
    ``num`` (optimizer iterations so far), ``loss`` (CRFsuite's objective
    Σℓᵢ(w) + c2‖w‖² = n·P(w)), ``time`` (optimizer seconds), ``scores`` (the dev set's
    metrics when ``X_dev`` was given) and every trace column; the last one also has
    ``feature_norm`` (‖w‖) and ``active_features`` (non-zero weights).
    """

    @property
    def _constructor(self) -> type[pd.DataFrame]:
        return pd.DataFrame  # slices and arithmetic are plain frames

    @property
    def iterations(self) -> list[dict[str, Any]]:
        n = self.attrs.get("n", 1)
        out = []
        for row in self.to_dict("records"):
            rec = {
                "num": int(row.get("iterations", 0)),
                "loss": float(row["primal"]) * n if pd.notna(row.get("primal")) else math.nan,
                "time": row.get("time_s"),
                "scores": {
                    k: row[k] for k in ("test_error", "chunk_f1") if k in row and pd.notna(row[k])
                },
                **row,
            }
            out.append(rec)
        if out:
            out[-1].update(self.attrs.get("final", {}))
        return out

    @property
    def last_iteration(self) -> dict[str, Any]:
        its = self.iterations
        if not its:
            raise ValueError("the training log is empty")
        return its[-1]


def _json_label(label: Any) -> Any:
    """A label as stored in the model file (ints and strings survive save/load)."""
    if isinstance(label, (bool, np.bool_)):
        return None
    if isinstance(label, (int, np.integer)):
        return int(label)
    return label if isinstance(label, str) else None


class CRF(_Base):
    """Linear-chain CRF trained by any crfopt optimizer: a scikit-learn estimator.

    Accepts sklearn-crfsuite's arguments with their meaning where crfopt has the
    concept, and refuses the others with an error naming the argument (the full table is
    in docs/api/estimator.md). The constructor stores its arguments unchanged; they
    are checked in :meth:`fit`, so ``clone``, ``get_params``/``set_params`` and the
    model-selection tools of scikit-learn work as with any estimator.

    Parameters
    ----------
    algorithm : {"lbfgs", "l2sgd"}, optional
        sklearn-crfsuite's name, and as there the one positional parameter:
        ``"lbfgs"`` → ``lbfgs`` (``owlqn`` when c1 > 0, as CRFsuite switches to OWL-QN),
        ``"l2sgd"`` → ``sg``; ``"ap"``, ``"pa"``, ``"arow"`` are refused (no objective to
        optimize).
    optimizer : str, optional
        A registered crfopt variant (``"sdca-gap"``, ``"lbfgs"``, ``"sag-nus-star"``…).
        Default: the one ``algorithm`` maps to, else ``"auto"``: the optimizer crfopt's
        measured seconds say is fastest for the problem's size, ℓ1 weight and thread
        count (``crfopt.apps.auto``; ``verbose`` prints the choice and why, and
        ``model_.training["auto"]`` keeps the reason).
    c1 : float, optional
        CRFsuite's ℓ1 coefficient, σ = c1/n (CRFsuite minimizes Σℓᵢ + c1‖w‖₁ + c2‖w‖²;
        every weight is penalized, transitions and bias included). With c1 > 0 ``auto``
        picks among the optimizers that accept it; an optimizer that handles ℓ2 only
        refuses it.
    c2 : float, optional
        CRFsuite's ℓ2 coefficient, λ = 2·c2/n (CRFsuite minimizes Σℓᵢ + c2‖w‖²).
        Give at most one of ``lam``, ``c2``; default λ = 1/n (c2 = 0.5).
    max_iterations : int, optional
        CRFsuite's iteration limit, replacing ``max_passes``: L-BFGS iterations for
        ``lbfgs``, epochs (effective passes) for every other optimizer.
    all_possible_transitions, all_possible_states : bool, optional
        crfopt's feature map always has every (label, label) transition and every
        (attribute, label) pair: ``None`` or ``True``; ``False`` is refused.
    epsilon : float, optional
        The stopping tolerance, meaning crfopt's: stop once the duality gap is
        ≤ ``epsilon``·P(0) (same as ``target_gap``, which it replaces).
    verbose : bool
        Print one line per checkpoint (turns monitoring on).
    max_passes : float
        Budget in effective passes.
    target_gap : float, optional
        Stop at the first checkpoint whose duality gap is ≤ ``target_gap``·P(0), P(0) =
        (N/n) log K (the same meaning as ``crfopt train --target-gap``).
    lam : float, optional
        ℓ2 regularization λ of P(w) = λ/2 ‖w‖² + (1/n) Σ ℓᵢ(w).
    bias : bool
        Include the per-label bias block (count, first, last).
    seed : int
    optimizer_params : dict, optional
        Overrides of the optimizer's parameters.
    plugin_dirs : sequence of str
        Where to find third-party optimizers.
    checkpoints : str or list of float, optional
        When the state is evaluated (:class:`crfopt.Schedule`). Default: monitoring off
        (no metrics; the gap checked every 5 passes when a target is set, else only at
        the start and the end), or the runner's ``"default"`` schedule with every metric
        when ``verbose`` or ``X_dev`` turns monitoring on.
    template : str or path, optional
        A CRF++ template or Wapiti pattern file (docs/patterns.md). Each token of ``X``
        is then the sequence of its column strings, as in the tool's data file without
        the label (``("Confidence", "NN")``), and the file's patterns make its
        attributes. The bias block is still ``bias``'s: give ``bias=False`` for exactly
        the tool's feature map.

    Attributes
    ----------
    Each is ``None`` before :meth:`fit`, as in sklearn-crfsuite.

    classes_ : list
        The labels as given in ``y``, in order of first appearance (CRFsuite's order;
        integers stay integers).
    attributes_ : list of str
    model_ : crfopt.Model
    training_log_ : TrainingLog
        The trace (a DataFrame: primal, duality gap, counters… per checkpoint) with
        ``.iterations`` and ``.last_iteration``.
    state_features_, transition_features_ : collections.Counter
        Non-zero weights keyed ``(attribute, label)`` and ``(label_from, label_to)``.
    num_attributes_, size_ : int
        Number of attributes; bytes of the saved model file.

    ``tagger_`` (python-crfsuite's ``Tagger``) does not exist: reading it raises an
    ``AttributeError`` saying what to use instead. sklearn-crfsuite's arguments that
    configure CRFsuite itself (``model_filename``, ``min_freq``, ``period``…) are not
    arguments here (docs/api/estimator.md gives the reason for each).

    Notes
    -----
    scikit-learn's ``check_estimator`` checks that feed 2-D numeric arrays (fit/predict
    shapes, dtypes, NaN handling, sample weights, ``n_features_in_``, pickling a fitted
    model trained on such arrays…) cannot apply: the input is a list of sequences of
    feature dicts, the target a list of label sequences. The checks of the estimator
    protocol itself pass (tests/test_sklearn_api.py lists both sets).
    """

    #: fitted state (instance attributes once fitted; None before, as sklearn-crfsuite's)
    classes_: list[Any] | None = None
    attributes_: list[str] | None = None
    model_: Model | None = None
    training_log_: TrainingLog | None = None

    def __init__(
        self,
        algorithm: str | None = None,
        *,
        optimizer: str | None = None,
        c1: float | None = None,
        c2: float | None = None,
        max_iterations: int | None = None,
        all_possible_transitions: bool | None = None,
        all_possible_states: bool | None = None,
        epsilon: float | None = None,
        verbose: bool = False,
        max_passes: float = 50.0,
        target_gap: float | None = 1e-6,
        lam: float | None = None,
        bias: bool = True,
        seed: int = 0,
        optimizer_params: Mapping[str, Any] | None = None,
        plugin_dirs: Sequence[str] = (),
        checkpoints: str | Sequence[float] | None = None,
        template: str | os.PathLike[str] | None = None,
    ) -> None:
        self.algorithm = algorithm
        self.optimizer = optimizer
        self.c1 = c1
        self.c2 = c2
        self.max_iterations = max_iterations
        self.all_possible_transitions = all_possible_transitions
        self.all_possible_states = all_possible_states
        self.epsilon = epsilon
        self.verbose = verbose
        self.max_passes = max_passes
        self.target_gap = target_gap
        self.lam = lam
        self.bias = bias
        self.seed = seed
        self.optimizer_params = optimizer_params
        self.plugin_dirs = plugin_dirs
        self.checkpoints = checkpoints
        self.template = template

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        # sequences of feature dicts in, sequences of labels out: not a 2-D array
        tags.input_tags.two_d_array = False
        tags.input_tags.dict = True
        tags.input_tags.string = True
        tags.target_tags.required = True
        tags.no_validation = True  # X is validated by fit itself, not check_array
        return tags

    # ------------------------------------------------------------- validation
    def _resolve_optimizer(self) -> str:
        mapped = None
        if self.algorithm is not None:
            if self.algorithm in UNSUPPORTED_ALGORITHMS:
                raise ValueError(
                    f"algorithm={self.algorithm!r} (CRFsuite's averaged perceptron / passive "
                    "aggressive / AROW) has no counterpart in crfopt; supported values: "
                    f"{', '.join(map(repr, ALGORITHMS))} (or any crfopt variant via optimizer=)"
                )
            if self.algorithm not in ALGORITHMS:
                raise ValueError(
                    f"algorithm={self.algorithm!r} is not a CRFsuite training algorithm "
                    f"crfopt supports; supported values: {', '.join(map(repr, ALGORITHMS))} "
                    f"(a crfopt optimizer is chosen with optimizer=)"
                )
            mapped = ALGORITHMS[self.algorithm]
            if mapped == "lbfgs" and self.c1:
                mapped = "owlqn"  # CRFsuite's lbfgs with c1 > 0 is OWL-QN
        if self.optimizer is not None:
            if mapped is not None and mapped != self.optimizer:
                raise ValueError(
                    f"algorithm={self.algorithm!r} means optimizer {mapped!r}, but "
                    f"optimizer={self.optimizer!r} was given: give one of them"
                )
            return self.optimizer
        return mapped or AUTO

    def _check_params(self) -> None:
        if self.c1 is not None and not (
            isinstance(self.c1, (int, float))
            and not isinstance(self.c1, bool)
            and math.isfinite(self.c1)
            and self.c1 >= 0
        ):
            raise ValueError(f"c1 must be a finite non-negative number, got {self.c1!r}")
        if self.c2 is not None and not (isinstance(self.c2, (int, float)) and self.c2 > 0):
            raise ValueError(f"c2 must be a positive number, got {self.c2!r}")
        if self.lam is not None and self.c2 is not None:
            raise ValueError("give lam or c2, not both")
        for name in ("all_possible_transitions", "all_possible_states"):
            value = getattr(self, name)
            if value is False:
                what = "(label, label) transition" if "trans" in name else "(attribute, label)"
                raise ValueError(
                    f"{name}=False is not supported: crfopt's feature map always has every "
                    f"{what} feature; use True or None"
                )
            if value not in (None, True):
                raise ValueError(f"{name} must be None or True, got {value!r}")
        if self.max_iterations is not None and not (
            isinstance(self.max_iterations, (int, np.integer))
            and not isinstance(self.max_iterations, bool)
            and self.max_iterations > 0
        ):
            raise ValueError(f"max_iterations must be a positive int, got {self.max_iterations!r}")
        if self.epsilon is not None:
            if not (isinstance(self.epsilon, (int, float)) and self.epsilon > 0):
                raise ValueError(f"epsilon must be a positive number, got {self.epsilon!r}")
            default = inspect.signature(type(self).__init__).parameters["target_gap"].default
            if self.target_gap not in (default, self.epsilon):
                raise ValueError(
                    f"epsilon={self.epsilon!r} and target_gap={self.target_gap!r} are the "
                    "same stopping tolerance: give one of them"
                )

    # ------------------------------------------------------------- training
    def fit(
        self,
        X: Iterable[Iterable[Any]],
        y: Iterable[Iterable[Any]],
        X_dev: Iterable[Iterable[Any]] | None = None,
        y_dev: Iterable[Iterable[Any]] | None = None,
    ) -> CRF:
        """Train on sentences ``X`` (lists of feature dicts) with label sequences ``y``.

        ``X_dev``/``y_dev``: a development set scored at every checkpoint (columns
        ``test_error`` and, for BIO labels, ``chunk_f1`` of ``training_log_``). Any
        iterable is accepted (generators are read once). Raises
        ``crfopt.apps.train.TrainingError`` (a ``RuntimeError``) when the run fails.
        """
        from crfopt.apps.train import train
        from crfopt.optim.registry import get_registry

        self._check_params()
        optimizer = self._resolve_optimizer()
        template = self._fit_template()
        problem, classes = self._training_problem(X, y, X_dev, y_dev, template)
        choice = None
        if optimizer == AUTO:
            choice = choose(problem)
            optimizer = choice.optimizer
            if self.verbose:
                print(choice.line())
        n, has_dev = problem.n, "test" in problem.splits  # X_dev became the "test" split
        attributes = list(problem.attribute_names or ())
        target = self.epsilon if self.epsilon is not None else self.target_gap
        passes: float | None = self.max_passes
        iterations = None
        if self.max_iterations is not None:  # CRFsuite's limit replaces max_passes
            if optimizer in ("lbfgs", "owlqn"):
                passes, iterations = None, int(self.max_iterations)
            else:
                passes = float(self.max_iterations)
        monitoring = bool(self.verbose) or has_dev
        if self.checkpoints is not None:
            checkpoints: str | Sequence[float] = self.checkpoints
        elif monitoring:
            checkpoints = "default"
        elif target is not None:
            checkpoints = f"every:{UNMONITORED_EVERY:g}"
        else:
            checkpoints = [0.0]  # the start and the state the budget ends at
        registry = get_registry(self.plugin_dirs)
        # an ℓ2-only optimizer with c1 > 0: a ValueError naming c1 now, not a skipped run
        refusal = registry.optimizer(optimizer).refusal(problem)
        if refusal is not None:
            raise ValueError(f"c1={self.c1!r}: {refusal}")
        trained = train(
            problem,
            optimizer,
            passes=passes,
            iterations=iterations,
            target_gap=target,
            seed=self.seed,
            params={**(choice.params if choice else {}), **(self.optimizer_params or {})},
            registry=registry,
            on_checkpoint=self._print_checkpoint if self.verbose else None,
            checkpoints=checkpoints,
            metrics=None if monitoring else [],
            train_error=monitoring,
        )
        if choice is not None:
            trained.model.training["auto"] = choice.reason
        if template is not None:  # predict (and a saved model) featurize with it
            trained.model.template = template.spec()
            trained.model.training["estimator_template"] = True
        labels_json = [_json_label(lab) for lab in classes]
        if all(v is not None for v in labels_json) and any(not isinstance(v, str) for v in classes):
            # save/load gives back integer labels as integers
            trained.model.training["estimator_labels"] = labels_json
        self.classes_ = classes
        self.attributes_ = attributes
        self.model_ = trained.model
        log = TrainingLog(trained.result.trace)
        w = trained.result.w
        log.attrs["n"] = n
        with one_blas_thread():  # one dot product: on 2 BLAS threads 30 ms under load
            norm = float(np.linalg.norm(w))
        log.attrs["final"] = {"feature_norm": norm, "active_features": int(np.count_nonzero(w))}
        self.training_log_ = log
        return self

    def _training_problem(
        self,
        X: Iterable[Iterable[Any]],
        y: Iterable[Iterable[Any]],
        X_dev: Iterable[Iterable[Any]] | None = None,
        y_dev: Iterable[Iterable[Any]] | None = None,
        template: Any = None,
    ) -> tuple[CRFProblem, list[Any]]:
        """The training problem of :meth:`fit` (dev set as its ``test`` split) and the
        labels in order of first appearance: everything ``fit`` does before the
        optimizer starts; ``template`` a pattern file that makes the tokens' attributes."""
        X, y = self._with_template(as_sentences(X), template), as_sentences(y, "y")
        if (X_dev is None) != (y_dev is None):
            raise ValueError("give both X_dev and y_dev, or neither")
        if len(X) != len(y):
            raise ValueError(f"X has {len(X)} sentences but y has {len(y)}")
        if len(X) == 0:
            raise ValueError("no training sentences")
        for i, (sent, seq) in enumerate(zip(X, y)):
            if len(seq) != len(sent):
                raise ValueError(f"sentence {i} has {len(sent)} tokens but {len(seq)} labels")
        classes = list(dict.fromkeys(lab for seq in y for lab in seq))  # CRFsuite's order
        names = [str(lab) for lab in classes]
        if len(set(names)) != len(names):
            raise ValueError(
                f"labels {classes!r} are not distinct as strings (e.g. 1 and '1'): the "
                "model names each label by its string"
            )
        label_id = {lab: k for k, lab in enumerate(classes)}
        vocab = Vocabulary()
        lengths, indptr, indices, values, _ = encode_items(X, vocab)
        flat = [label_id[lab] for seq in y for lab in seq]
        attributes = vocab.names  # column order

        dev = None
        if X_dev is not None:
            Xd = self._with_template(as_sentences(X_dev, "X_dev"), template, "X_dev")
            yd = as_sentences(y_dev, "y_dev")
            if len(Xd) != len(yd):
                raise ValueError(f"X_dev has {len(Xd)} sentences but y_dev has {len(yd)}")
            frozen = Vocabulary(attributes, frozen=True)
            d_len, d_ptr, d_idx, d_val, _ = encode_items(Xd, frozen)
            # a dev label never seen in training is -1: always counted wrong
            d_lab = [label_id.get(lab, -1) for seq in yd for lab in seq]
            if len(d_lab) != int(d_len.sum()):
                raise ValueError("X_dev and y_dev differ in the length of some sentence")
            dev = Sequences(
                lengths=d_len,
                labels=np.asarray(d_lab, dtype=np.int64),
                indptr=d_ptr,
                indices=d_idx,
                values=d_val,
            )
        n = len(X)
        lam = (
            self.lam
            if self.lam is not None
            else (2.0 * self.c2 / n if self.c2 is not None else 1.0 / n)
        )
        problem = CRFProblem(
            Sequences(
                lengths=lengths,
                labels=np.asarray(flat, dtype=np.int64),
                indptr=indptr,
                indices=indices,
                values=values,
            ),
            n_labels=len(classes),
            n_attributes=len(vocab),
            lam=lam,
            l1=self.c1 / n if self.c1 else 0.0,  # CRFsuite's c1‖w‖₁ over Σℓᵢ: σ = c1/n
            test=dev,
            bias=self.bias,
            label_names=names,
            attribute_names=attributes,
            name="estimator",
        )
        return problem, classes

    def _fit_template(self) -> Any:
        """The pattern file of ``template``, or None."""
        if self.template is None:
            return None
        from crfopt.data.patterns import PatternTemplate
        from crfopt.data.template_files import load_template

        tpl = load_template(self.template)
        if not isinstance(tpl, PatternTemplate):
            raise ValueError(
                f"template={self.template!r} is not a CRF++ or Wapiti pattern file: "
                "template= reads columns by position; crfopt's TOML/YAML templates name "
                "their columns and featurize corpus files (crfopt train --template)"
            )
        tpl.require_supported()
        return tpl

    def _model_template(self) -> Any:
        """The pattern file the fitted model was trained with, or None."""
        model = self._check_fitted()
        if not model.training.get("estimator_template"):
            return None
        from crfopt.data.template_files import template_from_spec

        return template_from_spec(model.template)

    @staticmethod
    def _with_template(X: list[list[Any]], template: Any, what: str = "X") -> list[list[Any]]:
        """``X`` itself, or, with a pattern template, its tokens (sequences of column
        strings) as the lists of attribute names the template makes of them."""
        if template is None:
            return X
        width = template.n_columns
        out = []
        for i, sent in enumerate(X):
            rows = []
            for t, tok in enumerate(sent):
                if isinstance(tok, (str, bytes, Mapping)) or not all(
                    isinstance(v, str) for v in tok
                ):
                    raise TypeError(
                        f"{what}[{i}][{t}]: with template=, a token is a sequence of column "
                        f"strings, e.g. ('Confidence', 'NN'), not {type(tok).__name__}"
                    )
                if len(tok) < width:
                    raise ValueError(
                        f"{what}[{i}][{t}] has {len(tok)} column(s); the patterns of "
                        f"{template.source or template.name} read {width}"
                    )
                rows.append(tuple(tok))
            # an attribute fires once per token, as in crfopt's corpus path
            out.append([list(dict.fromkeys(a)) for a in template.token_attributes(rows)])
        return out

    @staticmethod
    def _print_checkpoint(row: Mapping[str, Any]) -> None:
        parts = [
            f"iter {int(row.get('iterations', 0)):>7}",
            f"passes {float(row.get('effective_passes', 0.0)):8.2f}",
        ]
        for key, label in (("primal", "loss"), ("duality_gap", "gap"), ("test_error", "dev_err")):
            value = row.get(key)
            if value is not None and not (isinstance(value, float) and math.isnan(value)):
                parts.append(f"{label} {float(value):.6g}")
        print("  ".join(parts), file=sys.stdout, flush=True)

    # ------------------------------------------------------------- inference
    def _check_fitted(self) -> Model:
        model = self.model_
        if model is None:
            raise NotFittedError(
                f"this {type(self).__name__} is not fitted yet: call fit(X, y) first"
            )
        return model

    def _labels(self) -> list[Any]:
        return list(self.classes_ or self._check_fitted().labels)

    def predict(self, X: Iterable[Iterable[Any]]) -> np.ndarray:
        """Most probable label sequence of every sentence (Viterbi).

        As sklearn-crfsuite: ``np.array(list_of_label_lists, dtype=object)`` (so
        ``y_pred == y`` compares label by label; 2-D when all sentences have one length).
        """
        return np.array(self._predict_lists(X), dtype=object)

    def _predict_lists(self, X: Iterable[Iterable[Any]]) -> list[list[Any]]:
        model = self._check_fitted()
        X = as_sentences(X)
        if not X:
            return []
        lengths, indptr, indices, values, _ = encode_items(
            self._with_template(X, self._model_template()), model.vocabulary()
        )
        ids = model.viterbi(indptr, indices, values, lengths)
        return split_labels(ids, lengths, self._labels())

    def predict_single(self, xseq: Iterable[Any]) -> list[Any]:
        """The Viterbi labels of one sentence (a list)."""
        return self._predict_lists([xseq])[0]

    def predict_marginals(self, X: Iterable[Iterable[Any]]) -> np.ndarray:
        """P(y_t = label | x) of every token: per sentence a list of {label: probability},
        in ``np.array(..., dtype=object)`` as sklearn-crfsuite returns them."""
        return np.array(self._marginal_lists(X), dtype=object)

    def _marginal_lists(self, X: Iterable[Iterable[Any]]) -> list[list[dict[Any, float]]]:
        model = self._check_fitted()
        X = as_sentences(X)
        if not X:
            return []
        lengths, indptr, indices, values, _ = encode_items(
            self._with_template(X, self._model_template()), model.vocabulary()
        )
        rows = model.node_marginals(indptr, indices, values, lengths).tolist()
        labels = self._labels()
        out, pos = [], 0
        for T in lengths.tolist():
            out.append([dict(zip(labels, p)) for p in rows[pos : pos + T]])
            pos += T
        return out

    def predict_marginals_single(self, xseq: Iterable[Any]) -> list[dict[Any, float]]:
        """:meth:`predict_marginals` of one sentence (a list of dicts)."""
        return self._marginal_lists([xseq])[0]

    def score(self, X: Iterable[Iterable[Any]], y: Iterable[Iterable[Any]]) -> float:
        """Per-token accuracy (a label never seen in training counts as wrong)."""
        y = as_sentences(y, "y")
        pred = self._predict_lists(X)
        total = sum(len(s) for s in y)
        right = sum(p == t for ps, ts in zip(pred, y) for p, t in zip(ps, ts))
        return right / total

    # ------------------------------------------------------------- inspection
    @property
    def state_features_(self) -> Counter | None:
        """Non-zero emission weights keyed ``(attribute, label)``, as sklearn-crfsuite's."""
        model = self.model_
        if model is None:
            return None
        labels = self._labels()
        k_idx, a_idx = np.nonzero(model.emission)
        return Counter(
            {
                (model.attributes[a], labels[k]): float(model.emission[k, a])
                for k, a in zip(k_idx.tolist(), a_idx.tolist())
            }
        )

    @property
    def transition_features_(self) -> Counter | None:
        """Non-zero transition weights keyed ``(label_from, label_to)``."""
        model = self.model_
        if model is None:
            return None
        labels = self._labels()
        f_idx, t_idx = np.nonzero(model.transition)
        return Counter(
            {
                (labels[a], labels[b]): float(model.transition[a, b])
                for a, b in zip(f_idx.tolist(), t_idx.tolist())
            }
        )

    @property
    def num_attributes_(self) -> int | None:
        """Number of attributes (distinct names seen in training)."""
        return None if self.model_ is None else len(self.model_.attributes)

    @property
    def size_(self) -> int | None:
        """Bytes of the model file :meth:`save` writes."""
        model = self.model_
        if model is None:
            return None
        with tempfile.TemporaryDirectory() as tmp:
            return os.path.getsize(model.save(os.path.join(tmp, "m.crfopt")))

    @property
    def tagger_(self) -> Any:
        """python-crfsuite's ``Tagger`` of sklearn-crfsuite: not in crfopt (raises)."""
        raise AttributeError(
            "tagger_ is python-crfsuite's Tagger, which crfopt does not have: use "
            "predict_single/predict_marginals_single for tagging, classes_ for the labels, "
            "state_features_/transition_features_ for the weights and model_ for the model"
        )

    # ------------------------------------------------------------- files
    def save(self, path: str | os.PathLike[str]) -> None:
        self._check_fitted().save(path)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> CRF:
        model = Model.load(path)
        crf = cls(optimizer=model.training.get("optimizer", "sdca-gap"))
        crf.model_ = model
        stored = model.training.get("estimator_labels")
        if isinstance(stored, list) and [str(v) for v in stored] == list(model.labels):
            crf.classes_ = list(stored)
        else:
            crf.classes_ = list(model.labels)
        crf.attributes_ = list(model.attributes)
        return crf
