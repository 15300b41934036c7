"""Use a trained model: featurize new text, tag it, and score it (conlleval).

``crfopt train`` saves a :class:`crfopt.Model` with the template and column layout of
its training corpus; :func:`tag_corpus` featurizes new sentences with that template and
the model's attribute dictionary (unknown attributes are ignored) and decodes them with
Viterbi. :func:`chunk_scores` counts chunks as CoNLL's ``conlleval`` script does.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

import numpy as np

from crfopt.apps.model import Model, split_labels
from crfopt.data.corpus import _is_conllu
from crfopt.data.features import Template
from crfopt.data.readers import (
    CONLLU_COLUMNS,
    Corpus,
    DataFormatError,
    open_text,
    read_conll,
    read_conllu_words,
)
from crfopt.data.template_files import template_from_spec


class TaggingError(ValueError):
    """A model that cannot tag this input (no template, missing columns…)."""


def model_template(model: Model) -> Template:
    """The feature template the model was trained with."""
    if not model.template:
        raise TaggingError(
            "this model has no text template (it was trained on a non-text problem such as "
            "ocr or synthetic); it can only be applied from Python, to the same kind of data"
        )
    return template_from_spec(model.template)


def _layout(model: Model) -> tuple[str, list[str], str | None]:
    corpus = (model.training or {}).get("corpus") or {}
    return (
        corpus.get("format", "conll"),
        list(corpus.get("columns") or []),
        corpus.get("label"),
    )


def read_input(
    model: Model,
    path: str | os.PathLike[str],
    *,
    columns: str | Sequence[str] | None = None,
    encoding: str = "utf-8",
    labelled: bool | None = None,
) -> tuple[Corpus, str]:
    """Read a file to tag or score in the layout the model was trained on.

    Returns the corpus and its format (``"conll"`` or ``"conllu"``). A CoNLL file may
    carry the label column (as in training) or lack it; other layouts need ``columns``.
    ``labelled=True`` requires the label column (for scoring).
    """
    fmt, train_columns, label = _layout(model)
    path = os.fspath(path)
    if _is_conllu(path) or (fmt == "conllu" and columns is None and not _looks_like_conll(path)):
        return read_conllu_words(path, label=label or "xpos", encoding=encoding), "conllu"
    if isinstance(columns, str):
        columns = [c.strip() for c in columns.split(",") if c.strip()]
    probe = read_conll(path, label=None, encoding=encoding)
    width = len(probe.columns)
    if columns is None:
        without_label = [c for c in train_columns if c != label]
        if train_columns and width == len(train_columns):
            columns = train_columns
        elif train_columns and width == len(without_label):
            columns = without_label
        else:
            raise DataFormatError(
                path,
                f"has {width} columns; the model was trained on "
                f"{', '.join(train_columns) or 'an unknown layout'} — name them with --columns",
            )
    elif len(columns) != width:
        raise DataFormatError(path, f"has {width} columns but --columns names {len(columns)}")
    has_label = label is not None and label in columns
    if labelled and not has_label:
        raise DataFormatError(
            path, f"no gold label column {label!r} (columns: {', '.join(columns)}) to score against"
        )
    corpus = Corpus(tuple(columns), probe.sentences, probe.path, label if has_label else None)
    return corpus, "conll"


def _looks_like_conll(path: str) -> bool:
    with open_text(path) as f:
        for line in f:
            if line.strip() and not line.startswith("#"):
                return len(line.rstrip("\r\n").split("\t")) != 10
    return True


def tag_corpus(model: Model, corpus: Corpus) -> list[list[str]]:
    """Predicted label sequences (Viterbi) of every sentence of ``corpus``."""
    template = model_template(model)
    missing = [c for c in template.columns if c not in corpus.columns]
    if missing:
        raise TaggingError(
            f"{corpus.path}: the model's template reads column(s) {', '.join(missing)}, the "
            f"input has {', '.join(corpus.columns)} (name them with --columns)"
        )
    # as in training: the template's attributes, unknown ones dropped (data/features.py)
    lengths, indptr, indices = model.text_encoder().encode(corpus.sentences, corpus.columns)
    ids = model.viterbi(indptr, indices, np.ones(len(indices)), lengths)
    return split_labels(ids, lengths, model.labels)


def write_tagged(
    path: str | os.PathLike[str],
    fmt: str,
    predictions: Sequence[Sequence[str]],
    out: TextIO,
    *,
    label: str | None = None,
    encoding: str = "utf-8",
) -> None:
    """Copy the input to ``out`` with the predictions added.

    CoNLL: the predicted label is appended as a last column (separated like the line's
    own columns); blank and ``-DOCSTART-`` lines pass through. CoNLL-U: the predicted
    tag replaces the ``label`` field (``xpos`` or ``upos``); comments, multiword
    tokens and empty nodes pass through unchanged.
    """
    flat = iter(tag for sent in predictions for tag in sent)
    field_index = CONLLU_COLUMNS.index(label or "xpos") if fmt == "conllu" else -1
    with open_text(path, encoding) as f:
        for line in f:
            line = line.rstrip("\r\n")
            stripped = line.strip()
            if not stripped:
                out.write(line + "\n")
                continue
            if fmt == "conllu":
                fields = line.split("\t")
                if line.startswith("#") or "-" in fields[0] or "." in fields[0]:
                    out.write(line + "\n")
                    continue
                fields[field_index] = next(flat)
                out.write("\t".join(fields) + "\n")
                continue
            if stripped.split()[0] == "-DOCSTART-":
                out.write(line + "\n")
                continue
            sep = "\t" if "\t" in line else " "
            out.write(line + sep + next(flat) + "\n")


def evaluate_corpus(model: Model, corpus: Corpus) -> Scores:
    """Token accuracy and conlleval chunk scores of the model on a labelled corpus."""
    return chunk_scores(corpus.labels(), tag_corpus(model, corpus))


def _split_tag(tag: str) -> tuple[str, str]:
    """conlleval's reading of a tag: ``B-NP`` → (``B``, ``NP``), ``O`` → (``O``, ``""``)."""
    prefix, sep, kind = tag.partition("-")
    return (prefix, kind) if sep else (tag, "")


