"""Tokens given as python-crfsuite items, encoded as a CSR over attribute columns.

Feature dicts follow python-crfsuite's ``ItemSequence`` rules exactly (the attribute
names are the same, so ``state_features_`` keys match sklearn-crfsuite's):
``{"k": 1.5}`` is attribute ``k`` with value 1.5; ``{"k": True}`` is ``k`` with value 1
and ``{"k": False}`` is ``k`` with value 0 (the attribute exists, it weighs nothing);
``{"k": "v"}`` is attribute ``k:v`` with value 1; ``{"k": {"a": ...}}`` nests with the
prefix ``k:`` (so ``{"k": {"a": "v"}}`` is ``k:a:v``); ``{"k": ["a", "b"]}`` gives ``k:a``
and ``k:b``; a token may also be a list of attribute strings or one string. Keys, string
values and attribute strings may be ``bytes`` (UTF-8, as python-crfsuite reads them); a
value may be any real number (``numpy`` scalars, ``Decimal``, ``Fraction``) or bool.

:class:`crfopt.CRF` (crfopt/apps/estimator.py) encodes its ``X`` here, for fit and predict.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Mapping, Sequence
from itertools import chain, compress
from typing import Any

import numpy as np

from crfopt.data.vocabulary import Vocabulary

__all__ = ["as_sentences", "encode_items", "item_attributes"]


def _text(value: str | bytes, what: str) -> str:
    """A name part given as str or bytes (python-crfsuite takes bytes as UTF-8)."""
    if isinstance(value, str):
        return value
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{what}: {value!r} is not UTF-8 text") from None


def _is_number(value: Any) -> bool:
    """A real number python-crfsuite takes as a value (complex is not one)."""
    return isinstance(value, (numbers.Number, np.number)) and not isinstance(
        value, (complex, np.complexfloating)
    )


def item_attributes(item: Any, prefix: str = "") -> Iterable[tuple[str, float]]:
    """(attribute, value) pairs of one token, named exactly as python-crfsuite names them.

    python-crfsuite's ``ItemSequence``: a string value ``{"k": "v"}`` is ``k:v`` with
    value 1, a nested dict prefixes ``k:``, a list of strings gives ``k:s`` for each,
    bools are 1/0 and numbers their value (zero included: the attribute exists). Keys and
    strings may be ``bytes``, read as UTF-8.
    """
    if isinstance(item, Mapping):
        for key, value in item.items():
            if not isinstance(key, (str, bytes)):
                raise TypeError(f"feature keys must be strings, got {key!r} ({type(key).__name__})")
            name = f"{prefix}{_text(key, 'a feature key')}"
            if isinstance(value, (bool, np.bool_)):
                yield name, 1.0 if value else 0.0
            elif isinstance(value, (str, bytes)):
                yield f"{name}:{_text(value, f'feature {name!r}')}", 1.0
            elif _is_number(value):
                v = float(value)
                if not math.isfinite(v):
                    raise ValueError(f"feature {name!r} has a non-finite value {value!r}")
                yield name, v
            elif isinstance(value, Mapping):
                yield from item_attributes(value, prefix=f"{name}:")
            elif isinstance(value, (list, tuple, set, frozenset)):
                for v in value:
                    if not isinstance(v, (str, bytes)):
                        raise TypeError(
                            f"feature {name!r}: list entries must be strings, got "
                            f"{type(v).__name__}"
                        )
                    yield f"{name}:{_text(v, f'feature {name!r}')}", 1.0
            else:
                raise TypeError(
                    f"feature {name!r}: unsupported value type {type(value).__name__} "
                    "(use str, bytes, bool, a number, a dict or a list of str)"
                )
    elif isinstance(item, (list, tuple, set, frozenset)):
        for v in item:
            if not isinstance(v, (str, bytes)):
                raise TypeError("a token given as a list must list attribute strings")
            yield f"{prefix}{_text(v, 'an attribute')}", 1.0
    elif isinstance(item, (str, bytes)):
        yield f"{prefix}{_text(item, 'an attribute')}", 1.0
    else:
        raise TypeError(
            f"unsupported token type {type(item).__name__} (a dict of features, a list of "
            "attribute strings or a string)"
        )


def as_sentences(X: Iterable[Iterable[Any]], what: str = "X") -> list[list[Any]]:
    """``X`` as a list of lists: generators (of generators) are read once, here."""
    if isinstance(X, (str, bytes, Mapping)):
        raise TypeError(f"{what} must be a sequence of sequences, got a {type(X).__name__}")
    return [list(s) for s in X]


class _NotFlat(Exception):
    """A token outside the fast path: not a dict, or a value naming several attributes."""


#: The fast path numbers (key, value) pairs through a table of every key × value number
#: while it has at most twice as many entries as there are occurrences plus this many
#: (its memory then stays within that of the per-occurrence arrays), else by a sort.
PAIR_TABLE_SLOTS = 2**20
#: Value types of the fast path: those :func:`item_attributes` names as one attribute.
_FLAT_VALUE_TYPES = (str, bytes, int, float, np.integer, np.floating, np.bool_)


class _Codes(dict):
    """Item → its number in first-seen order; a miss numbers a new item (in C, but for
    the one Python call per distinct item)."""

    def __missing__(self, item: Any) -> int:
        code = self[item] = len(self)
        return code


def _pair_name(key: Any, value: Any) -> tuple[str, float]:
    """The attribute and value a flat (key, value) pair names, as :func:`item_attributes`."""
    attrs = list(item_attributes({key: value}))
    if len(attrs) != 1:  # a tuple/set value names 0 or several attributes
        raise _NotFlat
    return attrs[0]


def _flat_entries(tokens: list[Any]) -> tuple[np.ndarray, list[str], np.ndarray, np.ndarray]:
    """Fast path: every token a dict of str, bool or number values.

    Returns the per-occurrence entry numbers (one entry per distinct (key, value) pair,
    numbered in first-seen order), the entries' names and values, and the per-token
    occurrence counts; raises :class:`_NotFlat` when a token needs the general path
    (nested dicts, list values, non-dict tokens, a value type :func:`item_attributes`
    refuses).

    A corpus repeats the same few hundred thousand (key, value) pairs millions of times
    (the same word, suffix or flag) over a few dozen keys: keys and values are numbered
    apart, each occurrence looked up in C in a small dict of strings, the pair's number
    formed in NumPy, and only each distinct pair is named in Python, by
    :func:`item_attributes`' rules (so the names and errors are the general path's).
    Looking up (key, value) tuples instead cost twice as much: a tuple's hash and
    comparison touch both strings, in a dict of every distinct pair.
    """
    keys, values = _Codes(), _Codes()
    # dict.keys on a non-dict token and hashing a list/dict value both raise TypeError
    try:
        per_token = np.fromiter(map(len, tokens), dtype=np.int64, count=len(tokens))
        total = int(per_token.sum())
        key_of = np.fromiter(
            map(keys.__getitem__, chain.from_iterable(map(dict.keys, tokens))),
            dtype=np.int64,
            count=total,
        )
        value_of = np.fromiter(
            map(values.__getitem__, chain.from_iterable(map(dict.values, tokens))),
            dtype=np.int64,
            count=total,
        )
        # Values equal to a seen one (1 == 1.0 == True) share its number whatever their
        # type, so the types of the occurrences of numbers are checked one by one (a
        # str equals only strs): numpy.bool_, Decimal, complex… go to the general path,
        # and a value is accepted or refused by its type alone.
        value_list = list(values)
        types = set(map(type, value_list))
        number = np.fromiter((type(v) is not str for v in value_list), bool, len(value_list))
        if number.any():
            occurring = chain.from_iterable(map(dict.values, tokens))
            types.update(map(type, compress(occurring, number[value_of].tolist())))
    except TypeError:
        raise _NotFlat from None
    if not all(issubclass(t, _FLAT_VALUE_TYPES) for t in types):
        raise _NotFlat
    pair = key_of * len(values) + value_of
    slots = len(keys) * len(values)
    if slots <= 2 * total + PAIR_TABLE_SLOTS:  # a table of every (key, value): no sort
        first = np.full(slots, total, dtype=np.int64)
        np.minimum.at(first, pair, np.arange(total, dtype=np.int64))
        seen = np.flatnonzero(first < total)
        order = np.argsort(first[seen], kind="stable")
        entry = np.empty(slots, dtype=np.int64)
        entry[seen[order]] = np.arange(len(seen), dtype=np.int64)
        entries, firsts = entry[pair], first[seen[order]]
    else:
        _, first_of, inverse = np.unique(pair, return_index=True, return_inverse=True)
        order = np.argsort(first_of, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(len(order))
        entries, firsts = rank[inverse.reshape(-1)], first_of[order]
    key_list = list(keys)
    names: list[str] = []
    weights: list[float] = []
    try:
        for k, v in zip(key_of[firsts].tolist(), value_of[firsts].tolist()):
            key, value = key_list[k], value_list[v]
            if type(key) is str and type(value) is str:  # most pairs: no call
                names.append(f"{key}:{value}")
                weights.append(1.0)
            else:
                name, weight = _pair_name(key, value)
                names.append(name)
                weights.append(weight)
    except TypeError:  # e.g. a non-str key: the general path raises with the reason
        raise _NotFlat from None
    return entries, names, np.asarray(weights, dtype=np.float64), per_token


def _general_entries(tokens: list[Any]) -> tuple[np.ndarray, list[str], np.ndarray, np.ndarray]:
    """Any token python-crfsuite accepts, one :func:`item_attributes` call per token."""
    names: list[str] = []
    values: list[float] = []
    per_token = np.empty(len(tokens), dtype=np.int64)
    for t, item in enumerate(tokens):
        before = len(names)
        for name, value in item_attributes(item):
            names.append(name)
            values.append(value)
        per_token[t] = len(names) - before
    return np.arange(len(names)), names, np.asarray(values, dtype=np.float64), per_token


def encode_items(
    X: Sequence[Sequence[Any]], vocab: Vocabulary
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """CSR over tokens with the attribute values: (lengths, indptr, indices, values, dropped).

    An open ``vocab`` (fit) grows with new attributes in first-seen order and counts
    every occurrence; a frozen one (predict) drops unknown attributes, returned as the
    count of dropped occurrences. A zero value registers its attribute (as in CRFsuite)
    but stores no entry: it adds nothing. Each token's columns come sorted (the kernel
    data's canonical order, so building the problem skips its own sort); an attribute
    named twice in one token keeps both entries, which the problem sums.
    """
    lengths = np.fromiter(map(len, X), dtype=np.int64, count=len(X))
    if len(lengths) and lengths.min() == 0:
        i = int(np.argmin(lengths))
        raise ValueError(f"sentence {i} is empty: every sequence needs at least one token")
    tokens = list(chain.from_iterable(X))
    dropped_before = vocab.dropped
    try:
        entries, names, entry_values, per_token = _flat_entries(tokens)
    except _NotFlat:
        entries, names, entry_values, per_token = _general_entries(tokens)
    # each distinct entry is looked up once, standing for all its occurrences
    occurrences = np.bincount(entries, minlength=len(names))
    columns = vocab.lookup_many(names, occurrences)
    ids, values = columns[entries], entry_values[entries]
    row = np.repeat(np.arange(len(tokens), dtype=np.int64), per_token)
    keep = (ids >= 0) & (values != 0.0)
    row, ids, values = row[keep], ids[keep], values[keep]
    if len(ids) > 1:
        # sort within tokens: (row, column) as one int64 key, stable for duplicates
        key = row * max(len(vocab), 1) + ids
        if np.any(key[1:] < key[:-1]):
            order = np.argsort(key, kind="stable")
            ids, values = ids[order], values[order]
    indptr = np.zeros(len(tokens) + 1, dtype=np.int64)
    np.cumsum(np.bincount(row, minlength=len(tokens)), out=indptr[1:])
    return lengths, indptr, ids, values, vocab.dropped - dropped_before
