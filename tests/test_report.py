"""crfopt report: figures, Markdown and a self-contained HTML page from a results folder."""

from __future__ import annotations

import math
import sys

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from doubles import scripted as doubles

import crfopt
from crfopt.apps.cli import main
from crfopt.bench.report import plot_frame


def test_report_from_a_fresh_comparison(tmp_path, monkeypatch):
    monkeypatch.setenv("CRFOPT_CACHE", str(tmp_path / "cache"))
    res_dir = tmp_path / "res"
    optimizers = ["lbfgs", "sdca", "sdca-gap"]
    crfopt.compare(
        "synthetic",
        optimizers,
        seeds=[0, 1],
        passes=4,
        out=res_dir,
        problem_params={"synthetic": {"n": 60}},
    )
    out = tmp_path / "report"
    res = CliRunner().invoke(main, ["report", str(res_dir), "--out", str(out)])
    assert res.exit_code == 0, res.output
    names = {p.name for p in out.iterdir()}
    for stem in ("synthetic-suboptimality", "synthetic-gap", "synthetic-test-error"):
        assert {f"{stem}.png", f"{stem}.svg"} <= names
    for png in out.glob("*.png"):
        assert png.stat().st_size < 300_000, png
    page = (out / "report.html").read_text()
    md = (out / "summary.md").read_text()
    for opt in optimizers:
        assert opt in page and f"| synthetic | {opt} |" in md
    assert page.count("data:image/png;base64,") == 3  # self-contained
    # the gap figure only shows dual methods
    assert "lbfgs estimate" not in page


def test_report_of_an_empty_folder_is_a_usage_error(tmp_path):
    (tmp_path / "empty").mkdir()
    res = CliRunner().invoke(
        main, ["report", str(tmp_path / "empty"), "--out", str(tmp_path / "o")]
    )
    assert res.exit_code == 2 and "no results" in res.output


@pytest.fixture
def warm_results(tmp_path, monkeypatch):
    """A comparison of the warm-started plugin and L-BFGS, run through the CLI."""
    monkeypatch.setenv("CRFOPT_CACHE", str(tmp_path / "cache"))
    plugins = doubles.plugin_dir(tmp_path)  # registers "warm": 6 passes of work in setup()
    res_dir = tmp_path / "res"
    res = CliRunner().invoke(
        main,
        [
            "compare",
            "--problem",
            "synthetic",
            "--set",
            "synthetic.n=40",
            "--optimizers",
            "warm,lbfgs",
            "--passes",
            "2",
            "--out",
            str(res_dir),
            "--plugin-dir",
            str(plugins),
        ],
    )
    assert res.exit_code == 0, res.output
    assert "init passes" in res.output  # the compare summary shows the setup work
    return res_dir, res.output


def test_setup_work_is_in_the_results_and_shifts_the_report_axes(warm_results):
    res_dir, _ = warm_results
    table = crfopt.read_results(res_dir)
    warm = table[table["optimizer"] == "warm"]
    lbfgs = table[table["optimizer"] == "lbfgs"]
    # the truth: 6 full-batch gradients, one counted oracle call per sequence each
    assert (warm["init_oracle_calls"] == 6 * 40).all() and (warm["init_passes"] == 6.0).all()
    assert (warm["init_time_s"] > 0).all()
    assert (lbfgs["init_passes"] == 0.0).all()
    assert warm["effective_passes"].iloc[0] == 0.0  # the iterations' axis is unchanged

    shifted, plain = plot_frame(table), plot_frame(table, init_offset=False)
    for df, offset in ((shifted, 6.0), (plain, 0.0)):
        w = df[df["optimizer"] == "warm"].sort_values("checkpoint")
        assert w["effective_passes"].iloc[0] == offset
        assert w["effective_passes"].iloc[-1] == pytest.approx(offset + 2.0)
        assert w["oracle_calls"].iloc[0] == offset * 40
        assert (w["updates"] == w["iterations"]).all()  # the update axis is not shifted
        lb = df[df["optimizer"] == "lbfgs"].sort_values("checkpoint")
        assert lb["effective_passes"].iloc[0] == 0.0  # no setup work, no shift
    w = shifted[shifted["optimizer"] == "warm"]
    assert w["time_s"].iloc[0] == pytest.approx(float(warm["init_time_s"].iloc[0]))


