"""Runs cannot corrupt each other (issue 17, item 1).

A plugin gets a copy of the problem with its own counters and sealed data: it cannot
re-flag the arrays writeable; if it changes the data or λ anyway (through a raw address,
or by forcing an attribute), its run is stored ``failed`` naming what changed and the
problem is reloaded before the next run. A thread it leaves behind counts into a dead
counter array, and a run whose counters go backwards or stop advancing ends instead of
hanging (``compare`` and ``check_optimizer`` alike).

Every attack comes from the shared test double (tests/doubles/scripted.py: faults
``mutate-labels``, ``mutate-lam``, ``leftover-thread``, ``reset-counters``); the truth is
always the same optimizer run alone on an untouched problem.
"""

from __future__ import annotations

import ctypes
import re
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from doubles import scripted as doubles

import crfopt
from crfopt.apps.cli import main
from crfopt.bench.conformance import check_optimizer
from crfopt.bench.execute import ProblemCache, execute_task
from crfopt.bench.plan import RunTask
from crfopt.bench.results import run_path
from crfopt.bench.runner import Budget, run
from crfopt.core.problem import ProblemChangedError

DOUBLES = str(Path(doubles.__file__).resolve().parent)
SPEC = doubles.spec()


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("CRFOPT_CACHE", str(tmp_path_factory.getbasetemp() / "cache"))


def _problem(**kw):
    p = crfopt.make_synthetic(n=20, seed=2, **kw)
    return p.with_lam(p.lam)


def _within(seconds, fn):
    """``fn()``, failing (instead of hanging the suite) if it is still running after ``seconds``."""
    box = {}

    def target():
        try:
            box["value"] = fn()
        except BaseException as exc:  # re-raised in the test's thread
            box["error"] = exc

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f"still running after {seconds} s: it would hang"
    if "error" in box:
        raise box["error"]
    return box["value"]


def _poke_labels(problem):
    """Rewrite the labels through their raw address, as compiled code could."""
    y = problem.labels
    raw = np.frombuffer((ctypes.c_byte * y.nbytes).from_address(y.ctypes.data), dtype=y.dtype)
    raw[:] = (raw + 1) % problem.n_labels


# ------------------------------------------------------------------ sealed data


@pytest.mark.parametrize("dense", [False, True])
def test_problem_arrays_cannot_be_made_writeable_again(dense):
    p = _problem(dense=dense)
    p.radii()
    p.transpose  # noqa: B018 - built here, before the copies share it
    for q in (p, p.with_lam(0.5), p.for_run()):
        arrays = {"truth_features": q.truth_features, "radii": q.radii()}
        arrays.update({f"transpose.{k}": v for k, v in q.transpose._asdict().items()})
        for split in q.splits:
            kd = q.split_data(split)
            arrays.update(
                {
                    f"{split}.{k}": v
                    for k, v in kd._asdict().items()
                    if isinstance(v, np.ndarray) and k != "audit"
                }
            )
        for name, a in arrays.items():
            assert not a.flags.writeable, name
            for holder in (a, a.base):  # neither the array nor what it views
                if isinstance(holder, np.ndarray):
                    with pytest.raises(ValueError, match="WRITEABLE"):
                        holder.setflags(write=True)


# ------------------------------------------------------------------ mutations


def test_data_digests_name_what_changed():
    p = _problem()
    assert p.changed_data() == []  # takes the reference
    q = p.for_run()
    object.__setattr__(q, "_lam", 2 * p.lam)
    assert q.changed_data() == ["λ"] and p.changed_data() == []
    _poke_labels(p)
    assert p.changed_data() == ["labels (train.y)"]
    with pytest.raises(ProblemChangedError, match=r"labels \(train.y\).*load it again"):
        run(p, "lbfgs", passes=1)


def _compare(out, plugin_dir, optimizers):
    res = CliRunner().invoke(
        main,
        [
            "compare",
            "--problem",
            "synthetic",
            "--set",
            "synthetic.n=30",
            "--optimizers",
            optimizers,
            "--passes",
            "3",
            "--out",
            str(out),
            "--plugin-dir",
            str(plugin_dir),
            "--no-optimum",
            "--quiet",
            "--allow-failures",
        ],
    )
    assert res.exit_code == 0, res.output
    return crfopt.read_results(out)


def test_labels_rewritten_by_a_plugin_fail_its_run_and_not_the_next(tmp_path):
    """The issue's check: in one serial compare a plugin that rewrites the labels runs
    before lbfgs; lbfgs's primal equals that of lbfgs run alone, and the plugin's run is
    failed naming the mutation."""
    plugins = doubles.plugin_dir(tmp_path)
    bad = "scripted[at=5,fault=mutate-labels]"
    both = _compare(tmp_path / "both", plugins, f"{bad},lbfgs")
    alone = _compare(tmp_path / "alone", plugins, "lbfgs")

    final = both.groupby("optimizer")["status"].last().to_dict()
    assert final == {bad: "failed", "lbfgs": "budget"}
    failed_id = both.loc[both["optimizer"] == bad, "run_id"].iloc[0]
    error = both.attrs["runs"][failed_id]["error"]
    assert "problem data changed during the run: labels (train.y)" in error
    # the plugin's run started before lbfgs's in the same process
    starts = both.groupby("optimizer")["run_id"].first()
    assert read_run_start(tmp_path / "both", starts[bad]) <= read_run_start(
        tmp_path / "both", starts["lbfgs"]
    )

    def trace(table):
        t = table[table["optimizer"] == "lbfgs"]
        return t[["effective_passes", "primal", "train_error"]].to_numpy()

    np.testing.assert_array_equal(trace(both), trace(alone))


