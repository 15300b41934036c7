"""KL divergence and entropy of chain marginals given in linear and log form
(``kernels.chain_kl_linlog`` / ``chain_entropy_linlog``, docs/algorithms.md §1.3, §5.3)
against brute-force enumeration of every label sequence of a tiny chain, for both the
compiled and the NumPy twin."""

from __future__ import annotations

import inspect
import itertools

import numpy as np
import pytest

from crfopt import kernels
from crfopt.kernels import _numpy as _kernels_numpy
from crfopt.kernels.jit import JIT_ENABLED

IMPLS = [pytest.param(_kernels_numpy, id="numpy")]
if JIT_ENABLED:
    from crfopt.kernels import _numba as _kernels_jit

    IMPLS.insert(0, pytest.param(_kernels_jit, id="jit"))

NAMES = ("chain_kl_linlog", "chain_entropy_linlog")


def _chain(rng, T, K, zeros):
    """A Gibbs chain on random scores, by enumeration: the joint over all K^T labelings,
    and its node / edge marginals (linear and log) in buffers larger than T×K, as the
    optimizers' scratch tables are. ``zeros`` forbids that many random transitions
    (score -inf), so some marginals are exactly 0."""
    unary = rng.normal(scale=1.5, size=(T, K))
    edges = rng.normal(scale=1.5, size=(max(T - 1, 1), K, K))
    for _ in range(zeros):
        t, k, l = rng.integers(max(T - 1, 1)), rng.integers(K), rng.integers(K)
        edges[t, k, l] = -np.inf
    ys = list(itertools.product(range(K), repeat=T))
    scores = np.array(
        [
            unary[np.arange(T), y].sum() + sum(edges[t, y[t], y[t + 1]] for t in range(T - 1))
            for y in ys
        ]
    )
    joint = np.exp(scores - np.logaddexp.reduce(scores))
    L, Kb = T + 2, K + 1  # oversized buffers: only [:T, :K] may be read
    nodes = np.full((L, Kb), np.nan)
    pairs = np.full((L, Kb, Kb), np.nan)
    nodes[:T, :K] = 0.0
    pairs[: T - 1, :K, :K] = 0.0
    for y, p in zip(ys, joint, strict=True):
        for t in range(T):
            nodes[t, y[t]] += p
        for t in range(T - 1):
            pairs[t, y[t], y[t + 1]] += p
    with np.errstate(divide="ignore", invalid="ignore"):
        return dict(joint=joint, n=nodes, e=pairs, ln=np.log(nodes), le=np.log(pairs))


def _xlogy(p, lp, lq):
    with np.errstate(invalid="ignore"):  # 0 · (-inf): masked out, 0 log 0 = 0
        return float(np.sum(np.where(p > 0, p * (lp - lq), 0.0)))


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("T,K,zeros", [(1, 3, 0), (2, 2, 0), (3, 3, 0), (4, 2, 2), (3, 3, 4)])
def test_kl_and_entropy_match_enumeration(impl, T, K, zeros):
    rng = np.random.default_rng(100 * T + 10 * K + zeros)
    for _ in range(3):
        p = _chain(rng, T, K, zeros)
        q = _chain(rng, T, K, 0)  # full support: KL(p ‖ q) is finite
        with np.errstate(divide="ignore", invalid="ignore"):
            lp, lq = np.log(p["joint"]), np.log(q["joint"])
        kl_true = _xlogy(p["joint"], lp, lq)
        h_true = -_xlogy(p["joint"], lp, 0.0)
        kl = impl.chain_kl_linlog(p["n"], p["e"], p["ln"], p["le"], q["ln"], q["le"], T, K)
        h = impl.chain_entropy_linlog(p["n"], p["e"], p["ln"], p["le"], T, K)
        assert kl == pytest.approx(kl_true, rel=1e-10, abs=1e-12)
        assert h == pytest.approx(h_true, rel=1e-10, abs=1e-12)
        assert kl >= 0.0 and h >= 0.0
        # KL(p ‖ p) = 0 and KL(q ‖ p) where p has zeros is +inf
        assert impl.chain_kl_linlog(
            p["n"], p["e"], p["ln"], p["le"], p["ln"], p["le"], T, K
        ) == pytest.approx(0.0, abs=1e-14)
        if zeros:
            assert np.any(p["joint"] == 0)  # the case tests 0 log 0 = 0
            assert (
                impl.chain_kl_linlog(q["n"], q["e"], q["ln"], q["le"], p["ln"], p["le"], T, K)
                == np.inf
            )


@pytest.mark.parametrize("name", NAMES)
def test_twins_share_signature_and_match_the_log_form(name):
    """Same name and signature in both modules, exported by crfopt.kernels, and the same
    values as the log-only kernels chain_kl / chain_entropy on the same marginals."""
    fn_np = getattr(_kernels_numpy, name)
    assert name in kernels.__all__ and callable(getattr(kernels, name))
    if JIT_ENABLED:
        fn_jit = getattr(_kernels_jit, name)
        assert inspect.signature(fn_jit.py_func) == inspect.signature(fn_np)
    rng = np.random.default_rng(7)
    for T, K in [(1, 4), (5, 3), (6, 4)]:
        p, q = _chain(rng, T, K, 0) if T < 6 else _chain(rng, T, K, 3), _chain(rng, T, K, 0)
        if name == "chain_kl_linlog":
            args = (p["n"], p["e"], p["ln"], p["le"], q["ln"], q["le"], T, K)
            ref = kernels.chain_kl(p["ln"], p["le"], q["ln"], q["le"], T, K)
        else:
            args = (p["n"], p["e"], p["ln"], p["le"], T, K)
            ref = kernels.chain_entropy(p["ln"], p["le"], T, K)
        got = [fn_np(*args)] + ([getattr(_kernels_jit, name)(*args)] if JIT_ENABLED else [])
        for g in got:
            assert g == pytest.approx(ref, rel=1e-10, abs=1e-12)