def test_report_init_offset_flag(warm_results, tmp_path):
    res_dir, _ = warm_results
    runner = CliRunner()
    res = runner.invoke(main, ["report", str(res_dir), "--out", str(tmp_path / "on")])
    assert res.exit_code == 0, res.output
    md = (tmp_path / "on" / "summary.md").read_text()
    assert "include each optimizer's initialization work" in md and "warm (6)" in md
    row = next(line for line in md.splitlines() if line.startswith("| synthetic | warm |"))
    header = next(line for line in md.splitlines() if line.startswith("| problem |"))
    cells = dict(zip(header.split("|"), row.split("|")))
    assert cells[" init passes "].strip() == "6" and cells[" final passes "].strip() == "8"
    res = runner.invoke(
        main, ["report", str(res_dir), "--out", str(tmp_path / "off"), "--no-init-offset"]
    )
    assert res.exit_code == 0, res.output
    md = (tmp_path / "off" / "summary.md").read_text()
    assert "iterations only" in md
    row = next(line for line in md.splitlines() if line.startswith("| synthetic | warm |"))
    cells = dict(zip(header.split("|"), row.split("|")))
    assert cells[" init passes "].strip() == "6" and cells[" final passes "].strip() == "2"


# ------------------------------------------------- the reading rules both reports share


def test_value_at_interpolates_between_the_checkpoints_around_x():
    from crfopt.bench.analysis import value_at

    xs, ys = [0.0, 1.0, 3.0], [1.0, 1e-2, 1e-4]
    # by hand: x = 2 is halfway from (1, 1e-2) to (3, 1e-4) → 10^((−2 − 4)/2) = 1e-3
    assert value_at(xs, ys, 2.0) == pytest.approx(1e-3, rel=1e-12)
    # x = 1.5: a quarter of the way, 10^(−2 − 0.5) (the first checkpoint past x reads 1e-4)
    assert value_at(xs, ys, 1.5) == pytest.approx(10**-2.5, rel=1e-12)
    assert value_at(xs, ys, 1.0) == 1e-2  # on a checkpoint: its value
    # a segment touching a value ≤ 0 (below P*'s certificate) is linear: 1 + 0.25·(−1 − 1)
    assert value_at([0.0, 2.0], [1.0, -1.0], 0.5) == pytest.approx(0.5)
    # past the last checkpoint: nan unless the run converged or ended within 2 % of x
    assert math.isnan(value_at(xs, ys, 5.0))
    assert value_at(xs, ys, 5.0, converged=True) == 1e-4
    assert value_at(xs, ys, 3.05) == 1e-4


def test_first_reach_is_the_inverse_of_value_at():
    from crfopt.bench.analysis import first_reach, value_at

    xs, ys = [0.0, 1.0, 3.0], [1.0, 1e-2, 1e-4]
    assert first_reach(xs, ys, 1e-3) == pytest.approx(2.0, rel=1e-12)  # not 3, the checkpoint
    for target in (0.5, 1e-2, 3e-3, 1e-4):
        assert value_at(xs, ys, first_reach(xs, ys, target)) == pytest.approx(target, rel=1e-9)
    assert first_reach(xs, ys, 2.0) == 0.0
    assert first_reach(xs, ys, 1e-5) == math.inf


def _trace(opt, seed, xs, ys, status="max_passes"):
    return pd.DataFrame(
        {
            "problem": "p",
            "optimizer": opt,
            "seed": seed,
            "run_id": f"{opt}-{seed}",
            "checkpoint": range(len(xs)),
            "effective_passes": xs,
            "oracle_calls": [10.0 * x for x in xs],
            "time_s": xs,
            "init_passes": 0.0,
            "relative_suboptimality": ys,
            "test_error": 0.1,
            "status": status,
        }
    )


