"""Comparisons end to end: files on disk, resuming, crashes, backends, failing plugins."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pandas as pd
import pytest
from click.testing import CliRunner
from docs_examples import write_sgd_plugin
from doubles import scripted as doubles

import crfopt
from crfopt.apps.cli import main
from crfopt.bench.results import COLUMNS, result_files
from crfopt.optim.registry import PluginWarning


@pytest.fixture
def plugin_dir(tmp_path):
    d = doubles.plugin_dir(tmp_path)
    write_sgd_plugin(d)
    return d


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("CRFOPT_CACHE", str(tmp_path_factory.getbasetemp() / "cache"))


def invoke(*args):
    res = CliRunner().invoke(main, [str(a) for a in args])
    return res


def test_compare_writes_parquet_and_resumes(tmp_path):
    out = tmp_path / "res"
    t0 = time.perf_counter()
    res = invoke(
        "compare",
        "--problem",
        "synthetic",
        "--optimizers",
        "lbfgs",
        "--passes",
        5,
        "--out",
        out,
        "--seeds",
        "0,1",
    )
    first = time.perf_counter() - t0
    assert res.exit_code == 0, res.output
    files = result_files(out)
    assert len(files) == 2  # one file per (optimizer, seed)
    mtimes = {f: f.stat().st_mtime_ns for f in files}
    table = crfopt.read_results(out)
    assert list(table.columns[: len(COLUMNS)]) == list(COLUMNS)
    assert table["status"].iloc[-1] == "budget"
    assert table["suboptimality"].notna().all()  # P* computed and cached
    t0 = time.perf_counter()
    res = invoke(
        "compare",
        "--problem",
        "synthetic",
        "--optimizers",
        "lbfgs",
        "--passes",
        5,
        "--out",
        out,
        "--seeds",
        "0,1",
    )
    second = time.perf_counter() - t0
    assert res.exit_code == 0
    assert {f: f.stat().st_mtime_ns for f in result_files(out)} == mtimes
    print(f"first run {first:.2f} s, rerun {second:.2f} s")


def test_python_api_same_as_cli(tmp_path, plugin_dir):
    table = crfopt.compare(
        "synthetic",
        "my-sgd,lbfgs",
        seeds=[0, 1],
        passes=2,
        out=tmp_path / "api",
        plugin_dirs=[str(plugin_dir)],
        overrides={"my-sgd": {"step_size": 0.05}},
    )
    assert table["run_id"].nunique() == 4
    assert set(table["optimizer"]) == {"lbfgs", "my-sgd[step_size=0.05]"}
    assert table.groupby("run_id")["status"].last().eq("budget").all()


def test_failing_plugin_leaves_other_runs_intact(tmp_path, plugin_dir):
    out = tmp_path / "fail"
    res = invoke(
        "compare",
        "--problem",
        "synthetic",
        "--optimizers",
        "scripted[at=30,fault=raise],lbfgs,my-sgd",
        "--passes",
        2,
        "--out",
        out,
        "--plugin-dir",
        plugin_dir,
    )
    assert res.exit_code == 1, res.output  # a failed run is not a successful comparison
    assert "scripted failure in step" in res.output
    table = crfopt.read_results(out)
    final = table.groupby("optimizer")["status"].last().to_dict()
    assert final == {"scripted[at=30,fault=raise]": "failed", "lbfgs": "budget", "my-sgd": "budget"}
    failed_id = table.loc[table["status"] == "failed", "run_id"].iloc[0]
    assert "scripted failure in step" in table.attrs["runs"][failed_id]["error"]
    # failed runs are kept, and rerun only when asked
    before = {f.name: f.stat().st_mtime_ns for f in result_files(out)}
    invoke(
        "compare",
        "--problem",
        "synthetic",
        "--optimizers",
        "scripted[at=30,fault=raise],lbfgs,my-sgd",
        "--passes",
        2,
        "--out",
        out,
        "--plugin-dir",
        plugin_dir,
        "--retry-failed",
    )
    after = {f.name: f.stat().st_mtime_ns for f in result_files(out)}
    changed = {k for k in before if before[k] != after[k]}
    assert changed == {f"run-{failed_id}.parquet"}


def test_plugin_broken_at_import_does_not_stop_compare(tmp_path, plugin_dir):
    (plugin_dir / "zz_broken.py").write_text("raise ImportError('no such dependency')\n")
    # the user gets the plugin's name and its traceback as a PluginWarning (and on screen)
    with pytest.warns(PluginWarning, match=r"(?s)zz_broken.*Traceback.*no such dependency"):
        res = invoke(
            "compare",
            "--problem",
            "synthetic",
            "--optimizers",
            "lbfgs",
            "--passes",
            1,
            "--out",
            tmp_path / "o",
            "--plugin-dir",
            plugin_dir,
        )
    assert res.exit_code == 0
    assert "zz_broken" in res.output and "no such dependency" in res.output


def test_usage_errors(tmp_path):
    res = invoke("compare", "--problem", "synthetic", "--optimizers", "lbfgz", "--out", tmp_path)
    assert res.exit_code == 2 and "Did you mean lbfgs" in res.output
    res = invoke(
        "compare",
        "--problem",
        "synthetic",
        "--optimizers",
        "lbfgs",
        "--set",
        "lbfgs.memory=many",
        "--out",
        tmp_path,
    )
    assert res.exit_code == 2 and "expects int" in res.output
    res = invoke(
        "compare",
        "--problem",
        "synthetic",
        "--optimizers",
        "lbfgs",
        "--set",
        "lbfgs.memori=3",
        "--out",
        tmp_path,
    )
    assert res.exit_code == 2 and "valid parameters: max_line_search, memory" in res.output
    res = invoke("compare", "--problem", "nope", "--optimizers", "lbfgs", "--out", tmp_path)
    assert res.exit_code == 2 and "Registered problems" in res.output
    res = invoke(
        "compare",
        "--problem",
        "synthetic",
        "--optimizers",
        "lbfgs",
        "--passes",
        -1,
        "--out",
        tmp_path,
    )
    assert res.exit_code == 2


def test_config_file(tmp_path):
    cfg = tmp_path / "grid.yaml"
    cfg.write_text(
        "problem: synthetic\noptimizers: [lbfgs]\npasses: 2\nseeds: [0]\n"
        "set: [synthetic.n=30]\nquiet: true\n"
    )
    res = invoke("compare", "--config", cfg, "--out", tmp_path / "c")
    assert res.exit_code == 0, res.output
    table = crfopt.read_results(tmp_path / "c")
    assert table["effective_passes"].max() == 2
    meta = next(iter(table.attrs["runs"].values()))
    assert meta["config"]["problem"]["params"] == {"n": 30}
    bad = tmp_path / "bad.yaml"
    bad.write_text("pases: 2\n")
    res = invoke("compare", "--config", bad, "--problem", "synthetic", "--optimizers", "lbfgs")
    assert res.exit_code == 2 and "unknown option 'pases'" in res.output


def _strip_time(df: pd.DataFrame) -> pd.DataFrame:
    # wall-clock columns differ between runs, and where a run was computed (backend,
    # threads, worker) between backends; everything else must be identical
    timed = ["time_s", "init_time_s", "backend", "threads", "worker"]
    return df.drop(columns=timed).sort_values(["run_id", "checkpoint"]).reset_index(drop=True)


def test_backends_give_identical_tables(tmp_path, plugin_dir):
    kwargs = dict(
        seeds=[0, 1],
        passes=2,
        plugin_dirs=[str(plugin_dir)],
        problem_params={"synthetic": {"n": 40}},
    )
    tables = {}
    for backend in ("serial", "joblib", "dask"):
        tables[backend] = crfopt.compare(
            "synthetic",
            "my-sgd,lbfgs",
            out=tmp_path / backend,
            backend=backend,
            n_jobs=2,
            **kwargs,
        )
    ref = _strip_time(tables["serial"])
    assert ref["run_id"].nunique() == 4
    for backend in ("joblib", "dask"):
        pd.testing.assert_frame_equal(_strip_time(tables[backend]), ref)
    for backend, table in tables.items():  # each run says where it was timed
        assert set(table["backend"]) == {backend}
        assert table["worker"].notna().all() and table["threads"].notna().all()
    assert set(tables["joblib"]["threads"]) == {1}  # parallel workers: one thread each


def _quiet_state(dask_worker) -> dict:
    import dask

    from crfopt.bench.backends import QUIET_CLUSTER

    return {
        "profiler": "profile" in dask_worker.periodic_callbacks,
        "config": {k: dask.config.get(k) for k in QUIET_CLUSTER},
    }


def test_a_grids_local_cluster_runs_without_dashboard_feeds():
    """The grid's own LocalCluster has no dashboard: its workers start without the
    statistical profiler and with the slower ticks and monitors of QUIET_CLUSTER, and
    the caller's Dask configuration is as it was (Dask's defaults differ, so the check
    can fail)."""
    import dask
    from distributed import Client

    from crfopt.bench.backends import QUIET_CLUSTER, local_cluster

    before = {k: dask.config.get(k) for k in QUIET_CLUSTER}
    assert before["distributed.worker.profile.enabled"] is True  # Dask's default
    with local_cluster(1) as cluster, Client(cluster) as client:
        (state,) = client.run(_quiet_state).values()
        assert state == {"profiler": False, "config": QUIET_CLUSTER}
    assert {k: dask.config.get(k) for k in QUIET_CLUSTER} == before


def test_sigkill_mid_grid_then_resume(tmp_path, plugin_dir):
    """Kill the whole comparison with SIGKILL after the first run is written; rerun."""
    out = tmp_path / "killed"
    cmd = [
        sys.executable,
        "-m",
        "crfopt",
        "compare",
        "--problem",
        "synthetic",
        "--optimizers",
        "scripted[sleep=0.004]",
        "--seeds",
        "0,1,2,3",
        "--passes",
        "2",
        "--out",
        str(out),
        "--plugin-dir",
        str(plugin_dir),
        "--quiet",
        "--no-optimum",
    ]
    env = {**os.environ, "CRFOPT_CACHE": str(tmp_path / "cache")}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 120
    while time.time() < deadline and not result_files(out):
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    kept = {f.name: f.stat().st_mtime_ns for f in result_files(out)}
    assert 1 <= len(kept) < 4, "the kill should land mid-grid"
    table = crfopt.read_results(out)  # no partial file is ever read
    assert table["run_id"].nunique() == len(kept)
    subprocess.run(cmd, env=env, check=True, capture_output=True)
    final = {f.name: f.stat().st_mtime_ns for f in result_files(out)}
    assert len(final) == 4
    assert all(final[name] == mtime for name, mtime in kept.items())  # nothing recomputed
    table = crfopt.read_results(out)
    assert table.groupby("run_id")["status"].last().eq("budget").all()


def _grid(out, plugin_dir, optimizers, *extra):
    return invoke(
        "compare",
        "--problem",
        "synthetic",
        "--set",
        "synthetic.n=30",
        "--optimizers",
        optimizers,
        "--passes",
        1,
        "--out",
        out,
        "--plugin-dir",
        plugin_dir,
        "--no-optimum",
        "--quiet",
        *extra,
    )


def _failure_lines(output):
    """The summary's lines naming runs (the progress display names failures as they happen)."""
    return [line for line in output.splitlines() if "scripted[" in line and "(run " in line]


