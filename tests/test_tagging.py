"""`crfopt train` / `tag` / `evaluate` and the conlleval chunk scores."""

from __future__ import annotations

import io
import json
import zipfile

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

import crfopt
from crfopt.apps.cli import main
from crfopt.apps.model import Model
from crfopt.apps.tagging import chunk_scores, read_input, tag_corpus, write_tagged
from crfopt.data.corpus import load_corpus
from crfopt.data.features import Template, TemplateEncoder, _token_attributes
from crfopt.data.readers import read_conll
from crfopt.data.vocabulary import Vocabulary

# ----------------------------------------------------------------------------- conlleval


def test_chunk_scores_by_hand():
    gold = [["B-NP", "I-NP", "O", "B-VP"]]
    pred = [["B-NP", "B-NP", "O", "B-VP"]]
    sc = chunk_scores(gold, pred)
    assert (sc.gold_chunks, sc.pred_chunks, sc.correct_chunks) == (2, 3, 1)
    p, r, f = sc.precision_recall_f1
    assert (p, r) == pytest.approx((1 / 3, 1 / 2))
    assert f == pytest.approx(2 * p * r / (p + r))
    assert sc.accuracy == 0.75
    assert sc.per_type == {"NP": [1, 2, 0], "VP": [1, 1, 1]}


@pytest.mark.parametrize(
    "tags, chunks",
    [
        (["I-NP", "I-NP", "B-NP"], {(0, 2, "NP"), (2, 3, "NP")}),  # IOB1
        (["B-NP", "I-VP"], {(0, 1, "NP"), (1, 2, "VP")}),  # a type change starts a chunk
        (["O", "I-PP", "O"], {(1, 2, "PP")}),  # I after O starts a chunk
        (["I-NP", "E-NP", "I-NP", "E-NP"], {(0, 2, "NP"), (2, 4, "NP")}),  # IOE
        (["O", "O"], set()),
    ],
)
def test_chunk_boundaries_follow_conlleval(tags, chunks):
    from crfopt.apps.tagging import _chunks

    assert _chunks(tags) == chunks


def naive_iob_chunks(tags: list[str]) -> set[tuple[int, int, str]]:
    """Chunks of a B/I/O sequence read directly: B-X or a stray I-X opens, I-X continues."""
    out, t = set(), 0
    while t < len(tags):
        if tags[t] == "O":
            t += 1
            continue
        kind = tags[t][2:]
        end = t + 1
        while end < len(tags) and tags[end] == f"I-{kind}":
            end += 1
        out.add((t, end, kind))
        t = end
    return out


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["O", "B-A", "I-A", "B-B", "I-B"]), min_size=1, max_size=12))
def test_chunks_agree_with_a_direct_reading(tags):
    from crfopt.apps.tagging import _chunks

    assert _chunks(tags) == naive_iob_chunks(tags)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.lists(st.sampled_from(["O", "B-A", "I-A", "B-B"]), min_size=1, max_size=8),
            st.randoms(use_true_random=False),
        ),
        min_size=1,
        max_size=5,
    )
)
def test_scores_count_chunk_matches(data):
    gold = [g for g, _ in data]
    pred = [[rng.choice(["O", "B-A", "I-A", "B-B"]) for _ in g] for g, rng in data]
    sc = chunk_scores(gold, pred)
    truth = sum(len(naive_iob_chunks(g) & naive_iob_chunks(p)) for g, p in zip(gold, pred))
    assert sc.correct_chunks == truth
    assert chunk_scores(gold, gold).precision_recall_f1 == (
        (1.0, 1.0, 1.0) if sc.gold_chunks else (0.0, 0.0, 0.0)
    )


# ----------------------------------------------------------------------------- CLI


