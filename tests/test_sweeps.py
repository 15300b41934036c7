"""Parameter sweeps in the selection grammar and the post-hoc best-of of ``crfopt report``.

``sg[step_size=1,0.1]`` expands into one run per value (issue 21 item 2); ``--best-of
sg:step_size`` keeps the value with the lowest final relative sub-optimality, median over
seeds. The expectations here are written out by hand (the runs a sweep stands for, the
value a hand-made frame must keep) or read back from the stored traces themselves.
"""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from crfopt.apps.cli import main
from crfopt.bench.analysis import best_of, parse_best_of
from crfopt.bench.plan import expand_grid
from crfopt.bench.results import read_results
from crfopt.optim.contract import ParameterError
from crfopt.optim.parse import expand_selection, parse_selection, parse_sweep, split_list

# ------------------------------------------------------------------------------ grammar


@pytest.mark.parametrize(
    ("text", "runs"),
    [
        ("lbfgs", [("lbfgs", {})]),
        (
            "sdca-gap[non_uniformity=0.5,sampler=gap]",
            [("sdca-gap", {"non_uniformity": 0.5, "sampler": "gap"})],
        ),
        ("sg[step_size=1,0.1,0.01]", [("sg", {"step_size": v}) for v in (1, 0.1, 0.01)]),
        ("sg[step_size=[1,0.1,0.01]]", [("sg", {"step_size": v}) for v in (1, 0.1, 0.01)]),
        (
            "sdca-gap[non_uniformity=0,0.5,0.8,1]",
            [("sdca-gap", {"non_uniformity": v}) for v in (0, 0.5, 0.8, 1)],
        ),
        (
            # two swept parameters: every combination, the first varying slowest
            "sg[step_size=1,0.1,schedule=constant,decaying]",
            [
                ("sg", {"step_size": 1, "schedule": "constant"}),
                ("sg", {"step_size": 1, "schedule": "decaying"}),
                ("sg", {"step_size": 0.1, "schedule": "constant"}),
                ("sg", {"step_size": 0.1, "schedule": "decaying"}),
            ],
        ),
        ("sg[schedule=constant,step_size=[1e-3,none]]", [
            ("sg", {"schedule": "constant", "step_size": 1e-3}),
            ("sg", {"schedule": "constant", "step_size": None}),
        ]),
    ],
)  # fmt: skip
def test_a_sweep_expands_into_one_run_per_combination(text, runs):
    assert expand_selection(text) == runs
    # a list of several selections still splits only outside brackets
    assert split_list(f"lbfgs,{text}, oeg") == ["lbfgs", text, "oeg"]


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("sg[1,0.1]", "expected param=value first"),
        ("sg[step_size=1,1.0]", "given twice"),
        ("sg[step_size=1,step_size=2]", "given twice"),
        ("sg[step_size=[1,0.1],0.01]", "either param=v1,v2"),
        ("sg[step_size=[]]", "empty value list"),
        ("sg[step_size=[1,[2]]]", "bad value list"),
        ("SG[step_size=1]", "expected NAME"),
    ],
)
def test_malformed_sweeps_are_parameter_errors_saying_what_is_expected(text, says):
    with pytest.raises(ParameterError, match=re.escape(says)):
        parse_sweep(text)


def test_one_selection_refuses_a_sweep():
    assert parse_selection("sg[step_size=0.1]") == ("sg", {"step_size": 0.1})
    with pytest.raises(ParameterError, match="sweep over step_size"):
        parse_selection("sg[step_size=1,0.1]")


# ------------------------------------------------------------------------------ grid


def test_a_swept_grid_has_one_task_per_value_and_seed_with_distinct_run_ids(tmp_path):
    tasks = expand_grid(
        ["synthetic"], ["sg[step_size=1,0.1,0.01]", "lbfgs"], seeds=[0, 1], out=tmp_path
    )
    got = [(t.optimizer, dict(t.overrides), t.seed) for t in tasks]
    want = [("sg", {"step_size": v}, s) for v in (1, 0.1, 0.01) for s in (0, 1)]
    assert got == [*want, ("lbfgs", {}, 0), ("lbfgs", {}, 1)]
    assert len({t.run_id for t in tasks}) == len(tasks)
    # the step size reaches the run key as the parameter's type (1 → 1.0)
    assert [t.config["params"]["step_size"] for t in tasks[:6:2]] == [1.0, 0.1, 0.01]
    assert [t.label for t in tasks[:2]] == [
        "synthetic · sg[step_size=1] · seed 0",
        "synthetic · sg[step_size=1] · seed 1",
    ]


