"""Synthetic CRF problems with a planted model: the embedded default and test workhorse.

Token embeddings are random (binary pixels for ``dense=True``, a few attribute ids per
token otherwise); weights ``w_true`` are drawn at random; labels are then sampled exactly
from p(y | x; w_true) (chain sampling from the model's own marginals). Learning is
therefore possible and the Bayes error is known to be below the error of guessing.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from crfopt.core import duality
from crfopt.core.problem import CRFProblem
from crfopt.kernels.arrays import Sequences


def _embeddings(
    rng: np.random.Generator, lengths: np.ndarray, attributes: int, density: float, dense: bool
) -> dict[str, np.ndarray]:
    N = int(lengths.sum())
    if dense:
        return {"dense": (rng.random((N, attributes)) < density).astype(np.float64)}
    # At least one active attribute per token; ids drawn with replacement, so a repeated
    # id becomes multiplicity 2 (the §1.1 duplicate convention gets exercised).
    active = np.maximum(1, rng.poisson(density * attributes, size=N))
    indptr = np.zeros(N + 1, dtype=np.int64)
    np.cumsum(active, out=indptr[1:])
    # Zipf-like popularity so some attributes are frequent, as words are.
    popularity = 1.0 / np.arange(1, attributes + 1) ** 0.8
    popularity /= popularity.sum()
    perm = rng.permutation(attributes)
    ids = perm[rng.choice(attributes, size=int(indptr[-1]), p=popularity)]
    return {"indptr": indptr, "indices": ids.astype(np.int64)}


def _sample_labels(problem: CRFProblem, w: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Exact samples from p(y | x; w): y_1 ~ μ_1, then y_{t+1} ~ μ_{t,t+1}(y_t, ·) / μ_t(y_t)."""
    mu, _ = duality.model_marginals(problem, w)
    offsets = problem.data.offsets
    lengths = np.diff(offsets)
    starts = offsets[:-1]
    n = len(lengths)
    y = np.empty(int(offsets[-1]), dtype=np.int64)

    def draw(log_p: np.ndarray) -> np.ndarray:
        p = np.exp(log_p - log_p.max(axis=1, keepdims=True))
        cdf = np.cumsum(p, axis=1)
        u = rng.random(len(p)) * cdf[:, -1]
        return np.minimum((cdf < u[:, None]).sum(axis=1), p.shape[1] - 1)

    y[starts] = draw(mu.log_nodes[starts])
    seq_ids = np.arange(n)
    for t in range(1, int(lengths.max())):
        alive = seq_ids[lengths > t]
        edge = starts[alive] - alive + t - 1
        prev = y[starts[alive] + t - 1]
        y[starts[alive] + t] = draw(mu.log_edges[edge, prev, :])
    return y


def make_synthetic(
    n: int = 200,
    labels: int = 4,
    attributes: int = 30,
    length: float = 6.0,
    density: float = 0.1,
    *,
    dense: bool = False,
    seed: int = 0,
    n_test: int | None = None,
    lam: float | None = None,
    bias: bool = True,
    scale: float = 1.0,
) -> CRFProblem:
    """A CRF problem with labels sampled from a planted model.

    Parameters
    ----------
    n : int
        Training sequences.
    labels : int
        K.
    attributes : int
        A, the embedding size.
    length : float
        Mean sequence length (lengths are 1 + Poisson(length - 1)).
    density : float
        Fraction of attributes active per token (dense: pixel probability; sparse:
        expected active count is ``density * attributes``, at least one).
    dense : bool
        Dense binary embeddings (OCR-like) instead of sparse attribute ids.
    seed : int
        Everything is a deterministic function of the arguments.
    n_test : int, optional
        Test sequences drawn from the same model; default ``n // 4`` (at least 1).
    lam : float, optional
        λ; default 1/n.
    bias : bool
        Include the bias block.
    scale : float
        Scale of the planted weights; larger means an easier, more deterministic task.
    """
    if n < 1 or labels < 1 or attributes < 1:
        raise ValueError("n, labels and attributes must be positive")
    if not 0.0 < density <= 1.0:
        raise ValueError("density must lie in (0, 1]")
    if length < 1:
        raise ValueError("length must be at least 1")
    rng = np.random.default_rng(np.random.PCG64(seed))
    n_test = max(1, n // 4) if n_test is None else int(n_test)

    def lengths_of(count: int) -> np.ndarray:
        return 1 + rng.poisson(length - 1.0, size=count).astype(np.int64)

    tr_len = lengths_of(n)
    te_len = lengths_of(n_test)
    tr_emb = _embeddings(rng, tr_len, attributes, density, dense)
    te_emb = _embeddings(rng, te_len, attributes, density, dense)
    active = max(1.0, density * attributes)

    def placeholder(lens: np.ndarray, emb: dict[str, np.ndarray]) -> Sequences:
        return Sequences(lengths=lens, labels=np.zeros(int(lens.sum()), dtype=np.int64), **emb)

    draft = CRFProblem(
        placeholder(tr_len, tr_emb),
        n_labels=labels,
        n_attributes=attributes,
        test=placeholder(te_len, te_emb) if n_test else None,
        bias=bias,
    )
    blocks_shape = draft.unpack(draft.zeros())
    w_true = draft.zeros()
    blocks = draft.unpack(w_true)
    blocks.emission[...] = rng.normal(
        0.0, scale * 2.0 / np.sqrt(active), blocks_shape.emission.shape
    )
    if bias:
        blocks.bias[...] = rng.normal(0.0, 0.5 * scale, blocks.bias.shape)  # type: ignore[index]
    blocks.transition[...] = rng.normal(0.0, scale, blocks.transition.shape)
    y_train = _sample_labels(draft, w_true, rng)
    test_problem = CRFProblem(
        placeholder(te_len, te_emb), n_labels=labels, n_attributes=attributes, bias=bias
    )
    y_test = _sample_labels(test_problem, w_true, rng)

    meta: dict[str, Any] = {
        "generator": "crfopt.core.synthetic.make_synthetic",
        "params": {
            "n": n,
            "labels": labels,
            "attributes": attributes,
            "length": length,
            "density": density,
            "dense": dense,
            "seed": seed,
            "n_test": n_test,
            "bias": bias,
            "scale": scale,
        },
    }
    return CRFProblem(
        Sequences(lengths=tr_len, labels=y_train, **tr_emb),
        n_labels=labels,
        n_attributes=attributes,
        lam=lam,
        test=Sequences(lengths=te_len, labels=y_test, **te_emb),
        bias=bias,
        label_names=[f"L{k}" for k in range(labels)],
        name="synthetic",
        metadata=meta,
    )
