"""CRF++ templates and Wapiti pattern files (crfopt/data/patterns.py): what each macro
reads, the edge markers, comments, Wapiti's regular expressions against Python's ``re``,
the feature map they give, a clear error per kind of malformed line, the refusal of
bigram-observation patterns, and the paths that carry them (CLI, estimator).

The checks against the tools themselves (feature counts and objectives against Wapiti
and CRFsuite) are in tests/test_wapiti.py and at the end of this file (slow)."""

from __future__ import annotations

import gzip
import os
import re
import warnings
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

import crfopt
from crfopt.apps.cli import main
from crfopt.data.corpus import load_corpus
from crfopt.data.features import featurize
from crfopt.data.patterns import (
    PatternTemplate,
    PatternWarning,
    detect_format,
    parse_patterns,
    wapiti_search,
)
from crfopt.data.readers import DataFormatError, read_conll
from crfopt.data.template_files import load_template, template_from_spec

TRAIN = """\
Confidence NN B
in IN O
the DT B
pound NN I

Chancellor NNP B
Lawson NNP I
said VBD O
"""


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def attributes(template: PatternTemplate, text: str = TRAIN) -> list[list[list[str]]]:
    sentences = [
        [tuple(line.split()[:-1]) for line in block.splitlines()]
        for block in text.strip().split("\n\n")
    ]
    return [template.token_attributes(s) for s in sentences]


# ----------------------------------------------------------------------------- CRF++


def test_crfpp_macros_markers_comments_and_kinds():
    tpl = parse_patterns(
        "# Unigram\nU00:%x[-2,0]\nU01:%x[0,0]/%x[1,1]\nU02:%x[2,0]#not a comment\nU03\n\nB\n",
        "crfpp",
    )
    assert [p.kind for p in tpl.patterns] == ["unigram"] * 4 + ["bigram"]
    assert tpl.transition_pattern.text == "B" and not tpl.bigram_observation_patterns
    first, second = attributes(tpl)
    assert first[0] == ["U00:_B-2", "U01:Confidence/IN", "U02:the#not a comment", "U03"]
    assert first[3] == ["U00:in", "U01:pound/_B+1", "U02:_B+2#not a comment", "U03"]
    assert second[1][0] == "U00:_B-1"
    assert tpl.n_columns == 2 and not tpl.default_bias


def test_crfpp_empty_row_and_column_read_zero_as_crfpp_does():
    (p,) = parse_patterns("U:%x[,]\nB\n", "crfpp").patterns[:1]
    assert (p.macros[0].offset, p.macros[0].column) == (0, 0)


# ----------------------------------------------------------------------------- Wapiti


def test_wapiti_kinds_commands_fold_and_markers():
    tpl = parse_patterns(
        "*\n"
        "U:w=%x[ 0,0]   # the word\n"
        "u:lw=%X[-1,0]/%X[+1, 0]\n"
        'u:cap=%t[0,0,"^\\u"] pre=%M[0,0,"^.?.?"]\n'
        "u:first=%x[@1,0] last=%x[@-1,1]\n"
        "u:far=%x[-5,0]|%x[6,1]\n"
        "b:\n",
        "wapiti",
    )
    assert [p.kind for p in tpl.patterns] == ["both"] + ["unigram"] * 5 + ["bigram"]
    assert tpl.patterns[1].text == "u:w=%x[ 0,0]"  # kind lower-cased, comment cut
    # '*' is the first constant bigram: the transition block; 'b:' a second copy of it
    assert tpl.transition_pattern.text == "*"
    assert [p.text for p in tpl.bigram_observation_patterns] == ["b:"]
    tok = attributes(tpl)[0]
    assert tok[0] == [
        "*",
        "u:w=Confidence",
        "u:lw=_x-1/in",
        "u:cap=true pre=co",
        "u:first=Confidence last=NN",
        "u:far=_x-#|_x+3",
    ]
    assert tok[3][2] == "u:lw=the/_x+1"


def test_wapiti_fold_is_ascii_only_as_in_the_c_locale():
    tpl = parse_patterns("u:%X[0,0]\nb\n", "wapiti")
    assert tpl.token_attributes([("ÉCOLE",)]) == [["u:École"]]


