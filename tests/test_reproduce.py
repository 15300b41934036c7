"""reports/reproduce.py: seeds and budgets per scale, packed runs, outputs from the packs.

One small grid on the synthetic problem stands in for the paper's: it is run, packed, its
working folder deleted (a fresh clone has only the packs), and the outputs regenerated
from the pack must equal those from the run files.
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _module(monkeypatch):
    """reports/reproduce.py as a module (registered: its dataclasses look themselves up)."""
    spec = importlib.util.spec_from_file_location("reproduce", ROOT / "reports" / "reproduce.py")
    mod = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "reproduce", mod)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture()
def rep(tmp_path, monkeypatch):
    mod = _module(monkeypatch)
    monkeypatch.setattr(mod, "RESULTS", tmp_path / "results")
    monkeypatch.setattr(mod, "FIGURES", tmp_path / "figures")
    monkeypatch.setattr(mod, "HERE", tmp_path)
    grid = mod.Grid("synthetic", 2, 1, ("sdca", "sg", "sg-nus"), "test grid", seeds=(0, 1, 2))
    monkeypatch.setattr(mod, "GRIDS", {"synthetic": grid})
    monkeypatch.setattr(mod, "SIZES", {"synthetic": (1000, 4, 3)})
    monkeypatch.setattr(mod, "QUICK_OPTIMIZERS", {"synthetic": 3})
    monkeypatch.setattr(mod, "SECONDS_BUDGETS", {})  # no seconds grid unless a test says so
    return mod


def test_every_paper_grid_has_the_papers_seeds_and_budgets(monkeypatch):
    mod = _module(monkeypatch)
    want = {"ocr": 50, "conll2000": 30, "ner-nl": 30, "pos-ewt": 20, "pos-conll2000": 20}
    for name, grid in mod.GRIDS.items():
        assert grid.budget("paper") >= want[name], name
        main = [o for o in grid.optimizers if o in mod.MAIN]
        assert main and all(len(grid.seeds_of("paper", o)) >= 3 for o in grid.optimizers)
        for o in main:  # the main figures' methods: 5 seeds on OCR (issue 22)
            assert len(grid.seeds_of("paper", o)) >= (5 if name == "ocr" else 3), (name, o)
        assert all(len(grid.seeds_of("quick", o)) == 1 for o in grid.optimizers)
    for name in ("ocr", "conll2000", "ner-nl", "pos-ewt"):
        assert {"sg", "sg-nus"} <= set(mod.GRIDS[name].optimizers), name  # E9's sixth claim
    assert "sg-nus" in mod.SBA15_FIGURE


def test_list_prints_runs_and_an_estimate(rep, capsys):
    rep.main(["--list"])
    out = capsys.readouterr().out
    assert "synthetic: 3 optimizers × 3 seeds = 9 runs, 2 passes" in out
    assert "optimizer seconds" in out
    # quick: 3 runs of 1 pass calibrate to QUICK_HOURS; paper is 9 runs of 2 passes: 6×
    assert f"~{6 * rep.QUICK_HOURS:.0f} h of one process" in out


def test_pack_round_trip_and_outputs_from_the_pack(rep, tmp_path):
    rep.run_grids(["synthetic"], "paper")
    pack = rep.pack_path("synthetic", "paper")
    assert pack.exists()
    folder = rep.run_dir("synthetic", "paper")
    from_files = rep.load("synthetic")
    assert from_files["seed"].nunique() == 3 and from_files["optimizer"].nunique() == 3

    rep.make_outputs()
    numbers = (tmp_path / "numbers.md").read_text()
    figures = {p.name: p.read_bytes() for p in (tmp_path / "figures").glob("*.png")}
    assert {"synthetic-main.png", "synthetic-seconds.png", "synthetic-test-error.png"} <= set(
        figures
    )
    assert " [" in numbers and "–" in numbers  # readings carry their spread over seeds

    shutil.rmtree(folder)  # a fresh clone: the pack only
    from_pack = rep.load("synthetic")
    cols = ["run_id", "checkpoint", "subopt", "effective_passes", "time_s", "test_error"]
    key = ["run_id", "checkpoint"]
    a = from_files[cols].sort_values(key).reset_index(drop=True)
    b = from_pack[cols].sort_values(key).reset_index(drop=True)
    assert a.equals(b)
    assert from_pack.attrs["runs"] == from_files.attrs["runs"]
    for p in (tmp_path / "figures").glob("*.png"):
        p.unlink()
    rep.make_outputs()
    assert (tmp_path / "numbers.md").read_text() == numbers
    again = {p.name: p.read_bytes() for p in (tmp_path / "figures").glob("*.png")}
    assert again == figures  # byte-identical

    # a rerun restores the runs from the pack and computes nothing
    assert rep.unpack("synthetic", "paper") == 9
    assert rep.unpack("synthetic", "paper") == 0
    before = {p.name for p in folder.glob("run-*.parquet")}
    rep.run_grids(["synthetic"], "paper")
    assert {p.name for p in folder.glob("run-*.parquet")} == before


def test_a_changed_pack_is_refused(rep):
    import pyarrow.parquet as pq

    rep.GRIDS["synthetic"] = rep.Grid("synthetic", 1, 1, ("sg",), "t", seeds=(0,))
    rep.run_grids(["synthetic"], "paper")
    path = rep.pack_path("synthetic", "paper")
    table = pq.read_table(path)
    frame = table.to_pandas()
    frame.loc[frame.index[-1], "primal"] = frame["primal"].iloc[-1] + 1e-9
    import pyarrow as pa

    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path)
    with pytest.raises(ValueError, match="checksum"):
        rep.read_pack(path)


def test_seconds_methods_run_one_at_a_time_first_and_the_rest_in_parallel(
    rep, tmp_path, monkeypatch
):
    """--jobs 2: the seconds figure's runs stay serial (and come first), the others go to
    joblib workers; every run records the load average it saw, and numbers.md says both."""
    monkeypatch.setattr(rep, "SECONDS_METHODS", ("sdca",))
    calls = []
    real = rep.crfopt.compare

    def spy(problem, optimizers, **kw):
        calls.append((list(optimizers), kw.get("backend"), kw.get("n_jobs")))
        return real(problem, optimizers, **kw)

    monkeypatch.setattr(rep.crfopt, "compare", spy)
    rep.run_grids(["synthetic"], "paper", jobs=2)
    assert calls == [(["sdca"], None, None), (["sg", "sg-nus"], "joblib", 2)]

    df = rep.load("synthetic")
    last = df.groupby("run_id").tail(1)
    backends = {o: set(g["backend"].astype(str)) for o, g in last.groupby("optimizer")}
    assert backends == {"sdca": {"serial"}, "sg": {"joblib"}, "sg-nus": {"joblib"}}
    assert last["load_start"].notna().all() and last["load_end"].notna().all()
    assert (last["load_end"] >= 0).all()

    where = " ".join(rep.where_lines(df, rep.SECONDS_METHODS))
    assert "The seconds figure's 3 runs: backend serial" in where
    assert "The other 6 runs: backend joblib; threads 1" in where
    assert "load average at their start" in where and "3 of 3 runs recorded it" in where
    assert "did not run one at a time" not in where

    with pytest.raises(ValueError, match="--jobs"):
        rep.run_grids(["synthetic"], "paper", jobs=0)


def test_seconds_runs_outside_the_serial_backend_are_flagged(rep, monkeypatch):
    monkeypatch.setattr(rep, "SECONDS_METHODS", ())  # every run goes to the workers
    rep.run_grids(["synthetic"], "paper", jobs=2)
    monkeypatch.setattr(rep, "SECONDS_METHODS", ("sg",))  # read as if sg were timed
    where = " ".join(rep.where_lines(rep.load("synthetic"), rep.SECONDS_METHODS))
    assert "did not run one at a time" in where


def test_outputs_wait_for_every_run_of_every_grid(rep, tmp_path, capsys):
    """A grid lacking runs (a checkpoint pack, a grid still running) leaves numbers.md and
    the figures alone: a partial regeneration cannot be committed by accident."""
    rep.GRIDS["synthetic"] = rep.Grid("synthetic", 1, 1, ("sg", "sg-nus"), "t", seeds=(0, 1))
    rep.run_grids(["synthetic"], "paper")
    gone = [p for p in rep.run_dir("synthetic", "paper").glob("run-*.parquet")]
    frame = rep.load("synthetic")
    victim = frame[(frame["optimizer"] == "sg-nus") & (frame["seed"] == 1)]["run_id"].iloc[0]
    [path] = [p for p in gone if victim in p.name]
    path.unlink()
    rep.pack("synthetic", "paper")  # the checkpoint pack holds 3 of the 4 runs

    with pytest.raises(rep.IncompleteGrids) as err:
        rep.make_outputs()
    assert err.value.missing == {"synthetic": [("sg-nus", 1)]}
    assert "1 of 4 runs missing (sg-nus seed 1)" in str(err.value)
    assert not (tmp_path / "numbers.md").exists()
    assert rep.main(["--figures-only"]) == 2
    assert "--only synthetic" in capsys.readouterr().err
    assert not (tmp_path / "numbers.md").exists() and not (tmp_path / "figures").exists()

    assert rep.main(["--figures-only", "--partial"]) == 0  # a preview, on request
    assert (tmp_path / "numbers.md").exists()

    # the rerun computes the missing run from the checkpoint and then writes the outputs
    (tmp_path / "numbers.md").unlink()
    assert rep.main([]) == 0
    assert rep.missing_runs({"synthetic": rep.load("synthetic")}, "paper") == {}
    assert (tmp_path / "numbers.md").exists()


def test_ablations_may_take_fewer_seeds_than_the_main_methods(rep, monkeypatch):
    """OCR's grid: 5 seeds for the main figures' methods, 3 for the ablations; each group
    is one `crfopt.compare` call with its seeds, and completeness counts each its own."""
    rep.GRIDS["synthetic"] = rep.Grid(
        "synthetic", 1, 1, ("sdca", "sg", "sg-nus"), "t", seeds=(0, 1, 2), ablation_seeds=(0,)
    )
    grid = rep.GRIDS["synthetic"]
    assert grid.runs("paper") == [("sdca", 0), ("sdca", 1), ("sdca", 2), ("sg", 0), ("sg-nus", 0)]
    assert grid.describe("paper") == "1 main methods × 3 seeds + 2 others × 1 seeds"
    assert grid.runs("quick") == [("sdca", 0), ("sg", 0), ("sg-nus", 0)]
    calls = []
    real = rep.crfopt.compare

    def spy(problem, optimizers, **kw):
        calls.append((list(optimizers), tuple(kw["seeds"])))
        return real(problem, optimizers, **kw)

    monkeypatch.setattr(rep.crfopt, "compare", spy)
    rep.run_grids(["synthetic"], "paper")
    assert calls == [(["sdca"], (0, 1, 2)), (["sg", "sg-nus"], (0,))]
    frame = rep.load("synthetic")
    assert sorted(set(zip(frame["optimizer"], frame["seed"].astype(int)))) == sorted(
        grid.runs("paper")
    )
    assert rep.missing_runs({"synthetic": frame}, "paper") == {}
    rep.GRIDS["synthetic"] = rep.Grid(
        "synthetic", 1, 1, ("sdca", "sg", "sg-nus"), "t", seeds=(0, 1, 2), ablation_seeds=(0, 1)
    )
    assert rep.missing_runs({"synthetic": frame}, "paper") == {
        "synthetic": [("sg", 1), ("sg-nus", 1)]
    }


def test_the_seconds_grid_gives_every_main_method_the_same_seconds(rep, tmp_path, monkeypatch):
    """Issue 47 item 4: on the seconds axis no curve may stop where another goes on, so
    the seconds figure has its own grid, every main method given the same seconds."""
    monkeypatch.setattr(rep, "SECONDS_BUDGETS", {"synthetic": 0.5})
    monkeypatch.setattr(rep, "SECONDS_SEEDS", (0, 1))
    monkeypatch.setattr(rep, "MAIN", ("sdca", "sg"))
    rep.run_grids(["synthetic"], "paper")
    with pytest.raises(rep.IncompleteGrids) as err:  # the outputs wait for it too
        rep.make_outputs()
    assert set(err.value.missing) == {"synthetic-seconds"}
    assert "--seconds --only synthetic" in str(err.value)

    assert rep.main(["--seconds", "--only", "synthetic"]) == 0
    assert rep.pack_path("synthetic-seconds", "paper").exists()
    last = rep.load("synthetic-seconds").groupby("run_id").tail(1)
    assert set(zip(last["optimizer"], last["seed"])) == {
        (o, s) for o in ("sdca", "sg") for s in (0, 1)
    }
    # each ran until its seconds were spent (stopping at the first checkpoint past them)
    # or it reached 1e-8·P*: not for the passes grid's 2 passes, nor for the 10 passes a
    # budget's default would have given (on either kernel path, whatever a pass costs)
    frame = rep.load("synthetic-seconds", init_offset=False)  # the budget's own clock
    for _, run in frame.groupby("run_id"):
        if run["status"].iloc[-1] == "converged":
            continue
        assert run["status"].iloc[-1] == "budget"
        assert run["time_s"].iloc[-2] < 0.5 <= run["time_s"].iloc[-1]
    assert not (last["status"] == "converged").all()
    numbers = (tmp_path / "numbers.md").read_text()
    assert "Seconds figure (0.5 optimizer seconds each" in numbers
    assert "| sdca |" in numbers and "s per effective pass" in numbers
    assert (tmp_path / "figures" / "synthetic-seconds.png").exists()
