"""crfopt.CRF on the sklearn-crfsuite convention, and the model file format."""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest

import crfopt
from crfopt.apps.estimator import NotFittedError
from crfopt.apps.items import item_attributes
from crfopt.apps.model import Model, ModelFormatError
from crfopt.bench.evaluator import Evaluator


def _toy_corpus(n=80, seed=0):
    """Word/shape tagging: a token's tag is determined by its shape, with context noise."""
    rng = np.random.default_rng(seed)
    words = ["Paris", "london", "Zürich", "42", "the", "naïve", "Café", "2024", "of", "Oslo"]
    X, y = [], []
    for _ in range(n):
        sent = rng.choice(words, size=int(rng.integers(1, 7)))
        X.append(
            [
                {
                    "word.lower()": w.lower(),
                    "word.istitle()": w.istitle(),
                    "word.isdigit()": w.isdigit(),
                    "suffix": {"2": w[-2:]},
                    "bias": 1.0,
                }
                for w in sent
            ]
        )
        y.append(["NUM" if w.isdigit() else ("CAP" if w.istitle() else "LOW") for w in sent])
    return X, y


_ITEMS = [
    {
        "a": 1.5,
        "b": True,
        "c": False,
        "d": "x",
        "e": {"f": 2, "g": "h", "n": {"m": "q"}},
        "i": ["j", "k"],
        "z": 0.0,
        "l": {"o": ["p"]},
    },
    ["u", "v"],
    "w",
]


def test_item_conventions():
    """Attribute names and values as python-crfsuite's ItemSequence builds them: a string
    value is ``k:v``, nesting prefixes ``k:``, False and 0 keep the attribute at 0."""
    got = [dict(item_attributes(item)) for item in _ITEMS]
    assert got == [
        {
            "a": 1.5,
            "b": 1.0,
            "c": 0.0,
            "d:x": 1.0,
            "e:f": 2.0,
            "e:g:h": 1.0,
            "e:n:m:q": 1.0,
            "i:j": 1.0,
            "i:k": 1.0,
            "z": 0.0,
            "l:o:p": 1.0,
        },
        {"u": 1.0, "v": 1.0},
        {"w": 1.0},
    ]
    with pytest.raises(TypeError, match="unsupported value type"):
        list(item_attributes({"a": object()}))
    with pytest.raises(TypeError, match="keys must be strings"):
        list(item_attributes({1: "x"}))


def test_item_conventions_match_python_crfsuite():
    """The independent truth: python-crfsuite itself (the bench extra)."""
    pycrfsuite = pytest.importorskip("pycrfsuite")
    expected = pycrfsuite.ItemSequence(_ITEMS).items()
    assert [dict(item_attributes(item)) for item in _ITEMS] == expected


#: python-crfsuite's other value types (issue 51): bytes keys, values and attribute strings
#: (UTF-8), numpy scalars, Decimal, Fraction, numpy booleans.
_MORE_ITEMS = [
    {
        b"k": 1,
        "солнце": "не светит".encode(),
        "n": {b"x": b"y", "z": np.float32(0.25)},
        "d": Decimal("1.5"),
        "f": Fraction(1, 4),
        "t": np.bool_(True),
        "u": np.bool_(False),
        "i": np.int64(3),
        "l": [b"a", "b"],
    },
    [b"p", "q"],
    {},
]


def test_more_value_types_match_python_crfsuite():
    got = [dict(item_attributes(item)) for item in _MORE_ITEMS]
    assert got == [
        {
            "k": 1.0,
            "солнце:не светит": 1.0,
            "n:x:y": 1.0,
            "n:z": 0.25,
            "d": 1.5,
            "f": 0.25,
            "t": 1.0,
            "u": 0.0,
            "i": 3.0,
            "l:a": 1.0,
            "l:b": 1.0,
        },
        {"p": 1.0, "q": 1.0},
        {},
    ]
    pycrfsuite = pytest.importorskip("pycrfsuite")
    assert got == pycrfsuite.ItemSequence(_MORE_ITEMS).items()
    with pytest.raises(ValueError, match=r"feature 'k': b'\\xe9' is not UTF-8 text"):
        list(item_attributes({"k": "é".encode("latin-1")}))
    for value in (1 + 2j, None):
        with pytest.raises(TypeError, match="unsupported value type"):
            list(item_attributes({"k": value}))
    # the fast path of the estimator (flat dicts) names them the same way
    X = [[_MORE_ITEMS[0], {"солнце": "не светит", "t": True}], [{"k": b"v"}, {"k": "v"}]]
    crf = crfopt.CRF(max_passes=2).fit(X, [["A", "B"], ["A", "A"]])
    assert crf.attributes_ == [*got[0], "k:v"]


