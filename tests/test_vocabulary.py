"""The attribute dictionary against hand-computed columns, counts and drops."""

from __future__ import annotations

import numpy as np
import pytest

from crfopt.apps.items import encode_items, item_attributes
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
    lengths, indptr, indices, values, dropped = encode_items(X, v)
    assert v.names == ["w:the", "len", "w:cat", "up"]
    assert lengths.tolist() == [2] and indptr.tolist() == [0, 2, 4]
    assert indices.tolist() == [0, 1, 2, 3] and values.tolist() == [1.0, 3.0, 1.0, 1.0]
    assert dropped == 0
    v.freeze()
    _, indptr, indices, values, dropped = encode_items([[{"w": "dog", "len": 3}]], v)
    assert indptr.tolist() == [0, 1] and indices.tolist() == [1] and values.tolist() == [3.0]
    assert dropped == 1 and v.names == ["w:the", "len", "w:cat", "up"]


# --------------------------------------------------------------------------------------
# The batch paths (Vocabulary.lookup_many, the estimator's fast encode_items) against the
# one-occurrence-at-a-time rules they replace.


def _reference_encode(X, vocab):
    """The plain rule, one occurrence at a time: item_attributes names each attribute,
    Vocabulary.lookup numbers/counts/drops it, zero values register but store nothing;
    each token's entries sorted by column (the problem's canonical order; equal columns
    keep their order, the problem sums them)."""
    lengths, indptr, indices, values = [], [0], [], []
    dropped = vocab.dropped
    for sent in X:
        lengths.append(len(sent))
        for item in sent:
            row = []
            for name, value in item_attributes(item):
                j = vocab.lookup(name)
                if j is not None and value != 0.0:
                    row.append((j, value))
            row.sort(key=lambda e: e[0])  # stable: duplicates keep their order
            indices += [j for j, _ in row]
            values += [v for _, v in row]
            indptr.append(len(indices))
    return lengths, indptr, indices, values, vocab.dropped - dropped


def _random_corpus(rng, n_sent, *, flat):
    """Sentences of tutorial-like tokens; ``flat=False`` mixes in every other shape
    python-crfsuite accepts (nested dicts, lists, tuples, numpy scalars, list/str tokens)."""
    words = ["de", "De", "Gent", "1999", "het", "EU", "x", "de"]
    X = []
    for _ in range(n_sent):
        sent = []
        for _ in range(int(rng.integers(1, 6))):
            w = str(rng.choice(words))
            tok = {
                "bias": 1.0,
                "word.lower()": w.lower(),
                "word[-2:]": w[-2:],
                "word.isupper()": w.isupper(),
                "word.istitle()": w.istitle(),
                "len": int(rng.integers(0, 3)),  # 0: registered, stores nothing
                "score": float(rng.choice([0.5, -2.0, 0.0, 1.0])),
            }
            if rng.random() < 0.3:
                tok["BOS"] = True
            if rng.random() < 0.2:
                tok["word.lower():de"] = 2.5  # the same name as "word.lower()": "de"
            if not flat:
                kind = rng.integers(0, 7)
                if kind == 0:
                    tok["nested"] = {"a": w, "b": {"c": 2.0}, "f": False}
                elif kind == 1:
                    tok["list"] = [w, "z", w]
                elif kind == 2:
                    tok["tuple"] = ("p", w)
                elif kind == 3:
                    tok["np"] = np.float32(0.25)
                    tok["npi"] = np.int64(3)
                elif kind == 4:
                    tok = [f"w={w}", "shape", f"w={w}"]
                elif kind == 5:
                    tok = f"w={w}"
            sent.append(tok)
        X.append(sent)
    return X


@pytest.mark.parametrize("flat", [True, False], ids=["flat", "mixed"])
@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("table", [True, False], ids=["table", "sort"])
def test_fast_encode_matches_the_one_at_a_time_rule(seed, flat, table, monkeypatch):
    from crfopt.apps import items

    if not table:  # the pairs numbered by a sort, as for inputs with many keys and values
        monkeypatch.setattr(items, "PAIR_TABLE_SLOTS", -(10**9))
    rng = np.random.default_rng(seed)
    train = _random_corpus(rng, 60, flat=flat)
    test = _random_corpus(rng, 30, flat=flat)
    test[0][0] = {"never": "seen", "bias": 1.0, "also_new": 3.0}  # dropped occurrences
    fast, ref = Vocabulary(), Vocabulary()
    for X in (train, test):
        got = encode_items(X, fast)
        want = _reference_encode(X, ref)
        assert [a.tolist() for a in got[:4]] == list(want[:4])
        assert got[4] == want[4]
        assert fast.names == ref.names
        assert fast.counts.tolist() == ref.counts.tolist()
        assert fast.dropped == ref.dropped
        fast.freeze(), ref.freeze()
    assert ref.dropped >= 2  # the frozen pass did drop something


def test_fast_encode_decides_by_type_not_by_what_was_seen():
    """A value equal to an earlier one (numpy.bool_(True) == 1, Decimal(2) == 2,
    complex(1, 0) == 1) is accepted or refused as item_attributes takes it, whether or
    not the equal value was seen first."""
    from decimal import Decimal

    for value in (np.bool_(True), Decimal(2)):
        for X in ([[{"a": 1, "b": 2}], [{"a": value}]], [[{"a": value}]]):
            got = encode_items(X, Vocabulary())
            assert [a.tolist() for a in got[:4]] == list(_reference_encode(X, Vocabulary())[:4])
    X = [[{"a": 1, "b": 2}], [{"a": complex(1, 0)}]]
    with pytest.raises(TypeError, match="unsupported value type"):
        encode_items(X, Vocabulary())
    with pytest.raises(ValueError, match="non-finite"):
        encode_items([[{"a": 1.0}, {"a": float("nan")}]], Vocabulary())
    with pytest.raises(TypeError, match="feature keys must be strings"):
        encode_items([[{"a": 1.0}, {1: "x"}]], Vocabulary())
    with pytest.raises(ValueError, match="sentence 1 is empty"):
        encode_items([[{"a": 1.0}], []], Vocabulary())


def test_lookup_many_is_lookup_in_turn():
    names = ["b", "a", "b", "c", "a", "b"]
    one, batch = Vocabulary(["z"]), Vocabulary(["z"])
    want = [one.lookup(n) for n in names]
    assert batch.lookup_many(names).tolist() == want
    assert batch.names == one.names == ["z", "b", "a", "c"]
    assert batch.counts.tolist() == one.counts.tolist() == [0, 3, 2, 1]
    # occurrences: each distinct name once, standing for its count
    grouped = Vocabulary(["z"])
    assert grouped.lookup_many(["b", "a", "c"], [3, 2, 1]).tolist() == [1, 2, 3]
    assert grouped.counts.tolist() == [0, 3, 2, 1]
    # frozen: unknown names are -1 and their occurrences dropped; nothing counted
    for v in (one, batch, grouped):
        v.freeze()
    assert [one.lookup(n) for n in ["a", "q", "q", "z"]] == [2, None, None, 0]
    assert batch.lookup_many(["a", "q", "q", "z"]).tolist() == [2, -1, -1, 0]
    assert grouped.lookup_many(["a", "q", "z"], np.array([1, 2, 1])).tolist() == [2, -1, 0]
    assert one.dropped == batch.dropped == grouped.dropped == 2
    assert batch.counts.tolist() == [0, 3, 2, 1] and len(batch) == 4
    with pytest.raises(ValueError, match="occurrences must be 3 non-negative counts"):
        grouped.lookup_many(["a", "q", "z"], [1, 2])
