"""crfopt.CRF as a scikit-learn estimator and a drop-in for sklearn-crfsuite (issue 20).

The must-show lines of the issue: ``cross_val_score`` with a flat-F1 scorer, a
``RandomizedSearchCV`` over c2 with ``n_jobs=2``, ``clone`` of a fitted CRF unfitted,
``predict_marginals`` equal to brute-force enumeration.
"""

from __future__ import annotations

import itertools
import math
import pickle
from collections import Counter

import numpy as np
import pytest

sklearn = pytest.importorskip("sklearn")

from sklearn.base import clone  # noqa: E402
from sklearn.metrics import f1_score, make_scorer  # noqa: E402
from sklearn.model_selection import (  # noqa: E402
    GridSearchCV,
    RandomizedSearchCV,
    cross_val_score,
)
from sklearn.pipeline import Pipeline  # noqa: E402
from sklearn.utils import estimator_checks  # noqa: E402
from sklearn.utils.validation import check_is_fitted  # noqa: E402

import crfopt  # noqa: E402
from crfopt.apps.estimator import NotFittedError  # noqa: E402


def flat_f1_score(y_true, y_pred, **kwargs):
    """sklearn-crfsuite's metrics.flat_f1_score: f1_score over the flattened sequences."""
    return f1_score([t for s in y_true for t in s], [p for s in y_pred for p in s], **kwargs)


WORDS = ["Paris", "london", "Oslo", "42", "the", "of", "Café", "2024", "run", "Bern"]


def _corpus(n=45, seed=0, int_labels=False):
    """Tagging by word shape (CAP/LOW/NUM) from sklearn-crfsuite-style feature dicts."""
    rng = np.random.default_rng(seed)
    X, y = [], []
    for _ in range(n):
        sent = rng.choice(WORDS, size=int(rng.integers(1, 6)))
        X.append(
            [
                {
                    "bias": 1.0,
                    "word.lower()": w.lower(),
                    "word.istitle()": w.istitle(),
                    "word.isdigit()": w.isdigit(),
                    "suffix": {"2": w[-2:]},
                }
                for w in sent
            ]
        )
        tags = ["NUM" if w.isdigit() else ("CAP" if w.istitle() else "LOW") for w in sent]
        y.append([{"CAP": 10, "LOW": 20, "NUM": 30}[t] for t in tags] if int_labels else tags)
    return X, y


FAST = dict(max_passes=8, target_gap=None)


# ------------------------------------------------------------------ the must-show lines
def test_cross_val_score_with_flat_f1():
    X, y = _corpus()
    labels = ["CAP", "LOW", "NUM"]
    scores = cross_val_score(
        crfopt.CRF(c2=0.1, **FAST),
        X,
        y,
        cv=3,
        scoring=make_scorer(flat_f1_score, average="weighted", labels=labels),
    )
    assert scores.shape == (3,)
    assert np.all(scores > 0.95)  # the shape features determine the tag


def test_randomized_search_over_c2_in_two_processes():
    X, y = _corpus()
    search = RandomizedSearchCV(
        crfopt.CRF(**FAST),
        {"c2": [0.01, 0.1, 1.0, 100.0]},
        n_iter=3,
        cv=3,
        n_jobs=2,
        random_state=0,
        scoring=make_scorer(flat_f1_score, average="weighted"),
    )
    search.fit(X, y)
    assert len(search.cv_results_["params"]) == 3
    assert search.best_params_["c2"] in (0.01, 0.1, 1.0, 100.0)
    # refit on all the data with the chosen c2: λ = 2 c2 / n
    assert search.best_estimator_.model_.training["lam"] == pytest.approx(
        2 * search.best_params_["c2"] / len(X)
    )
    assert search.predict(X[:3]).tolist() == y[:3]