def test_wapiti_c_integer_offsets():
    tpl = parse_patterns("u:%x[-0x1,0]/%x[01,0]/%x[ -010,0]\nb\n", "wapiti")
    assert [m.offset for m in tpl.patterns[0].macros] == [-1, 1, -8]


@pytest.mark.parametrize(
    ("regex", "text", "span"),
    [
        ("^.?.?", "Rockwell", (0, 2)),
        (".?.?$", "Rockwell", (6, 8)),
        (".?$", "", (0, 0)),
        ("\\u", "rOck", (1, 2)),
        ("^\\u*$", "ABC", (0, 3)),
        ("^\\u*$", "AbC", None),
        ("a*b", "xaab", (1, 4)),  # the leftmost start, then the shortest repetition
        ("a*", "aaa", (0, 0)),
        (".\\p.", "a-b", (0, 3)),
        ("\\$", "5$", (1, 2)),
        ("x$y", "x$y", (0, 3)),  # '$' inside is a plain character
        ("\\d", "_x-1", (3, 4)),  # markers are tested as any string
        ("\\D\\W", "é!", (0, 2)),  # complements take every non-ASCII character
    ],
)
def test_wapiti_regex_by_hand(regex, text, span):
    assert wapiti_search(regex, text) == span


_CLASS_RE = {
    "d": "[0-9]",
    "u": "[A-Z]",
    "l": "[a-z]",
    "a": "[A-Za-z]",
    "w": "[A-Za-z0-9]",
    "p": "[" + re.escape("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~") + "]",
    "s": "[ \\t\\n\\v\\f\\r]",
}


def _python_regex(regex: str) -> str:
    """The same search in Python's ``re``: ``*`` is Wapiti's shortest-first repetition
    (``*?``), ``$`` only at the very end (``\\Z``), classes ASCII."""
    out, i = [], 0
    if regex.startswith("^"):
        out.append("^")
        i = 1
    while i < len(regex):
        c = regex[i]
        if c == "$" and i == len(regex) - 1:
            out.append(r"\Z")
            break
        if c == "\\":
            e = regex[i + 1]
            if e.lower() in _CLASS_RE:
                cls = _CLASS_RE[e.lower()]
                out.append(cls if e.islower() else "[^" + cls[1:])
            else:
                out.append(re.escape(e))
            i += 2
        else:
            out.append("." if c == "." else re.escape(c))
            i += 1
        if i < len(regex) and regex[i] in "*?":
            out.append("*?" if regex[i] == "*" else "?")
            i += 1
    return "".join(out)


atoms = st.sampled_from(["a", "b", "A", "1", "-", ".", "\\d", "\\u", "\\p", "\\W", "\\$"])
regexes = st.builds(
    lambda start, body, end: start + "".join(body) + end,
    st.sampled_from(["", "^"]),
    st.lists(st.tuples(atoms, st.sampled_from(["", "*", "?"])).map("".join), max_size=5),
    st.sampled_from(["", "$"]),
)


@settings(max_examples=400, deadline=None)
@given(regexes, st.text(alphabet="abAB1-$é ", max_size=8))
def test_wapiti_regex_agrees_with_python_re(regex, text):
    expected = re.search(_python_regex(regex), text, flags=re.DOTALL)
    assert wapiti_search(regex, text) == (expected.span() if expected else None)


# ----------------------------------------------------------------------------- format


@pytest.mark.parametrize(
    ("text", "fmt"),
    [
        ("# chunking\nU00:%x[0,0]\nU01:%x[-1,0]/%x[0,0]\n\nB\n", "crfpp"),
        ("*\nU:w=%X[0,0]\n", "wapiti"),
        ("u:w=%x[0,0]\nb\n", "wapiti"),
        ("U:w=%x[ 0,0]\nB\n", "wapiti"),  # a space inside a macro: only Wapiti reads it
        ("U:w=%x[0,0] # the word\nB\n", "wapiti"),
        ('U:c=%t[0,0,"\\u"]\nB\n', "wapiti"),
        ('name = "t"\n[[features]]\nname = "w"\ncolumn = "word"\n', "crfsuite"),
    ],
)
def test_format_detected_by_content(text, fmt):
    assert detect_format(text) == fmt