def test_report_summary_reads_efforts_on_the_interpolated_curve():
    """An OEG-like run whose checkpoints land past the marks: 1e-2 is crossed at 2 passes
    (log-linear between 1e-1 at 1.0 and 1e-3 at 3.0), not at the checkpoint 3.0."""
    from crfopt.bench.report import summary_table

    df = pd.concat(
        [
            _trace("oeg", 0, [0.0, 1.0, 3.0, 5.0], [1.0, 1e-1, 1e-3, 1e-5]),
            _trace("oeg", 1, [0.0, 1.5, 3.5, 5.5], [1.0, 1e-1, 1e-3, 1e-5]),
            _trace("oeg", 2, [0.0, 2.0, 4.0], [1.0, 1e-1, 1e-2]),
        ]
    )
    row = summary_table(df).iloc[0]
    # by hand: the seeds cross 1e-2 at 2.0, 2.5 and 4.0 → median 2.5; 1e-4 at 4.0, 4.5, never
    assert row["passes to 0.01"] == pytest.approx(2.5)
    assert row["oracle calls to 0.01"] == pytest.approx(25.0)
    assert row["passes to 0.0001"] == pytest.approx(4.5)
    assert math.isnan(row["passes to 1e-06"])


def test_median_value_at_leaves_out_runs_that_stopped_short():
    from crfopt.bench.analysis import median_value_at

    df = pd.concat(
        [
            _trace("a", 0, [0.0, 1.0, 3.0], [1.0, 1e-2, 1e-4]),
            _trace("a", 1, [0.0, 2.0, 4.0], [1.0, 1e-1, 1e-3]),
            _trace("a", 2, [0.0, 1.0], [1.0, 1e-1]),  # its budget ended at 1 pass
        ]
    )
    # by hand: 1e-3 and 1e-1 at x = 2; the third run never got there
    assert median_value_at(df, "relative_suboptimality", 2.0) == pytest.approx(
        float(np.median([1e-3, 1e-1]))
    )


def test_line_styles_pin_the_paper_methods_and_never_repeat_a_style():
    import seaborn as sns

    from crfopt.bench.analysis import FIXED_COLOURS, line_styles

    tab = sns.color_palette("tab10", 10)
    names = [f"m{k:02d}" for k in range(25)] + ["oeg", "sdca"]
    styles = line_styles(names)
    assert styles["oeg"] == (tab[FIXED_COLOURS["oeg"]], "-")
    assert line_styles(["x", "sdca"])["sdca"] == styles["sdca"]  # in every figure
    assert len(set(map(lambda cs: (tuple(cs[0]), cs[1]), styles.values()))) == len(names)
    assert line_styles(["x", "y"]) == {"x": (tab[0], "-"), "y": (tab[1], "-")}


def test_report_and_reproduce_share_one_analysis_module(monkeypatch):
    """reports/reproduce.py reads and draws through crfopt.bench.analysis, like the report."""
    import importlib.util
    from pathlib import Path

    import crfopt.bench.analysis as analysis
    import crfopt.bench.report as report

    path = Path(__file__).resolve().parents[1] / "reports" / "reproduce.py"
    spec = importlib.util.spec_from_file_location("reproduce_under_test", path)
    reproduce = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, reproduce)  # its dataclasses look it up
    spec.loader.exec_module(reproduce)
    tables = sys.modules["repro_tables"]  # its tables, imported from its folder
    for name in ("curve_figure", "line_styles"):
        assert getattr(reproduce, name) is getattr(analysis, name)
    for name in ("spread_value_at", "spread_reach", "format_spread"):
        assert getattr(tables, name) is getattr(analysis, name)
    assert (
        report.line_styles is analysis.line_styles and report.curve_figure is analysis.curve_figure
    )
    # and its numbers read the interpolated curve
    df = _trace("oeg", 0, [0.0, 1.0, 3.0], [1.0, 1e-2, 1e-4]).rename(
        columns={"relative_suboptimality": "subopt"}
    )
    assert reproduce.at(df, "oeg", "subopt", 2.0).median == pytest.approx(1e-3)
    assert reproduce.reach(df, "oeg", 1e-3).median == pytest.approx(2.0)


