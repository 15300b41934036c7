"""The compiled kernels and the pure-NumPy kernels agree to 1e-10 (docs/algorithms.md §5.1).

The NumPy twin runs forward–backward in log space throughout; the compiled one uses
scaled linear-space messages and falls back to log space per sequence when a score
table spans more than LOG_SPAN_LIMIT nats, so both of its paths are compared here,
also mixed within one parallel batch.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import crfopt
from crfopt import kernels
from crfopt.core import duality
from crfopt.kernels import _numpy as NP
from crfopt.kernels.jit import JIT_ENABLED

needs_jit = pytest.mark.skipif(
    not JIT_ENABLED,
    reason="compares with the compiled kernels in this process (CRFOPT_DISABLE_JIT set)",
)

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
    from crfopt.kernels import _numba as _kernels_jit

    return _kernels_jit


@needs_jit
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
            # scores that are not θ(w) (as SAG's w = s·u gives them), so this is not
            # oracle_sums again
            nodes6, esum6 = np.empty((T, K)), np.empty((K, K))
            z6, nll6 = impl.oracle_sums_scores(
                problem.data,
                c,
                i,
                0.7 * unary,
                1.3 * impl.transition_matrix(problem.data, w),
                nodes6,
                esum6,
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
                    z6,
                    nll6,
                    nodes6,
                    esum6,
                )
            )
        for a, b in zip(*outs):
            np.testing.assert_allclose(a, b, **TOL)
    np.testing.assert_array_equal(c1, c2)


def _batch_outputs(impl, problem, w):
    """One twin's batch value with and without the gradient, log-marginals (as a dual μ)
    and expected features at w: what both batch-agreement tests compare."""
    tr = problem.transpose
    kd = problem.data
    g = np.empty(problem.dim)
    v = impl.batch_value_grad(kd, tr, w, True, g)
    v2 = impl.batch_value_grad(kd, tr, w, False, np.empty(0))
    mu = duality.new_dual(problem)
    logz = np.empty(problem.n)
    impl.batch_log_marginals(kd, w, mu.log_nodes, mu.log_edges, logz)
    EF = np.empty(problem.dim)
    impl.batch_expected_features(kd, tr, mu.log_nodes, mu.log_edges, EF)
    return v, g, v2, mu, logz, EF


@needs_jit
def test_batch_kernels_agree(problem):
    JT = _jit()
    rng = np.random.default_rng(1)
    w = rng.normal(scale=1.5, size=problem.dim)
    kd = problem.data
    res = []
    for impl in (JT, NP):
        v, g, v2, mu, logz, EF = _batch_outputs(impl, problem, w)
        H = np.empty(problem.n)
        impl.batch_entropy(kd, mu.log_nodes, mu.log_edges, H)
        nu = duality.new_dual(problem)
        impl.batch_log_marginals(kd, 0.5 * w, nu.log_nodes, nu.log_edges, np.empty(problem.n))
        kl = np.empty(problem.n)
        impl.batch_kl(kd, mu.log_nodes, mu.log_edges, nu.log_nodes, nu.log_edges, kl)
        vit = np.empty(problem.n_tokens, dtype=np.int64)
        impl.batch_viterbi(kd, w, vit)
        res.append((v, g, v2, mu.log_nodes, mu.log_edges, logz, H, EF, kl, vit))
    for a, b in zip(*res):
        np.testing.assert_allclose(a, b, **TOL)


@needs_jit
def test_local_gradient_agrees(problem):
    """Both twins assemble the same ∇ℓ_i, and ‖∇ℓ_i‖² to the last bit (SAG branches on it);
    both give its node residual D = ν_nodes − onehot(y_i) exactly."""
    JT = _jit()
    rng = np.random.default_rng(3)
    K = problem.n_labels
    w = rng.normal(scale=1.5, size=problem.dim)
    rows = max(
        int(hi - lo)
        for lo, hi in (kernels.support_bounds(problem.data, i) for i in range(problem.n))
    )
    T_max = int(np.diff(problem.data.offsets).max())
    c = np.zeros(7, dtype=np.int64)
    for i in range(problem.n):
        nodes, esum = np.empty((T_max, K)), np.empty((K, K))
        NP.oracle_sums(problem.data, c, i, w, nodes, esum)
        outs = []
        for impl in (JT, NP):
            work, truth = np.full((T_max, K), np.nan), np.full((K, K), np.nan)
            E_loc, trans = np.full((rows, K), np.nan), np.full((K, K), np.nan)
            before = nodes.copy()
            gn2 = impl.local_gradient(problem.data, i, nodes, esum, work, truth, E_loc, trans)
            np.testing.assert_array_equal(nodes, before)  # input left unchanged
            lo, hi = kernels.support_bounds(problem.data, i)
            outs.append((gn2, E_loc[: hi - lo].copy(), trans.copy()))
        (g1, E1, t1), (g2, E2, t2) = outs
        np.testing.assert_allclose(E1, E2, **TOL)
        np.testing.assert_allclose(t1, t2, **TOL)
        assert g1 == g2, (i, g1, g2)
        # independent truth: ‖∇ℓ_i‖² is the squared norm of the returned blocks
        assert g2 == pytest.approx(float(np.sum(E2**2) + np.sum(t2**2)), rel=1e-13)
        # node_residual: ν_i's node marginals minus the one-hot truth, in both twins
        s0, T = (
            int(problem.data.offsets[i]),
            int(problem.data.offsets[i + 1] - problem.data.offsets[i]),
        )
        want = nodes[:T] - np.eye(K)[problem.data.y[s0 : s0 + T]]
        for impl in (JT, NP):
            D = np.full((T_max, K), np.nan)
            assert impl.node_residual(problem.data, i, nodes, D) == T
            np.testing.assert_array_equal(D[:T], want)


@needs_jit
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


# ------------------------------------------------------------------------------ parity


def _public_functions(module) -> dict:
    """Functions (plain or numba dispatchers) with public names that ``module`` defines,
    or, for a package (the compiled twin), that its modules define and it re-exports."""
    inside = (module.__name__, *(f"{module.__name__}.{m}" for m in getattr(module, "MODULES", ())))
    return {
        name: fn
        for name, fn in vars(module).items()
        if not name.startswith("_")
        and callable(fn)
        and not isinstance(fn, type)
        and getattr(fn, "__module__", None) in inside
    }


def _parameters(fn) -> list[tuple[str, object]]:
    sig = inspect.signature(getattr(fn, "py_func", fn))  # a dispatcher's Python function
    return [(p.name, p.kind) for p in sig.parameters.values()]


def test_twins_export_the_same_functions_with_the_same_signatures():
    """Every function either twin defines exists in the other with the same parameters.

    crfopt.kernels re-exports the per-sequence API and crfopt.core.problem calls the batch_*
    functions of whichever module is selected, so a name or parameter present in one
    twin only would break one mode only. Reading signatures compiles nothing.
    """
    pytest.importorskip("numba")
    from crfopt.kernels import _numba as JT

    jit_fns, np_fns = _public_functions(JT), _public_functions(NP)
    assert sorted(jit_fns) == sorted(np_fns)
    differ = {
        name: (_parameters(jit_fns[name]), _parameters(np_fns[name]))
        for name in jit_fns
        if _parameters(jit_fns[name]) != _parameters(np_fns[name])
    }
    assert not differ, differ
    # what crfopt.kernels re-exports is exactly the selected twin's function
    impl = JT if JIT_ENABLED else NP
    exported = [n for n in kernels.__all__ if callable(getattr(kernels, n))]
    assert set(exported) <= set(np_fns)
    for name in exported:
        assert getattr(kernels, name) is getattr(impl, name), name


# ------------------------------------------------------------- log space and mixed batch


def _row_spans(problem, w) -> tuple[np.ndarray, float]:
    """Per sequence, the largest max - min of a unary row; and the transitions' span."""
    theta = NP.all_unary(problem.data, w)
    row = np.ptp(theta, axis=1)
    off = problem.data.offsets
    seq = np.array([row[off[i] : off[i + 1]].max() for i in range(problem.n)])
    return seq, float(np.ptp(NP.transition_matrix(problem.data, w)))