@pytest.mark.parametrize(
    ("selection", "says"),
    [
        ("sdca-gap[non_uniformity=0,0.5,1.5]", "non_uniformity accepts float [0, 1]"),
        ("sg[step_size=0.1,-1]", "step_size accepts float ≥ 0"),
        ("sg[step_size=0.1,fast]", "expects float"),
        ("sg[schedule=decaying,sometimes]", "schedule accepts str decaying | constant"),
        ("sg[stepsize=0.1,1]", "valid parameters: schedule, step_size"),
    ],
)
def test_every_swept_value_is_checked_before_any_run(tmp_path, selection, says):
    with pytest.raises(ParameterError, match=re.escape(says)) as info:
        expand_grid(["synthetic"], [selection], out=tmp_path)
    assert not (tmp_path / "results").exists()
    if "accepts" in says:  # names the offending run, not only the variant
        bad = selection.split("=")[1].rstrip("]").split(",")[-1]
        assert f"={bad}]" in str(info.value)


# ------------------------------------------------------------------------------ best-of


def _frame() -> pd.DataFrame:
    """Hand-made finals: per (problem, step, seed) a trace of relative sub-optimality.

    On 'a', step 0.1 must be kept (median 0.2). Traps for wrong criteria:
    step 1 has the lowest single final (0.001) but median 0.5; step 0.01 has the
    lowest final of the runs that ended (1e-5) but two of three seeds failed (nan);
    step 0.5 touched 1e-6 mid-run but ends at 0.9. On 'b' step 1 is best.
    Under schedule=constant on 'a', step 0.01 is best (its own group).
    """
    traces = {
        ("a", "decaying", 1.0): [[1, 0.3, 0.001], [1, 0.4, 0.5], [1, 0.7, 0.6]],
        ("a", "decaying", 0.5): [[1, 1e-6, 0.9]] * 3,
        ("a", "decaying", 0.1): [[1, 0.3, 0.2]] * 3,
        ("a", "decaying", 0.01): [[1, 0.5, np.nan], [1, 0.5, np.nan], [1, 0.1, 1e-5]],
        ("a", "constant", 1.0): [[1, 0.9, 0.8]] * 3,
        ("a", "constant", 0.01): [[1, 0.2, 0.05]] * 3,
        ("b", "decaying", 1.0): [[1, 0.1, 0.01]] * 3,
        ("b", "decaying", 0.1): [[1, 0.3, 0.2]] * 3,
    }
    rows = []
    for (problem, schedule, step), runs in traces.items():
        params = json.dumps({"schedule": schedule, "step_size": step}, sort_keys=True)
        for seed, trace in enumerate(runs):
            for k, v in enumerate(trace):
                rows.append(
                    {
                        "problem": problem,
                        "optimizer": f"sg[schedule={schedule},step_size={step:g}]",
                        "params": params,
                        "seed": seed,
                        "run_id": f"{problem}-{schedule}-{step}-{seed}",
                        "checkpoint": k,
                        "relative_suboptimality": v,
                    }
                )
    for seed in range(2):  # another optimizer, untouched by --best-of sg:...
        for k, v in enumerate([1, 0.5]):
            rows.append(
                {
                    "problem": "a",
                    "optimizer": "lbfgs",
                    "params": json.dumps({"memory": 10}),
                    "seed": seed,
                    "run_id": f"lbfgs-{seed}",
                    "checkpoint": k,
                    "relative_suboptimality": v,
                }
            )
    # stored out of checkpoint order: "final" means the last checkpoint, not the last row
    frame = pd.DataFrame(rows).sample(frac=1.0, random_state=0)
    frame.attrs["runs"] = {"marker": {}}
    return frame


def test_best_of_keeps_the_lowest_median_final_value_per_problem_and_other_parameters():
    frame = _frame()
    kept, notes = best_of(frame, ["sg:step_size"])
    steps = (
        kept[kept["optimizer"] != "lbfgs"]
        .assign(step=lambda d: d["params"].map(lambda t: json.loads(t)["step_size"]),
                schedule=lambda d: d["params"].map(lambda t: json.loads(t)["schedule"]))
        .groupby(["problem", "schedule"])["step"].unique()
    )  # fmt: skip
    assert {k: list(v) for k, v in steps.items()} == {
        ("a", "constant"): [0.01],
        ("a", "decaying"): [0.1],
        ("b", "decaying"): [1.0],
    }
    # every row of the kept runs is kept (3 seeds × 3 checkpoints), lbfgs untouched
    assert (kept["optimizer"] == "lbfgs").sum() == 4
    assert len(kept) == 4 + 3 * 9
    assert kept.attrs["runs"] == {"marker": {}}
    by = {(n.problem, n.fixed): n for n in notes}
    assert by[("a", "schedule=decaying")].note == (
        "sg (schedule=decaying): best step_size=0.1 of 1, 0.5, 0.1, 0.01"
    )
    assert by[("a", "schedule=decaying")].scores == (0.5, 0.9, 0.2, math.inf)
    assert by[("b", "")].note == "sg: best step_size=1 of 1, 0.1"  # one schedule on b


