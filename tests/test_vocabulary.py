"""The attribute dictionary against hand-computed columns, counts and drops."""

from __future__ import annotations

import numpy as np
import pytest

from crfopt.apps.estimator import _encode
from crfopt.data.features import Template, featurize
from crfopt.data.readers import Corpus
from crfopt.data.vocabulary import Vocabulary, drop_columns


def test_grow_freeze_and_min_count_by_hand():
    v = Vocabulary()
    # training: three tokens; "a" twice in the first token fires once but counts twice
    train = [v.token(["a", "b", "a"]), v.token(["c", "b"]), v.token(["d"])]
    assert train == [[0, 1], [1, 2], [3]]
    assert v.names == ["a", "b", "c", "d"]
    assert v.counts.tolist() == [2, 2, 1, 1]
    assert v.dropped == 0

    v.freeze()
    # test: "e" is unknown (two occurrences dropped); known ones are not counted
    assert v.token(["e", "d", "a", "e"]) == [0, 3]
    assert v.dropped == 2
    assert v.counts.tolist() == [2, 2, 1, 1]
    assert len(v) == 4 and "e" not in v

    keep_map = v.prune(2)  # keeps a, b (2 each); drops c, d (1 each)
    assert keep_map.tolist() == [0, 1, -1, -1]
    assert v.names == ["a", "b"] and dict(v) == {"a": 0, "b": 1}
    assert v.counts.tolist() == [2, 2]

    # train CSR rows [0,1] [1,2] [3] → [0,1] [1] []; test row [0,3] → [0]
    ptr, ind = drop_columns(np.array([0, 2, 4, 5]), np.array([0, 1, 1, 2, 3]), keep_map)
    assert ptr.tolist() == [0, 2, 3, 3] and ind.tolist() == [0, 1, 1]
    ptr, ind = drop_columns(np.array([0, 2]), np.array([0, 3]), keep_map)
    assert ptr.tolist() == [0, 1] and ind.tolist() == [0]


def test_prune_one_changes_nothing_and_freezes():
    v = Vocabulary()
    v.token(["x", "y"])
    assert v.prune(1) is None
    assert v.frozen and v.names == ["x", "y"]
    assert v.lookup("z") is None and v.dropped == 1
    with pytest.raises(ValueError, match="min_count must be at least 1"):
        v.prune(0)


def test_frozen_from_a_model_attribute_list():
    v = Vocabulary(["p", "q"], frozen=True)
    assert v.lookup("q") == 1 and v.lookup("r") is None
    assert v.names == ["p", "q"] and v.dropped == 1
    with pytest.raises(ValueError, match="'p' is listed twice"):
        Vocabulary(["p", "q", "p"])


def test_featurize_uses_the_training_dictionary():
    """w[0] attributes: train a, b, a (b below min_count 2); test a, c (c unknown)."""
    tpl = Template.from_spec({"name": "w", "features": [{"name": "w", "column": "word"}]})
    cols = ("word", "label")
    tr = Corpus(cols, [[("a", "X"), ("b", "Y")], [("a", "X")]], "train", "label")
    te = Corpus(cols, [[("a", "X"), ("c", "Y")]], "test", "label")
    f = featurize({"train": tr, "test": te}, tpl, min_count=2)
    assert f.attribute_names == ["w[0]=a"]
    assert f.stats["attributes_below_min_count"] == 1
    assert f.stats["test_unknown_attributes_dropped"] == 1
    assert f.splits["train"].indptr.tolist() == [0, 1, 1, 2]
    assert f.splits["train"].indices.tolist() == [0, 0]
    assert f.splits["test"].indptr.tolist() == [0, 1, 1]
    assert f.splits["test"].indices.tolist() == [0]


def test_estimator_encoding_grows_then_drops():
    v = Vocabulary()
    X = [[{"w": "the", "len": 3}, {"w": "cat", "up": True}]]
    lengths, indptr, indices, values, dropped = _encode(X, v)
    assert v.names == ["w:the", "len", "w:cat", "up"]
    assert lengths.tolist() == [2] and indptr.tolist() == [0, 2, 4]
    assert indices.tolist() == [0, 1, 2, 3] and values.tolist() == [1.0, 3.0, 1.0, 1.0]
    assert dropped == 0
    v.freeze()
    _, indptr, indices, values, dropped = _encode([[{"w": "dog", "len": 3}]], v)
    assert indptr.tolist() == [0, 1] and indices.tolist() == [1] and values.tolist() == [3.0]
    assert dropped == 1 and v.names == ["w:the", "len", "w:cat", "up"]
