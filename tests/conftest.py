"""Shared fixtures: tiny hand-written problems and brute-force references.

The brute-force helpers here build F(x, y) directly from the raw token embeddings, in
the paper's block layout (emission K × A, bias K × 3, transition K × K), independently
of the kernels' virtual bias attributes, and enumerate all K^T labelings.
"""

from __future__ import annotations

import contextlib
import itertools
import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import crfopt
from crfopt import Sequences
from crfopt.bench.evaluator import Evaluator

REPO = Path(__file__).resolve().parents[1]
DATA_DIR = Path(os.environ.get("CRFOPT_DATA", REPO.parent / "shared" / "datasets"))
# The loaders read CRFOPT_DATA; give them the same default as the tests.
os.environ.setdefault("CRFOPT_DATA", str(DATA_DIR))
# No test may reach the network: a missing file is an error, not a download (tests of the
# download path unset this and serve files from a local HTTP server).
os.environ.setdefault("CRFOPT_OFFLINE", "1")


@pytest.fixture(scope="session", autouse=True)
def _isolated_cache(tmp_path_factory):
    """Every test writes featurizations and P* into a cache of this session, never the user's.

    One directory for the session (not per test) so a dataset is featurized once per run;
    tests that need an empty cache set ``CRFOPT_CACHE`` themselves. ``CRFOPT_TEST_CACHE``
    names a persistent directory instead (the slow env reuses the certified OCR optimum).
    """
    old = os.environ.get("CRFOPT_CACHE")
    path = os.environ.get("CRFOPT_TEST_CACHE") or str(tmp_path_factory.mktemp("crfopt-cache"))
    os.environ["CRFOPT_CACHE"] = path
    yield Path(path)
    if old is None:
        os.environ.pop("CRFOPT_CACHE", None)
    else:
        os.environ["CRFOPT_CACHE"] = old


@contextlib.contextmanager
def one_kernel_thread() -> Iterator[None]:
    """numba's kernels on one thread inside the block (nothing to do on the NumPy path)."""
    from crfopt.kernels.jit import JIT_ENABLED

    if not JIT_ENABLED:
        yield
        return
    import numba

    old = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        yield
    finally:
        numba.set_num_threads(old)


def pytest_collection_modifyitems(config, items):
    """Skip tests that need the raw data files when CRFOPT_DATA has none."""
    if DATA_DIR.is_dir():
        return
    skip = pytest.mark.skip(reason=f"raw data not found at {DATA_DIR} (set CRFOPT_DATA)")
    for item in items:
        if "data" in item.keywords:
            item.add_marker(skip)


def random_sequences(
    rng: np.random.Generator,
    lengths: list[int],
    K: int,
    A: int,
    *,
    dense: bool,
    density: float = 0.4,
) -> Sequences:
    """Random sequences with real-valued dense or sparse (duplicate-free) embeddings."""
    lengths_arr = np.asarray(lengths, dtype=np.int64)
    N = int(lengths_arr.sum())
    labels = rng.integers(0, K, size=N)
    if dense:
        X = rng.normal(size=(N, A)) * (rng.random((N, A)) < density + 0.3)
        return Sequences(lengths=lengths_arr, labels=labels, dense=X)
    indptr = [0]
    indices: list[int] = []
    values: list[float] = []
    for _ in range(N):
        k = int(rng.integers(1, max(2, int(A * density)) + 1))
        ids = rng.choice(A, size=min(k, A), replace=False)
        indices.extend(int(a) for a in ids)
        values.extend(rng.uniform(0.5, 1.5, size=len(ids)).tolist())
        indptr.append(len(indices))
    return Sequences(
        lengths=lengths_arr,
        labels=labels,
        indptr=np.asarray(indptr),
        indices=np.asarray(indices),
        values=np.asarray(values),
    )


def embeddings_of(seqs: Sequences, A: int) -> np.ndarray:
    """Dense N × A matrix of any Sequences (duplicates summed)."""
    if seqs.dense is not None:
        return np.asarray(seqs.dense, dtype=float)
    N = len(seqs.labels)
    X = np.zeros((N, A))
    vals = np.ones(len(seqs.indices)) if seqs.values is None else seqs.values
    for r in range(N):
        for p in range(seqs.indptr[r], seqs.indptr[r + 1]):
            X[r, seqs.indices[p]] += vals[p]
    return X