def _per_sequence_outputs(impl, problem, w, c, edge_scale):
    K = problem.n_labels
    trans = impl.transition_matrix(problem.data, w)
    rng = np.random.default_rng(5)
    outs = []
    for i in range(problem.n):
        T = int(problem.data.offsets[i + 1] - problem.data.offsets[i])
        E = max(T - 1, 0)
        ln, le = np.empty((T, K)), np.empty((E, K, K))
        r1 = impl.oracle(problem.data, c, i, w, ln, le)
        ln2, le2 = np.empty((T, K)), np.empty((E, K, K))
        nd2, ed2 = np.empty((T, K)), np.empty((E, K, K))
        r2 = impl.oracle_marginals(problem.data, c, i, w, ln2, le2, nd2, ed2)
        nd3, es3 = np.empty((T, K)), np.empty((K, K))
        r3 = impl.oracle_sums(problem.data, c, i, w, nd3, es3)
        unary = np.empty((T, K))
        impl.unary_scores(problem.data, i, w, unary)
        nd4, es4 = np.empty((T, K)), np.empty((K, K))
        r4 = impl.oracle_sums_scores(problem.data, c, i, unary, trans, nd4, es4)
        r5 = impl.forward(problem.data, c, i, w)
        r6 = impl.forward_scores(problem.data, c, i, unary, trans)
        edges = edge_scale * rng.normal(size=(E, K, K))
        ln7, le7 = np.empty((T, K)), np.empty((E, K, K))
        r7 = impl.oracle_scores(problem.data, c, i, unary, edges, ln7, le7)
        outs += [r1, ln, le, r2, ln2, le2, nd2, ed2, r3, nd3, es3, r4, nd4, es4, r5, r6]
        outs += [r7, ln7, le7]
    return outs


