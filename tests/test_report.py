"""crfopt report: figures, Markdown and a self-contained HTML page from a results folder."""

from __future__ import annotations

from click.testing import CliRunner

import crfopt
from crfopt.cli import main


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
