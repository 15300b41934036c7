"""A trained model's decoding (the csr_* kernels behind Model.viterbi and
Model.node_marginals): against brute-force enumeration, against the problem's own
decoding, and unchanged by pruning the attributes whose weights are all zero."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import crfopt
from crfopt.apps.model import Model
from crfopt.bench.evaluator import Evaluator

from conftest import enumerate_sequence, tiny_problem


def csr_of(X: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(indptr, indices, values) of the non-zero entries of a dense N × A matrix."""
    rows, cols = np.nonzero(X)
    indptr = np.zeros(len(X) + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=len(X)), out=indptr[1:])
    return indptr, cols, X[rows, cols]


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("scale", [1.0, 60.0])  # 60: scores span > 300 nats, log space
def test_viterbi_and_marginals_are_the_brute_force_ones(bias, scale):
    problem, X = tiny_problem(4, dense=False, K=3, A=6, bias=bias, lengths=[1, 2, 4, 3, 5])
    w = np.random.default_rng(1).normal(scale=scale, size=problem.dim)
    model = Model.from_problem(problem, w)
    lengths = np.diff(problem.data.offsets)
    indptr, indices, values = csr_of(X)
    labels = model.viterbi(indptr, indices, values, lengths)
    nodes = model.node_marginals(indptr, indices, values, lengths)
    for i in range(problem.n):
        s, e = problem.data.offsets[i], problem.data.offsets[i + 1]
        _, want_nodes, _, _, ys, _, scores = enumerate_sequence(problem, X, i, w)
        np.testing.assert_array_equal(labels[s:e], ys[np.argmax(scores)])
        np.testing.assert_allclose(nodes[s:e], want_nodes, rtol=1e-9, atol=1e-12)


def test_decoding_is_the_problems_to_the_last_bit():
    """Model.viterbi decodes as CRFProblem.predict (same score sums) and its marginals are
    the evaluator's ν(w), also with real-valued attributes and one listed twice."""
    rng = np.random.default_rng(5)
    problem = crfopt.make_synthetic(n=80, labels=5, attributes=40, length=7, seed=5)
    w = rng.normal(scale=2.0, size=problem.dim)
    model = Model.from_problem(problem, w)
    lengths = np.diff(problem.data.offsets)
    N = int(lengths.sum())
    indptr, indices, values = [0], [], []
    for _ in range(N):
        ids = sorted(rng.choice(40, size=int(rng.integers(0, 6)), replace=True).tolist())
        indices += ids
        values += rng.uniform(-2, 2, size=len(ids)).tolist()
        indptr.append(len(indices))
    indptr, indices, values = np.array(indptr), np.array(indices, dtype=np.int64), np.array(values)
    twin = model.problem_for(indptr, indices, values, lengths)
    ev = Evaluator(twin)
    np.testing.assert_array_equal(
        model.viterbi(indptr, indices, values, lengths),
        ev.predict(model.weights_for(twin), "train"),
    )
    mu, _ = ev.model_marginals(model.weights_for(twin))
    np.testing.assert_allclose(
        model.node_marginals(indptr, indices, values, lengths),
        np.exp(mu.log_nodes),
        rtol=1e-12,
        atol=1e-14,
    )


def test_bad_sequences_are_refused_with_the_reason():
    problem, X = tiny_problem(0, dense=False, K=3, A=5)
    model = Model.from_problem(problem, problem.zeros())
    indptr, indices, values = csr_of(X)
    lengths = np.diff(problem.data.offsets)
    with pytest.raises(ValueError, match=r"attribute ids must lie in 0\.\.4"):
        model.viterbi(indptr, indices + 5, values, lengths)
    with pytest.raises(ValueError, match="N\\+1 entries"):
        model.viterbi(indptr[:-1], indices, values, lengths)
    with pytest.raises(ValueError, match="finite"):
        model.node_marginals(indptr, indices, values * np.inf, lengths)


# ----------------------------------------------------------------------------- pruning


def l1_model() -> tuple[crfopt.CRF, list, list]:
    """An ℓ1-trained estimator: rare attributes end with all weights zero."""
    rng = np.random.default_rng(2)
    words = [f"w{j}" for j in range(60)]
    X, y = [], []
    for _ in range(120):
        T = int(rng.integers(2, 7))
        sent = [{"w": str(rng.choice(words)), "b": bool(rng.random() < 0.5)} for _ in range(T)]
        X.append(sent)
        y.append(["A" if int(tok["w"][1:]) % 3 == 0 or tok["b"] else "B" for tok in sent])
    crf = crfopt.CRF(algorithm="lbfgs", c1=2.0, c2=0.01, max_iterations=200).fit(X, y)
    return crf, X, y