@needs_jit
@pytest.mark.parametrize("trigger", ["unary", "transitions"])
def test_log_space_path_agrees(problem, trigger):
    """Scores spanning > LOG_SPAN_LIMIT nats send every compiled oracle to log space."""
    JT = _jit()
    K, A = problem.n_labels, problem.n_kernel_attributes
    rng = np.random.default_rng(11)
    w = rng.normal(size=problem.dim)
    if trigger == "unary":
        w[: A * K] *= 2000.0  # every token has an active attribute: rows span ~1e3-1e4
    else:
        w[A * K :] *= 2000.0  # transitions span ~1e4, unary rows stay small
    spans, tspan = _row_spans(problem, w)
    if trigger == "unary":
        assert spans.min() > JT.LOG_SPAN_LIMIT and tspan <= JT.LOG_SPAN_LIMIT
    else:
        assert tspan > JT.LOG_SPAN_LIMIT and spans.max() <= JT.LOG_SPAN_LIMIT
    edge_scale = 2000.0 if trigger == "transitions" else 1.0
    c1, c2 = np.zeros(7, dtype=np.int64), np.zeros(7, dtype=np.int64)
    got = _per_sequence_outputs(JT, problem, w, c1, edge_scale)
    want = _per_sequence_outputs(NP, problem, w, c2, edge_scale)
    for j, (a, b) in enumerate(zip(got, want)):
        assert np.all(np.isfinite(np.asarray(a, dtype=float)) | np.isneginf(a)), j
        np.testing.assert_allclose(a, b, **TOL, err_msg=f"output {j}")
    np.testing.assert_array_equal(c1, c2)


def _mixed_weights(problem, JT) -> np.ndarray:
    """Small weights plus one large emission on an attribute that only some sequences
    have: those sequences go to log space, the others stay scaled, in one batch."""
    K = problem.n_labels
    rng = np.random.default_rng(12)
    base = 0.5 * rng.normal(size=problem.dim)
    for a in range(problem.n_kernel_attributes):
        w = base.copy()
        w[a * K] += 1000.0
        spans, _ = _row_spans(problem, w)
        logspace = spans > JT.LOG_SPAN_LIMIT
        # both kinds, and neighbours of different kinds (sequences of one parallel chunk)
        if 0.2 < logspace.mean() < 0.8 and np.any(logspace[1:] != logspace[:-1]):
            return w
    raise AssertionError("no attribute splits the sequences into scaled and log-space ones")


