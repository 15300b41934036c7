"""sdca-passcode-wild (plugins/sdca_passcode.py): asynchronous parallel SDCA (PASSCoDe-Wild).

* One thread is ``sdca-gap`` iterate for iterate: the same draws, steps, weights, stored
  gaps, running totals and counters, bit for bit, in blocks of any size.
* Two threads: at every block end w is ŵ(μ) again (the racy adds restored from the
  threads' private increments), so the duality gap the runner reports (P(w) − D(μ) at
  the optimizer's w) is never below the true gap of the dual state recomputed from
  scratch, P(ŵ(μ)) − D(μ); the running dual is D(μ); every oracle call is counted (the
  threads' private counters and audit cells are merged).
"""

from __future__ import annotations

import numpy as np
import pytest

import crfopt
from crfopt.bench.evaluator import Evaluator
from crfopt.bench.runner import Budget, evaluate, run
from crfopt.core import duality
from crfopt_plugins.sdca_passcode import partition

from conftest import one_kernel_thread

NAME = "sdca-passcode-wild"


def _problem(dense: bool, n: int = 24, l1: float = 0.0) -> crfopt.CRFProblem:
    p = crfopt.make_synthetic(
        n=n, labels=4, attributes=12, length=6, dense=dense, density=0.35, seed=11
    )
    return p.with_regularization(l1=l1) if l1 else p


def _make(p: crfopt.CRFProblem, name: str = NAME, seed: int = 7, **params):
    spec = crfopt.get_registry().optimizers[name]
    with p.initialization():
        return spec.create(p, seed, params)


@pytest.mark.parametrize("dense", [False, True], ids=["sparse", "dense"])
def test_one_thread_is_sdca_gap_bit_for_bit(dense):
    p = _problem(dense, n=150)
    a, b = p.with_lam(p.lam), p.with_lam(p.lam)
    ref, par = _make(a, "sdca-gap"), _make(b, threads=1)
    assert par.threads == 1
    for k in (1, 1, 7, 150, 1, 300, 33):
        assert ref.run_block(k) == par.run_block(k) == k
        assert np.array_equal(ref.w, par.w)
        ra, rb = ref._state, par._state
        for field in ("gaps", "last_step", "entropies", "gap_sum", "w_sq", "entropy_sum"):
            assert np.array_equal(getattr(ra, field), getattr(rb, field)), field
        assert np.array_equal(ra.mu_n, rb.mu_n) and np.array_equal(ra.mu_e, rb.mu_e)
        assert np.array_equal(ref.sampler.values, par._samplers[0].values)
    assert a.counters.snapshot() == b.counters.snapshot()


def test_one_thread_trace_is_sdca_gap_trace():
    """The runner's trace (every counted and evaluated column) and the final weights."""
    p = _problem(False)
    cols = ["oracle_calls", "updates", "iterations", "primal", "dual", "duality_gap"]
    cols += ["gap_estimate"]
    budget = Budget(passes=3)
    a = run(p.with_lam(p.lam), "sdca-gap", budget=budget, seed=3)
    b = run(p.with_lam(p.lam), NAME, budget=budget, seed=3, params={"threads": 1})
    assert a.status == b.status
    assert np.array_equal(a.w, b.w)
    assert np.array_equal(a.trace[cols].to_numpy(float), b.trace[cols].to_numpy(float))


def test_threads_default_to_the_kernel_threads_and_need_large_enough_parts():
    p = _problem(False, n=200)
    with one_kernel_thread():
        assert _make(p).threads == 1  # numba's thread count in this thread
    assert _make(p, threads=2).threads == 2  # 200 sequences, 64 or more per thread
    assert _make(p, threads=4).threads == 3  # at most n // min_partition
    assert _make(p, threads=2, min_partition=101).threads == 1
    assert _make(_problem(False, n=24), threads=2).threads == 1  # the suite's tiny problems


def test_partition_is_disjoint_covering_and_balanced():
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 60, size=1001)
    parts = partition(lengths, 3)
    joined = np.concatenate(parts)
    assert np.array_equal(np.sort(joined), np.arange(1001))  # each sequence once
    sizes = [len(q) for q in parts]
    assert max(sizes) - min(sizes) <= 1
    tokens = [int(lengths[q].sum()) for q in parts]
    assert max(tokens) - min(tokens) <= lengths.max()  # dealt back and forth by length
    assert all(np.all(np.diff(q) > 0) for q in parts)


