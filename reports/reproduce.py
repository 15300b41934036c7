"""Regenerate reports/: the papers' findings (docs/algorithms.md §6, E1–E11) on this machine.

    python reports/reproduce.py                 # run every grid, then figures and numbers
    python reports/reproduce.py --only ocr ner  # some problems
    python reports/reproduce.py --figures-only  # redraw from the stored runs
    python reports/reproduce.py --list          # the grids and their sizes
    python reports/reproduce.py --figures-only --no-init-offset  # iterations-only axes

Every run is stored as one Parquet file under ``reports/results/<problem>/`` (not
committed); a rerun keeps what is stored and computes only the missing runs, so an
interrupted reproduction resumes where it stopped. One grid per problem holds every
optimizer of every finding with the same budget, so a run shared by two findings (the
default ``sdca-gap`` of E2, E3 and E6) is computed once.

The budgets are scaled down from the papers' (50–100 passes, several seeds) to what two
cores do in about two hours; each grid says how. Figures go to ``reports/figures/`` and
the numbers quoted in ``reports/README.md`` to ``reports/numbers.md``.

Axes, as in ``crfopt report``: by default (``--init-offset``) the passes and oracle-call
axes of every table and figure include each optimizer's initialization work (the
``init_*`` columns: SDCA's and OEG's `gibbs` dual initialization is one ``oracle_scores``
pass), so "P−P* @5 passes" is read after 5 passes of work in all. ``--no-init-offset``
reads them on the iterations alone, the papers' convention (docs/algorithms.md §2).
``numbers.md`` says which one it used and lists every optimizer's init passes.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

import crfopt
from crfopt.bench.analysis import (
    curve_figure,
    line_styles,
    median_reach,
    median_value_at,
    shift_init,
)

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
FIGURES = HERE / "figures"


@dataclass(frozen=True)
class Grid:
    problem: str
    passes: float
    optimizers: tuple[str, ...]
    note: str
    seeds: tuple[int, ...] = (0,)
    problem_params: dict = field(default_factory=dict)


MAIN = ("sdca", "sdca-gap", "sag-nus", "sag-nus-star", "oeg", "lbfgs")
SBA15 = ("sag", "saga-nus", "oeg-c0", "oeg-norp", "sg", "asg", "adagrad")

SG_STEPS = ("[step_size=1.0]", "", "[step_size=0.01]")  # the default η₀ is 0.1

GRIDS = {
    "ocr": Grid(
        "ocr",
        30,
        MAIN
        + SBA15
        + (
            # E3 samplers (sdca = uniform, sdca-gap = gap)
            "sdca-importance",
            "sdca-gapimp",
            "sdca-max",
            # E2 line search: sub-precision, a single Newton step, the starting point
            "sdca-gap[sub_precision=0.01]",
            "sdca-gap[sub_precision=1e-05]",
            "sdca-gap[sub_precision=0.5]",
            "sdca-gap[start=previous]",
            # E11 order of visits
            "sdca-perm",
            "sdca-cyclic",
            # E9: SAG's line search started from a too-small L
            "sag-nus-star[initial_lipschitz=0.001]",
            # SBA15 §6 picks each SG method's η₀ post hoc from {10^-k}: the rest of that grid
            "sg[step_size=1.0]",
            "sg[step_size=0.01]",
            "asg[step_size=1.0]",
            "asg[step_size=0.01]",
            "adagrad[step_size=1.0]",
            "adagrad[step_size=0.01]",
        ),
        "LPL18 uses 50–100 passes; 30 here, one seed",
        seeds=(0,),
    ),
    "conll2000": Grid(
        "conll2000",
        15,
        (*MAIN, "sag", "saga-nus", "oeg-c0", "oeg-norp", "asg", "sdca-gap[sub_precision=0.5]"),
        "15 passes (LPL18: 50), one seed",
    ),
    "ner-nl": Grid(
        "ner-nl",
        15,
        (
            *MAIN,
            "sag",
            "oeg-c0",
            "oeg-norp",
            "asg",
            # E4 non-uniformity ρ and periodic refresh; E2 single Newton step
            "sdca-gap[non_uniformity=0.5]",
            "sdca-gap[non_uniformity=0.9]",
            "sdca-gap[non_uniformity=1.0]",
            "sdca-gap[refresh_period=1]",
            "sdca-gap[sub_precision=0.5]",
        ),
        "15 passes (LPL18: 50), one seed",
    ),
    "pos-ewt": Grid(
        "pos-ewt",
        12,
        (*MAIN, "sag", "oeg-norp"),
        "12 passes (LPL18: 50), one seed",
    ),
    "pos-conll2000": Grid(
        "pos-conll2000",
        5,
        ("sdca", "sdca-gap", "sag-nus-star", "oeg", "lbfgs"),
        "5 passes, one seed; the POS column of CoNLL-2000 (WSJ text; the papers' full WSJ "
        "set is licensed)",
    ),
}


def run_grids(names: list[str]) -> None:
    for name in names:
        grid = GRIDS[name]
        print(
            f"== {name}: {len(grid.optimizers)} optimizers × {len(grid.seeds)} seeds, "
            f"{grid.passes:g} passes ({grid.note})",
            flush=True,
        )
        t0 = time.time()
        table = crfopt.compare(
            grid.problem,
            list(grid.optimizers),
            seeds=grid.seeds,
            passes=grid.passes,
            out=RESULTS / name,
            problem_params={grid.problem: grid.problem_params} if grid.problem_params else None,
            checkpoints="default",
        )
        failed = table[table["status"] == "failed"]["optimizer"].unique()
        print(
            f"   {table['run_id'].nunique()} runs in {time.time() - t0:.0f} s"
            + (f"; failed: {', '.join(failed)}" if len(failed) else ""),
            flush=True,
        )


# ----------------------------------------------------------------------------- numbers


def load(name: str, init_offset: bool = True) -> pd.DataFrame:
    """One grid's runs; with ``init_offset`` the axes include initialization work.

    ``iteration_oracle_calls`` keeps the iterations' own oracle calls for the counting
    table; unknown init work (null) shifts by nothing.
    """
    path = RESULTS / name
    if not path.exists():
        return pd.DataFrame()
    df = crfopt.read_results(path)
    runs = df.attrs["runs"]
    df = df.sort_values(["optimizer", "seed", "checkpoint"]).reset_index(drop=True)
    df["iteration_oracle_calls"] = df["oracle_calls"]
    df = shift_init(df, init_offset)  # the same axes as `crfopt report`
    df["subopt"] = df["suboptimality"]
    df["P0"] = df["run_id"].map(lambda r: runs[r]["P0"])
    df["n"] = df["run_id"].map(lambda r: runs[r]["n"])
    df["gap_ratio"] = df["gap_estimate"] / df["duality_gap"]
    df["ls_evals"] = df["run_id"].map(lambda r: runs[r]["final_counters"].get("ls_evals", 0))
    return df


def at(df: pd.DataFrame, opt: str, col: str, x: float, axis: str = "effective_passes") -> float:
    """Value of ``col`` at ``axis`` = x for ``opt``, median over seeds, read as
    ``crfopt report`` reads it: interpolated between the checkpoints around x
    (:func:`crfopt.bench.analysis.value_at`; nan where the run never got to x)."""
    return median_value_at(df[df["optimizer"] == opt], col, x, axis, by="seed")


def reach(
    df: pd.DataFrame,
    opt: str,
    threshold: float,
    axis: str = "effective_passes",
    col: str = "subopt",
) -> float:
    """First ``axis`` value where ``col`` ≤ threshold for ``opt`` (median over seeds, on
    the interpolated curve, :func:`crfopt.bench.analysis.first_reach`); inf if never."""
    return median_reach(df[df["optimizer"] == opt], col, threshold, axis, by="seed")


def fmt(v: float) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "—"
    if v == math.inf:
        return "not reached"
    if v == 0:
        return "0"
    if abs(v) >= 100 or abs(v) < 1e-3:
        return f"{v:.2e}"
    return f"{v:.3g}"


def numbers_table(df: pd.DataFrame, opts: list[str], passes: list[float]) -> list[str]:
    n = int(df["n"].iloc[0]) if "n" in df else None
    p0 = float(df["P0"].iloc[0])
    head = (
        "| optimizer | init passes | "
        + " | ".join(f"P−P* @{p:g} passes" for p in passes)
        + " | passes to 1e-3·P(0) | updates/n to 1e-3·P(0) | oracle calls/n to 1e-3·P(0) "
        "| final test error |"
    )
    lines = [head, "|" + "---|" * (len(passes) + 6)]
    for opt in opts:
        if opt not in set(df["optimizer"]):
            continue
        init = df.loc[df["optimizer"] == opt, "init_passes"].astype(float)
        row = [fmt(float(init.median())) if init.notna().all() else "—"]
        row += [fmt(at(df, opt, "subopt", p)) for p in passes]
        thr = 1e-3 * p0
        row.append(fmt(reach(df, opt, thr)))
        u = reach(df, opt, thr, axis="updates")
        row.append(fmt(u / n if n else u))
        o = reach(df, opt, thr, axis="oracle_calls")
        row.append(fmt(o / n if n else o))
        last = df[df["optimizer"] == opt].groupby("seed").tail(1)
        row.append(fmt(float(last["test_error"].median())))
        lines.append(f"| {opt} | " + " | ".join(row) + " |")
    return lines


def axis_lines(df: pd.DataFrame, opts: list[str], axis: str, marks: list[float]) -> list[str]:
    """P−P* at ``axis``/n = mark (interpolated, see :func:`at`): the E6/E7 readings."""
    n = int(df["n"].iloc[0])
    name = {"updates": "updates/n", "oracle_calls": "oracle calls/n"}[axis]
    lines = [
        "| optimizer | " + " | ".join(f"P−P* @{name} = {m:g}" for m in marks) + " |",
        "|" + "---|" * (len(marks) + 1),
    ]
    for opt in opts:
        if opt in set(df["optimizer"]):
            row = [fmt(at(df, opt, "subopt", m * n, axis=axis)) for m in marks]
            lines.append(f"| {opt} | " + " | ".join(row) + " |")
    return lines


def error_lines(df: pd.DataFrame, opts: list[str], marks: list[float]) -> list[str]:
    lines = [
        "| optimizer | " + " | ".join(f"test error @{m:g} passes" for m in marks) + " |",
        "|" + "---|" * (len(marks) + 1),
    ]
    for opt in opts:
        if opt in set(df["optimizer"]):
            row = [f"{100 * at(df, opt, 'test_error', m):.2f} %" for m in marks]
            lines.append(f"| {opt} | " + " | ".join(row) + " |")
    return lines


def gap_lines(df: pd.DataFrame, opts: list[str], passes: list[float]) -> list[str]:
    lines = [
        "| optimizer | "
        + " | ".join(f"est/true @{p:g}" for p in passes)
        + " | ls_evals / iteration |",
        "|" + "---|" * (len(passes) + 2),
    ]
    for opt in opts:
        sub = df[df["optimizer"] == opt]
        if sub.empty or sub["gap_estimate"].isna().all():
            continue
        ratio = [
            fmt(at(df, opt, "gap_estimate", p) / at(df, opt, "duality_gap", p)) for p in passes
        ]
        last = sub.iloc[-1]
        ls = last.get("ls_evals", math.nan) / max(last["iterations"], 1)
        lines.append(f"| {opt} | " + " | ".join(ratio) + f" | {fmt(ls)} |")
    return lines


def counting_lines(df: pd.DataFrame) -> list[str]:
    lines = [
        "| optimizer | oracle calls / iteration | updates / iteration | "
        "forward calls / iteration, first → last pass |",
        "|---|---|---|---|",
    ]
    for opt, sub in df.groupby("optimizer"):
        sub = sub[sub["iterations"] > 0]
        if sub.empty:
            continue
        last = sub.iloc[-1]
        it = sub["iterations"].diff().fillna(sub["iterations"])
        fw = sub["forward_calls"].diff().fillna(sub["forward_calls"])
        k = max(1, len(fw) // 8)  # the first and the last eighth of the checkpoints
        first = fw.iloc[:k].sum() / max(it.iloc[:k].sum(), 1)
        tail = fw.iloc[-k:].sum() / max(it.iloc[-k:].sum(), 1)
        lines.append(
            f"| {opt} | {last['iteration_oracle_calls'] / last['iterations']:.3f} | "
            f"{last['updates'] / last['iterations']:.3f} | {first:.3f} → {tail:.3f} |"
        )
    return lines


# ----------------------------------------------------------------------------- figures


def figure(
    df: pd.DataFrame,
    opts: list[str],
    stem: str,
    title: str,
    axes: tuple[str, ...] = ("effective_passes",),
    y: str = "subopt",
    style: dict[str, tuple[int, str]] | None = None,
    init_offset: bool = True,
) -> Path | None:
    """One PNG drawn by crfopt's figure routine (:func:`crfopt.bench.analysis.curve_figure`)
    with its styles (LPL18's six methods keep their colours); ``style`` overrides an
    optimizer's (tab10 colour index, line style)."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    opts = [o for o in opts if o in set(df["optimizer"])]
    if not opts:
        return None
    styles = line_styles(opts)
    if style:
        tab = sns.color_palette("tab10", 10)
        styles.update({opt: (tab[c], ls) for opt, (c, ls) in style.items()})
    fig, panels, _, _ = curve_figure(
        df,
        y,
        styles,
        axes=axes,
        log=y != "test_error",
        init_offset=init_offset,
        per_n=float(df["n"].iloc[0]),
        ylabel={
            "subopt": "P(w) − P*",
            "test_error": "test error",
            "gap_ratio": "gap estimate / true gap",
        }.get(y, y),
        # one update per pass: a vertical line at 0 that hides the others
        skip={"updates": ["lbfgs"]},
        panel_size=(5.2, 3.9),
    )
    for ax in panels:
        if y == "test_error":
            # linear around the final errors: they differ in the second digit, not in decades
            final = df[df["optimizer"].isin(opts)].groupby("optimizer")["test_error"].last()
            ax.set_ylim(0.8 * float(final.min()), 3.0 * float(final.max()))
        if y == "gap_ratio":
            for level in (0.5, 1.0, 2.0):  # E5's factor-2 band
                ax.axhline(level, color="0.5", lw=0.8, ls="--" if level != 1.0 else "-")
        if y == "subopt":
            # a method that starts far above P(0) (oeg-c0) must not squash the others
            p0 = float(df["P0"].iloc[0])
            low = max(float(df[df["optimizer"].isin(opts)][y].min()), p0 * 1e-9) / 2
            ax.set_ylim(low, 2 * p0)
    fig.suptitle(title, fontsize=10)
    FIGURES.mkdir(parents=True, exist_ok=True)
    path = FIGURES / f"{stem}.png"
    fig.savefig(path, dpi=80, bbox_inches="tight")
    plt.close(fig)
    return path


def make_outputs(init_offset: bool = True) -> None:
    axes = (
        "Passes and oracle calls include each optimizer's initialization work "
        "(`init passes`; `--init-offset`, the default)."
        if init_offset
        else "Passes and oracle calls count the iterations only; initialization work "
        "(`init passes`) is left off them (`--no-init-offset`)."
    )
    out = [
        "# Numbers behind reports/README.md",
        "",
        f"Generated by `python reports/reproduce.py` on {time.strftime('%Y-%m-%d')}; "
        "P−P* is absolute, P* the certified optimum of `crfopt optimum`. " + axes,
        "",
    ]

    def draw(*args, **kwargs) -> Path | None:
        return figure(*args, init_offset=init_offset, **kwargs)

    for name, grid in GRIDS.items():
        df = load(name, init_offset)
        if df.empty:
            out += [f"## {name}", "", "(not run)", ""]
            continue
        passes = [p for p in (1, 2, 5, 10, 15, 20, 30) if p <= grid.passes]
        out += [f"## {name} ({grid.note})", "", f"P(0) = {df['P0'].iloc[0]:.6g}", ""]
        out += [*numbers_table(df, sorted(df["optimizer"].unique()), passes), ""]
        main6 = [o for o in MAIN if o != "lbfgs"]
        marks = [m for m in (1, 2, 5, 10, 15) if m <= grid.passes]
        out += ["Parameter-update axis (E7):", ""]
        out += [*axis_lines(df, main6, "updates", marks), ""]
        out += ["Test error against effective passes (E8):", ""]
        out += [*error_lines(df, [*main6, "lbfgs"], marks), ""]
        out += ["Oracle-call axis (E6):", ""]
        out += [*axis_lines(df, main6, "oracle_calls", marks), ""]
        out += [*gap_lines(df, sorted(df["optimizer"].unique()), passes), ""]
        out += [*counting_lines(df), ""]
        main = [o for o in MAIN if o != "lbfgs"]
        draw(
            df,
            [*main, "lbfgs"],
            f"{name}-main",
            f"{name}: LPL18 Fig. 4 / 6 comparison (E6, E7)",
            axes=("oracle_calls", "updates", "effective_passes"),
        )
        draw(df, main, f"{name}-test-error", f"{name}: test error (E8)", y="test_error")
        if name == "ocr":
            draw(
                df,
                ["sdca", "sdca-importance", "sdca-gap", "sdca-gapimp", "sdca-max"],
                "ocr-samplers",
                "OCR: SDCA samplers, ρ = 0.8 (E3, LPL18 Fig. 2)",
            )
            draw(
                df,
                [
                    "sdca-gap",
                    "sdca-gap[sub_precision=0.01]",
                    "sdca-gap[sub_precision=1e-05]",
                    "sdca-gap[sub_precision=0.5]",
                    "sdca-gap[start=previous]",
                ],
                "ocr-line-search",
                "OCR: line search precision and start (E2)",
            )
            draw(
                df, ["sdca", "sdca-perm", "sdca-cyclic"], "ocr-order", "OCR: order of visits (E11)"
            )
            draw(
                df,
                [f"{m}{s}" for m in ("sg", "asg", "adagrad") for s in SG_STEPS],
                "ocr-sg-steps",
                "OCR: SG, ASG, AdaGrad, η₀ = 1 (dotted), 0.1, 0.01 (dashed) (E9)",
                # colour = method, line style = step size
                style={
                    f"{m}{s}": (c, ls)
                    for m, c in (("sg", 6), ("asg", 8), ("adagrad", 9))
                    for s, ls in zip(SG_STEPS, (":", "-", "--"))
                },
            )
        if name in ("ocr", "ner-nl", "pos-ewt"):
            draw(
                df,
                ["sdca", "sdca-gap"],
                f"{name}-gap-estimate",
                f"{name}: gap estimate / true duality gap (E5)",
                y="gap_ratio",
            )
        if name in ("ocr", "conll2000", "ner-nl", "pos-ewt"):
            draw(
                df,
                [
                    "sag",
                    "sag-nus",
                    "sag-nus-star",
                    "saga-nus",
                    "oeg",
                    "oeg-c0",
                    "oeg-norp",
                    "sg",
                    "asg",
                    "adagrad",
                    "lbfgs",
                    "sdca-gap",
                    "sag-nus-star[initial_lipschitz=0.001]",
                ],
                f"{name}-sba15",
                f"{name}: SBA15 Fig. 2 comparison, effective passes (E9)",
            )
        if name == "ner-nl":
            draw(
                df,
                [
                    "sdca",
                    "sdca-gap[non_uniformity=0.5]",
                    "sdca-gap",
                    "sdca-gap[non_uniformity=0.9]",
                    "sdca-gap[non_uniformity=1.0]",
                    "sdca-gap[refresh_period=1]",
                ],
                "ner-nonuniformity",
                "NER: non-uniformity ρ of the gap sampler (E4)",
            )
            draw(
                df,
                ["sdca-gap", "sdca-gap[sub_precision=0.5]"],
                "ner-line-search",
                "NER: a single Newton step (E2)",
            )
    (HERE / "numbers.md").write_text("\n".join(out) + "\n", encoding="utf-8")
    print(f"wrote {HERE / 'numbers.md'} and {len(list(FIGURES.glob('*.png')))} figures")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", nargs="*", choices=list(GRIDS), help="problems to run")
    ap.add_argument("--figures-only", action="store_true")
    ap.add_argument("--list", action="store_true")
    ap.add_argument(
        "--init-offset",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="add initialization work to the passes and oracle-call axes (default: on)",
    )
    args = ap.parse_args(argv)
    if args.list:
        for name, g in GRIDS.items():
            print(f"{name}: {len(g.optimizers)} optimizers, {g.passes:g} passes — {g.note}")
        return 0
    os.environ.setdefault("CRFOPT_DATA", str(HERE.parent.parent / "shared" / "datasets"))
    if not args.figures_only:
        run_grids(args.only or list(GRIDS))
    make_outputs(args.init_offset)
    return 0


if __name__ == "__main__":
    sys.exit(main())