@needs_jit
def test_mixed_scaled_and_log_space_batch_agrees(problem):
    """The parallel batch kernels with some sequences scaled and some in log space.

    batch_value_grad sums the scaled sequences' pairwise marginals as one matrix product
    and adds the log-space ones per chunk; a wrong split or a lost chunk shows here.
    """
    JT = _jit()
    w = _mixed_weights(problem, JT)
    res = []
    for impl in (JT, NP):
        v, g, v2, mu, logz, EF = _batch_outputs(impl, problem, w)
        res.append((v, g, v2, mu.log_nodes, mu.log_edges, logz, EF))
    for j, (a, b) in enumerate(zip(*res)):
        np.testing.assert_allclose(a, b, **TOL, err_msg=f"output {j}")
    assert np.isclose(res[0][0], res[0][2], rtol=1e-12)  # with and without the gradient


@needs_jit
@pytest.mark.parametrize("K", [1, 2, 3, 4, 5, 7, 9, 26, 49])
def test_transition_span_is_exact_for_every_label_count(K):
    """The four-lane extrema scan (every oracle call's span test) returns exactly
    (max, max - min) whatever K mod 4 is and wherever the extremes sit."""
    from crfopt.kernels._numba import tables

    rng = np.random.default_rng(K)
    for trial in range(20):
        table = rng.normal(scale=10.0, size=(K, K))
        if trial % 2:  # an extreme in a remainder lane / the last column
            table[rng.integers(K), K - 1] = 1e3 * (1 if trial % 4 == 1 else -1)
        mx, span = tables.table_span(table, K)
        assert mx == table.max()
        assert span == table.max() - table.min()


@needs_jit
@pytest.mark.parametrize("K", [1, 2, 3, 5, 26])
def test_bonus_edge_maxima_are_the_per_table_scans_to_the_bit(K):
    """OEG's trial tables (base, plus a bonus on each position's truth pair) take their
    maxima and span from one scan of base where that is exact; the result must be the
    T - 1 scans' to the bit (zero signs included), in every case the shortcut declines:
    truth entries at base's minimum or maximum (unique and tied), a bonus that lands on
    base's maximum, negative and NaN bonuses, signed-zero extrema, NaN and inf in base."""
    from crfopt.kernels._numba import tables

    rng = np.random.default_rng(100 + K)
    T = 12

    def bits(x):
        return np.asarray(x, dtype=np.float64).reshape(-1).view(np.int64)

    cases = 0
    for trial in range(60):
        base = rng.normal(size=(K, K)).round(1)  # rounded: ties are common
        truth = rng.integers(K, size=T)
        kind = trial % 10
        if kind == 1:  # truth entries at base's minimum
            base[truth[0], truth[1]] = base.min() - 1.0
        elif kind == 2:  # ... and at its maximum
            base[truth[2], truth[3]] = base.max() + 1.0
        elif kind == 3:  # signed-zero extrema
            base = np.where(rng.random((K, K)) < 0.5, -0.0, 0.0) - np.abs(base) * (K > 1)
            base[truth[4], truth[5]] = 0.0
            base.flat[0] = -0.0
        elif kind == 4 and K > 1:
            base[rng.integers(K), rng.integers(K)] = np.nan
        elif kind == 5:
            base[truth[6], truth[7]] = np.inf
        elif kind == 6:
            base.flat[rng.integers(K * K)] = -np.inf
        with np.errstate(invalid="ignore"):  # inf - inf: a NaN bonus, covered anyway
            to_max = base.max() - base[truth[0], truth[1]]  # e lands on max base
        for bonus in (0.0, 0.1, 3.0, -0.2, np.nan, to_max):
            edges = np.repeat(base[None], T - 1, axis=0)
            with np.errstate(invalid="ignore"):  # inf + -inf: a NaN truth entry
                for t in range(T - 1):
                    edges[t, truth[t], truth[t + 1]] = base[truth[t], truth[t + 1]] + bonus
            want = np.zeros(T - 1)
            span_want = tables.table_maxima(edges, False, T, K, want)
            got = np.zeros(T - 1)
            span_got, mb = tables.bonus_table_maxima(edges, base, truth, T, K, got)
            assert np.array_equal(bits(got), bits(want)), (trial, bonus)
            assert bits(span_got) == bits(span_want), (trial, bonus)
            assert bits(mb) == bits(tables.table_span(base, K)[0])
            cases += 1
    assert cases == 360