def test_grid_search_and_pipeline():
    X, y = _corpus()
    grid = GridSearchCV(crfopt.CRF(**FAST), {"algorithm": ["lbfgs", "l2sgd"]}, cv=2)
    grid.fit(X, y)  # default scoring: CRF.score (token accuracy)
    assert set(grid.cv_results_["param_algorithm"]) == {"lbfgs", "l2sgd"}
    pipe = Pipeline([("crf", crfopt.CRF(**FAST))]).set_params(crf__c2=0.2)
    pipe.fit(X, y)
    assert pipe.named_steps["crf"].model_.training["lam"] == pytest.approx(0.4 / len(X))
    assert pipe.predict(X[:2]).tolist() == y[:2]


def test_clone_of_fitted_is_unfitted():
    X, y = _corpus(n=20)
    crf = crfopt.CRF(c2=0.3, algorithm="lbfgs", max_iterations=5).fit(X, y)
    check_is_fitted(crf)
    # joblib (n_jobs) and users pickle fitted estimators: the copy predicts the same
    copy = pickle.loads(pickle.dumps(crf))
    assert copy.predict(X).tolist() == crf.predict(X).tolist()
    assert copy.training_log_.last_iteration == crf.training_log_.last_iteration
    again = clone(crf)
    assert again.get_params() == crf.get_params()
    with pytest.raises(NotFittedError):
        check_is_fitted(again)
    with pytest.raises(NotFittedError, match="not fitted"):
        again.predict(X)
    assert not any(k.endswith("_") and not k.startswith("_") for k in vars(again))


def _brute_force_marginals(crf, sent):
    """P(y_t = k | x) by enumerating all K^T labelings with the model's weights.

    Independent of crfopt's kernels: the score of a labeling is written out from the
    weight blocks (docs/algorithms.md §1: emission W_E, bias W_B = (count, first,
    last), transition W_T[y_t, y_{t+1}]).
    """
    from crfopt.apps.items import item_attributes

    m = crf.model_
    col = {a: j for j, a in enumerate(m.attributes)}
    T, K = len(sent), m.n_labels
    unary = np.zeros((T, K))
    for t, item in enumerate(sent):
        for name, v in item_attributes(item):
            if name in col:
                unary[t] += v * m.emission[:, col[name]]
    if m.bias is not None:
        unary += m.bias[:, 0]
        unary[0] += m.bias[:, 1]
        unary[-1] += m.bias[:, 2]
    scores = {}
    for lab in itertools.product(range(K), repeat=T):
        s = sum(unary[t, lab[t]] for t in range(T))
        s += sum(m.transition[lab[t], lab[t + 1]] for t in range(T - 1))
        scores[lab] = s
    top = max(scores.values())
    z = sum(math.exp(s - top) for s in scores.values())
    marg = np.zeros((T, K))
    for lab, s in scores.items():
        for t in range(T):
            marg[t, lab[t]] += math.exp(s - top) / z
    return marg


@pytest.mark.parametrize("bias", [True, False])
def test_predict_marginals_match_brute_force(bias):
    X, y = _corpus(n=30, seed=1)
    # few passes and a strong ℓ2: marginals well inside (0, 1), so the check has teeth
    crf = crfopt.CRF(c2=2.0, max_passes=3, target_gap=None, bias=bias).fit(X, y)
    test = [
        X[0],
        [{"word.lower()": "unseen", "suffix": {"2": "en"}}, {"bias": 1.0}, {}, {"bias": 1.0}],
    ]
    got = crf.predict_marginals(test)
    assert crf.predict_marginals_single(test[1]) == got[1]
    for sent, rows in zip(test, got):
        assert len(rows) == len(sent)
        truth = _brute_force_marginals(crf, sent)
        for t, row in enumerate(rows):
            assert list(row) == crf.classes_
            assert sum(row.values()) == pytest.approx(1.0, abs=1e-12)
            np.testing.assert_allclose(list(row.values()), truth[t], rtol=1e-9, atol=1e-12)
        assert float(np.min(truth)) > 0.05 or float(np.max(truth)) < 0.999