def _three_seeds():
    return pd.concat(
        [
            _trace("a", 0, [0.0, 1.0, 3.0], [1.0, 1e-2, 1e-4]),
            _trace("a", 1, [0.0, 2.0, 4.0], [1.0, 1e-1, 1e-3]),
            _trace("a", 2, [0.0, 2.0, 4.0], [1.0, 1e-2, 1e-6]),
        ]
    )


def test_spreads_are_the_median_and_range_over_seeds():
    from crfopt.bench.analysis import (
        Spread,
        median_reach,
        median_value_at,
        spread_reach,
        spread_value_at,
    )

    df = _three_seeds()
    # by hand at x = 2: seed 0 between 1e-2 @1 and 1e-4 @3 → 1e-3; seeds 1, 2 at checkpoints
    sp = spread_value_at(df, "relative_suboptimality", 2.0)
    assert (sp.median, sp.low, sp.high, sp.count) == pytest.approx((1e-2, 1e-3, 1e-1, 3))
    assert sp.median == median_value_at(df, "relative_suboptimality", 2.0, by="seed")
    # 1e-3 is reached at 2.0 (seed 0), 4.0 (seed 1), and a quarter of the way in log from
    # 1e-2 @2 to 1e-6 @4 for seed 2: 2.5
    r = spread_reach(df, "relative_suboptimality", 1e-3)
    assert (r.median, r.low, r.high) == pytest.approx((2.5, 2.0, 4.0))
    assert r.median == median_reach(df, "relative_suboptimality", 1e-3, by="seed")
    never = spread_reach(df, "relative_suboptimality", 1e-6)
    assert never.high == math.inf and never.median == math.inf
    assert Spread.of([]).count == 0


def test_ratios_pair_seed_k_with_seed_k_and_format_with_their_spread():
    from crfopt.bench.analysis import Spread, format_spread, spread_ratio

    a = _three_seeds()
    b = a.assign(relative_suboptimality=a["relative_suboptimality"] / 4.0)
    b.loc[b["seed"] == 2, "relative_suboptimality"] /= 2.0  # seed 2 of b is 8x lower
    sp = spread_ratio(a, b, "relative_suboptimality", 2.0)
    assert (sp.median, sp.low, sp.high, sp.count) == pytest.approx((4.0, 4.0, 8.0, 3))
    assert format_spread(Spread(3.1, 2.5, 3.8, 3), ratio=True) == "×3.1 [2.5–3.8]"
    assert format_spread(Spread(1.24e-3, 9.8e-4, 1.5e-3, 5)) == "1.24e-03 [9.80e-04–1.50e-03]"
    assert format_spread(Spread(0.5, 0.5, 0.5, 1)) == "0.5"  # one run: no range to show
    assert format_spread(Spread(2.0, 1.5, math.inf, 3)) == "2 [1.5–not reached]"


def test_curve_band_puts_runs_on_one_grid():
    """Seeds whose checkpoints differ still share a median and a band at every x."""
    from crfopt.bench.analysis import curve_band

    df = pd.concat(
        [
            _trace("a", 0, [0.0, 2.0], [1.0, 1e-2]),
            _trace("a", 1, [1.0, 3.0], [1e-1, 1e-3]),  # starts after init work
        ]
    )
    band = curve_band(df, "effective_passes", "relative_suboptimality").set_index("x")
    assert list(band.index) == [0.0, 1.0, 2.0, 3.0]
    # x = 0: only seed 0 had started; x = 1: seed 0 interpolated to 1e-1, seed 1 at 1e-1
    assert band.loc[0.0, "count"] == 1 and band.loc[0.0, "median"] == 1.0
    assert band.loc[1.0, ["low", "high"]].tolist() == pytest.approx([1e-1, 1e-1])
    # x = 2: 1e-2 and seed 1's 10^-2 (halfway in log between 1e-1 and 1e-3)
    assert band.loc[2.0, "median"] == pytest.approx(1e-2)
    # x = 3: seed 0 ended at 2 (not within 2 %): only seed 1 is left
    assert band.loc[3.0, "count"] == 1 and band.loc[3.0, "median"] == pytest.approx(1e-3)