@needs_jit
@pytest.mark.parametrize("K", [1, 2, 3, 4, 5, 7, 9, 26, 49])
def test_local_sums_agree_to_the_last_bit_for_every_label_count(K):
    """‖d‖² and ⟨w, d⟩ of a direction run in four running sums (columns k mod 4): both
    twins add in that order, so they agree exactly whatever K mod 4 is, and equal the
    correctly rounded sum (math.fsum) to rounding."""
    import math

    from crfopt.kernels import _numba as NB

    problem = crfopt.make_synthetic(n=6, labels=K, attributes=23, length=5, density=0.4, seed=K)
    data = problem.data
    rng = np.random.default_rng(K)
    w = rng.normal(size=problem.dim)
    U = NP.emission_matrix(data, w)
    W = NP.transition_matrix(data, w)
    for i in range(problem.n):
        lo, hi = kernels.support_bounds(data, i)
        E_loc = rng.normal(scale=3.0, size=(hi - lo + 2, K))  # rows past the support unread
        trans = rng.normal(size=(K, K))
        sq = NB.norm2_local(data, i, E_loc, trans)
        dot = NB.dot_local(data, i, w, E_loc, trans)
        assert sq == NP.norm2_local(data, i, E_loc, trans)
        assert dot == NP.dot_local(data, i, w, E_loc, trans)
        E = E_loc[: hi - lo]
        exact_sq = math.fsum(np.concatenate([(E**2).ravel(), (trans**2).ravel()]))
        products = np.concatenate([(U[data.support[lo:hi]] * E).ravel(), (W * trans).ravel()])
        assert sq == pytest.approx(exact_sq, rel=1e-14)
        assert dot == pytest.approx(math.fsum(products), rel=1e-12, abs=1e-12)


@needs_jit
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("parallel_from", [0, 10**9])  # numba's threads, the caller's
def test_decode_twins_agree(bias, parallel_from, monkeypatch):
    """The CSR decode kernels, compiled and NumPy: the same Viterbi labels and node
    marginals of a batch whose sequences are partly scaled, partly in log space (one
    large weight on an attribute some tokens have), with real-valued attributes."""
    from crfopt.kernels._numba import decode

    JT = _jit()
    monkeypatch.setattr(decode, "PARALLEL_FROM", parallel_from)

    rng = np.random.default_rng(21 + bias)
    K, A, n = 6, 30, 70
    lengths = rng.integers(1, 12, size=n)
    offsets = np.concatenate(([0], np.cumsum(lengths)))
    N = int(offsets[-1])
    counts = rng.integers(0, 5, size=N)
    indptr = np.concatenate(([0], np.cumsum(counts)))
    indices = np.concatenate([np.sort(rng.choice(A, size=c, replace=False)) for c in counts])
    values = rng.uniform(-1.5, 1.5, size=len(indices))
    emission = rng.normal(size=(A, K))
    emission[7, 2] = 800.0  # rows holding attribute 7 span > LOG_SPAN_LIMIT
    assert 0 < np.isin(indices, 7).sum() < N
    bias_block = rng.normal(size=(K, 3)) if bias else np.zeros((K, 0))
    trans = rng.normal(size=(K, K))
    args = (offsets, indptr, indices.astype(np.int32), values, emission, bias_block, trans)
    labels = [np.full(N, -1, dtype=np.int64) for _ in range(2)]
    nodes = [np.full((N, K), np.nan) for _ in range(2)]
    JT.csr_viterbi(*args, labels[0])
    NP.csr_viterbi(*args, labels[1])
    JT.csr_node_marginals(*args, nodes[0])
    NP.csr_node_marginals(*args, nodes[1])
    np.testing.assert_array_equal(labels[0], labels[1])
    np.testing.assert_allclose(nodes[0], nodes[1], **TOL)
    np.testing.assert_allclose(nodes[0].sum(axis=1), 1.0, rtol=1e-12)
