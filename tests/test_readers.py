"""Readers and feature templates: formats, malformed input, fuzzing."""

from __future__ import annotations

import contextlib
import gzip
import io

import numpy as np
import pytest
import scipy.io
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crfopt.data.features import featurize
from crfopt.data.readers import (
    DataFormatError,
    read_conll,
    read_conllu,
    read_conllu_words,
    read_letter_data,
    read_sag4crf_mat,
)
from crfopt.data.template_files import load_template

DUTCH = """-DOCSTART- -DOCSTART- O
De Art O
Belgische Adj B-MISC
premier N O

Jan N B-PER
zei V O
-DOCSTART- -DOCSTART- O

Hij Pron O
"""


def write(tmp_path, name, text, *, gz=False, encoding="utf-8"):
    path = tmp_path / name
    data = text.encode(encoding)
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


def test_conll_columns_labels_and_docstart(tmp_path):
    path = write(tmp_path, "ned.train", DUTCH)
    c = read_conll(path, columns=["word", "pos", "ne"], label="ne")
    assert [len(s) for s in c.sentences] == [3, 2, 1]  # DOCSTART dropped, never a sentence
    assert c.labels()[0] == ["O", "B-MISC", "O"]
    assert c.label_set() == ["B-MISC", "B-PER", "O"]
    kept = read_conll(path, columns=["word", "pos", "ne"], docstart="keep")
    assert kept.n_tokens == c.n_tokens + 2
    assert read_conll(path, label=1).label == "c1"


def test_gzip_is_detected_by_content_not_name(tmp_path):
    a = read_conll(write(tmp_path, "plain.gz", DUTCH))  # not gzipped despite the name
    b = read_conll(write(tmp_path, "packed.txt", DUTCH, gz=True))
    assert a.sentences == b.sentences


def test_encoding_option(tmp_path):
    path = write(tmp_path, "latin.txt", "België N B-LOC\n", encoding="latin-1")
    with pytest.raises(DataFormatError, match=r"cannot be decoded as utf-8.*latin-1"):
        read_conll(path)
    assert read_conll(path, encoding="latin-1").sentences[0][0][0] == "België"


def test_a_layout_never_tested_before_works(tmp_path):
    """German, four tab-separated columns, label in the second column, CRLF line ends."""
    text = "Die\tB-ORG\tART\td\r\nBundesbank\tI-ORG\tNN\tb\r\n\r\nin\tO\tAPPR\ti\r\n"
    c = read_conll(
        write(tmp_path, "de.tsv", text),
        columns=["w", "tag", "pos", "lemma"],
        label="tag",
        separator="\t",
    )
    assert c.labels() == [["B-ORG", "I-ORG"], ["O"]]


def test_ragged_columns(tmp_path):
    path = write(tmp_path, "bad.txt", "a DT B-NP\nb NN\n")
    with pytest.raises(
        DataFormatError, match=r"bad\.txt:2: has 2 columns, expected 3 as on line 1"
    ):
        read_conll(path)
    with pytest.raises(DataFormatError, match=r":1: has 3 columns, expected 2 \(word label\)"):
        read_conll(path, columns=["word", "label"])


def test_empty_file(tmp_path):
    with pytest.raises(DataFormatError, match="contains no sentence"):
        read_conll(write(tmp_path, "empty.txt", "\n\n"))


def test_unknown_label_column(tmp_path):
    path = write(tmp_path, "x.txt", "a DT B-NP\n")
    with pytest.raises(DataFormatError, match="no label column 'chunk'; columns are: w, p, c"):
        read_conll(path, columns=["w", "p", "c"], label="chunk")
    with pytest.raises(DataFormatError, match="out of range"):
        read_conll(path, label=5)


def test_bad_gzip(tmp_path):
    path = tmp_path / "broken.gz"
    path.write_bytes(gzip.compress(DUTCH.encode())[:40])
    with pytest.raises(DataFormatError, match="not a valid gzip file"):
        read_conll(path)


CONLLU = """# sent_id = 1
# text = Don't go.
1-2\tDon't\t_\t_\t_\t_\t_\t_\t_\t_
1\tDo\tdo\tAUX\tVBP\t_\t3\taux\t_\t_
2\tn't\tnot\tPART\tRB\t_\t3\tadvmod\t_\t_
3\tgo\tgo\tVERB\tVB\t_\t0\troot\t_\t_
3.1\tgone\tgo\tVERB\tVBN\t_\t_\t_\t0:root\t_
4\t.\t.\tPUNCT\t.\t_\t3\tpunct\t_\t_

"""