# ------------------------------------------------------------------ sklearn-crfsuite surface
def test_sklearn_crfsuite_arguments():
    X, y = _corpus(n=30)
    crf = crfopt.CRF(
        algorithm="lbfgs",
        c1=0,
        c2=0.1,
        max_iterations=7,
        all_possible_transitions=True,
        all_possible_states=True,
        epsilon=1e-5,
    ).fit(X, y)
    training = crf.model_.training
    assert training["optimizer"] == "lbfgs"
    assert training["lam"] == pytest.approx(2 * 0.1 / len(X))
    # max_iterations of lbfgs counts L-BFGS iterations (not passes): the budget ends there
    assert training["status"] == "budget"
    assert crf.training_log_.last_iteration["num"] == 7 < training["effective_passes"]
    assert training["target_gap_relative"] == 1e-5
    # l2sgd is crfopt's sg; max_iterations are then epochs (effective passes)
    sgd = crfopt.CRF(algorithm="l2sgd", max_iterations=2, epsilon=None, target_gap=None)
    sgd.fit(X, y)
    assert sgd.model_.training["optimizer"] == "sg"
    assert sgd.model_.training["effective_passes"] == pytest.approx(2.0, abs=0.05)


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"c1": -0.1}, r"c1 must be a finite non-negative number, got -0\.1"),
        (
            {"c1": 0.1, "optimizer": "sag-nus"},
            r"c1=0\.1: sag-nus handles the l2 penalty only.*owlqn, prox-saga and every sdca",
        ),
        ({"algorithm": "ap"}, r"algorithm='ap' .* supported values: 'lbfgs', 'l2sgd'"),
        ({"algorithm": "arow"}, r"algorithm='arow'"),
        ({"algorithm": "bfgs"}, r"algorithm='bfgs' .* supported values"),
        ({"algorithm": "lbfgs", "optimizer": "sdca-gap"}, "give one of them"),
        ({"all_possible_transitions": False}, r"all_possible_transitions=False"),
        ({"all_possible_states": False}, r"all_possible_states=False"),
        ({"max_iterations": 0}, "max_iterations must be a positive int"),
        ({"epsilon": 1e-3, "target_gap": 1e-4}, "same stopping tolerance"),
        ({"lam": 0.1, "c2": 1.0}, "lam or c2"),
    ],
)
def test_refused_arguments_name_themselves(params, message):
    crf = crfopt.CRF(**params)  # stored unchanged: validation is fit's
    assert crf.get_params()[next(iter(params))] == params[next(iter(params))]
    X, y = _corpus(n=4)
    with pytest.raises(ValueError, match=message):
        crf.fit(X, y)


def test_feature_counters_keyed_like_sklearn_crfsuite():
    X, y = _corpus(n=30, int_labels=True)
    crf = crfopt.CRF(max_passes=10).fit(X, y)
    assert crf.classes_ == [10, 20, 30]  # integer labels stay integers
    assert crf.predict(X[:5]).tolist() == y[:5]
    sf, tf = crf.state_features_, crf.transition_features_
    assert isinstance(sf, Counter) and isinstance(tf, Counter)
    m = crf.model_
    j = m.attributes.index("word.isdigit()")
    assert sf[("word.isdigit()", 30)] == m.emission[2, j] > 0
    assert ("word.lower():paris", 10) in sf  # python-crfsuite's k:v names
    assert tf[(10, 20)] == m.transition[0, 1]
    assert len(sf) == np.count_nonzero(m.emission)
    assert sf.most_common(1)[0][1] == m.emission.max()
    assert crf.num_attributes_ == len(m.attributes) == len(set(crf.attributes_))
    assert crf.size_ > 0
    # the string names and the integer labels survive save/load
    path = crf.model_.save(__import__("tempfile").mkdtemp() + "/m.crfopt")
    again = crfopt.CRF.load(path)
    assert again.classes_ == [10, 20, 30] and again.predict(X[:5]).tolist() == y[:5]


