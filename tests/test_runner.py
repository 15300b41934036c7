"""The runner: schedules, budgets, statuses, timing and counting around the optimizer."""

from __future__ import annotations

import time

import numpy as np
import pytest
from doubles import scripted as doubles
from doubles.scripted import Scripted as _Scripted

import crfopt
from crfopt.bench.results import COLUMNS
from crfopt.bench.runner import Budget, Schedule, run

SPEC = doubles.spec()


@pytest.fixture
def problem():
    p = crfopt.make_synthetic(n=20, seed=2)
    return p.with_lam(p.lam)


def test_default_schedule():
    s = Schedule("default")
    pts = [0.0]
    while pts[-1] < 4:
        pts.append(s.next_after(pts[-1]))
    assert pts == [0.0, 0.25, 0.5, 0.75, 1.0, 2.0, 3.0, 4.0]
    assert Schedule("every:0.5").next_after(1.0) == 1.5
    log = Schedule("log")
    x, seen = 0.0, []
    for _ in range(30):
        x = log.next_after(x)
        seen.append(x)
    assert seen[0] == 0.1 and np.all(np.diff(seen) > 0) and np.max(np.diff(seen)) <= 5.0 + 1e-9
    assert Schedule([0.5, 2]).next_after(2) == np.inf
    with pytest.raises(ValueError, match="unknown checkpoint schedule"):
        Schedule("weekly")


def test_budget_validation():
    with pytest.raises(ValueError, match="positive"):
        Budget(passes=-1)
    with pytest.raises(ValueError, match="at least one"):
        Budget(passes=None)


@pytest.mark.parametrize(
    "budget",
    [Budget(), Budget(passes=None, seconds=2.0), Budget(passes=None, target_suboptimality=0.1)],
)
def test_budget_round_trips_through_its_dict(budget):
    # a grid's tasks carry the budget as a dict and are rebuilt with Budget(**d): a
    # seconds-only budget came back with the default 10 passes and stopped there
    assert Budget(**budget.as_dict()) == budget


def test_a_compare_budget_without_passes_is_not_cut_at_ten(tmp_path):
    table = crfopt.compare(
        "synthetic",
        "lbfgs",
        budget=Budget(passes=None, iterations=15),
        checkpoints="every:1",
        out=tmp_path,
    )
    assert table["iterations"].max() == 15 and table["effective_passes"].max() > 10


def test_trace_has_schema_and_checkpoints(problem):
    res = run(problem, SPEC, budget=Budget(passes=3))
    t = res.trace
    assert list(t.columns) == list(COLUMNS)
    assert res.status == "budget"
    assert list(t["effective_passes"]) == [0.0, 0.25, 0.5, 0.75, 1.0, 2.0, 3.0]
    assert (t["oracle_calls"] == t["iterations"]).all()
    assert list(t["status"]) == ["running"] * 6 + ["budget"]
    assert t["suboptimality"].isna().all()  # no P* given
    assert t["dual"].isna().all() and t["gap_estimate"].isna().all()  # a primal method


def test_time_excludes_evaluation(problem, monkeypatch):
    """Evaluation is slowed down artificially; time_s must not see it."""
    import crfopt.bench.runner as runner_mod

    real = runner_mod.evaluate

    def slow_eval(*a, **k):
        time.sleep(0.05)
        return real(*a, **k)

    monkeypatch.setattr(runner_mod, "evaluate", slow_eval)
    t0 = time.perf_counter()
    res = run(problem, SPEC, budget=Budget(passes=2))
    wall = time.perf_counter() - t0
    n_eval = len(res.trace)
    assert wall > 0.05 * n_eval
    assert res.trace["time_s"].iloc[-1] < wall - 0.05 * n_eval + 0.01


