"""The compiled kernels and the pure-NumPy kernels agree to 1e-10 (DESIGN.md)."""

from __future__ import annotations

import numpy as np
import pytest

import crfopt
from crfopt import _kernels_numpy as NP
from crfopt._jit import JIT_ENABLED

pytestmark = pytest.mark.skipif(not JIT_ENABLED, reason="needs the JIT (CRFOPT_DISABLE_JIT set)")

TOL = {"atol": 1e-10, "rtol": 1e-10}


@pytest.fixture(scope="module", params=["sparse", "dense", "nobias"])
def problem(request):
    if request.param == "dense":
        return crfopt.make_synthetic(
            n=60, labels=5, attributes=16, length=7, dense=True, density=0.3, seed=8
        )
    if request.param == "nobias":
        return crfopt.make_synthetic(n=60, labels=3, attributes=40, length=4, bias=False, seed=9)
    return crfopt.make_synthetic(n=60, labels=6, attributes=50, length=9, density=0.08, seed=7)


def _jit():
    from crfopt import _kernels_jit

    return _kernels_jit


def test_per_sequence_kernels_agree(problem):
    JT = _jit()
    rng = np.random.default_rng(0)
    K = problem.n_labels
    w = rng.normal(scale=2.0, size=problem.dim)
    c1 = np.zeros(7, dtype=np.int64)
    c2 = np.zeros(7, dtype=np.int64)
    for i in range(problem.n):
        T = int(problem.data.offsets[i + 1] - problem.data.offsets[i])
        edges = rng.normal(size=(max(T - 1, 0), K, K))
        outs = []
        for impl, c in ((JT, c1), (NP, c2)):
            ln, le = np.empty((T, K)), np.empty((max(T - 1, 0), K, K))
            z, nll = impl.oracle(problem.data, c, i, w, ln, le)
            nodes, esum = np.empty((T, K)), np.empty((K, K))
            z2, nll2 = impl.oracle_sums(problem.data, c, i, w, nodes, esum)
            z3, nll3 = impl.forward(problem.data, c, i, w)
            unary = np.empty((T, K))
            impl.unary_scores(problem.data, i, w, unary)
            ln3, le3 = np.empty((T, K)), np.empty((max(T - 1, 0), K, K))
            z4 = impl.oracle_scores(problem.data, c, i, unary, edges, ln3, le3)
            z5 = impl.forward_scores(
                problem.data, c, i, unary, impl.transition_matrix(problem.data, w)
            )
            lo, hi = impl.support_bounds(problem.data, i)
            E_loc = np.empty((hi - lo, K))
            impl.expected_emission(problem.data, i, nodes - 0.5, E_loc)
            loc_sc = np.empty((T, K))
            impl.local_scores(problem.data, i, E_loc, loc_sc)
            dot = impl.dot_local(problem.data, i, w, E_loc, esum)
            w_copy = w.copy()
            impl.add_local(problem.data, i, w_copy, 0.3, E_loc, esum)
            H = impl.chain_entropy(ln, le, T, K)
            kl = impl.chain_kl(ln3, le3, ln, le, T, K)
            vit = np.empty(T, dtype=np.int64)
            impl.chain_viterbi(unary, impl.transition_matrix(problem.data, w), T, K, vit)
            outs.append(
                (
                    z,
                    nll,
                    ln,
                    le,
                    z2,
                    nll2,
                    nodes,
                    esum,
                    z3,
                    nll3,
                    z4,
                    ln3,
                    le3,
                    z5,
                    E_loc,
                    loc_sc,
                    dot,
                    w_copy,
                    H,
                    kl,
                    vit,
                )
            )
        for a, b in zip(*outs):
            np.testing.assert_allclose(a, b, **TOL)
    np.testing.assert_array_equal(c1, c2)


def test_batch_kernels_agree(problem):
    JT = _jit()
    rng = np.random.default_rng(1)
    w = rng.normal(scale=1.5, size=problem.dim)
    tr = problem._get_transpose()
    kd = problem.data
    res = []
    for impl in (JT, NP):
        g = np.empty(problem.dim)
        v = impl.batch_value_grad(kd, tr, w, True, g)
        v2 = impl.batch_value_grad(kd, tr, w, False, np.empty(0))
        mu = problem.new_dual()
        logz = np.empty(problem.n)
        impl.batch_log_marginals(kd, w, mu.log_nodes, mu.log_edges, logz)
        H = np.empty(problem.n)
        impl.batch_entropy(kd, mu.log_nodes, mu.log_edges, H)
        EF = np.empty(problem.dim)
        impl.batch_expected_features(kd, tr, mu.log_nodes, mu.log_edges, EF)
        nu = problem.new_dual()
        impl.batch_log_marginals(kd, 0.5 * w, nu.log_nodes, nu.log_edges, np.empty(problem.n))
        kl = np.empty(problem.n)
        impl.batch_kl(kd, mu.log_nodes, mu.log_edges, nu.log_nodes, nu.log_edges, kl)
        vit = np.empty(problem.n_tokens, dtype=np.int64)
        impl.batch_viterbi(kd, w, vit)
        res.append((v, g, v2, mu.log_nodes, mu.log_edges, logz, H, EF, kl, vit))
    for a, b in zip(*res):
        np.testing.assert_allclose(a, b, **TOL)


def test_oracle_marginals_gives_both_forms(problem):
    JT = _jit()
    rng = np.random.default_rng(3)
    K = problem.n_labels
    w = rng.normal(scale=1.0, size=problem.dim)
    c = np.zeros(7, dtype=np.int64)
    for i in range(0, problem.n, 7):
        T = int(problem.data.offsets[i + 1] - problem.data.offsets[i])
        outs = []
        for impl in (JT, NP):
            ln, le = np.empty((T, K)), np.empty((max(T - 1, 0), K, K))
            nd, ed = np.empty((T, K)), np.empty((max(T - 1, 0), K, K))
            z, nll = impl.oracle_marginals(problem.data, c, i, w, ln, le, nd, ed)
            np.testing.assert_allclose(nd, np.exp(ln), rtol=1e-12, atol=1e-300)
            np.testing.assert_allclose(ed, np.exp(le), rtol=1e-12, atol=1e-300)
            outs.append((z, nll, ln, le, nd, ed))
        for a, b in zip(*outs):
            np.testing.assert_allclose(a, b, **TOL)
    assert c[0] == 2 * len(range(0, problem.n, 7))