def write_corpus(path, n: int, seed: int, *, labelled: bool = True) -> None:
    """A small chunking-like corpus: the chunk tag follows the POS with some noise."""
    rng = np.random.default_rng(seed)
    pos_to_kind = {"DT": "NP", "NN": "NP", "VB": "VP", "IN": "PP", "RB": "ADVP"}
    words = {p: [f"{p.lower()}{j}" for j in range(12)] for p in pos_to_kind}
    lines = []
    for s in range(n):
        if s % 50 == 0:
            lines += ["-DOCSTART- -X- O", ""]
        prev = None
        for _ in range(int(rng.integers(2, 9))):
            pos = str(rng.choice(list(pos_to_kind)))
            kind = pos_to_kind[pos]
            tag = ("I-" if prev == kind and rng.random() < 0.9 else "B-") + kind
            prev = kind
            word = str(rng.choice(words[pos]))
            lines.append(f"{word} {pos} {tag}" if labelled else f"{word} {pos}")
        lines.append("")
    path.write_text("\n".join(lines) + "\n")


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    d = tmp_path_factory.mktemp("tagging")
    write_corpus(d / "train.txt", 120, seed=1)
    write_corpus(d / "test.txt", 40, seed=2)
    res = CliRunner().invoke(
        main,
        [
            "train", "--problem", str(d / "train.txt"), "--test", str(d / "test.txt"),
            "--template", "chunking", "--optimizer", "sdca-gap", "--passes", "15",
            "--model", str(d / "m.crfopt"), "--quiet",
        ],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    problem = load_corpus(d / "train.txt", template="chunking", test=d / "test.txt")
    return d, Model.load(d / "m.crfopt"), problem


def test_train_saves_everything_needed_to_tag(trained):
    _, model, problem = trained
    assert model.labels == list(problem.label_names)
    assert model.attributes == list(problem.attribute_names)
    assert model.template["name"] == "chunking"
    assert model.training["corpus"] == {
        "format": "conll",
        "columns": ["word", "pos", "label"],
        "label": "label",
    }
    assert model.training["optimizer"] == "sdca-gap"
    assert model.training["status"] in ("budget", "converged")
    assert 0 < model.training["effective_passes"] <= 15.5


def test_tag_predicts_what_the_trained_problem_predicts(trained):
    d, model, problem = trained
    w = model.weights_for(problem)
    corpus, fmt = read_input(model, d / "test.txt")
    expected = [problem.label_names[k] for k in problem.predict(w, "test")]
    got = [t for sent in tag_corpus(model, corpus) for t in sent]
    assert fmt == "conll" and got == expected


def test_tag_writes_the_input_with_a_prediction_column(trained):
    d, model, _ = trained
    res = CliRunner().invoke(main, ["tag", "--model", str(d / "m.crfopt"), str(d / "test.txt")])
    assert res.exit_code == 0, res.output
    src = (d / "test.txt").read_text().splitlines()
    out = res.output.splitlines()
    assert len(out) == len(src)
    corpus, _ = read_input(model, d / "test.txt")
    flat = iter(t for sent in tag_corpus(model, corpus) for t in sent)
    for a, b in zip(src, out):
        if not a or a.startswith("-DOCSTART-"):
            assert b == a
        else:
            assert b == f"{a} {next(flat)}"


def test_unlabelled_input_gets_the_same_labels(trained, tmp_path):
    d = trained[0]
    write_corpus(tmp_path / "unl.txt", 40, seed=2, labelled=False)
    out = tmp_path / "tagged.txt"
    res = CliRunner().invoke(
        main, ["tag", "--model", str(d / "m.crfopt"), str(tmp_path / "unl.txt"), "--out", str(out)]
    )
    assert res.exit_code == 0, res.output
    labelled = read_conll(d / "test.txt")
    tagged_labelled = CliRunner().invoke(
        main, ["tag", "--model", str(d / "m.crfopt"), str(d / "test.txt")]
    )
    a = read_conll(io_path(tmp_path / "a.txt", tagged_labelled.output))
    b = read_conll(out)
    assert [[tok[-1] for tok in s] for s in a.sentences] == [
        [tok[-1] for tok in s] for s in b.sentences
    ]
    assert len(b.sentences) == len(labelled.sentences)


def io_path(path, text):
    path.write_text(text)
    return path


def test_saved_and_reloaded_models_predict_identically(trained, tmp_path):
    d, model, _ = trained
    again = model.save(tmp_path / "again.crfopt")
    reloaded = Model.load(again)
    corpus, _ = read_input(model, d / "test.txt")
    assert tag_corpus(reloaded, corpus) == tag_corpus(model, corpus)
    for name in ("emission", "transition", "bias"):
        np.testing.assert_array_equal(getattr(reloaded, name), getattr(model, name))


def test_evaluate_accuracy_is_one_minus_test_error(trained):
    d, model, problem = trained
    res = CliRunner().invoke(
        main, ["evaluate", "--model", str(d / "m.crfopt"), str(d / "test.txt"), "--json"]
    )
    assert res.exit_code == 0, res.output
    scores = json.loads(res.output)
    w = model.weights_for(problem)
    assert scores["accuracy"] == pytest.approx(1 - problem.error(w, "test"), abs=1e-12)
    assert 0 < scores["f1"] <= 1 and set(scores["per_type"]) <= {"NP", "VP", "PP", "ADVP"}
    table = CliRunner().invoke(
        main, ["evaluate", "--model", str(d / "m.crfopt"), str(d / "test.txt")]
    )
    assert "all chunks" in table.output and "accuracy" in table.output


def test_bad_models_and_inputs_are_clear_errors(trained, tmp_path):
    d = trained[0]
    runner = CliRunner()
    truncated = tmp_path / "truncated.crfopt"
    truncated.write_bytes((d / "m.crfopt").read_bytes()[:300])
    res = runner.invoke(main, ["tag", "--model", str(truncated), str(d / "test.txt")])
    assert res.exit_code == 2 and "not a readable crfopt model" in res.output

    future = tmp_path / "future.crfopt"
    with zipfile.ZipFile(d / "m.crfopt") as zin, zipfile.ZipFile(future, "w") as zout:
        for item in zin.namelist():
            data = zin.read(item)
            if item == "meta.npy":
                meta = np.load(io.BytesIO(data))
                text = json.loads(bytes(meta).decode())
                text["version"] = 99
                buf = io.BytesIO()
                np.save(buf, np.frombuffer(json.dumps(text).encode(), dtype=np.uint8))
                data = buf.getvalue()
            zout.writestr(item, data)
    res = runner.invoke(main, ["evaluate", "--model", str(future), str(d / "test.txt")])
    assert res.exit_code == 2 and "format version 99" in res.output

    odd = tmp_path / "odd.txt"
    odd.write_text("a b c d\ne f g h\n")
    res = runner.invoke(main, ["tag", "--model", str(d / "m.crfopt"), str(odd)])
    assert res.exit_code == 2
    assert "odd.txt: has 4 columns" in res.output and "--columns" in res.output

    unl = tmp_path / "unl.txt"
    write_corpus(unl, 3, seed=5, labelled=False)
    res = runner.invoke(main, ["evaluate", "--model", str(d / "m.crfopt"), str(unl)])
    assert res.exit_code == 2 and "no gold label column" in res.output


def test_a_model_without_a_template_cannot_tag(tmp_path):
    res = CliRunner().invoke(
        main,
        ["train", "--problem", "synthetic", "--set", "synthetic.n=30", "--optimizer", "lbfgs",
         "--passes", "3", "--model", str(tmp_path / "s.crfopt"), "--quiet"],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "cannot use the model" in res.output
    (tmp_path / "x.txt").write_text("w1 a\n")
    res = CliRunner().invoke(
        main, ["tag", "--model", str(tmp_path / "s.crfopt"), str(tmp_path / "x.txt"),
               "--columns", "word,pos"]
    )  # fmt: skip
    assert res.exit_code == 2 and "no text template" in res.output


def test_train_rejects_unknown_names(tmp_path):
    runner = CliRunner()
    res = runner.invoke(
        main, ["train", "--problem", "synthetic", "--optimizer", "sdca-nope", "--model",
               str(tmp_path / "m")]
    )  # fmt: skip
    assert res.exit_code == 2 and "sdca-gap" in res.output
    res = runner.invoke(
        main, ["train", "--problem", "synthetic", "--set", "sag.step=1", "--model",
               str(tmp_path / "m")]
    )  # fmt: skip
    assert res.exit_code == 2 and "unknown name" in res.output
    assert not (tmp_path / "m").exists()


CONLLU = """# sent_id = 1
# text = The cat sat.
1\tThe\tthe\tDET\tDT\t_\t2\tdet\t_\t_
2\tcat\tcat\tNOUN\tNN\t_\t3\tnsubj\t_\t_
3-4\tsat.\t_\t_\t_\t_\t_\t_\t_\t_
3\tsat\tsit\tVERB\tVBD\t_\t0\troot\t_\t_
4\t.\t.\tPUNCT\t.\t_\t3\tpunct\t_\t_

# sent_id = 2
1\tA\ta\tDET\tDT\t_\t2\tdet\t_\t_
2\tdog\tdog\tNOUN\tNN\t_\t3\tnsubj\t_\t_
3\tran\trun\tVERB\tVBD\t_\t0\troot\t_\t_

"""


def test_conllu_models_fill_the_label_field(tmp_path):
    (tmp_path / "train.conllu").write_text(CONLLU * 5)
    res = CliRunner().invoke(
        main,
        ["train", "--problem", str(tmp_path / "train.conllu"), "--optimizer", "lbfgs",
         "--passes", "40", "--model", str(tmp_path / "pos.crfopt"), "--quiet"],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    res = CliRunner().invoke(
        main, ["tag", "--model", str(tmp_path / "pos.crfopt"), str(tmp_path / "train.conllu")]
    )
    assert res.exit_code == 0, res.output
    src = (CONLLU * 5).splitlines()
    out = res.output.splitlines()
    assert len(out) == len(src)
    for a, b in zip(src, out):
        fa, fb = a.split("\t"), b.split("\t")
        if a.startswith("#") or not a or "-" in fa[0]:
            assert a == b
        else:  # the training data is memorised: every tag comes back, other fields untouched
            assert fa == fb


def test_write_tagged_keeps_tab_separated_columns(tmp_path):
    (tmp_path / "t.tsv").write_text("a\tx\n\nb\ty\n")
    buf = io.StringIO()
    write_tagged(tmp_path / "t.tsv", "conll", [["P"], ["Q"]], buf)
    assert buf.getvalue() == "a\tx\tP\n\nb\ty\tQ\n"


def test_estimator_models_carry_no_template():
    X = [[{"w": "a"}, {"w": "b"}], [{"w": "b"}]]
    crf = crfopt.CRF(optimizer="lbfgs", max_passes=5).fit(X, [["A", "B"], ["B"]])
    assert crf.model_.template is None


# ----------------------------------------------------------------------------- encoding

ENCODER_TEMPLATE = Template.from_spec(
    {
        "name": "encoder-test",
        "features": [
            {"name": "w", "column": "word", "window": [-1, 0, 2]},
            {"name": "lw", "column": "word", "transform": "lower"},
            {"name": "suf", "column": "word", "transform": "suffix:2", "offset": 1},
            {"name": "t", "column": "word", "transform": "istitle", "window": [0, -1]},
            {"name": "d", "column": "word", "transform": "hasdigit"},
            {"name": "w|p", "parts": [{"column": "word", "offset": -1}, {"column": "pos"}]},
            {
                "name": "p|p|p",
                "parts": [
                    {"column": "pos", "offset": -1},
                    {"column": "pos"},
                    {"column": "pos", "offset": 1},
                ],
            },
            {"name": "x=y", "column": "pos"},  # a feature name holding '='
            {"name": "w", "column": "word"},  # w[0] twice: one column
        ],
    }
)


@settings(max_examples=150, deadline=None)
@given(
    sentences=st.lists(
        st.lists(
            st.tuples(
                st.text("aB=|1", min_size=1, max_size=3),
                st.sampled_from(["DT", "NN", "V=B", "N|N", "x"]),
            ),
            min_size=1,
            max_size=6,
        ),
        min_size=1,
        max_size=5,
    ),
    rng=st.randoms(use_true_random=False),
)
def test_template_encoder_gives_the_columns_of_the_attribute_strings(sentences, rng):
    """TemplateEncoder (no strings formed) encodes every token as the template's attribute
    strings looked up in a frozen dictionary do: the same sorted distinct columns, unknown
    attributes dropped; values and feature names holding '=' and '|' included."""
    columns = ("word", "pos")
    col_index = {"word": 0, "pos": 1}
    seen = [name for s in sentences for tok in _token_attributes(s, ENCODER_TEMPLATE, col_index)
            for name in tok]  # fmt: skip
    names = [n for n in dict.fromkeys(seen) if rng.random() < 0.7]
    names += ["w[0]", "zz=1", "w[0]=", "t[0].istitle=x", "x=y[0]"]  # near misses
    rng.shuffle(names)
    names = list(dict.fromkeys(names))
    vocab = Vocabulary(names, frozen=True)
    want_ptr, want_idx = [0], []
    for sent in sentences:
        for tok in _token_attributes(sent, ENCODER_TEMPLATE, col_index):
            want_idx += vocab.token(tok)
            want_ptr.append(len(want_idx))
    lengths, indptr, indices = TemplateEncoder(ENCODER_TEMPLATE, names).encode(sentences, columns)
    assert lengths.tolist() == [len(s) for s in sentences]
    assert indptr.tolist() == want_ptr
    assert indices.tolist() == want_idx


def test_a_file_in_another_layout_is_warned_about(trained, tmp_path):
    """A `word label` file read as the model's `word pos`: its pos column holds the chunk
    tags, values the model never saw there."""
    d = trained[0]
    lines = [" ".join((tok[0], tok[2])) if tok else "" for tok in
             (ln.split() for ln in (d / "test.txt").read_text().splitlines())]  # fmt: skip
    (tmp_path / "wl.txt").write_text("\n".join(lines) + "\n")
    res = CliRunner().invoke(
        main, ["tag", "--model", str(d / "m.crfopt"), str(tmp_path / "wl.txt")]
    )
    assert res.exit_code == 0, res.output
    assert "column 'pos'" in res.output and "never saw there" in res.output
    res = CliRunner().invoke(main, ["tag", "--model", str(d / "m.crfopt"), str(d / "test.txt")])
    assert "never saw there" not in res.output