def test_evaluation_is_not_counted(problem):
    res = run(problem, SPEC, budget=Budget(passes=1))
    last = res.trace.iloc[-1]
    assert last["oracle_calls"] == problem.n  # exactly one pass of the optimizer's own calls
    assert res.meta["final_counters"]["oracle_calls"] == problem.n


def test_diverged(problem):
    res = run(problem, SPEC, params={"fault": "nan", "at": 7}, budget=Budget(passes=3))
    assert res.status == "diverged"
    assert res.trace["status"].iloc[-1] == "diverged"
    assert res.trace["primal"].iloc[-1] is crfopt.bench.results.pd.NA or np.isnan(
        float(res.trace["primal"].astype(float).iloc[-1])
    )


def test_failed_keeps_rows_and_traceback(problem):
    res = run(problem, SPEC, params={"fault": "raise", "at": 30}, budget=Budget(passes=3))
    assert res.status == "failed"
    assert len(res.trace) >= 2  # checkpoints before the failure are kept
    assert "scripted failure" in res.meta["error"]
    assert res.trace["status"].iloc[-1] == "failed"


def test_failure_in_constructor(problem):
    class Broken(_Scripted):
        """Fails at construction."""

        def setup(self):
            raise ValueError("no setup")

    spec = crfopt.OptimizerSpec("broken", Broken, summary="x", reference="x")
    res = run(problem, spec, budget=Budget(passes=1))
    assert res.status == "failed" and "no setup" in res.meta["error"]
    assert len(res.trace) == 1


def test_targets_and_other_budgets(problem):
    ref = crfopt.reference_optimum(problem)
    res = run(
        problem, "lbfgs", p_star=ref.p_star, budget=Budget(passes=200, target_suboptimality=1e-3)
    )
    assert res.status == "converged"
    assert res.trace["suboptimality"].iloc[-1] <= 1e-3
    res = run(problem, SPEC, budget=Budget(updates=7))
    assert res.trace["updates"].iloc[-1] == 7
    res = run(problem, SPEC, budget=Budget(oracle_calls=33))
    assert res.trace["oracle_calls"].iloc[-1] == 33
    res = run(problem, SPEC, params={"sleep": 0.001}, budget=Budget(seconds=0.05, passes=100))
    assert res.status == "budget" and res.trace["effective_passes"].iloc[-1] < 100
    with pytest.raises(ValueError, match="p_star"):
        run(problem, SPEC, budget=Budget(target_suboptimality=1e-3))


def test_unknown_parameter_is_rejected_before_running(problem):
    with pytest.raises(
        crfopt.ParameterError, match="valid parameters: at, fault, sleep, step_size, warm_passes"
    ):
        run(problem, SPEC, params={"faultt": "none"})
    with pytest.raises(crfopt.ParameterError, match="must be one of"):
        run(problem, SPEC, params={"fault": "fast"})


def test_counters_reset_between_runs(problem):
    run(problem, SPEC, budget=Budget(passes=1))
    res = run(problem, SPEC, budget=Budget(passes=1))
    assert res.trace["oracle_calls"].iloc[0] == 0


def test_setup_work_is_stored_on_every_row_and_kept_off_the_iteration_axes(problem):
    spec = doubles.spec("warm")
    res = run(problem, spec, params={"warm_passes": 4}, budget=Budget(passes=1))
    t = res.trace
    # the independent truth: value_and_gradient is one counted oracle call per sequence
    assert (t["init_oracle_calls"] == 4 * problem.n).all()
    assert (t["init_forward_calls"] == 0).all()
    assert (t["init_passes"] == 4.0).all()
    assert (t["init_time_s"] > 0).all() and t["init_time_s"].nunique() == 1
    assert t["init_time_s"].iloc[0] == res.meta["init_seconds"]
    # the iteration axes and the budget start after the warm start
    assert t["effective_passes"].iloc[0] == 0.0 and t["oracle_calls"].iloc[-1] == problem.n
    # a method without setup work reports zero, not null
    plain = run(problem, SPEC, budget=Budget(passes=0.25)).trace
    assert (plain["init_passes"] == 0.0).all() and (plain["init_oracle_calls"] == 0).all()


