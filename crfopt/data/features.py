"""Feature templates in the CRFsuite tradition, declared as data (TOML or YAML).

A template lists features; a feature is one or more *parts* ``(column, transform,
offset)`` — the transformed value of a column at a relative position. One part gives
an attribute named like CRFsuite's example templates, ``w[-1]=the``; several parts are
a conjunction, ``pos[-1]|pos[0]=DT|NN``. A feature whose position falls outside the
sentence is not emitted (CRFsuite's examples do the same). Boolean transforms
(``istitle``, ``isdigit``…) emit ``w[0].istitle`` when true and nothing otherwise.
Sentence boundaries need no attribute of their own: the bias block's first/last
features (docs/algorithms.md §1.1) play the role of CRFsuite's BOS/EOS.

Template file (TOML)::

    name = "my-template"
    description = "words and suffixes"

    [[features]]
    name = "w"
    column = "word"
    transform = "lower"
    window = [-1, 0, 1]          # one feature per offset

    [[features]]
    name = "suf3"
    column = "word"
    transform = "suffix:3"

    [[features]]                 # a conjunction
    name = "pos|pos"
    parts = [{column = "pos", offset = -1}, {column = "pos", offset = 0}]

Transforms: ``identity``, ``lower``, ``prefix:N``, ``suffix:N``, ``shape`` (Xx9 per
character), ``shortshape`` (repeats collapsed), ``length``, and the booleans
``istitle``, ``isupper``, ``islower``, ``isdigit``, ``hasdigit``, ``hashyphen``,
``ispunct``.

Built-in templates: ``chunking``, ``ner``, ``pos`` (``crfopt/data/templates/*.toml``).
"""

from __future__ import annotations

import hashlib
import json
import string
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain, repeat
from operator import itemgetter
from pathlib import Path
from typing import Any, cast

import numpy as np

from crfopt.data.readers import Corpus, DataFormatError
from crfopt.data.vocabulary import Vocabulary, drop_columns
from crfopt.kernels.arrays import Sequences

#: Bump when featurization changes, so cached problems are rebuilt.
FEATURIZER_VERSION = 1


_PUNCT = set(string.punctuation)


def _shape(s: str) -> str:
    out = []
    for ch in s:
        if ch.isupper():
            out.append("X")
        elif ch.islower():
            out.append("x")
        elif ch.isdigit():
            out.append("9")
        else:
            out.append(ch)
    return "".join(out)


def _short_shape(s: str) -> str:
    full = _shape(s)
    out = []
    for ch in full:
        if not out or out[-1] != ch:
            out.append(ch)
    return "".join(out)


_BOOLEAN: dict[str, Callable[[str], bool]] = {
    "istitle": str.istitle,
    "isupper": str.isupper,
    "islower": str.islower,
    "isdigit": str.isdigit,
    "hasdigit": lambda s: any(c.isdigit() for c in s),
    "hashyphen": lambda s: "-" in s,
    "ispunct": lambda s: bool(s) and all(c in _PUNCT for c in s),
}
_VALUED: dict[str, Callable[[str], str]] = {
    "identity": lambda s: s,
    "lower": str.lower,
    "shape": _shape,
    "shortshape": _short_shape,
    "length": lambda s: str(len(s)),
}


def _transform(name: str) -> tuple[Callable[[str], Any], bool]:
    """(function, is_boolean) of a transform name."""
    if name in _BOOLEAN:
        return _BOOLEAN[name], True
    if name in _VALUED:
        return _VALUED[name], False
    for kind in ("prefix", "suffix"):
        if name.startswith(kind + ":"):
            try:
                k = int(name.split(":", 1)[1])
            except ValueError:
                break
            if k < 1:
                break
            return ((lambda s, k=k: s[:k]) if kind == "prefix" else (lambda s, k=k: s[-k:])), False
    valid = sorted([*_BOOLEAN, *_VALUED, "prefix:N", "suffix:N"])
    raise ValueError(f"unknown transform {name!r}; valid: {', '.join(valid)}")


@dataclass(frozen=True)
class Part:
    column: str
    transform: str = "identity"
    offset: int = 0