def test_template_format_named_or_detected(tmp_path):
    path = write(tmp_path, "template", "U00:%x[0,0]\nB\n")
    assert load_template(path).format == "crfpp"
    tpl = load_template(path, "wapiti")
    assert tpl.format == "wapiti" and attributes(tpl)[0][0] == ["u00:Confidence"]
    with pytest.raises(ValueError, match="not valid TOML"):
        load_template(path, "crfsuite")
    with pytest.raises(ValueError, match=r"unknown template format 'crf'.*crfpp, wapiti"):
        load_template(path, "crf")


def test_spec_round_trip_keeps_the_features():
    tpl = parse_patterns('*\nu:%x[0,0]/%t[1,1,"^N"]\n', "wapiti", source="p.txt")
    back = template_from_spec(tpl.spec())
    assert isinstance(back, PatternTemplate) and back.digest == tpl.digest
    assert attributes(back) == attributes(tpl)


def test_warnings_for_repeated_lines_and_no_transitions():
    with pytest.warns(PatternWarning, match=r"p.txt:2: repeats line 1.*twice per token"):
        parse_patterns("U0:%x[0,0]\nU0:%x[0,0]\nB\n", "crfpp", source="p.txt")
    with pytest.warns(PatternWarning, match="no bigram pattern.*transition block"):
        parse_patterns("u:%x[0,0]\n", "wapiti", source="p.txt")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        parse_patterns("U0:%x[0,0]\nB\n", "crfpp")


# ----------------------------------------------------------------------------- errors

BAD_LINES = [
    ("crfpp", "X00:%x[0,0]", r"unknown line type: a CRF\+\+ template line starts with U"),
    ("crfpp", " U00:%x[0,0]", "unknown line type"),
    ("crfpp", "U00:%X[0,0]", r"unknown macro '%X': CRF\+\+ knows only %x\[row,col\]"),
    ("crfpp", "U00:%x[0]", r"malformed macro at column 5: expected %x\[row,col\]"),
    ("crfpp", "U00:%x[ 0,0]", "malformed macro at column 5.*no spaces"),
    ("crfpp", "U00:%x[-9,0]", r"row -9 out of range: CRF\+\+ reads rows -8..8"),
    ("wapiti", "x:%x[0,0]", "unknown pattern type: a Wapiti pattern starts with u"),
    ("wapiti", " u:%x[0,0]", "unknown pattern type"),
    ("wapiti", "u:%y[0,0]", "unknown command '%y' at column 3"),
    ("wapiti", "u:%x[a,0]", r"malformed arguments of %x at column 3: expected %x\[offset,column\]"),
    ("wapiti", "u:%x[0,-1]", "malformed arguments.*non-negative column"),
    ("wapiti", "u:%t[0,0]", r'missing regular expression of %t.*%t\[offset,column,"regexp"\]'),
    ("wapiti", 'u:%m[0,0,"abc]', 'unterminated regular expression of %m: expected a closing "'),
    ("wapiti", "u:%x[0,0", "missing ] closing %x at column 9"),
    ("wapiti", 'u:%t[0,0,"*a"]', r"invalid regular expression '\*a': unescaped '\*' with nothing"),
    ("wapiti", 'u:%t[0,0,"a??"]', r"unescaped '\?' with nothing to repeat"),
]


@pytest.mark.parametrize(("fmt", "line", "expected"), BAD_LINES)
def test_a_malformed_line_names_file_line_text_and_expectation(tmp_path, fmt, line, expected):
    good = "U00:%x[0,0]" if fmt == "crfpp" else "u:%x[0,0]"
    path = write(tmp_path, "pat.txt", f"# patterns\n{good}\n\n{line}\nB\n")
    with pytest.raises(DataFormatError) as err:
        load_template(path, fmt)
    message = str(err.value)
    assert message.startswith(f"{path}:4: {line!r}: "), message
    assert re.search(expected, message), message