def test_setup_failure_still_reports_its_work(problem):
    class WarmThenBroken(_Scripted):
        """Does two passes of work in setup(), then raises."""

        def setup(self):
            super().setup()
            raise ValueError("broken after warm start")

    spec = crfopt.OptimizerSpec("warm-broken", WarmThenBroken, summary="x", reference="x")
    res = run(problem, spec, params={"warm_passes": 2}, budget=Budget(passes=1))
    assert res.status == "failed"
    assert res.trace["init_passes"].iloc[-1] == 2.0
    assert res.trace["init_time_s"].iloc[-1] > 0


# ------------------------------------- keywords as in docs/architecture.md "Public surface"


def test_run_takes_passes_and_parameters_as_keywords(problem):
    """crfopt.run(problem, name, passes=, seed=, param=) is the same run as budget=/params=."""
    a = crfopt.run(problem, SPEC, passes=2, seed=4, at=7)
    b = run(problem, SPEC, budget=Budget(passes=2), seed=4, params={"at": 7})
    assert (
        a.meta["params"]
        == b.meta["params"]
        == {"step_size": 0.05, "fault": "none", "at": 7, "sleep": 0.0, "warm_passes": 0}
    )
    assert a.meta["budget"] == b.meta["budget"] == {"passes": 2}
    cols = ["iterations", "oracle_calls", "effective_passes", "primal", "status"]
    assert a.trace[cols].equals(b.trace[cols])
    assert a.trace["optimizer"].iloc[0] == "scripted[at=7]"
    # a registered name with docs/architecture.md "Public surface"
    res = crfopt.run(problem, "sdca-gap", passes=1, seed=0, non_uniformity=0.5)
    assert res.status == "budget" and res.meta["params"]["non_uniformity"] == 0.5


def test_run_keyword_errors_are_clear(problem):
    with pytest.raises(crfopt.ParameterError, match="either passes= or budget=, not both"):
        run(problem, SPEC, passes=2, budget=Budget(passes=3))
    # a typo of run()'s own keyword is named with both lists of valid names
    with pytest.raises(
        crfopt.ParameterError,
        match=r"'pases'.*valid parameters: at, fault, sleep, step_size, warm_passes",
    ):
        run(problem, SPEC, pases=2)
    with pytest.raises(crfopt.ParameterError, match=r"run\(\) itself takes: seed, passes"):
        run(problem, SPEC, pases=2)
    with pytest.raises(crfopt.ParameterError, match="'fault' given both"):
        run(problem, SPEC, params={"fault": "none"}, fault="none")


# ------------------------------------------------ declining a problem (Optimizer.decline)


class _Picky(_Scripted):
    calls: list = []

    @classmethod
    def decline(cls, problem, params, limits):
        cls.calls.append((problem.n, dict(params), limits.max_memory))
        if limits.max_memory is not None and limits.max_memory < 1000:
            return f"needs 1000 bytes, limit {limits.max_memory}"
        return None

    def setup(self):
        raise AssertionError("a declined optimizer must not be built")


def test_declined_run_is_skipped_before_construction(problem):
    picky = crfopt.OptimizerSpec("picky", _Picky)
    res = run(problem, picky, passes=1, max_memory=999, at=3)
    assert res.status == "skipped" and res.w is None
    assert res.meta["skip_reason"] == "needs 1000 bytes, limit 999"
    assert _Picky.calls[-1] == (
        problem.n,
        {"step_size": 0.05, "fault": "none", "at": 3, "sleep": 0.0, "warm_passes": 0},
        999,
    )
    assert len(res.trace) == 1 and res.trace["status"].iloc[0] == "skipped"
    assert res.trace["oracle_calls"].iloc[0] == 0 and res.trace["primal"].isna().all()
    # without a limit it is not declined (and then its setup fails: it was built)
    assert run(problem, picky, passes=1).status == "failed"
    assert run(problem, picky, passes=1, max_memory="1K").status == "failed"