@pytest.mark.parametrize("optimizer", ["sdca-gap", "lbfgs"])
def test_fit_predict(optimizer):
    X, y = _toy_corpus()
    crf = crfopt.CRF(optimizer=optimizer, max_passes=40)
    crf.fit(X[:60], y[:60])
    assert crf.classes_ == ["CAP", "LOW", "NUM"]
    assert crf.score(X[60:], y[60:]) == 1.0
    assert crf.training_log_["primal"].iloc[-1] < crf.training_log_["primal"].iloc[0]
    assert crf.predict_single(X[0]) == y[0]


def test_save_load_roundtrip(tmp_path):
    X, y = _toy_corpus(seed=1)
    crf = crfopt.CRF(max_passes=20).fit(X, y)
    path = tmp_path / "toy.crfopt"
    crf.save(path)
    again = crfopt.CRF.load(path)
    assert again.predict(X).tolist() == crf.predict(X).tolist()
    m = Model.load(path)
    np.testing.assert_array_equal(m.emission, crf.model_.emission)
    assert "Café" not in m.attributes and "word.lower():café" in m.attributes  # UTF-8 kept


def test_corrupted_and_foreign_files(tmp_path):
    X, y = _toy_corpus(seed=2)
    path = tmp_path / "m.crfopt"
    crfopt.CRF(max_passes=5).fit(X, y).save(path)
    raw = path.read_bytes()
    (tmp_path / "cut.crfopt").write_bytes(raw[: len(raw) // 2])
    with pytest.raises(ModelFormatError, match="not a readable crfopt model"):
        Model.load(tmp_path / "cut.crfopt")
    np.savez(tmp_path / "other.npz", x=np.arange(3))
    with pytest.raises(ModelFormatError, match="missing entries"):
        Model.load(tmp_path / "other.npz")
    m = Model.load(path)
    import json

    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files}
    meta = json.loads(bytes(arrays["meta"]).decode())
    meta["version"] = 99
    arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    np.savez(tmp_path / "v99.npz", **arrays)
    with pytest.raises(ModelFormatError, match="format version 99"):
        Model.load(tmp_path / "v99.npz")
    assert m.n_labels == 3


def test_errors():
    X, y = _toy_corpus(n=5)
    with pytest.raises(ValueError, match="labels"):
        crfopt.CRF().fit(X, [s[:-1] if len(s) > 1 else [*s, "LOW"] for s in y])
    with pytest.raises(NotFittedError, match="not fitted"):
        crfopt.CRF().predict(X)
    with pytest.raises(ValueError, match=r"(?i)invalid parameter"):
        crfopt.CRF().set_params(learning_rate=1)
    with pytest.raises(ValueError, match="lam or c2"):
        crfopt.CRF(lam=0.1, c2=1.0).fit(X, y)


def test_c2_is_crfsuite_scaling_of_lam():
    """c2 = nλ/2: CRFsuite minimizes Σℓ_i(w) + c2‖w‖², crfopt (1/n)Σℓ_i(w) + (λ/2)‖w‖².

    The training record of a fit with c2 must carry λ = 2 c2 / n, and n·P_λ(w) must equal
    CRFsuite's objective at any w, with Σℓ_i computed by enumerating every labeling.
    """
    from conftest import enumerate_sequence, feature_vector, tiny_problem

    X, y = _toy_corpus(n=30, seed=3)
    c2 = 0.7
    crf = crfopt.CRF(c2=c2, max_passes=2).fit(X, y)
    assert crf.model_.training["lam"] == pytest.approx(2 * c2 / len(X), rel=1e-15)

    n = 6
    problem, emb = tiny_problem(5, dense=False, K=3, lengths=[1, 2, 3, 2, 4, 1], lam=2 * c2 / n)
    w = np.random.default_rng(0).normal(size=problem.dim)
    nll = 0.0
    for i in range(n):
        log_z = enumerate_sequence(problem, emb, i, w)[0]
        s, e = (int(v) for v in problem.data.offsets[i : i + 2])
        nll += log_z - feature_vector(problem, emb[s:e], problem.labels[s:e]) @ w
    crfsuite_objective = nll + c2 * float(w @ w)
    assert n * Evaluator(problem).primal(w) == pytest.approx(crfsuite_objective, rel=1e-12)


def _sentences_of(problem):
    """The training sequences of ``problem`` as sklearn-crfsuite input (X, y).

    Attribute j becomes the feature ``x{j}`` with the same value (repeated ids add up,
    as in the kernels), so CRF.fit builds the same objective up to the order of the
    attributes.
    """
    data = problem.data
    X, y = [], []
    for i in range(problem.n):
        sent, labels = [], []
        for t in range(int(data.offsets[i]), int(data.offsets[i + 1])):
            feats: dict[str, float] = {}
            for k in range(int(data.indptr[t]), int(data.indptr[t + 1])):
                if int(data.indices[k]) >= problem.n_attributes:
                    continue  # the kernels' bias columns: CRF(bias=True) adds its own
                key = f"x{int(data.indices[k])}"
                feats[key] = feats.get(key, 0.0) + float(data.values[k])
            sent.append(feats)
            labels.append(problem.label_names[int(data.y[t])])
        X.append(sent)
        y.append(labels)
    return X, y


def test_train_and_fit_stop_at_the_same_relative_gap(tmp_path, monkeypatch):
    """One target_gap meaning: ``crfopt train --target-gap g`` and ``CRF(target_gap=g)``
    stop at the first checkpoint whose duality gap is ≤ g · P(0)."""
    from click.testing import CliRunner

    from crfopt.apps.cli import main

    monkeypatch.setenv("CRFOPT_CACHE", str(tmp_path / "cache"))
    problem = crfopt.load_problem("synthetic", n=40)
    p0 = problem.primal_at_zero()
    assert p0 > 2  # so an absolute reading of g would stop elsewhere
    g = 1e-3
    path = tmp_path / "m.crfopt"
    res = CliRunner().invoke(
        main,
        ["train", "--problem", "synthetic", "--set", "synthetic.n=40", "--optimizer",
         "sdca-gap", "--passes", "40", "--target-gap", str(g), "--model", str(path), "--quiet"],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    cli = Model.load(path).training

    X, y = _sentences_of(problem)
    crf = crfopt.CRF(
        optimizer="sdca-gap",
        max_passes=40,
        target_gap=g,
        lam=problem.lam,
        bias=problem.bias,
        checkpoints="default",  # the CLI's schedule (CRF checks less often unmonitored)
    ).fit(X, y)
    fit = crf.model_.training
    log = crf.training_log_
    # the truth: the run stopped at the first checkpoint at or below g · P(0)
    gaps = log["duality_gap"].to_numpy(dtype=float)
    assert fit["status"] == "converged" and gaps[-1] <= g * p0 < gaps[-2]
    assert crf.model_.training["target_gap_relative"] == g
    # and the command line stopped at the same point of the same objective
    assert cli["status"] == "converged"
    assert cli["effective_passes"] == pytest.approx(fit["effective_passes"], rel=1e-12)
    assert cli["duality_gap"] == pytest.approx(fit["duality_gap"], rel=1e-6)
    assert cli["primal"] == pytest.approx(fit["primal"], rel=1e-9)


def test_without_scikit_learn():
    """scikit-learn is optional: without it CRF keeps get_params/set_params over every
    constructor argument and a NotFittedError that is a ValueError and AttributeError
    (as scikit-learn's), and trains as usual."""
    import inspect
    import os
    import subprocess
    import sys

    code = """
import sys
sys.modules["sklearn"] = None  # import sklearn now raises ImportError
import inspect
from crfopt.apps.estimator import CRF, NotFittedError
assert "sklearn" not in str(CRF.__mro__)
crf = CRF(c2=0.5, max_passes=3, target_gap=None)
names = sorted(p for p in inspect.signature(CRF.__init__).parameters if p != "self")
assert sorted(crf.get_params()) == names, crf.get_params()
assert crf.set_params(seed=3).seed == 3
try:
    crf.set_params(learning_rate=1)
except ValueError as exc:
    assert "valid parameters" in str(exc)
else:
    raise AssertionError("set_params accepted an unknown name")
try:
    crf.predict([[{"w": "a"}]])
except NotFittedError as exc:
    assert isinstance(exc, ValueError) and isinstance(exc, AttributeError)
X = [[{"w": "a"}, {"w": "b"}], [{"w": "b"}]]
assert crf.fit(X, [[1, 2], [2]]).predict(X).tolist() == [[1, 2], [2]]
print("ok")
"""
    env = {**os.environ, "CRFOPT_DISABLE_JIT": "1"}  # the NumPy kernels: no compile
    res = subprocess.run(
        [sys.executable, "-c", inspect.cleandoc(code)], capture_output=True, text=True, env=env
    )
    assert res.returncode == 0 and res.stdout.strip() == "ok", res.stderr[-2000:]