def test_an_empty_pattern_file(tmp_path):
    path = write(tmp_path, "pat.txt", "# nothing\n\n")
    with pytest.raises(DataFormatError, match=r"pat.txt: no pattern in this Wapiti file"):
        load_template(path, "wapiti")


def test_a_column_beyond_the_data_names_the_pattern_line(tmp_path):
    corpus = read_conll(write(tmp_path, "train.txt", TRAIN), columns=["word", "pos", "chunk"])
    path = write(tmp_path, "pat.txt", "U00:%x[0,0]\nU01:%x[1,2]\nB\n")
    with pytest.raises(DataFormatError) as err:
        featurize({"train": corpus}, load_template(path))
    assert f"{path}:2: pattern 'U01:%x[1,2]' reads column 2" in str(err.value)
    assert "has 2 observation column(s) (0..1) before its label" in str(err.value)


def test_the_label_must_be_the_last_column(tmp_path):
    corpus = read_conll(
        write(tmp_path, "train.txt", TRAIN), columns=["word", "pos", "chunk"], label="pos"
    )
    with pytest.raises(DataFormatError, match="label column 'pos' is not the last"):
        featurize({"train": corpus}, parse_patterns("U:%x[0,0]\nB\n", "crfpp"), label="pos")


@pytest.mark.parametrize(
    ("fmt", "text", "line"),
    [
        ("crfpp", "U00:%x[0,0]\nB01:%x[0,0]\nB\n", 2),
        ("wapiti", "*\nu:%x[0,0]\n*:p=%x[-1,1]\n", 3),
        ("wapiti", "b\nu:%x[0,0]\nB:again\n", 3),  # a second transition block
    ],
)
def test_bigram_observation_patterns_are_refused_not_dropped(tmp_path, fmt, text, line):
    data = write(tmp_path, "train.txt", TRAIN)
    pat = write(tmp_path, "pat.txt", text)
    message = f"{pat}:{line}: .*bigram-observation pattern.*not support yet"
    with pytest.raises(DataFormatError, match=message):
        load_corpus(data, template=pat, template_format=fmt)
    with pytest.raises(DataFormatError, match=message):
        featurize({"train": read_conll(data)}, load_template(pat, fmt))
    res = CliRunner().invoke(
        main, ["info", "--problem", str(data), "--template", str(pat), "--template-format", fmt]
    )
    assert res.exit_code == 2 and "bigram-observation" in res.output


# ----------------------------------------------------------------------------- feature map


def test_the_feature_map_of_a_pattern_file(tmp_path):
    data = write(tmp_path, "train.txt", TRAIN)
    pat = write(tmp_path, "pat.txt", "*\nU:w=%x[0,0]\nU:p=%x[-1,1]\n")
    problem = load_corpus(data, template=pat)
    names = problem.attribute_names
    # every distinct observation of the training file, '*' (every token) included
    words = ["Confidence", "in", "the", "pound", "Chancellor", "Lawson", "said"]
    expected = {"*"} | {f"u:w={w}" for w in words}
    expected |= {"u:p=_x-1", "u:p=NN", "u:p=IN", "u:p=DT", "u:p=NNP"}
    assert set(names) == expected
    assert not problem.bias and problem.n_labels == 3
    assert problem.dim == 3 * len(expected) + 3 * 3  # K·A + K², as Wapiti counts
    # each token carries exactly its observations
    kd = problem.data
    first = {names[j] for j in kd.indices[kd.indptr[0] : kd.indptr[1]]}
    assert first == {"*", "u:w=Confidence", "u:p=_x-1"}
    assert load_corpus(data, template=pat, bias=True).bias


def trained(tmp_path, name: str, patterns: str, passes: int):
    """(training file, pattern file, model) after `crfopt train` with ``patterns``."""
    data, pat = write(tmp_path, "train.txt", TRAIN), write(tmp_path, name, patterns)
    model = tmp_path / "m.crfopt"
    args = ["train", "--problem", str(data), "--template", str(pat), "--optimizer", "lbfgs"]
    res = CliRunner().invoke(
        main, [*args, "--passes", str(passes), "--model", str(model), "--quiet"]
    )
    assert res.exit_code == 0, res.output
    return data, pat, model