def test_exit_status_1_names_the_failed_run_and_allow_failures_gives_0(tmp_path, plugin_dir):
    res = _grid(tmp_path / "o", plugin_dir, "scripted[at=5,fault=raise],lbfgs")
    assert res.exit_code == 1, res.output
    assert "1 run(s) failed or diverged" in res.output
    named = _failure_lines(res.output)
    assert len(named) == 1 and "failed" in named[0] and "scripted failure in step" in named[0]
    # the run that finished is not named among the failures (it may be in the note on
    # runs that stopped far from the optimum, printed before them)
    assert "lbfgs · seed" not in res.output[res.output.index("failed or diverged") :]
    # the same grid, resumed from disk without rerunning: still a failure, unless allowed
    res = _grid(tmp_path / "o", plugin_dir, "scripted[at=5,fault=raise],lbfgs", "--allow-failures")
    assert res.exit_code == 0, res.output
    assert "allowed by --allow-failures" in res.output and len(_failure_lines(res.output)) == 1


def test_exit_status_1_for_a_diverged_run(tmp_path, plugin_dir):
    res = _grid(tmp_path / "d", plugin_dir, "scripted[at=3,fault=nan]")
    assert res.exit_code == 1, res.output
    named = _failure_lines(res.output)
    assert len(named) == 1 and "diverged" in named[0]
    assert crfopt.read_results(tmp_path / "d")["status"].iloc[-1] == "diverged"
    res = _grid(tmp_path / "d", plugin_dir, "scripted[at=3,fault=nan]", "--allow-failures")
    assert res.exit_code == 0, res.output