def test_pruning_keeps_every_prediction_and_marginal(tmp_path):
    crf, X, _ = l1_model()
    full = crf.model_
    zero = ~np.any(full.emission != 0, axis=0)
    assert 0 < zero.sum() < len(full.attributes)  # ℓ1 zeroed some attributes, not all
    crf.save(tmp_path / "pruned.crfopt")
    full.save(tmp_path / "full.crfopt", prune=False)
    small = crfopt.CRF.load(tmp_path / "pruned.crfopt")
    whole = crfopt.CRF.load(tmp_path / "full.crfopt")
    assert small.model_.attributes == [a for a, z in zip(full.attributes, zero) if not z]
    assert whole.model_.attributes == full.attributes
    assert small.model_.training["pruned_attributes"] == int(zero.sum())
    assert "pruned_attributes" not in whole.model_.training
    assert (tmp_path / "pruned.crfopt").stat().st_size < (tmp_path / "full.crfopt").stat().st_size
    # the attributes left out add nothing to any score: identical outputs, to the bit
    assert small.predict(X).tolist() == whole.predict(X).tolist() == crf.predict(X).tolist()
    marginals = [c.predict_marginals(X).tolist() for c in (small, whole, crf)]
    assert marginals[0] == marginals[1] == marginals[2]
    assert full.pruned().pruned().attributes == small.model_.attributes
    assert small.model_.emission.flags.f_contiguous
    assert small.model_.pruned() is small.model_  # nothing left to prune


def test_pruned_cli_models_tag_as_the_whole_ones(tmp_path):
    from click.testing import CliRunner
    from test_tagging import write_corpus

    from crfopt.apps.cli import main
    from crfopt.apps.tagging import read_input, tag_corpus

    write_corpus(tmp_path / "train.txt", 150, seed=3)
    write_corpus(tmp_path / "test.txt", 40, seed=4)
    args = ["train", "--problem", str(tmp_path / "train.txt"), "--template", "chunking",
            "--optimizer", "owlqn", "--passes", "40", "--l1", "0.02", "--quiet"]  # fmt: skip
    res = CliRunner().invoke(main, [*args, "--model", str(tmp_path / "p.crfopt")])
    assert res.exit_code == 0, res.output
    assert "with all weights zero left out" in res.output
    res = CliRunner().invoke(main, [*args, "--no-prune", "--model", str(tmp_path / "f.crfopt")])
    assert res.exit_code == 0, res.output
    pruned, whole = Model.load(tmp_path / "p.crfopt"), Model.load(tmp_path / "f.crfopt")
    assert len(pruned.attributes) < len(whole.attributes)
    corpus, _ = read_input(whole, tmp_path / "test.txt")
    assert tag_corpus(pruned, corpus) == tag_corpus(whole, corpus)


def test_models_load_in_either_memory_order_and_pickle_without_their_tables(tmp_path):
    problem, _ = tiny_problem(3, dense=False, K=3, A=5)
    w = np.random.default_rng(0).normal(size=problem.dim)
    model = Model.from_problem(problem, w)
    assert model.emission.flags.f_contiguous  # emission.T is what the kernels read
    # a file whose emission was written row-major (as before) reads the same
    c_order = Model(
        model.labels, model.attributes, np.ascontiguousarray(model.emission), model.bias,
        model.transition,
    )  # fmt: skip
    arrays = {k: getattr(model, k) for k in ("emission", "transition")}
    np.testing.assert_array_equal(c_order.emission, arrays["emission"])
    back = Model.load(c_order.save(tmp_path / "c.crfopt", prune=False))
    np.testing.assert_array_equal(back.emission, model.emission)
    assert back.emission.flags.f_contiguous
    assert model.vocabulary() is model.vocabulary()  # built once
    assert "_lookup_cache" in model.__dict__
    clone = pickle.loads(pickle.dumps(model))
    assert "_lookup_cache" not in clone.__dict__
    assert clone.vocabulary()["x0"] == 0
    # a new attribute list (of the same length) is a new dictionary
    model.attributes = [f"y{j}" for j in range(len(model.attributes))]
    assert "y0" in model.vocabulary() and "x0" not in model.vocabulary()
