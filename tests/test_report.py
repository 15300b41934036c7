"""crfopt report: figures, Markdown and a self-contained HTML page from a results folder."""

from __future__ import annotations

import textwrap

import pytest
from click.testing import CliRunner

import crfopt
from crfopt.apps.cli import main
from crfopt.bench.report import plot_frame

WARM = '''
"""Test plugin: 6 passes of full gradient descent in setup(), then SGD steps."""
import crfopt

class Warm(crfopt.Optimizer):
    """A warm start: its setup() does many passes of counted work."""
    parameters = {"warm_passes": crfopt.Param(6, int, "passes of gradient descent in setup")}
    capabilities = frozenset({"stochastic"})

    def setup(self):
        self._w = self.problem.zeros()
        for _ in range(self.params["warm_passes"]):
            _, g = self.problem.value_and_gradient(self._w)  # n counted oracle calls
            self._w -= 0.5 * g

    @property
    def w(self):
        return self._w

    def step(self):
        i = int(self.rng.integers(self.problem.n))
        g = self.problem.oracle(i, self._w, gradient=True).gradient.to_dense(self.problem)
        self._w -= 0.01 * (g + self.problem.lam * self._w)
        self.count(iterations=1, updates=1)

@crfopt.hookimpl
def crfopt_register_optimizers():
    return [crfopt.OptimizerSpec("warm", Warm, summary="test plugin", reference="tests")]
'''


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
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / "warm.py").write_text(textwrap.dedent(WARM), encoding="utf-8")
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