def test_exit_status_0_when_every_run_finishes(tmp_path, plugin_dir):
    res = _grid(tmp_path / "ok", plugin_dir, "scripted,lbfgs")
    assert res.exit_code == 0, res.output
    assert "failed or diverged" not in res.output


# ------------------------------------------------ declined runs, one grammar, split modules


def test_declined_runs_are_skipped_named_and_not_failures(tmp_path):
    """SDCA declines when its dual exceeds --max-memory: stored as 'skipped' with the
    reason, shown in the summary, exit 0; rerun with a larger limit, it runs."""
    out = tmp_path / "mem"
    p = crfopt.load_problem("synthetic", n=30)
    sdca_gap = crfopt.get_registry().optimizer("sdca-gap")
    need = sdca_gap.cls.state_memory(p, sdca_gap.resolve())
    args = ["compare", "--problem", "synthetic", "--set", "synthetic.n=30"]
    args += ["--optimizers", "sdca-gap,lbfgs", "--passes", 1, "--out", out, "--no-optimum"]
    res = invoke(*args, "--quiet", "--max-memory", need - 1)
    assert res.exit_code == 0, res.output
    table = crfopt.read_results(out)
    status = table.groupby("optimizer")["status"].last().to_dict()
    assert status == {"sdca-gap": "skipped", "lbfgs": "budget"}
    assert "1 run(s) skipped" in res.output and f"({need:,} bytes)" in res.output
    from crfopt.bench.compare import skipped_runs, unsuccessful_runs

    assert len(unsuccessful_runs(table)) == 0
    assert list(skipped_runs(table)["optimizer"]) == ["sdca-gap"]
    # the limit is not part of the run id: the same run, done now that it fits
    before = {f.name for f in result_files(out)}
    res = invoke(*args, "--quiet", "--max-memory", f"{need // 1024 + 1}K")
    assert res.exit_code == 0, res.output
    assert {f.name for f in result_files(out)} == before
    assert set(crfopt.read_results(out).groupby("run_id")["status"].last()) == {"budget"}
    bad = invoke(*args, "--quiet", "--max-memory", "lots")
    assert bad.exit_code == 2 and "bad memory size 'lots'" in bad.output


