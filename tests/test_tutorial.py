"""docs/tutorial.md runs as written (on fewer sentences) and its numbers are what they claim.

The tutorial's python blocks run in order in one namespace, with only the knobs below
changed; the checks then recompute flat F1 by counting and the top features from the
model's weight matrices.
"""

from __future__ import annotations

import contextlib
import io
from collections import Counter

import numpy as np
import pytest
from docs_examples import code_blocks

pytest.importorskip("sklearn")

#: The doc's sizes → the test's: each must occur exactly once in the tutorial's code.
SMALL = {
    "N_TRAIN = 3000": "N_TRAIN = 300",
    "N_TEST = 1000": "N_TEST = 200",
    "n_iter=4": "n_iter=2",
    "n_jobs=-1": "n_jobs=1",  # worker processes would each start numba: slow, tested elsewhere
}


def _corpus_available() -> bool:
    from crfopt.data.sources import DataNotFoundError, locate
    from crfopt_datasets.conll2002 import FILES

    try:
        for split in ("train", "test"):
            locate(FILES[split], download=False)
    except DataNotFoundError:
        return False
    return True


@pytest.fixture(scope="module")
def tutorial() -> tuple[dict, str]:
    """The namespace after the last block, and everything the blocks printed."""
    if not _corpus_available():
        pytest.skip("CoNLL-2002 Dutch is not under $CRFOPT_DATA (docs/datasets.md, ner-nl)")
    from crfopt.kernels.jit import JIT_ENABLED

    if not JIT_ENABLED:
        # The pure-NumPy path runs SDCA's per-entry loops in the interpreter: the search's
        # fits take tens of minutes (measured: >5 min for the first candidate). The kernels
        # it relies on are checked against their compiled twins elsewhere (test_determinism).
        pytest.skip("the tutorial's fits are for the compiled kernels (CRFOPT_DISABLE_JIT is set)")
    blocks = code_blocks("tutorial.md")
    source = "\n".join(blocks)
    for old in SMALL:
        assert source.count(old) == 1, f"docs/tutorial.md should contain {old!r} once"
    ns: dict = {"__name__": "tutorial"}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        for i, block in enumerate(blocks):
            for old, new in SMALL.items():
                block = block.replace(old, new)
            exec(compile(block, f"docs/tutorial.md block {i + 1}", "exec"), ns)
    return ns, out.getvalue()


def test_every_step_runs_and_prints(tutorial):
    ns, printed = tutorial
    assert len(ns["train_sents"]) == 300 and len(ns["test_sents"]) == 200
    assert len(ns["search"].cv_results_["params"]) == 2  # n_iter candidates were tried
    for line in ("attributes; 9 labels", "flat F1", "best c1", "test flat F1", "non-zero"):
        assert line in printed
    for line in ("Most likely transitions:", "Least likely transitions:", "Top negative:"):
        assert line in printed
    assert set(ns["search"].best_params_) == {"c1", "c2"}


def test_searched_l1_model_is_sparse(tutorial):
    """The refitted best model has c1 > 0 (expon draws are positive): auto's ℓ1 pick
    (OWL-QN, prox-SAGA or an SDCA variant, each with exact zeros)."""
    ns, printed = tutorial
    crf = ns["crf"]
    assert crf.c1 > 0
    assert "auto" in crf.model_.training
    l1_optimizers = {"owlqn", "prox-saga", "sdca-gap", "sdca-passcode-wild"}
    assert crf.model_.training["optimizer"] in l1_optimizers
    emission = crf.model_.emission
    assert 0 < np.count_nonzero(emission) < emission.size
    assert f"{len(crf.state_features_)} of {emission.size} state features are non-zero" in printed


def test_features_are_python_crfsuites_attribute_names(tutorial):
    """The dicts' attributes as python-crfsuite names them (k:v for strings, k for flags)."""
    ns, _ = tutorial
    crf = ns["crf"]
    first = ns["X_train"][0][0]
    assert f"word.lower():{first['word.lower()']}" in crf.attributes_
    assert "BOS" in crf.attributes_ and "bias" in crf.attributes_


def _weighted_f1_by_counting(y_true, y_pred, labels):
    t = [lab for seq in y_true for lab in seq]
    p = [lab for seq in y_pred for lab in seq]
    total, weighted = 0, 0.0
    for lab in labels:
        tp = sum(a == lab and b == lab for a, b in zip(t, p))
        n_true, n_pred = t.count(lab), p.count(lab)
        prec = tp / n_pred if n_pred else 0.0
        rec = tp / n_true if n_true else 0.0
        f1 = 2 * prec * rec / (prec + rec) if prec + rec else 0.0
        weighted += n_true * f1
        total += n_true
    return weighted / total


def test_flat_f1_score_is_the_weighted_f1_of_the_flattened_labels(tutorial):
    ns, _ = tutorial
    labels, y_test, y_pred = ns["labels"], ns["y_test"], ns["y_pred"]
    got = ns["flat_f1_score"](y_test, y_pred, average="weighted", labels=labels)
    assert got == pytest.approx(_weighted_f1_by_counting(y_test, y_pred, labels), abs=1e-12)
    assert got > 0.2  # 300 sentences already find entities (all-'O' would score 0)
    assert "O" not in labels and sorted(labels) == sorted(set(ns["crf"].classes_) - {"O"})


def test_top_features_are_the_largest_weights(tutorial):
    """most_common of the Counters = the largest entries of the weight matrices."""
    ns, _ = tutorial
    crf = ns["crf"]
    model, labels = crf.model_, list(crf.classes_)
    top = ns["states"].most_common(8)
    flat = model.emission.ravel()
    order = np.argsort(-flat, kind="stable")[:8]
    A = model.emission.shape[1]
    assert [w for _, w in top] == pytest.approx(flat[order].tolist(), abs=0)
    expected = {(model.attributes[j % A], labels[j // A]) for j in order}
    assert {key for key, _ in top} == expected
    bottom = ns["states"].most_common()[-8:]
    assert [w for _, w in bottom] == pytest.approx(np.sort(flat[flat != 0])[:8][::-1].tolist())
    trans = Counter(ns["transitions"])
    assert len(trans) == np.count_nonzero(model.transition)
    a, b = np.unravel_index(np.argmax(model.transition), model.transition.shape)
    assert trans.most_common(1)[0] == ((labels[a], labels[b]), model.transition[a, b])