def read_run_start(out, run_id):
    """When the run's file was written (serial runs are written in the order they ran)."""
    return run_path(out, run_id).stat().st_mtime_ns


def test_lam_forced_by_a_plugin_fails_its_run_only():
    p = _problem()
    truth = run(_problem(), "lbfgs", passes=3)
    bad = run(p, SPEC, passes=2, fault="mutate-lam", at=3)
    assert bad.status == "failed"
    assert bad.meta["problem_changed"] == ["λ"]
    assert bad.meta["error_summary"].endswith("problem data changed during the run: λ")
    assert bad.trace["status"].iloc[-1] == "failed"
    after = run(p, "lbfgs", passes=3)
    assert p.lam == _problem().lam
    np.testing.assert_array_equal(after.trace["primal"], truth.trace["primal"])


def test_a_rewritten_problem_is_reloaded_before_the_next_task(tmp_path):
    """execute_task: a run that changed the problem makes the cache drop it; a change
    found before a run (after the last check) reloads it and the run goes ahead."""
    cache = ProblemCache()

    def task(run_id, optimizer, **overrides):
        return RunTask(
            run_id=run_id,
            problem="synthetic",
            problem_params={"n": 20},
            optimizer=optimizer,
            overrides=overrides,
            seed=0,
            budget={"passes": 2.0},
            checkpoints="default",
            out_dir=str(tmp_path),
            plugin_dirs=(DOUBLES,),
        )

    bad = execute_task(task("a", "scripted", fault="mutate-labels", at=3), cache=cache)
    assert bad["status"] == "failed" and "labels (train.y)" in bad["error"]
    assert cache.loads == 1
    ok = execute_task(task("b", "lbfgs"), cache=cache)
    assert ok["status"] == "budget" and cache.loads == 2  # reloaded, not the rewritten one

    problem = cache.get(crfopt.get_registry(), "synthetic", {"n": 20})
    _poke_labels(problem)  # as a leftover thread could, after the last check
    again = execute_task(task("c", "lbfgs"), cache=cache)
    assert again["status"] == "budget" and cache.loads == 3
    assert again["last"]["primal"] == ok["last"]["primal"]


# ------------------------------------------------------------------ counters


def test_a_leftover_thread_cannot_reach_the_next_runs_counters():
    p = _problem()
    alone = run(_problem(), SPEC, passes=2)
    run(p, SPEC, passes=1, fault="leftover-thread", at=2)
    nxt = run(p, SPEC, passes=2)
    assert any(t.name == "scripted-leftover" and t.is_alive() for t in threading.enumerate())
    cols = ["iterations", "oracle_calls", "forward_calls", "updates", "effective_passes"]
    np.testing.assert_array_equal(nxt.trace[cols].to_numpy(), alone.trace[cols].to_numpy())
    assert nxt.meta["final_counters"] == alone.meta["final_counters"]
    # the problem's own counters show the last run's work, and stay so
    time.sleep(0.05)
    assert p.counters.snapshot().as_dict() == nxt.meta["final_counters"]


def test_a_plugin_that_resets_its_counters_fails_instead_of_hanging():
    res = _within(120, lambda: run(_problem(), SPEC, passes=2, fault="reset-counters", at=4))
    assert res.status == "failed"
    assert "counters go backwards" in res.meta["error_summary"]
    assert re.search(r"\(oracle_calls [1-9]\d* → 0, ", res.meta["error_summary"])


class _NeverCounts(crfopt.Optimizer):
    """Steps that do nothing and report nothing: only the iterations the contract counts
    for it advance, no work."""

    def setup(self):
        self._w = self.problem.zeros()

    @property
    def w(self):
        return self._w

    def step(self):
        pass


def test_a_plugin_that_never_counts_fails_instead_of_hanging():
    """A budget in passes is never reached by steps that call no oracle: the run fails
    after 50 blocks in a row that advanced no counter the budget ends on."""
    spec = crfopt.OptimizerSpec("never-counts", _NeverCounts, {}, summary="", reference="")
    res = _within(120, lambda: run(_problem(), spec, budget=Budget(passes=2)))
    assert res.status == "failed"
    assert "made no progress: 50 blocks in a row" in res.meta["error_summary"]
    assert res.trace["effective_passes"].iloc[-1] == 0


def test_steps_that_do_no_work_still_count_as_iterations():
    """The contract counts an iteration per step() (and per iteration run_block returns)
    for the plugin, so an iteration budget ends such a run, with no work done."""
    spec = crfopt.OptimizerSpec("never-counts", _NeverCounts, {}, summary="", reference="")
    res = _within(120, lambda: run(_problem(), spec, budget=Budget(passes=None, iterations=10)))
    assert res.status == "budget"
    assert res.trace["iterations"].iloc[-1] == 10
    assert res.trace["oracle_calls"].iloc[-1] == 0


def test_check_optimizer_does_not_hang_on_a_counter_reset():
    results = _within(
        300, lambda: check_optimizer("broken-resets-counters", plugin_dirs=[DOUBLES], verbose=False)
    )
    failed = {r["check"]: r["message"] for r in results.failed}
    assert "counters go backwards" in failed["check_budget_end"]
    assert "counters go backwards" in failed["check_primal_decreases"]


def test_check_optimizer_names_what_a_plugin_changed():
    results = check_optimizer("broken-mutates-lam", plugin_dirs=[DOUBLES], verbose=False)
    failed = {r["check"]: r["message"] for r in results.failed}
    assert failed["check_problem_unchanged"].endswith("the problem is not mutated: λ changed")
    assert "problem data changed during the run: λ" in failed["check_budget_end"]