def test_train_tag_and_info_with_a_crfpp_template(tmp_path):
    data, pat, model = trained(tmp_path, "template", "U00:%x[0,0]\nU01:%x[-1,1]/%x[0,1]\n\nB\n", 20)
    loaded = crfopt.Model.load(model)
    assert loaded.template["format"] == "crfpp" and "U00:Confidence" in loaded.attributes
    assert loaded.bias is None  # a pattern file defines the whole feature map
    res = CliRunner().invoke(main, ["tag", "--model", str(model), str(data)])
    assert res.exit_code == 0, res.output
    tagged = [line.split() for line in res.output.splitlines() if line.strip()]
    assert all(len(row) == 4 for row in tagged) and tagged[0][:3] == ["Confidence", "NN", "B"]
    assert [row[3] for row in tagged] == [row[2] for row in tagged]  # training set fit
    res = CliRunner().invoke(main, ["info", "--problem", str(data), "--template", str(pat)])
    assert res.exit_code == 0, res.output
    assert "CRF++ patterns" in res.output and "transitions (K × K)" in res.output


def test_evaluate_scores_untyped_chunks(tmp_path):
    data, _, model = trained(tmp_path, "pat.txt", "*\nu:%x[0,0]\n", 30)
    res = CliRunner().invoke(main, ["evaluate", "--model", str(model), str(data), "--json"])
    assert res.exit_code == 0, res.output
    # the tagger featurizes through the saved patterns: the separable toy set is fit
    assert '"accuracy": 1.0' in res.output
    assert '"f1": 1.0' in res.output  # B I O chunks are scored, not only tokens


def test_estimator_with_a_pattern_template(tmp_path):
    pat = write(tmp_path, "pat.txt", "*\nu:w=%X[0,0]\nu:p=%x[-1,1]/%x[0,1]\n")
    X = [
        [(line.split()[0], line.split()[1]) for line in block.splitlines()]
        for block in TRAIN.strip().split("\n\n")
    ]
    y = [[line.split()[2] for line in block.splitlines()] for block in TRAIN.strip().split("\n\n")]
    crf = crfopt.CRF("lbfgs", template=pat, bias=False, max_passes=50).fit(X, y)
    problem = load_corpus(write(tmp_path, "train.txt", TRAIN), template=pat)
    assert set(crf.attributes_) == set(problem.attribute_names)
    assert crf.predict(X).tolist() == y
    crf.save(tmp_path / "m.crfopt")
    again = crfopt.CRF.load(tmp_path / "m.crfopt")
    assert again.predict(X).tolist() == y  # the saved model featurizes with its patterns
    # marginals featurize through the patterns too: the Viterbi label is their argmax here
    marginals = again.predict_marginals(X)
    argmax = [[max(m, key=m.get) for m in sent] for sent in marginals]
    assert argmax == y
    with pytest.raises(TypeError, match=r"X\[0\]\[0\]: with template=, a token is a sequence"):
        crf.predict([[{"w": "Confidence"}]])
    with pytest.raises(ValueError, match="has 1 column"):
        crf.predict([[("Confidence",)]])
    with pytest.raises(ValueError, match="not a CRF\\+\\+ or Wapiti pattern file"):
        crfopt.CRF(template="pos").fit(X, y)


# ----------------------------------------------------------------------------- CRFsuite


def _crfpp_by_regex(template: str, sentence: list[tuple[str, ...]]) -> list[list[str]]:
    """CRF++'s unigram features of a sentence, straight from its rules (feature.cpp's
    applyRule with _B-k/_B+k outside), written apart from crfopt's reader."""
    rules = [ln for ln in template.splitlines() if ln.startswith("U")]
    T = len(sentence)

    def value(t: int, m: re.Match) -> str:
        pos = t + int(m.group(1))
        if pos < 0:
            return f"_B-{-pos}"
        if pos >= T:
            return f"_B+{pos - T + 1}"
        return sentence[pos][int(m.group(2))]

    return [
        [re.sub(r"%x\[(-?\d+),(\d+)\]", lambda m, t=t: value(t, m), rule) for rule in rules]
        for t in range(T)
    ]