def test_conllu_words_only(tmp_path):
    c = read_conllu(write(tmp_path, "x.conllu", CONLLU))
    assert [t[1] for t in c.sentences[0]] == ["Do", "n't", "go", "."]
    assert c.labels() == [["VBP", "RB", "VB", "."]]
    assert read_conllu(write(tmp_path, "y.conllu", CONLLU), label="upos").labels()[0][0] == "AUX"
    with pytest.raises(DataFormatError, match=r":4: has 9 tab-separated fields"):
        read_conllu(write(tmp_path, "bad.conllu", CONLLU.replace("\tVBP\t_\t3", "\tVBP\t3")))
    with pytest.raises(DataFormatError, match="no column 'pos'"):
        read_conllu(write(tmp_path, "z.conllu", CONLLU), label="pos")


def test_conllu_words_name_the_form_column_word(tmp_path):
    """What featurizing, tagging and the UD datasets read: templates use ``word``."""
    path = write(tmp_path, "x.conllu", CONLLU)
    raw = read_conllu(path, label="upos")
    c = read_conllu_words(path, label="upos")
    assert c.columns == (
        "id",
        "word",
        "lemma",
        "upos",
        "xpos",
        "feats",
        "head",
        "deprel",
        "deps",
        "misc",
    )
    assert c.sentences == raw.sentences and c.label == "upos" and c.path == raw.path
    assert [t[c.column("word")] for t in c.sentences[0]] == ["Do", "n't", "go", "."]


def _letters(words):
    lines, ident = [], 1
    for word in words:
        for pos, ch in enumerate(word):
            nxt = -1 if pos == len(word) - 1 else ident + 1
            pixels = "\t".join(str((ident + j) % 2) for j in range(128))
            lines.append(f"{ident}\t{ch}\t{nxt}\t1\t{pos + 1}\t{ident % 10}\t{pixels}\t")
            ident += 1
    return "\n".join(lines) + "\n"


def test_letter_data(tmp_path):
    d = read_letter_data(write(tmp_path, "letter.data.gz", _letters(["ab", "xyz"]), gz=True))
    assert list(d.lengths) == [2, 3] and list(d.labels) == [0, 1, 23, 24, 25]
    assert d.X.shape == (5, 128)
    bad = _letters(["ab"]).replace("\tb\t", "\tB\t")
    with pytest.raises(DataFormatError, match=r":2: letter 'B' is not one of a..z"):
        read_letter_data(write(tmp_path, "bad.data", bad))
    unfinished = _letters(["ab"]).replace("\t-1\t", "\t3\t")
    with pytest.raises(DataFormatError, match="last word does not end"):
        read_letter_data(write(tmp_path, "cut.data", unfinished))


def test_sag4crf_mat(tmp_path):
    X = np.array([[1, 2], [2, 0], [0, 0], [3, 1], [0, 0]], dtype=np.uint16)
    y = np.array([[1], [2], [0], [1], [0]], dtype=np.uint8)
    scipy.io.savemat(tmp_path / "ok.mat", {"X": X, "y": y})
    m = read_sag4crf_mat(tmp_path / "ok.mat")
    assert list(m.lengths) == [2, 1] and list(m.labels) == [1, 2, 1]
    scipy.io.savemat(tmp_path / "noy.mat", {"X": X})
    with pytest.raises(DataFormatError, match="variable 'y' missing"):
        read_sag4crf_mat(tmp_path / "noy.mat")
    scipy.io.savemat(tmp_path / "open.mat", {"X": X[:4], "y": y[:4]})
    with pytest.raises(DataFormatError, match="last row is not 0"):
        read_sag4crf_mat(tmp_path / "open.mat")
    (tmp_path / "junk.mat").write_bytes(b"MATLAB but not really")
    with pytest.raises(DataFormatError, match="not a readable MATLAB"):
        read_sag4crf_mat(tmp_path / "junk.mat")


# ------------------------------------------------------------------------ fuzzing

_FUZZ = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@_FUZZ
@given(st.binary(max_size=400))
def test_fuzz_conll_raises_only_data_format_errors(tmp_path, blob):
    path = tmp_path / "fuzz.txt"
    path.write_bytes(blob)
    for reader in (
        lambda p: read_conll(p),
        lambda p: read_conll(p, columns=["a", "b"]),
        read_conllu,
        read_letter_data,
    ):
        with contextlib.suppress(DataFormatError):
            reader(path)


@_FUZZ
@given(st.text(alphabet=" \t\n-DOCSTART12abc.#", max_size=300))
def test_fuzz_structured_text(tmp_path, text):
    path = tmp_path / "fuzz.conllu"
    path.write_text(text)
    for reader in (read_conll, read_conllu, read_letter_data):
        with contextlib.suppress(DataFormatError):
            reader(path)