def test_one_selection_grammar_round_trips_display_names():
    """What tables show (display_name) is what --optimizers and --set read back."""
    from crfopt.bench import compare as compare_module
    from crfopt.optim import parse
    from crfopt.optim.contract import display_name

    overrides = {"non_uniformity": 0.5, "sampler": "gap", "refresh_period": None, "x": True}
    shown = display_name("sdca-gap", overrides)
    assert parse.parse_selection(shown) == ("sdca-gap", overrides)
    assert parse.split_list(f"lbfgs,{shown}, oeg") == ["lbfgs", shown, "oeg"]
    assert parse.parse_assignments(["sdca-gap.non_uniformity=0.5", "data/x.conll.lam=1e-3"]) == {
        "sdca-gap": {"non_uniformity": 0.5},
        "data/x.conll": {"lam": 1e-3},
    }
    # compare's names are the same functions, not a second parser
    assert compare_module.parse_optimizer is parse.parse_selection
    assert compare_module.split_list is parse.split_list
    with pytest.raises(crfopt.ParameterError, match=r"expected NAME\.param=value"):
        parse.parse_assignments(["sdca-gap=1"])


def test_problem_cache_is_an_object_shared_by_optimum_and_serial_runs(tmp_path, monkeypatch):
    """The problem loaded to compute P* is the one the serial runs use (one load), and a
    cache keeps at most `size` problems."""
    from crfopt.bench import execute
    from crfopt.optim.registry import get_registry

    assert not hasattr(execute, "_problem_cache")  # no module-global dict any more
    made = []
    real = execute.ProblemCache

    class Counting(real):
        def __init__(self, *a, **k):
            super().__init__(*a, **k)
            made.append(self)

    monkeypatch.setattr("crfopt.bench.compare.ProblemCache", Counting)
    crfopt.compare("synthetic", "lbfgs,sag", passes=1, out=tmp_path / "o", seeds=[0, 1])
    assert len(made) == 1 and made[0].loads == 1
    cache = real(size=1)
    reg = get_registry()
    a = cache.get(reg, "synthetic", {"n": 20})
    assert cache.get(reg, "synthetic", {"n": 20}) is a and cache.loads == 1
    cache.get(reg, "synthetic", {"n": 21})
    assert cache.get(reg, "synthetic", {"n": 20}) is not a and cache.loads == 3


def test_compare_passes_and_budget_together_is_an_error(tmp_path):
    with pytest.raises(crfopt.ParameterError, match="either passes= or budget="):
        crfopt.compare("synthetic", "lbfgs", passes=1, budget=crfopt.Budget(passes=2), out=tmp_path)