def test_sdca_declines_when_the_dual_exceeds_max_memory(problem):
    need64, need32 = problem.dual_memory(8), problem.dual_memory(4)
    # N·K node + (N−n)·K² edge log-marginals, counted independently of dual_memory
    K, N, n = problem.n_labels, problem.n_tokens, problem.n
    assert need64 == 8 * (N * K + (N - n) * K * K)
    # the whole state (test_memory.py checks it against what setup allocates)
    sdca = crfopt.get_registry().optimizer("sdca-gap").cls
    state64 = sdca.state_memory(problem, {"dtype": "float64"})
    state32 = sdca.state_memory(problem, {"dtype": "float32"})
    assert state64 - state32 == need64 - need32
    res = crfopt.run(problem, "sdca-gap", passes=1, max_memory=state64 - 1)
    assert res.status == "skipped"
    assert f"({state64:,} bytes)" in res.meta["skip_reason"]
    assert "float32" in res.meta["skip_reason"]
    assert crfopt.run(problem, "sdca-gap", passes=1, max_memory=state64).status == "budget"
    # float32 storage halves the dual, so it fits where float64 does not
    fits = crfopt.run(problem, "sdca-gap", passes=1, max_memory=state32, dtype="float32")
    assert fits.status == "budget"


def test_an_iteration_budget_alone_with_no_checkpoint_left(problem):
    """No pass limit and only the checkpoint at 0 (CRF.fit without monitoring): the block
    size comes from the iteration budget alone (it was ceil(inf): an OverflowError)."""
    res = run(problem, "lbfgs", budget=Budget(passes=None, iterations=7), checkpoints=[0.0])
    assert res.status == "budget", res.meta.get("error")
    assert int(res.trace["iterations"].iloc[-1]) == 7


def test_evaluation_reuses_only_the_pass_at_the_same_weights(problem, monkeypatch):
    """The evaluator takes P(w), ∇f(w) from the problem's last counted pass only when it
    was at exactly this w with this λ and σ: the same numbers as computing them afresh,
    and a counted pass always computes (issue 51)."""
    from crfopt.bench.evaluator import Evaluator
    from crfopt.core import duality

    run_copy = problem.for_run()  # what an optimizer is handed: shares the data
    rng = np.random.default_rng(0)
    w = rng.normal(scale=0.1, size=problem.dim)
    value, grad = run_copy.value_and_gradient(w)
    calls = []
    real = duality._impl.batch_value_grad
    monkeypatch.setattr(duality._impl, "batch_value_grad", lambda *a: calls.append(1) or real(*a))
    ev = Evaluator(problem)
    assert ev.value_and_gradient(w)[0] == value and calls == []  # reused
    np.testing.assert_array_equal(ev.gradient(w), grad)
    assert ev.primal_and_gap(w) == (value, duality.gap_from_gradient(problem, w, grad))
    fresh = duality.objective(problem, w, gradient=True)  # computed: the same numbers
    assert calls == [1] and fresh[0] == value and np.array_equal(fresh[1], grad)
    ev.gradient(w)[:] = 0.0  # a caller scribbling on its copy changes nothing
    np.testing.assert_array_equal(ev.gradient(w), grad)
    for other, at in (
        (problem, w + 1e-12),  # another w
        (problem.with_regularization(lam=2 * problem.lam), w),  # another λ, same data
        (problem.with_regularization(l1=1e-3), w),  # another σ
    ):
        calls.clear()
        Evaluator(other).primal(at)
        assert calls == [1]
    calls.clear()
    run_copy.value_and_gradient(w)  # counted: computes although the entry matches
    assert calls == [1] and run_copy.counters.oracle_calls == 2 * problem.n
