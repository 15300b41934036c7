"""crfopt report's interactive page (crfopt/bench/interactive.py): what it embeds.

The page's numbers are parsed back from its JSON and checked against the results read
independently from the Parquet files (the raw counters plus the run's init work, the
suboptimality divided by the P(0) stored in the run's metadata), not against the
module's own helpers.
"""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest

import crfopt
from crfopt.bench.interactive import QUANTITIES, write_interactive
from crfopt.bench.report import make_report, plot_frame
from crfopt.bench.results import read_results

OPTIMIZERS = ["lbfgs", "sdca", "sdca-gap"]
SEEDS = [0, 1]
DATA_RE = re.compile(r'<script type="application/json" id="crfopt-data">(.*?)</script>', re.S)


def _strict(text: str) -> object:
    """JSON.parse's reading: NaN / Infinity are not JSON and would break the page."""

    def refuse(name: str) -> None:
        raise ValueError(f"{name} in the page's JSON")

    return json.loads(text, parse_constant=refuse)


def page_data(page: str) -> dict:
    found = DATA_RE.findall(page)
    assert len(found) == 1, "the page embeds its data exactly once"
    return _strict(found[0])


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """A small comparison: 3 fast optimizers (one primal, two dual), 2 seeds each."""
    out = tmp_path_factory.mktemp("interactive") / "res"
    crfopt.compare(
        "synthetic",
        OPTIMIZERS,
        seeds=SEEDS,
        passes=3,
        out=out,
        problem_params={"synthetic": {"n": 60}},
    )
    return out


@pytest.fixture(scope="module")
def report(results, tmp_path_factory):
    out = tmp_path_factory.mktemp("interactive") / "report"
    return make_report(results, out, formats=("png",))


def test_report_writes_and_links_the_interactive_page(report):
    assert report.interactive == report.out_dir / "interactive.html"
    page = report.interactive.read_text(encoding="utf-8")
    data = page_data(page)
    assert set(data["problems"]) == {"synthetic"}
    prob = data["problems"]["synthetic"]
    assert prob["optimizers"] == sorted(OPTIMIZERS)
    assert set(data["optimizers"]) == set(OPTIMIZERS)
    # every run of every optimizer, each with its seed
    seen = sorted((r["optimizer"], r["seed"]) for r in prob["runs"])
    assert seen == sorted((o, s) for o in OPTIMIZERS for s in SEEDS)
    assert 'href="interactive.html"' in report.html.read_text(encoding="utf-8")
    assert "(interactive.html)" in report.markdown.read_text(encoding="utf-8")


def test_the_page_keeps_the_report_title(report, results, tmp_path):
    """The heading is the report's title (no figure's title leaks into it)."""
    data = page_data(report.interactive.read_text(encoding="utf-8"))
    assert data["title"] == "crfopt comparison report"
    assert "<h1>crfopt comparison report</h1>" in report.html.read_text(encoding="utf-8")
    mine = make_report(results, tmp_path, formats=("png",), title="Sweep & co")
    assert page_data(mine.interactive.read_text(encoding="utf-8"))["title"] == "Sweep & co"


def test_page_needs_no_network(report):
    from plotly.offline import get_plotlyjs

    page = report.interactive.read_text(encoding="utf-8")
    srcs = re.findall(r"<script[^>]*\bsrc\s*=\s*['\"]?([^'\" >]+)", page, re.I)
    assert not [s for s in srcs if re.match(r"(https?:)?//", s)], srcs
    assert not re.search(r"<link[^>]+href=['\"]?(https?:)?//", page, re.I)
    # plotly.js itself is inlined, whole
    assert get_plotlyjs() in page