@dataclass(frozen=True)
class Feature:
    name: str
    parts: tuple[Part, ...]

    @property
    def boolean(self) -> bool:
        return len(self.parts) == 1 and self.parts[0].transform in _BOOLEAN

    def label(self) -> str:
        """Attribute name before '=': ``w[-1]``, ``pos[-1]|pos[0]``, ``w[0].istitle``."""
        if self.boolean:
            p = self.parts[0]
            return f"{self.name}[{p.offset}].{p.transform}"
        if len(self.parts) == 1:
            return f"{self.name}[{self.parts[0].offset}]"
        prefixes = self.name.split("|")
        if len(prefixes) != len(self.parts):
            prefixes = [self.name] * len(self.parts)
        return "|".join(f"{pre}[{p.offset}]" for pre, p in zip(prefixes, self.parts))


@dataclass(frozen=True)
class Template:
    """A parsed feature template."""

    name: str
    features: tuple[Feature, ...]
    description: str = ""
    source: str = ""

    @property
    def columns(self) -> tuple[str, ...]:
        return tuple(sorted({p.column for f in self.features for p in f.parts}))

    @property
    def default_bias(self) -> bool:
        """Whether a problem gets crfopt's bias block unless told otherwise: yes here; no
        for CRF++/Wapiti pattern files, which define every feature of their model."""
        return True

    def require_supported(self) -> None:
        """Raise if crfopt's model cannot hold every feature of this template (a pattern
        file's bigram-observation patterns); crfopt's own templates always fit."""

    def check_corpus(self, corpus: Corpus, split: str, label: str) -> None:
        """Raise :class:`DataFormatError` unless ``corpus`` has what the template reads."""
        missing = [c for c in self.columns if c not in corpus.columns]
        if missing:
            raise DataFormatError(
                corpus.path,
                f"template {self.name!r} needs column(s) {', '.join(missing)}; the "
                f"{split} corpus has {', '.join(corpus.columns)} (name them with --columns)",
            )

    def token_attributes(
        self, sent: Sequence[tuple[str, ...]], col_index: Mapping[str, int]
    ) -> list[list[str]]:
        """Attribute strings of every token of one sentence (``col_index``: column → position)."""
        T = len(sent)
        cache: dict[tuple[str, str], list[Any]] = {}

        def values(column: str, transform: str) -> list[Any]:
            key = (column, transform)
            if key not in cache:
                fn, _ = _transform(transform)
                j = col_index[column]
                cache[key] = [fn(tok[j]) for tok in sent]
            return cache[key]

        out: list[list[str]] = [[] for _ in range(T)]
        for feat in self.features:
            label = feat.label()
            if feat.boolean:
                p = feat.parts[0]
                vals = values(p.column, p.transform)
                for t in range(T):
                    pos = t + p.offset
                    if 0 <= pos < T and vals[pos]:
                        out[t].append(label)
                continue
            cols = [values(p.column, p.transform) for p in feat.parts]
            offs = [p.offset for p in feat.parts]
            lo = -min(0, *offs)
            hi = T - max(0, *offs)
            for t in range(lo, hi):
                out[t].append(label + "=" + "|".join(c[t + o] for c, o in zip(cols, offs)))
        return out

    def encoder(self, attributes: Sequence[str]) -> TemplateEncoder | AttributeEncoder:
        """The encoder of sentences into the columns of ``attributes`` (a model's
        dictionary) through this template, for tagging."""
        return TemplateEncoder(self, attributes)

    def spec(self) -> dict[str, Any]:
        """Canonical data form (what is hashed, cached and saved in models)."""
        return {
            "name": self.name,
            "features": [
                {"name": f.name, "parts": [[p.column, p.transform, p.offset] for p in f.parts]}
                for f in self.features
            ],
        }

    @property
    def digest(self) -> str:
        return hashlib.sha256(json.dumps(self.spec(), sort_keys=True).encode()).hexdigest()[:16]

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any], source: str = "") -> Template:
        """Build from the canonical form or from the user file layout (module docstring).

        A pattern file's canonical form (``format``: ``crfpp`` or ``wapiti``) is read by
        :func:`crfopt.data.template_files.template_from_spec`, which knows both kinds.
        """
        if not isinstance(spec, Mapping):
            raise ValueError(f"{source or 'template'}: expected a mapping at the top level")
        if "format" in spec:
            raise ValueError(
                f"{source or 'template'}: a CRF++/Wapiti pattern file's spec; read it with "
                "crfopt.data.template_files.template_from_spec"
            )
        name = str(spec.get("name", Path(source).stem if source else "template"))
        raw = spec.get("features")
        if not isinstance(raw, Sequence) or isinstance(raw, str) or not raw:
            raise ValueError(f"{source or name}: a template needs a non-empty 'features' list")
        features: list[Feature] = []
        for j, entry in enumerate(raw):
            where = f"{source or name}: feature {j + 1}"
            if not isinstance(entry, Mapping):
                raise ValueError(f"{where}: expected a table")
            unknown = set(entry) - {"name", "column", "transform", "window", "offset", "parts"}
            if unknown:
                raise ValueError(f"{where}: unknown keys {sorted(unknown)}")
            fname = entry.get("name")
            if not fname:
                raise ValueError(f"{where}: missing 'name'")
            if "parts" in entry:
                parts = []
                for part in entry["parts"]:
                    if isinstance(part, (list, tuple)):
                        column, transform, offset = part
                    else:
                        column = part.get("column")
                        transform = part.get("transform", "identity")
                        offset = part.get("offset", 0)
                    if not column:
                        raise ValueError(f"{where}: every part needs a column")
                    _transform(transform)
                    parts.append(Part(str(column), str(transform), int(offset)))
                if len(parts) > 1 and any(p.transform in _BOOLEAN for p in parts):
                    raise ValueError(f"{where}: boolean transforms cannot be conjoined")
                features.append(Feature(str(fname), tuple(parts)))
                continue
            column = entry.get("column")
            if not column:
                raise ValueError(f"{where}: missing 'column' (or 'parts')")
            transform = str(entry.get("transform", "identity"))
            try:
                _transform(transform)
            except ValueError as exc:
                raise ValueError(f"{where}: {exc}") from None
            offsets = entry.get("window", [entry.get("offset", 0)])
            for off in offsets:
                features.append(Feature(str(fname), (Part(str(column), transform, int(off)),)))
        return cls(name, tuple(features), str(spec.get("description", "")), source)


