"""Seconds-axis curves: ``sdca-minibatch`` on 2 threads beside ``sdca-gap`` on 1 and 2 threads.

On OCR and CoNLL-2000 (synthetic stand-ins of their sizes when the data is missing),
each run goes until its relative sub-optimality (P(w) - P*)/P* reaches 1e-3 or its pass
budget ends; P* is the certified optimum shipped in crfopt/bench/optima.json. Printed:
the time to 1e-3 in optimizer seconds (the runner's ``time_s``: initialization and
checkpoint evaluations off the clock) and in effective passes, with the load average,
since on a shared machine the seconds are noisy. ``--csv FILE`` keeps every checkpoint
(problem, run, time_s, effective_passes, relative sub-optimality) and ``--figure FILE``
draws them (relative sub-optimality against optimizer seconds, one panel per problem)::

    python benchmarks/sdca_parallel_curves.py [--problems ocr,conll2000] [--passes 40] \
        [--csv curves.csv] [--figure reports/figures/sdca-minibatch-seconds.png]
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import numpy as np
import pandas as pd

import crfopt
from crfopt.bench.optimum import shipped_optimum
from crfopt.bench.runner import Budget, run

from conftest import bench_problem, threads  # the script's folder is on sys.path

TARGET = 1e-3
# (label, optimizer, threads)
RUNS = [
    ("sdca-gap, 1 thread", "sdca-gap", 1),
    ("sdca-gap, 2 threads", "sdca-gap", 2),
    ("sdca-minibatch, 2 threads", "sdca-minibatch", 2),
]


def curves(name: str, passes: float, seed: int = 0) -> pd.DataFrame:
    """Every checkpoint of the three runs on problem ``name`` (relative sub-optimality)."""
    p, label = bench_problem(name)
    ref = shipped_optimum(p)
    if ref is None:
        raise SystemExit(f"{label}: no shipped P* (crfopt optimum {name} computes one)")
    p_star = ref.p_star
    rows = []
    for run_label, method, k in RUNS:
        with threads(k):
            res = run(
                p.with_lam(p.lam),
                method,
                seed=seed,
                budget=Budget(passes=passes, target_suboptimality=TARGET * p_star),
                p_star=p_star,
            )
        t = res.trace
        rows.append(
            pd.DataFrame(
                {
                    "problem": label,
                    "run": run_label,
                    "time_s": t["time_s"].to_numpy(float),
                    "effective_passes": t["effective_passes"].to_numpy(float),
                    "rel_suboptimality": (t["primal"].to_numpy(float) - p_star) / p_star,
                    "status": res.status,
                }
            )
        )
    return pd.concat(rows, ignore_index=True)


def time_to_target(df: pd.DataFrame) -> pd.DataFrame:
    """First checkpoint at or below TARGET per (problem, run); NaN when never reached."""
    out = []
    for (prob, run_label), g in df.groupby(["problem", "run"], sort=False):
        hit = g[g["rel_suboptimality"] <= TARGET]
        first = hit.iloc[0] if len(hit) else None
        out.append(
            {
                "problem": prob,
                "run": run_label,
                "seconds_to_1e-3": np.nan if first is None else first["time_s"],
                "passes_to_1e-3": np.nan if first is None else first["effective_passes"],
                "final_rel_subopt": g["rel_suboptimality"].iloc[-1],
            }
        )
    return pd.DataFrame(out)


def draw(df: pd.DataFrame, path: Path) -> None:
    """Relative sub-optimality against optimizer seconds, a panel per problem."""
    import matplotlib

    matplotlib.use("Agg")
    import seaborn as sns

    plot = df[df["rel_suboptimality"] > 0]
    grid = sns.relplot(
        data=plot,
        x="time_s",
        y="rel_suboptimality",
        hue="run",
        col="problem",
        kind="line",
        estimator=None,  # every checkpoint as measured, no averaging of equal x
        marker="o",
        markersize=3,
        facet_kws={"sharex": False, "sharey": False},
        height=3.2,
        aspect=1.2,
    )
    grid.set(yscale="log")
    grid.set_axis_labels("optimizer seconds", "(P(w) - P*) / P*")
    for ax in grid.axes.flat:
        ax.axhline(TARGET, color="grey", lw=0.8, ls=":")
    path.parent.mkdir(parents=True, exist_ok=True)
    grid.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--problems", default="ocr,conll2000")
    ap.add_argument("--passes", type=float, default=40.0, help="pass budget of each run")
    ap.add_argument("--csv", type=Path, help="write every checkpoint here")
    ap.add_argument("--figure", type=Path, help="draw the curves into this image file")
    args = ap.parse_args(argv)
    print(f"crfopt {crfopt.__version__}; load average before: {os.getloadavg()}", flush=True)
    frames = []
    for name in args.problems.split(","):
        df = curves(name, args.passes)
        frames.append(df)
        with pd.option_context("display.width", 160):
            print(time_to_target(df).to_string(index=False), flush=True)
        print(f"load average: {os.getloadavg()}", flush=True)
    every = pd.concat(frames, ignore_index=True)
    if args.csv:
        every.to_csv(args.csv, index=False)
    if args.figure:
        draw(every, args.figure)
        print(f"figure: {args.figure}")


if __name__ == "__main__":
    main()