def test_embedded_numbers_are_the_results(results, report):
    """Runs, axes (with the init offset) and quantities equal the Parquet files' values."""
    frame = read_results(results)
    meta = frame.attrs["runs"]
    data = page_data(report.interactive.read_text(encoding="utf-8"))
    runs = data["problems"]["synthetic"]["runs"]
    assert {r["run_id"] for r in runs} == set(frame["run_id"])
    shift = {"effective_passes": "init_passes", "oracle_calls": "init_oracle_calls"}
    shift["time_s"] = "init_time_s"
    for run in runs:
        raw = frame[frame["run_id"] == run["run_id"]].sort_values("checkpoint")
        assert run["optimizer"] == raw["optimizer"].iloc[0]
        assert run["seed"] == int(raw["seed"].iloc[0])
        assert run["params"] == json.loads(raw["params"].iloc[0])
        assert run["checkpoint"] == [int(c) for c in raw["checkpoint"]]
        for axis in ("effective_passes", "oracle_calls", "time_s", "updates"):
            want = raw[axis].astype(float).to_numpy()
            if axis in shift:  # the init offset: setup() work is charged (default on)
                want = want + raw[shift[axis]].astype(float).fillna(0.0).to_numpy()
            np.testing.assert_allclose(run["x"][axis], want, rtol=1e-12, err_msg=axis)
        p0 = float(meta[run["run_id"]]["P0"])
        for col, q in (
            ("suboptimality", "relative_suboptimality"),
            ("duality_gap", "relative_gap"),
            ("gap_estimate", "relative_gap_estimate"),
            ("test_error", "test_error"),
        ):
            want = raw[col].astype(float).to_numpy()
            if q != "test_error":
                want = want / p0
            got = np.array([math.nan if v is None else v for v in run["y"][q]])
            np.testing.assert_allclose(got, want, rtol=1e-12, equal_nan=True, err_msg=q)
    # a primal method has no gap estimate: nulls, not NaN (strict JSON parsed above)
    lbfgs = [r for r in runs if r["optimizer"] == "lbfgs"]
    assert all(v is None for r in lbfgs for v in r["y"]["relative_gap_estimate"])
    # the dual methods start after their initialization work (the ◇ of the figures)
    starts = data["problems"]["synthetic"]["starts"]
    assert "lbfgs" not in starts
    for opt in ("sdca", "sdca-gap"):
        init = frame[(frame["optimizer"] == opt) & (frame["checkpoint"] == 0)]
        x0 = float(np.median(init["effective_passes"].astype(float) + init["init_passes"]))
        assert starts[opt]["effective_passes"]["relative_suboptimality"][0] == pytest.approx(x0)
        assert x0 > 0


def test_bands_are_the_seed_median_min_and_max(results, report):
    """The band at each x: min / median / max over the seeds' values at that x."""
    frame = plot_frame(read_results(results))
    data = page_data(report.interactive.read_text(encoding="utf-8"))
    bands = data["problems"]["synthetic"]["bands"]
    assert set(bands) == set(OPTIMIZERS)
    checked = 0
    for opt in OPTIMIZERS:
        assert "time_s" not in bands[opt]  # every run alone on the seconds axis
        for axis in ("effective_passes", "oracle_calls", "updates"):
            for q in ("relative_suboptimality", "test_error"):
                band = bands[opt][axis][q]["all"]
                sub = frame[frame["optimizer"] == opt]
                xs = sorted(set(sub[axis].dropna()))
                assert band["x"] == pytest.approx(xs)
                for i, x in enumerate(xs):
                    vals = sub.loc[sub[axis] == x, q].dropna().to_numpy()
                    assert band["median"][i] == pytest.approx(float(np.median(vals)))
                    assert band["min"][i] == pytest.approx(float(vals.min()))
                    assert band["max"][i] == pytest.approx(float(vals.max()))
                    assert band["count"][i] == len(vals)
                    checked += 1
    assert checked > 30


def test_init_offset_off_plots_the_iterations_alone(results, tmp_path):
    frame = read_results(results)
    path = write_interactive(plot_frame(frame, init_offset=False), tmp_path, init_offset=False)
    data = page_data(path.read_text(encoding="utf-8"))
    assert data["init_offset"] is False
    assert "init" not in data["axes"]["effective_passes"]
    assert data["problems"]["synthetic"]["starts"] == {}
    for run in data["problems"]["synthetic"]["runs"]:
        raw = frame[frame["run_id"] == run["run_id"]].sort_values("checkpoint")
        np.testing.assert_allclose(
            run["x"]["effective_passes"], raw["effective_passes"].astype(float).to_numpy()
        )


def test_every_quantity_and_axis_is_offered(report):
    data = page_data(report.interactive.read_text(encoding="utf-8"))
    assert list(data["quantities"]) == list(QUANTITIES)
    assert set(data["axes"]) == {"oracle_calls", "updates", "effective_passes", "time_s"}
    assert data["axes"]["effective_passes"] == "effective passes, init + iterations"
    assert data["quantities"]["relative_suboptimality"]["log"] is True
    assert data["quantities"]["test_error"]["log"] is False


def test_text_cannot_close_the_data_script(results, tmp_path):
    """A title (or parameter) holding '</script>' stays data: the JSON still parses."""
    title = "</script><script>alert(1)</script> & <b>"
    frame = plot_frame(read_results(results))
    path = write_interactive(frame, tmp_path, title=title)
    page = path.read_text(encoding="utf-8")
    assert page_data(page)["title"] == title
    assert "<script>alert(1)" not in page


def test_a_frame_that_is_not_a_plot_frame_is_refused(results, tmp_path):
    with pytest.raises(ValueError, match="plot_frame"):
        write_interactive(read_results(results), tmp_path)