@dataclass
class Featurized:
    """The output of :func:`featurize`: sequences per split and the dictionaries."""

    splits: dict[str, Sequences]
    label_names: list[str]
    attribute_names: list[str]
    stats: dict[str, Any] = field(default_factory=dict)


def _token_attributes(
    sent: Sequence[tuple[str, ...]], template: Template, col_index: Mapping[str, int]
) -> list[list[str]]:
    """Attribute strings of every token of one sentence (:meth:`Template.token_attributes`)."""
    return template.token_attributes(sent, col_index)


class TemplateEncoder:
    """Sentences straight to the columns of a fixed attribute dictionary (tagging).

    Gives every token the columns :func:`_token_attributes` and a frozen
    :class:`~crfopt.data.vocabulary.Vocabulary` give it (sorted, distinct, unknown
    attributes dropped) without forming the attribute strings: an attribute of a valued
    feature is ``label=value``, so the dictionary is split once into one table per
    feature, ``value → column`` (the names that begin with ``label=``), and a batch of
    sentences is encoded feature by feature over all its tokens at once, each lookup a
    dict access in C. Forming and hashing the strings one token at a time was 95 % of
    ``crfopt tag``'s time.

    Parameters
    ----------
    template : Template
        The model's feature template.
    attributes : sequence of str
        The model's attribute names, in column order.
    """

    def __init__(self, template: Template, attributes: Sequence[str]) -> None:
        self.template = template
        self.n_attributes = len(attributes)
        labels = [f.label() for f in template.features]
        booleans = {lab for f, lab in zip(template.features, labels) if f.boolean}
        valued = {lab for f, lab in zip(template.features, labels) if not f.boolean}
        # A label without '=' heads exactly the names whose first '=' follows it; a
        # label holding '=' (a feature named so) is matched by its prefix instead.
        by_head: dict[str, dict[str, int]] = {lab: {} for lab in valued if "=" not in lab}
        odd = sorted(lab for lab in valued if "=" in lab)
        flags: dict[str, int] = {}
        for column, name in enumerate(attributes):
            head, sep, rest = name.partition("=")
            if sep:
                table = by_head.get(head)
                if table is not None:
                    table[rest] = column
            if name in booleans:
                flags[name] = column
        for lab in odd:
            prefix = lab + "="
            by_head[lab] = {
                name[len(prefix) :]: column
                for column, name in enumerate(attributes)
                if name.startswith(prefix)
            }
        #: per feature of the template: the column of a boolean feature's attribute
        #: (None: unknown), or the table value → column of a valued one
        self.tables: list[int | dict[str, int] | None] = [
            flags.get(lab) if f.boolean else by_head[lab]
            for f, lab in zip(template.features, labels)
        ]

    def encode(
        self, sentences: Sequence[Sequence[tuple[str, ...]]], columns: Sequence[str]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(lengths, indptr, indices) of ``sentences`` (tuples of the ``columns``' values):
        a CSR over their tokens with the sorted distinct columns of each."""
        col_index = {c: j for j, c in enumerate(columns)}
        lengths = np.fromiter(map(len, sentences), dtype=np.int64, count=len(sentences))
        offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        N, A = int(offsets[-1]), self.n_attributes
        if N == 0 or A == 0:
            return lengths, np.zeros(N + 1, dtype=np.int64), np.zeros(0, dtype=np.int64)
        tokens = list(chain.from_iterable(sentences))
        first = np.repeat(offsets[:-1], lengths)  # of each token's sentence
        end = np.repeat(offsets[1:], lengths)
        at = np.arange(N, dtype=np.int64)
        raw: dict[str, tuple[list[str], np.ndarray]] = {}
        coded: dict[tuple[str, str], tuple[list[Any], np.ndarray]] = {}

        # Every value is transformed and looked up once per distinct value, not per
        # token: (distinct values, each token's code) of a column, then of a transform.
        def column(name: str) -> tuple[list[str], np.ndarray]:
            if name not in raw:
                raw[name] = _factorize(list(map(itemgetter(col_index[name]), tokens)))
            return raw[name]

        def values(part: Part) -> tuple[list[Any], np.ndarray]:
            key = (part.column, part.transform)
            if key not in coded:
                distinct, codes = column(part.column)
                fn, boolean = _transform(part.transform)
                if boolean:
                    flags = np.fromiter(map(bool, map(fn, distinct)), dtype=bool)
                    coded[key] = ([False, True], flags[codes].astype(np.int64))
                else:
                    out, recode = _factorize(list(map(fn, distinct)))
                    coded[key] = (out, recode[codes])
            return coded[key]

        rows: list[np.ndarray] = []
        cols: list[np.ndarray] = []
        for feat, table in zip(self.template.features, self.tables):
            if table is None or (isinstance(table, dict) and not table):
                continue  # no attribute of this feature is in the dictionary
            inside = np.ones(N, dtype=bool)
            for off in {p.offset for p in feat.parts}:
                inside &= (at + off >= first) & (at + off < end)
            if feat.boolean:
                part = feat.parts[0]
                source = np.where(inside, at + part.offset, 0)
                hit = np.flatnonzero(inside & (values(part)[1][source] == 1))
                rows.append(hit)
                cols.append(np.full(len(hit), table, dtype=np.int64))
                continue
            hit = np.flatnonzero(inside)
            parts = [values(p) for p in feat.parts]
            codes = [c[hit + p.offset] for (_, c), p in zip(parts, feat.parts)]
            # the distinct value tuples of the hits, their first hit, and each hit's tuple
            key = codes[0]
            for c, (distinct, _) in zip(codes[1:], parts[1:]):
                key = np.unique(key * len(distinct) + c, return_inverse=True)[1]
            _, first_hit, which = np.unique(key, return_index=True, return_inverse=True)
            picked = [[d[j] for j in c[first_hit].tolist()] for (d, _), c in zip(parts, codes)]
            names = picked[0] if len(picked) == 1 else map("|".join, zip(*picked))
            lookup = cast(dict, table).get
            found = np.fromiter(
                map(lookup, names, repeat(-1)), dtype=np.int64, count=len(first_hit)
            )
            rows.append(hit)
            cols.append(found[which])
        if not rows:
            return lengths, np.zeros(N + 1, dtype=np.int64), np.zeros(0, dtype=np.int64)
        row = np.concatenate(rows)
        col = np.concatenate(cols)
        known = col >= 0
        # sorted and distinct within each token: one sort of the (token, column) keys
        key = np.sort(row[known] * A + col[known])
        if len(key) > 1:
            key = key[np.concatenate(([True], key[1:] != key[:-1]))]
        row = key // A
        indptr = np.zeros(N + 1, dtype=np.int64)
        np.cumsum(np.bincount(row, minlength=N), out=indptr[1:])
        return lengths, indptr, key - row * A


class AttributeEncoder:
    """Sentences to the columns of a fixed attribute dictionary through any template's
    :meth:`Template.token_attributes`: the attribute strings of each token looked up in
    a frozen :class:`~crfopt.data.vocabulary.Vocabulary` (unknown ones dropped), as
    :func:`featurize` encodes a test split. The path for templates whose attributes are
    not ``label=value`` names (CRF++/Wapiti pattern files), which :class:`TemplateEncoder`
    cannot split into per-feature tables.
    """

    def __init__(self, template: Template, attributes: Sequence[str]) -> None:
        self.template = template
        self.vocabulary = Vocabulary(attributes, frozen=True)
        self.n_attributes = len(attributes)

    def encode(
        self, sentences: Sequence[Sequence[tuple[str, ...]]], columns: Sequence[str]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(lengths, indptr, indices) as :meth:`TemplateEncoder.encode` gives them."""
        col_index = {c: j for j, c in enumerate(columns)}
        lengths = np.fromiter(map(len, sentences), dtype=np.int64, count=len(sentences))
        indptr: list[int] = [0]
        indices: list[int] = []
        for sent in sentences:
            for names in _token_attributes(sent, self.template, col_index):
                indices.extend(self.vocabulary.token(names))
                indptr.append(len(indices))
        return lengths, np.asarray(indptr, dtype=np.int64), np.asarray(indices, dtype=np.int64)


def _factorize(items: list[Any]) -> tuple[list[Any], np.ndarray]:
    """(the distinct items in first-seen order, each item's index among them)."""
    distinct = list(dict.fromkeys(items))
    index = dict(zip(distinct, range(len(distinct))))
    codes = np.fromiter(map(index.__getitem__, items), dtype=np.int64, count=len(items))
    return distinct, codes


def featurize(
    corpora: Mapping[str, Corpus],
    template: Template,
    *,
    train: str = "train",
    label: str | None = None,
    min_count: int = 1,
) -> Featurized:
    """Sparse sequences for every split; dictionaries from the training split only.

    Attributes seen fewer than ``min_count`` times in training are dropped. Test
    attributes unknown to training are dropped and counted; test tokens whose label does
    not occur in training get label -1 (always counted as an error).
    """
    if train not in corpora:
        raise ValueError(f"no training split {train!r} among {sorted(corpora)}")
    if min_count < 1:
        raise ValueError("min_count must be at least 1")
    tr = corpora[train]
    label_col = label or tr.label
    if label_col is None:
        raise ValueError("the training corpus has no label column")
    template.require_supported()
    for split, corpus in corpora.items():
        template.check_corpus(corpus, split, label_col)
        if label_col not in corpus.columns:
            raise DataFormatError(corpus.path, f"no label column {label_col!r}")
    label_names = sorted({tok[tr.column(label_col)] for sent in tr.sentences for tok in sent})
    label_id = {lab: k for k, lab in enumerate(label_names)}

    vocab = Vocabulary()
    splits: dict[str, Sequences] = {}
    stats: dict[str, Any] = {
        "template": template.name,
        "template_digest": template.digest,
        "min_count": min_count,
    }
    order = [train, *[s for s in corpora if s != train]]
    raw: dict[str, tuple[list[int], list[int], list[int], list[int]]] = {}
    for split in order:
        if split != train:
            vocab.freeze()  # the dictionary comes from the training split only
        corpus = corpora[split]
        col_index = {c: j for j, c in enumerate(corpus.columns)}
        lj = col_index[label_col]
        lengths: list[int] = []
        labels: list[int] = []
        indptr: list[int] = [0]
        indices: list[int] = []
        dropped_before = vocab.dropped
        unseen_labels = 0
        for sent in corpus.sentences:
            lengths.append(len(sent))
            attrs = _token_attributes(sent, template, col_index)
            for tok, names in zip(sent, attrs):
                k = label_id.get(tok[lj])
                if k is None:
                    unseen_labels += 1
                    k = -1
                labels.append(k)
                indices.extend(vocab.token(names))
                indptr.append(len(indices))
        raw[split] = (lengths, labels, indptr, indices)
        stats[f"{split}_unknown_attributes_dropped"] = vocab.dropped - dropped_before
        stats[f"{split}_tokens_with_unseen_labels"] = unseen_labels
    # rare attributes go after every split is encoded: a test attribute below min_count
    # is removed with its column, not counted as unknown
    n_seen = len(vocab)
    keep_map = vocab.prune(min_count)
    if keep_map is not None:
        stats["attributes_below_min_count"] = n_seen - len(vocab)
    for split in order:
        lengths, labels, indptr, indices = raw[split]
        ind = np.asarray(indices, dtype=np.int64)
        ptr = np.asarray(indptr, dtype=np.int64)
        if keep_map is not None:
            ptr, ind = drop_columns(ptr, ind, keep_map)
        splits[split] = Sequences(
            lengths=np.asarray(lengths, dtype=np.int64),
            labels=np.asarray(labels, dtype=np.int64),
            indptr=ptr,
            indices=ind,
        )
    return Featurized(splits, label_names, vocab.names, stats)
