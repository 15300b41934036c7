"""Section ``parallel`` (issue 48): ``sdca-passcode-wild`` on 2 threads against
``sdca-gap`` on 1, in seconds to 1e-3 relative sub-optimality, with the seconds-axis curves.

Every run of benchmarks/sdca_parallel_curves.py, side by side in one process, one seed
after the other: the baseline, the parallel method on 1 thread (``sdca-gap``'s iterates:
its seconds are what the parallel machinery costs when idle) and on 2. The figure is
drawn from the same runs.
"""

from __future__ import annotations

import argparse

import pandas as pd
from harness import ROOT, label_of, ok_mark, problems_of, skipped_note
from sdca_parallel_curves import (
    BASELINE,
    PARALLEL,
    RUNS,
    TARGET,
    TARGET_RATIO,
    curves,
    draw,
    levels,
    summary,
    time_to_target,
)

#: the problems of the issue's target, and the runs' budget and seeds
PARALLEL_PROBLEMS = ["ocr", "conll2000"]
PASSES = 40.0
SEEDS = (0, 1, 2)
FIGURE = ROOT / "reports" / "figures" / "sdca-passcode-seconds.png"


def parallel(args: argparse.Namespace) -> dict:
    names = problems_of(args, PARALLEL_PROBLEMS)
    if not names:
        return {"skipped": "no problem of this section among --problems"}
    frames = {name: curves(name, PASSES, SEEDS) for name in names}
    draw(pd.concat(frames.values(), ignore_index=True), FIGURE)
    return {
        "target": TARGET,
        "target_ratio": TARGET_RATIO,
        "passes": PASSES,
        "seeds": list(SEEDS),
        "figure": str(FIGURE.relative_to(ROOT)),
        "problems": {
            name: {
                "runs": time_to_target(df).to_dict(orient="records"),
                "summary": summary(df).to_dict(orient="records")[0],
                "idle": summary(df, RUNS[1][0]).to_dict(orient="records")[0],
                "levels": levels(df).to_dict(orient="records"),
            }
            for name, df in frames.items()
        },
    }


def parallel_summary_rows(r: dict) -> list[str]:
    """The report's top-table rows: one per problem."""
    rows = []
    for name, e in r.get("problems", {}).items():
        s = e["summary"]
        rows.append(
            f"| parallel | {label_of(name)}: seconds to {r['target']:g} relative sub-optimality, "
            f"{PARALLEL} / {BASELINE} (median of seeds: {s['seconds_ratios']}) | | | "
            f"{s['seconds_ratio_median']:.2f} | ≤ {r['target_ratio']} | "
            f"{ok_mark(s['seconds_ratio_median'] <= r['target_ratio'])} |"
        )
    return rows


def parallel_section(r: dict) -> list[str]:
    lines = ["## Parallel SDCA on two cores", ""]
    if skipped_note(r, lines, "Parallel SDCA"):
        return lines
    lines += [
        f"`sdca-passcode-wild` (PASSCoDe-Wild, docs/algorithms.md §3.16) against `sdca-gap` on "
        f"one kernel thread, each run until (P − P*)/P* ≤ {r['target']:g} or {r['passes']:g} "
        f"passes, seeds {', '.join(map(str, r['seeds']))}, one run at a time in one process "
        "(benchmarks/sdca_parallel_curves.py). Seconds: the runner's optimizer time "
        "(initialization and checkpoint evaluations off the clock). Ratio: the run's seconds "
        "over the baseline's of the same seed.",
        "",
        "| problem | run | seconds to target, per seed | passes to target, per seed | "
        "ratio to baseline (median) | load |",
        "|---|---|---|---|---|---|",
    ]
    for name, e in r["problems"].items():
        runs = pd.DataFrame(e["runs"])
        for run_label, g in runs.groupby("run", sort=False):
            ratio = ""
            if run_label == PARALLEL:
                ratio = f"{e['summary']['seconds_ratio_median']:.2f}"
            elif run_label != BASELINE:
                ratio = f"{e['idle']['seconds_ratio_median']:.2f}"
            secs = " ".join(f"{v:.2f}" for v in g["seconds_to_1e-3"])
            passes = " ".join(f"{v:g}" for v in g["passes_to_1e-3"])
            loads = ", ".join(g["load"])
            lines.append(
                f"| {label_of(name)} | {run_label} | {secs} | {passes} | {ratio} | {loads} |"
            )
    lines += [
        "",
        "Per pass, the 2-thread runs against the baseline's seed spread (passes to the "
        "target, and the share of their half-pass checkpoints inside the baseline's band):",
        "",
    ]
    for name, e in r["problems"].items():
        s = e["summary"]
        inside = "within" if s["passes_within_spread"] else "**outside**"
        lines.append(
            f"- {label_of(name)}: passes {s['passes']} against {s['baseline_passes']} "
            f"({inside}); {100 * s['band_share']:.0f} % of the checkpoints in the band."
        )
    lines += ["", f"![seconds and passes]({r['figure'].removeprefix('reports/')})", ""]
    return lines