# conlleval.pl's endOfChunk / startOfChunk tables (IOB1, IOB2, IOE1, IOE2).
_ENDS = {("B", "B"), ("B", "O"), ("I", "B"), ("I", "O"), ("E", "E"), ("E", "I"), ("E", "O")}
_STARTS = {("B", "B"), ("I", "B"), ("O", "B"), ("O", "I"), ("E", "E"), ("E", "I"), ("O", "E")}


def _chunks(tags: Sequence[str]) -> set[tuple[int, int, str]]:
    """(start, end, type) of every chunk of one sentence, by conlleval's rules.

    A sentence boundary counts as ``O`` on both sides, as in conlleval.
    """
    out: set[tuple[int, int, str]] = set()
    start: int | None = None
    prev_tag, prev_type = "O", ""
    for t, raw in enumerate([*tags, "O"]):
        tag, kind = _split_tag(raw)
        ends = (prev_tag, tag) in _ENDS or (prev_tag not in ("O", ".") and prev_type != kind)
        if ends and start is not None:
            out.add((start, t, prev_type))
            start = None
        begins = (prev_tag, tag) in _STARTS or (tag not in ("O", ".") and prev_type != kind)
        if begins:
            start = t
        prev_tag, prev_type = tag, kind
    return out


@dataclass
class Scores:
    """Token accuracy and chunk precision / recall / F1 (overall and per type)."""

    tokens: int = 0
    correct: int = 0
    gold_chunks: int = 0
    pred_chunks: int = 0
    correct_chunks: int = 0
    per_type: dict[str, list[int]] = field(default_factory=dict)  # type -> [gold, pred, right]

    @property
    def accuracy(self) -> float:
        return self.correct / self.tokens if self.tokens else 0.0

    @staticmethod
    def prf(gold: int, pred: int, right: int) -> tuple[float, float, float]:
        p = right / pred if pred else 0.0
        r = right / gold if gold else 0.0
        f = 2 * p * r / (p + r) if p + r else 0.0
        return p, r, f

    @property
    def precision_recall_f1(self) -> tuple[float, float, float]:
        return self.prf(self.gold_chunks, self.pred_chunks, self.correct_chunks)

    def as_dict(self) -> dict[str, Any]:
        p, r, f = self.precision_recall_f1
        return {
            "tokens": self.tokens,
            "accuracy": self.accuracy,
            "chunks_gold": self.gold_chunks,
            "chunks_predicted": self.pred_chunks,
            "precision": p,
            "recall": r,
            "f1": f,
            "per_type": {
                k: dict(zip(("precision", "recall", "f1"), self.prf(*v)))
                for k, v in sorted(self.per_type.items())
            },
        }


def chunk_scores(gold: Sequence[Sequence[str]], pred: Sequence[Sequence[str]]) -> Scores:
    """Token accuracy and conlleval chunk scores of predicted against gold sequences."""
    sc = Scores()
    for g, p in zip(gold, pred):
        if len(g) != len(p):
            raise ValueError("gold and predicted sentences differ in length")
        sc.tokens += len(g)
        sc.correct += sum(a == b for a, b in zip(g, p))
        cg, cp = _chunks(g), _chunks(p)
        sc.gold_chunks += len(cg)
        sc.pred_chunks += len(cp)
        sc.correct_chunks += len(cg & cp)
        for c in cg:
            sc.per_type.setdefault(c[2], [0, 0, 0])[0] += 1
        for c in cp:
            sc.per_type.setdefault(c[2], [0, 0, 0])[1] += 1
        for c in cg & cp:
            sc.per_type[c[2]][2] += 1
    return sc


def is_chunk_tagset(labels: Sequence[str]) -> bool:
    """True when labels look like IOB/IOE chunk tags (so chunk F1 is meaningful): typed
    (``B-NP``) or, as in Wapiti's base-NP examples, one untyped chunk kind (``B I O``)."""
    untyped = {"B", "I", "O", "E"}
    return any(lab.startswith(("B-", "I-", "E-", "S-")) for lab in labels) or (
        len(labels) > 1 and set(labels) <= untyped and ("B" in labels or "E" in labels)
    )