def test_generators_dev_set_and_log(capsys):
    X, y = _corpus(n=30)
    crf = crfopt.CRF(max_passes=3, target_gap=None)
    crf.fit((iter(s) for s in X), (iter(s) for s in y))
    assert crf.predict(iter(X[:3])).tolist() == crf.predict(X[:3]).tolist()
    # monitoring off by default: evaluated at the start and the end only, no dev scores
    assert list(crf.training_log_["effective_passes"]) == [0.0, 3.0]
    assert crf.training_log_.last_iteration["scores"] == {}

    Xd, yd = _corpus(n=10, seed=5)
    yd[0][0] = "UNSEEN"  # a dev label never seen in training counts as an error
    # a stochastic optimizer named: the default (auto) may pick L-BFGS, whose checkpoints
    # fall on its evaluations
    crf = crfopt.CRF(optimizer="sdca-gap", max_passes=3, target_gap=None, verbose=True)
    crf.fit(X, y, X_dev=Xd, y_dev=yd)
    log = crf.training_log_
    assert len(log) == 7  # the runner's default schedule: 0, ¼, ½, ¾, 1, 2, 3
    pred = crf.predict(Xd)
    n_tok = sum(map(len, yd))
    wrong = sum(p != t for ps, ts in zip(pred, yd) for p, t in zip(ps, ts))
    assert log["test_error"].iloc[-1] == pytest.approx(wrong / n_tok)
    last = log.last_iteration
    assert last["scores"]["test_error"] == log["test_error"].iloc[-1]
    assert last["loss"] == pytest.approx(len(X) * log["primal"].iloc[-1])
    assert last["active_features"] > 0 and last["feature_norm"] > 0
    out = capsys.readouterr().out
    assert out.count("dev_err") == 7 and "loss" in out


# ------------------------------------------------------------------ estimator checks
#: scikit-learn's checks that do not feed 2-D numeric arrays: they apply and pass.
APPLICABLE_CHECKS = [
    "check_estimator_cloneable",
    "check_estimator_repr",
    "check_no_attributes_set_in_init",
    "check_parameters_default_constructible",
    "check_get_params_invariance",
    "check_set_params",
    "check_estimator_tags_renamed",
    "check_valid_tag_types",
    "check_do_not_raise_errors_in_init_or_set_params",
    "check_mixin_order",
    "check_estimators_unfitted",
]


@pytest.mark.parametrize("check", APPLICABLE_CHECKS)
def test_sklearn_estimator_checks(check):
    getattr(estimator_checks, check)("CRF", crfopt.CRF())


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.SkipTestWarning")
def test_sequence_versions_of_the_data_checks():
    """What the array-fed checks test, on sequence input: fit returns self, leaves the
    parameters alone, is idempotent; tags say the input is not a 2-D array (which is
    why check_estimator itself runs none of its data checks)."""
    X, y = _corpus(n=20)
    crf = crfopt.CRF(c2=0.5, max_passes=4, target_gap=None)
    before = crf.get_params()
    assert crf.fit(X, y) is crf
    assert crf.get_params() == before
    first = crf.predict_marginals(X)
    crf.fit(X, y)
    assert crf.predict_marginals(X).tolist() == first.tolist()
    tags = crf.__sklearn_tags__()
    assert not tags.input_tags.two_d_array and tags.input_tags.dict
    results = estimator_checks.check_estimator(crf, on_fail=None, on_skip=None)
    assert [(r["check_name"], r["status"]) for r in results] == [
        ("check_estimator_cloneable", "passed")
    ]


# ------------------------------------------------------------------ sklearn-crfsuite's conventions
# (issue 51; tests/test_sklearn_crfsuite_suite.py runs sklearn-crfsuite's own tests too)
FITTED = (
    "classes_",
    "attributes_",
    "model_",
    "training_log_",
    "size_",
    "num_attributes_",
    "state_features_",
    "transition_features_",
)


def test_unfitted_attributes_are_none_and_tagger_is_refused():
    crf = crfopt.CRF()
    assert {name: getattr(crf, name) for name in FITTED} == dict.fromkeys(FITTED)
    with pytest.raises(AttributeError, match=r"tagger_ is python-crfsuite's Tagger.*predict"):
        crf.tagger_  # noqa: B018
    assert not hasattr(crf, "tagger_")
    with pytest.raises(NotFittedError):  # the class-level Nones do not make it look fitted
        check_is_fitted(crf)
    X, y = _corpus(n=20)
    crf.fit(X, y)
    assert all(getattr(crf, name) is not None for name in FITTED)
    assert not hasattr(crf, "tagger_")
    with pytest.raises(TypeError, match="model_filename"):
        crfopt.CRF(model_filename="m.crfsuite")