def feature_vector(problem: crfopt.CRFProblem, X_seq: np.ndarray, y: np.ndarray) -> np.ndarray:
    """F(x, y) in the problem's flat layout, built block by block from §1.1."""
    K, A = problem.n_labels, problem.n_attributes
    T = len(y)
    emission = np.zeros((K, A))
    bias = np.zeros((K, 3))
    trans = np.zeros((K, K))
    for t in range(T):
        emission[y[t]] += X_seq[t]
        bias[y[t], 0] += 1
    bias[y[0], 1] += 1
    bias[y[T - 1], 2] += 1
    for t in range(T - 1):
        trans[y[t], y[t + 1]] += 1
    return problem.pack(emission, bias if problem.bias else None, trans)


def enumerate_sequence(problem: crfopt.CRFProblem, X: np.ndarray, i: int, w: np.ndarray):
    """Brute force over all K^T labelings of sequence i of the training split.

    Returns (log Z, node marginals T×K, edge marginals (T-1)×K×K, E[F], all labelings,
    their probabilities, their scores).
    """
    offsets = problem.data.offsets
    s, e = int(offsets[i]), int(offsets[i + 1])
    T, K = e - s, problem.n_labels
    ys = np.array(list(itertools.product(range(K), repeat=T)))
    feats = np.array([feature_vector(problem, X[s:e], y) for y in ys])
    scores = feats @ w
    mx = scores.max()
    log_z = mx + np.log(np.exp(scores - mx).sum())
    p = np.exp(scores - log_z)
    nodes = np.zeros((T, K))
    edges = np.zeros((max(T - 1, 0), K, K))
    for y, py in zip(ys, p):
        nodes[np.arange(T), y] += py
        for t in range(T - 1):
            edges[t, y[t], y[t + 1]] += py
    return log_z, nodes, edges, p @ feats, ys, p, scores


def tiny_problem(
    seed: int,
    *,
    dense: bool,
    K: int = 3,
    A: int = 5,
    bias: bool = True,
    lengths: list[int] | None = None,
    lam: float | None = None,
):
    rng = np.random.default_rng(seed)
    if lengths is None:
        lengths = [int(v) for v in rng.integers(1, 6, size=6)]
    train = random_sequences(rng, lengths, K, A, dense=dense)
    test = random_sequences(rng, [3, 2, 4], K, A, dense=dense)
    problem = crfopt.CRFProblem(train, n_labels=K, n_attributes=A, test=test, bias=bias, lam=lam)
    return problem, embeddings_of(train, A)


@pytest.fixture
def hand_problem() -> crfopt.CRFProblem:
    """Three hand-written sentences, with a non-ASCII attribute name."""
    names = ["word=the", "word=café", "word=naïve", "suffix=é", "shape=Xx"]
    # tokens: (attribute ids), label
    sents = [
        [((0,), 0), ((1, 3), 1)],
        [((2, 3, 3), 2)],  # duplicate id 3: multiplicity 2
        [((4, 1), 1), ((0,), 0), ((2, 4), 2)],
    ]
    lengths, labels, indptr, indices = [], [], [0], []
    for sent in sents:
        lengths.append(len(sent))
        for ids, lab in sent:
            indices.extend(ids)
            indptr.append(len(indices))
            labels.append(lab)
    return crfopt.CRFProblem(
        Sequences(
            lengths=np.array(lengths),
            labels=np.array(labels),
            indptr=np.array(indptr),
            indices=np.array(indices),
        ),
        n_labels=3,
        n_attributes=len(names),
        attribute_names=names,
        label_names=["DET", "NOUN", "ADJ"],
        name="hand",
    )


@pytest.fixture(scope="session")
def small_sparse() -> crfopt.CRFProblem:
    return crfopt.make_synthetic(n=40, labels=4, attributes=25, length=5, seed=3)


@pytest.fixture(scope="session")
def small_dense() -> crfopt.CRFProblem:
    return crfopt.make_synthetic(
        n=30, labels=3, attributes=12, length=4, density=0.3, dense=True, seed=4
    )


def scipy_optimum(problem: crfopt.CRFProblem) -> np.ndarray:
    """w* by scipy's L-BFGS-B on the uncounted primal: the independent reference optimum
    the optimizer tests compare with (gtol 1e-12)."""
    import scipy.optimize

    res = scipy.optimize.minimize(
        Evaluator(problem).value_and_gradient,
        problem.zeros(),
        jac=True,
        method="L-BFGS-B",
        options={"maxiter": 5000, "ftol": 0.0, "gtol": 1e-12},
    )
    return res.x