def test_best_of_refuses_what_it_cannot_choose():
    frame = _frame()
    with pytest.raises(ValueError, match="no runs of 'sag'; present: lbfgs, sg"):
        best_of(frame, [("sag", "step_size")])
    with pytest.raises(ValueError, match="its parameters: schedule, step_size"):
        best_of(frame, ["sg:step"])
    with pytest.raises(ValueError, match="more than once"):
        best_of(frame, ["sg:step_size", "sg:schedule"])
    with pytest.raises(ValueError, match="expected NAME:PARAM"):
        parse_best_of("sg")
    no_optimum = frame.assign(relative_suboptimality=np.nan)
    with pytest.raises(ValueError, match="on a, no run of sg has a final relative sub"):
        best_of(no_optimum, ["sg:step_size"])


# ------------------------------------------------------------------------------ CLI


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    """The issue's command: two step sizes of SG on the synthetic problem, 2 passes."""
    out = tmp_path_factory.mktemp("sweep") / "res"
    args = ["compare", "--problem", "synthetic", "--optimizers", "sg[step_size=1,0.1]"]
    res = CliRunner().invoke(main, [*args, "--passes", "2", "--out", str(out), "--quiet"])
    assert res.exit_code == 0, res.output
    return out, res.output


def test_compare_with_a_sweep_makes_one_run_per_value(swept):
    out, output = swept
    frame = read_results(out)
    runs = frame.groupby("run_id").agg(optimizer=("optimizer", "first"), params=("params", "first"))
    assert sorted(runs["optimizer"]) == ["sg[step_size=0.1]", "sg[step_size=1]"]
    assert sorted(json.loads(p)["step_size"] for p in runs["params"]) == [0.1, 1.0]
    assert "2 runs" in output
    assert sorted(p.name for p in out.glob("run-*.parquet")) and len(list(out.glob("run-*"))) == 2


def test_report_shows_each_value_and_best_of_keeps_the_one_that_ends_lowest(swept, tmp_path):
    out, _ = swept
    frame = read_results(out)
    # the truth, read from the traces: final (P(w) - P*)/P(0) of each step size
    last = frame.sort_values("checkpoint").groupby("run_id").tail(1)
    p0 = {rid: meta["P0"] for rid, meta in frame.attrs["runs"].items()}
    final = {
        r["optimizer"]: float(r["suboptimality"]) / p0[r["run_id"]] for _, r in last.iterrows()
    }
    winner = min(final, key=final.get)
    loser = max(final, key=final.get)
    assert final[winner] < final[loser]

    plain = tmp_path / "plain"
    res = CliRunner().invoke(main, ["report", str(out), "--out", str(plain), "--format", "png"])
    assert res.exit_code == 0, res.output
    md = (plain / "summary.md").read_text()
    assert f"| synthetic | {winner} |" in md and f"| synthetic | {loser} |" in md

    best = tmp_path / "best"
    args = ["report", str(out), "--out", str(best), "--format", "svg", "--best-of", "sg:step_size"]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    md = (best / "summary.md").read_text()
    assert f"| synthetic | {winner} |" in md and f"| synthetic | {loser} |" not in md
    value = winner.split("=")[1].rstrip("]")
    assert f"sg: best step_size={value} of 1, 0.1" in md
    svg = (best / "synthetic-suboptimality.svg").read_text()
    assert f"best step_size={value} of 1, 0.1" in svg  # the figure says so too
    assert f"best step_size={value}" in (best / "report.html").read_text()

    res = CliRunner().invoke(
        main, ["report", str(out), "--out", str(tmp_path / "x"), "--best-of", "sg:stepsize"]
    )
    assert res.exit_code == 2 and "its parameters: schedule, step_size" in res.output


def test_compare_refuses_an_out_of_range_sweep_value_as_a_usage_error(tmp_path):
    args = ["compare", "--problem", "synthetic", "--optimizers", "sdca-gap[non_uniformity=0.5,2]"]
    res = CliRunner().invoke(main, [*args, "--passes", "1", "--out", str(tmp_path / "r")])
    assert res.exit_code == 2
    assert "non_uniformity accepts float [0, 1]" in res.output
    assert not (tmp_path / "r").exists() or not list((tmp_path / "r").glob("run-*"))


def test_a_comma_list_in_set_points_to_the_sweep_notation(tmp_path):
    args = [
        "compare",
        "--problem",
        "synthetic",
        "--optimizers",
        "sg",
        "--set",
        "sg.step_size=1,0.1",
    ]
    res = CliRunner().invoke(main, [*args, "--passes", "1", "--out", str(tmp_path / "r")])
    assert res.exit_code == 2
    assert "to sweep it, select sg[step_size=1,0.1] in --optimizers" in res.output