CHUNKING = """\
# words
U00:%x[-2,0]
U01:%x[-1,0]
U02:%x[0,0]
U03:%x[1,0]
U04:%x[2,0]
U05:%x[-1,0]/%x[0,0]
# part-of-speech tags
U10:%x[-1,1]
U11:%x[0,1]
U12:%x[1,1]
U13:%x[-1,1]/%x[0,1]/%x[1,1]

B
"""


@pytest.mark.slow
@pytest.mark.data
def test_crfpp_template_reaches_crfsuites_objective_on_conll2000(tmp_path):
    """A CRF++ template on 300 CoNLL-2000 sentences: CRFsuite trained on the attributes
    CRF++'s rules give (computed apart) reaches crfopt's P* to 1e-6 relative, with the
    same λ (c2 = nλ/2, every attribute × label and label pair)."""
    pycrfsuite = pytest.importorskip("pycrfsuite")
    from crfopt.bench.optimum import reference_optimum

    source = Path(os.environ["CRFOPT_DATA"]) / "conll2000" / "train.txt.gz"
    with gzip.open(source, "rt") as f:
        blocks = f.read().strip().split("\n\n")[:300]
    data = write(tmp_path, "train.txt", "\n\n".join(blocks) + "\n")
    pat = write(tmp_path, "template", CHUNKING)
    problem = load_corpus(data, template=pat)
    sentences = [[tuple(ln.split()) for ln in b.splitlines()] for b in blocks]
    trainer = pycrfsuite.Trainer(verbose=False)
    seen = set()
    for sent in sentences:
        xseq = _crfpp_by_regex(CHUNKING, [tok[:-1] for tok in sent])
        seen.update(a for tok in xseq for a in tok)
        trainer.append(xseq, [tok[-1] for tok in sent])
    assert seen == set(problem.attribute_names)
    trainer.select("lbfgs")  # resets every parameter: set them after
    trainer.set_params(
        {
            "c1": 0.0,
            "c2": problem.n * problem.lam / 2,
            "feature.possible_states": True,
            "feature.possible_transitions": True,
            "max_iterations": 100000,
            "delta": 1e-12,
            "epsilon": 1e-12,
            "period": 20,
        }
    )
    trainer.train(str(tmp_path / "m.crfsuite"))
    theirs = trainer.logparser.last_iteration["loss"] / problem.n
    ours = reference_optimum(problem).p_star
    assert problem.dim == problem.n_labels * (len(seen) + problem.n_labels)
    print(
        f"CoNLL-2000[:300], CRF++ template: d = {problem.dim}, CRFsuite n·P = "
        f"{theirs * problem.n:.6f}, crfopt n·P* = {ours * problem.n:.6f}, relative "
        f"{abs(theirs - ours) / ours:.2e}"
    )
    assert abs(theirs - ours) <= 1e-6 * ours, (theirs, ours)
    assert np.isfinite(ours)


def test_compare_on_a_corpus_file_with_a_named_template_format(tmp_path):
    data = write(tmp_path, "train.txt", TRAIN)
    pat = write(tmp_path, "pat", "U00:%x[-1,0]\nB\n")  # as Wapiti reads it: u00:, _x-1
    args = ["compare", "--problem", str(data), "--template", str(pat)]
    args += ["--template-format", "wapiti", "--optimizers", "lbfgs", "--passes", "2"]
    res = CliRunner().invoke(main, [*args, "--out", str(tmp_path / "out"), "--quiet"])
    assert res.exit_code == 0, res.output
    table = crfopt.read_results(tmp_path / "out")
    assert set(table["optimizer"]) == {"lbfgs"} and table["primal"].notna().all()
    names = load_corpus(data, template=pat, template_format="wapiti").attribute_names
    assert "u00:_x-1" in names and "u00:Confidence" in names
    assert "U00:_B-1" in load_corpus(data, template=pat).attribute_names  # CRF++ by default
    problem = load_corpus(data, template=pat, template_format="wapiti")
    assert table["primal"].iloc[0] == pytest.approx(problem.primal_at_zero())