def test_positional_algorithm_and_what_predict_returns():
    X, y = _corpus(n=30)
    crf = crfopt.CRF("lbfgs", max_iterations=20)
    assert crf.get_params()["algorithm"] == "lbfgs" and crf.optimizer is None
    assert crf.fit(X, y).model_.training["optimizer"] == "lbfgs"
    for sentences in (X[:6], [s for s in X if len(s) == 3][:4]):  # ragged, then one length
        # sklearn-crfsuite builds np.array(list of per-sentence results, dtype=object)
        want = np.array([crf.predict_single(s) for s in sentences], dtype=object)
        got = crf.predict(sentences)
        assert got.dtype == object and got.shape == want.shape and (got == want).all()
        margs = crf.predict_marginals(sentences)
        want = np.array([crf.predict_marginals_single(s) for s in sentences], dtype=object)
        assert margs.dtype == object and margs.shape == want.shape and (margs == want).all()
    assert len({len(s) for s in X[:6]}) > 1 and crf.predict(X[:6]).ndim == 1
    assert crf.predict([]).shape == (0,)
    assert isinstance(crf.predict_single(X[0]), list)
    with pytest.raises(ValueError, match=r"algorithm='sdca-gap' .* chosen with optimizer="):
        crfopt.CRF("sdca-gap").fit(X, y)


def test_classes_in_order_of_first_appearance():
    X = [[{"w": "x"}, {"w": "y"}], [{"w": "z"}, {"w": "x"}], [{"w": "y"}]]
    y = [["B-PER", "O"], ["A", "B-PER"], ["O"]]
    crf = crfopt.CRF(max_passes=5).fit(X, y)
    assert crf.classes_ == ["B-PER", "O", "A"]
    assert list(crf.predict_marginals_single(X[0])[0]) == crf.classes_
    sklearn_crfsuite = pytest.importorskip("sklearn_crfsuite")  # the bench extra
    X, y = _corpus(n=30, seed=3)
    cs = sklearn_crfsuite.CRF(max_iterations=5).fit(X, y)
    assert crfopt.CRF(max_passes=5).fit(X, y).classes_ == cs.classes_


@pytest.mark.parametrize(
    "params", [{}, {"algorithm": "lbfgs"}, {"c1": 0.1}, {"algorithm": "l2sgd"}, {"verbose": True}]
)
def test_a_single_label(params):
    """One label: every labeling is the truth, P(w) = λ/2‖w‖² + σ‖w‖₁, so w = 0 is optimal
    with a zero gap and the relative target stops training at once."""
    X, _ = _corpus(n=12)
    y = [["O"] * len(s) for s in X]
    crf = crfopt.CRF(**params).fit(X, y)
    assert crf.classes_ == ["O"]
    assert crf.predict(X).tolist() == y and crf.score(X, y) == 1.0
    assert crf.training_log_["status"].iloc[-1] == "converged"
    assert not np.any(crf.model_.emission) and not np.any(crf.model_.transition)
    assert crf.predict_marginals_single(X[0]) == [{"O": 1.0}] * len(X[0])


def test_a_label_never_seen_in_training():
    X, y = _corpus(n=30)
    crf = crfopt.CRF(max_passes=10).fit(X, y)
    assert crf.score(X, y) == 1.0
    y_new = [list(s) for s in y]
    y_new[0][0] = "UNSEEN"  # never predicted, so always counted wrong
    assert crf.score(X, y_new) == pytest.approx(1 - 1 / sum(map(len, y)))
    assert "UNSEEN" not in crf.predict_marginals_single(X[0])[0]
    # a dev set may have it too (its error counts it wrong; tested with the dev log above)
    crf.fit(X, y, X_dev=X[:3], y_dev=y_new[:3])
    assert set(crf.classes_) == {"CAP", "LOW", "NUM"}  # not a class of the model