@_FUZZ
@given(st.binary(max_size=300))
def test_fuzz_gzip_and_mat(tmp_path, blob):
    for name, data in (("f.gz", b"\x1f\x8b" + blob), ("f.mat", blob)):
        path = tmp_path / name
        path.write_bytes(data)
        for reader in (read_conll, read_sag4crf_mat):
            with contextlib.suppress(DataFormatError):
                reader(path)


# ------------------------------------------------------------------------ templates


def test_chunking_template_names_and_windows(tmp_path):
    c = read_conll(
        write(tmp_path, "c.txt", "He PRP B-NP\nruns VBZ B-VP\n. . O\n"),
        columns=["word", "pos", "chunk"],
        label="chunk",
    )
    f = featurize({"train": c}, load_template("chunking"))
    names = set(f.attribute_names)
    assert {
        "w[0]=He",
        "w[1]=runs",
        "w[-1]|w[0]=He|runs",
        "pos[-2]|pos[-1]|pos[0]=PRP|VBZ|.",
        "pos[0]|pos[1]|pos[2]=PRP|VBZ|.",
    } <= names
    first = f.splits["train"]
    token0 = [f.attribute_names[j] for j in first.indices[first.indptr[0] : first.indptr[1]]]
    assert not any(n.startswith(("w[-1]", "w[-2]", "pos[-1]", "pos[-2]")) for n in token0)
    counts = np.diff(f.splits["train"].indptr)
    assert counts.max() <= 19


def test_min_count_unknown_attributes_and_unseen_labels(tmp_path):
    tr = read_conll(write(tmp_path, "tr.txt", "a X O\nb X O\n\na X I\n"), label=-1)
    te = read_conll(write(tmp_path, "te.txt", "a X O\nz X NEW\n"), label=-1)
    tpl = {"name": "t", "features": [{"name": "w", "column": "c0"}]}
    f = featurize({"train": tr, "test": te}, load_template(tpl))
    assert f.attribute_names == ["w[0]=a", "w[0]=b"]
    assert f.stats["test_unknown_attributes_dropped"] == 1
    assert f.stats["test_tokens_with_unseen_labels"] == 1
    assert list(f.splits["test"].labels) == [1, -1]
    f2 = featurize({"train": tr}, load_template(tpl), min_count=2)
    assert f2.attribute_names == ["w[0]=a"] and f2.stats["attributes_below_min_count"] == 1


def test_template_files_toml_and_yaml(tmp_path):
    (tmp_path / "t.toml").write_text(
        'name = "mine"\n[[features]]\nname = "suf"\ncolumn = "word"\ntransform = "suffix:2"\n'
        '[[features]]\nname = "w"\ncolumn = "word"\ntransform = "istitle"\nwindow = [0, 1]\n'
    )
    t = load_template(tmp_path / "t.toml")
    assert t.name == "mine" and [f.label() for f in t.features] == [
        "suf[0]",
        "w[0].istitle",
        "w[1].istitle",
    ]
    (tmp_path / "t.yaml").write_text("features:\n  - {name: w, column: word, transform: lower}\n")
    assert load_template(tmp_path / "t.yaml").features[0].parts[0].transform == "lower"
    (tmp_path / "bad.toml").write_text(
        '[[features]]\nname = "x"\ncolumn = "w"\ntransform = "cube"\n'
    )
    with pytest.raises(ValueError, match="unknown transform 'cube'"):
        load_template(tmp_path / "bad.toml")
    with pytest.raises(ValueError, match="not a built-in"):
        load_template("chunkingg")
    with pytest.raises(ValueError, match="not valid TOML"):
        (tmp_path / "broken.toml").write_text("[[features]\n")
        load_template(tmp_path / "broken.toml")


def test_template_needs_its_columns(tmp_path):
    c = read_conll(write(tmp_path, "c.txt", "a B\n"), columns=["word", "label"], label="label")
    with pytest.raises(DataFormatError, match=r"needs column.*pos"):
        featurize({"train": c}, load_template("chunking"))


def test_featurization_is_identical_for_a_gzip_copy(tmp_path):
    text = io.StringIO(DUTCH).read()
    a = read_conll(write(tmp_path, "a.txt", text), columns=["word", "pos", "ne"], label="ne")
    b = read_conll(
        write(tmp_path, "b.gz", text, gz=True), columns=["word", "pos", "ne"], label="ne"
    )
    fa = featurize({"train": a}, load_template("ner"))
    fb = featurize({"train": b}, load_template("ner"))
    assert fa.attribute_names == fb.attribute_names
    np.testing.assert_array_equal(fa.splits["train"].indices, fb.splits["train"].indices)