def _check_state(p: crfopt.CRFProblem, opt) -> tuple[float, float]:
    """The reported and the true duality gap of the optimizer's current state, after the
    consistency checks of a dual state (w = ŵ(μ), running dual = D(μ), ĝ = mean G_i)."""
    ev = Evaluator(p)
    mu = opt.dual_state()
    row, _ = evaluate(p, opt, None, train_error=False)  # what the runner's trace holds
    true_gap = ev.duality_gap(mu=mu)  # P(ŵ(μ)) − D(μ), from μ alone
    w_hat = duality.conjugate_weights(p, mu)
    # an entry's rounding scales with the moves summed into it, not with its own value
    # (a small entry left by cancellation): the absolute slack is relative to ‖ŵ‖∞; a lost
    # add left unrestored would be off by a whole step γv
    np.testing.assert_allclose(opt.w, w_hat, rtol=1e-9, atol=1e-9 * np.abs(w_hat).max())
    np.testing.assert_allclose(opt.dual_value(), ev.dual(mu), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(opt._state.w_sq[0], opt.w @ opt.w, rtol=1e-10, atol=1e-12)
    assert opt.gap_estimate() == pytest.approx(opt._state.gaps.mean(), rel=1e-10)
    return row["duality_gap"], true_gap


@pytest.mark.parametrize(
    "dense, l1", [(False, 0.0), (True, 0.0), (False, 0.002)], ids=["sparse", "dense", "l1"]
)
def test_two_threads_report_no_gap_below_the_true_one(dense, l1):
    p = _problem(dense, n=256, l1=l1)
    opt = _make(p, threads=2)
    assert opt.threads == 2
    done = 0
    for k in (64, 256, 1, 300, 256, 256, 77):
        done += opt.run_block(k)
        reported, true_gap = _check_state(p, opt)
        # equal up to the rounding of ŵ(μ) summed in another order than w's moves (w
        # matches ŵ(μ) to 1e-9 relative above, and the threads' order of adds, hence the
        # rounding, changes from run to run); a lost add left unrestored moves w by a
        # whole step γv, far more than rounding
        assert reported >= true_gap - 1e-9 * max(1.0, abs(Evaluator(p).primal(opt.w)))
    c = p.counters.snapshot()
    assert c.oracle_calls == c.updates == c.iterations == done
    audited = int(p.data.audit[0])
    assert audited >= c.oracle_calls + c.init_oracle_calls  # the evaluations mark it too
    assert opt.converged is False


def test_two_threads_count_every_oracle_call_and_visit_every_part():
    """Private counters and audit cells merged after the parallel loop: none lost; single
    steps go to the threads in turn, so no part is starved."""
    p = _problem(False, n=256)
    before = int(p.data.audit[0])
    opt = _make(p, threads=2)
    init = int(p.data.audit[0]) - before
    assert opt.run_block(500) == 500
    for _ in range(9):
        assert opt.run_block(1) == 1
    c = p.counters.snapshot()
    assert c.oracle_calls == c.updates == c.iterations == 509
    assert int(p.data.audit[0]) - before - init == 509
    visited = opt._state.gaps != opt.params["initial_gap"]  # visited sequences store g_i
    members = opt._members
    for t in range(2):
        assert visited[members[t]].any()
    # the sampler of each thread took the feedback of its own sequences only
    for t, s in enumerate(opt._samplers):
        part = members[t, : s.n]
        seen = s.values != opt.params["initial_gap"]
        assert np.array_equal(seen, visited[part])


def test_two_threads_converge_like_sdca_gap():
    """Per pass, the asynchronous method stays within an order of magnitude of sdca-gap
    on a problem whose sequences share most attributes (the densest overlap, where adds
    collide most): the restore at block ends keeps it converging to the same optimum."""
    p = _problem(True, n=256)
    p_star_run = run(p.with_lam(p.lam), "lbfgs", passes=200, seed=0)
    p_star = float(p_star_run.trace["primal"].min())
    base = run(p.with_lam(p.lam), "sdca-gap", passes=12, seed=1)
    start = float(base.trace["primal"].iloc[0]) - p_star
    subopt = float(base.trace["primal"].iloc[-1]) - p_star
    # The threads' interleaving differs from run to run, and so does the curve: 20 runs
    # measured 1.9-13.9x sdca-gap's sub-optimality after 12 passes (median 5.0), while
    # sdca-gap's own seeds 0-3 span 6.8x. On OCR, CoNLL-2000 and POS-EWT the passes to
    # 1e-3 stay within sdca-gap's seed spread (reports/performance.md, "Parallel SDCA").
    # One run in CI (a loaded clean clone) measured 27x, so the bound is on the median
    # of three runs; every run must still have converged by a factor of ten.
    finals = []
    for _ in range(3):
        res = run(p.with_lam(p.lam), NAME, passes=12, seed=1, params={"threads": 2})
        finals.append(float(res.trace["primal"].iloc[-1]) - p_star)
        assert finals[-1] <= 1e-1 * start
    median = sorted(finals)[1]
    assert median <= 25 * subopt + 1e-9
    assert median <= 1e-2 * start
