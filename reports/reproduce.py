"""Regenerate reports/: the papers' findings (docs/algorithms.md §6, E1–E11) on this machine.

    python reports/reproduce.py                   # every grid at the papers' scale, then outputs
    python reports/reproduce.py --scale quick     # one seed, the earlier scaled-down budgets
    python reports/reproduce.py --only ocr ner-nl # some problems
    python reports/reproduce.py --jobs 2          # the runs outside the seconds figures 2 at a time
    python reports/reproduce.py --seconds         # the seconds figures' own grids (same seconds)
    python reports/reproduce.py --figures-only    # redraw from the stored (committed) runs
    python reports/reproduce.py --figures-only --partial  # a preview while grids are missing
    python reports/reproduce.py --list            # the grids, their sizes and compute estimate
    python reports/reproduce.py --figures-only --no-init-offset  # iterations-only axes

**Scales.** ``paper`` (the default) runs every optimizer of a grid with several seeds (5 on
OCR, 3 elsewhere) for the papers' budgets: 50 effective passes on OCR, 30 on CoNLL-2000 and
NER-nl, 20 on POS-EWT and POS-CoNLL-2000 — or until P − P* ≤ 1e-8·P* (the certified P* of
``crfopt/bench/optima.json``), whichever comes first. ``quick`` is the earlier one-seed,
scaled-down reproduction (30/15/15/12/5 passes), for a look in about two hours.

**Stored runs.** ``crfopt.compare`` writes one Parquet file per run under
``reports/results/<scale>/<problem>/`` (not committed: a working folder; a rerun computes
only the runs missing there). After a grid, its runs are packed into one file,
``reports/results/<problem>.parquet`` (``<problem>-quick.parquet`` for the quick scale):
every run's rows in one zstd-compressed table and every run's metadata (configuration,
final counters, provenance, trace checksum) in its footer. The packs are committed:
``--figures-only`` reads them on a fresh clone (checking each run's trace checksum), and
a rerun unpacks them into the working folder first, so it computes only what is missing.
A grid's pack may be committed before the grid is complete (a checkpoint of long grids);
``numbers.md`` and the figures are rewritten only when every grid has all its runs, so a
partial regeneration cannot be committed by accident (``--partial`` previews one).
One run file carries ~17 KB of Parquet footer (the schema of 24 columns and their
statistics) whatever its length; packed, a run costs its rows only (see ``--list``).

**Spreads.** Every number in ``numbers.md`` is the median over seeds with the min–max range,
``1.2e-03 [9.8e-04–1.5e-03]``; ratios between two methods pair seed k with seed k,
``×3.1 [2.5–3.8]`` (:mod:`crfopt.bench.analysis`, the same reading as ``crfopt report``).
Figures draw the median over seeds and the min–max band (with 3–5 seeds a quartile would
interpolate between two runs; the range is what was observed).

Axes, as in ``crfopt report``: by default (``--init-offset``) the passes, oracle-call and
seconds axes of every table and figure include each optimizer's initialization work (the
``init_*`` columns: SDCA's and OEG's `gibbs` dual initialization is one ``oracle_scores``
pass), so "P−P* @5 passes" is read after 5 passes of work in all. ``--no-init-offset``
reads them on the iterations alone, the papers' convention (docs/algorithms.md §2).
``numbers.md`` says which one it used and lists every optimizer's init passes. Each problem
also gets a seconds figure (``<problem>-seconds.png``) of the main methods
(``SECONDS_METHODS``): their runs come first and one at a time (``crfopt.compare``'s serial
backend), so the seconds are comparable when nothing else runs on the machine. Every run
file records the 1-minute load average at the run's start and end, and ``numbers.md``
reports the range the seconds figures' runs saw beside their backend and threads. With
``--jobs N`` the grid's other runs (ablations read on the counted axes only) then run N at
a time, single-threaded; without it they too run one at a time.

**Seconds figures on equal terms.** A grid's budget is in passes, and a pass of SDCA costs
3–15 times a pass of SAG, so on the seconds axis the SAG curves of the passes grids end
where SDCA's go on. ``--seconds`` runs, for the problems of ``SECONDS_BUDGETS`` (OCR,
CoNLL-2000, NER-nl, POS-EWT), a grid of its own: every main method, one at a time, given
the same optimizer seconds (or stopped at 1e-8·P*), seeds ``SECONDS_SEEDS``, checkpoints
``SECONDS_CHECKPOINTS``; packed as ``reports/results/<problem>-seconds.parquet``. Those
problems' seconds figures and the seconds tables of ``numbers.md`` are drawn from it; the
other problems' seconds figures stay on their passes grid (the title says which).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import pandas as pd

import crfopt
from crfopt.bench.analysis import (
    curve_figure,
    line_styles,
    shift_init,
)

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # its grids and tables, beside it

from repro_grids import (  # noqa: E402
    GRIDS,
    MAIN,
    QUICK_HOURS,
    QUICK_OPTIMIZERS,
    SBA15_FIGURE,
    SECONDS_BUDGETS,
    SECONDS_CHECKPOINTS,
    SECONDS_SEEDS,
    SG_STEPS,
    SIZES,
    TARGET_RELATIVE,
    Grid,
)
from repro_packs import pack_runs, read_pack, unpack_runs  # noqa: E402
from repro_tables import (  # noqa: E402
    at,
    axis_lines,
    counting_lines,
    error_lines,
    gap_lines,
    numbers_table,
    reach,
    seconds_lines,
    verdict_lines,
    where_lines,
)

__all__ = ["GRIDS", "MAIN", "SBA15_FIGURE", "Grid", "at", "main", "make_outputs", "reach"]
RESULTS = HERE / "results"
FIGURES = HERE / "figures"
SCALES = ("paper", "quick")


def run_dir(name: str, scale: str) -> Path:
    """The working folder of a grid's run files (one Parquet file per run, not committed)."""
    return RESULTS / scale / name


def pack_path(name: str, scale: str) -> Path:
    """The committed pack of a grid's runs."""
    return RESULTS / (f"{name}.parquet" if scale == "paper" else f"{name}-{scale}.parquet")


def p_star_of(problem: str) -> float | None:
    """The certified P* shipped for the built-in problem at its default parameters."""
    table = json.loads((Path(crfopt.__file__).parent / "bench" / "optima.json").read_text())
    for entry in table["optima"]:
        if entry["problem"] == problem:
            return float(entry["p_star"])
    return None


#: The methods of the seconds figures. Their runs come first and one at a time (the
#: serial backend, with the kernels' default threads), so their seconds are comparable when
#: nothing else runs on the machine; each run's file records the load average at its start
#: and end, which numbers.md reports. The grid's other runs are read on the counted axes
#: only and may share the cores (``--jobs``).
SECONDS_METHODS = MAIN


def run_grids(names: list[str], scale: str, jobs: int = 1) -> None:
    """Run the grids: first the seconds figure's methods one at a time, then the rest on
    ``jobs`` single-threaded worker processes (joblib) when ``jobs`` > 1."""
    if jobs < 1:
        raise ValueError(f"--jobs must be at least 1, not {jobs}")
    for name in names:
        grid = GRIDS[name]
        passes = grid.budget(scale)
        p_star = p_star_of(grid.problem)
        target = TARGET_RELATIVE * p_star if p_star and scale == "paper" else None
        print(
            f"== {name}: {grid.describe(scale)}, "
            f"{passes:g} passes" + (f" or P−P* ≤ {target:.2e}" if target else ""),
            flush=True,
        )
        out = run_dir(name, scale)
        restored = unpack(name, scale)
        if restored:
            print(f"   {restored} runs restored from {pack_path(name, scale).name}", flush=True)
        common = {
            "budget": crfopt.Budget(passes=passes, target_suboptimality=target),
            "out": out,
            "problem_params": {grid.problem: grid.problem_params} if grid.problem_params else None,
            "checkpoints": "default",
        }
        timed = [o for o in grid.optimizers if o in SECONDS_METHODS]
        rest = [o for o in grid.optimizers if o not in SECONDS_METHODS]
        t0 = time.time()
        tables = []
        if timed:
            print(f"   one at a time (seconds figure): {', '.join(timed)}", flush=True)
            for seeds, group in _by_seeds(grid, scale, timed):
                tables.append(crfopt.compare(grid.problem, group, seeds=seeds, **common))
        if rest:
            shared = {"backend": "joblib", "n_jobs": jobs} if jobs > 1 else {}
            how = f"{jobs} at a time" if jobs > 1 else "one at a time"
            print(f"   {how} (counted axes only): {', '.join(rest)}", flush=True)
            for seeds, group in _by_seeds(grid, scale, rest):
                tables.append(crfopt.compare(grid.problem, group, seeds=seeds, **common, **shared))
        _summarize_and_pack(pd.concat(tables, ignore_index=True), name, scale, t0)


def _summarize_and_pack(table: pd.DataFrame, name: str, scale: str, t0: float) -> None:
    """Print a finished grid's run count, time and failures, then pack its runs."""
    failed = table[table["status"] == "failed"]["optimizer"].unique()
    print(
        f"   {table['run_id'].nunique()} runs in {time.time() - t0:.0f} s"
        + (f"; failed: {', '.join(failed)}" if len(failed) else ""),
        flush=True,
    )
    size = pack(name, scale)
    print(f"   packed into {pack_path(name, scale)} ({size / 1e6:.2f} MB)", flush=True)


def seconds_name(name: str) -> str:
    """The folder and pack stem of a problem's seconds grid (``ocr-seconds``)."""
    return f"{name}-seconds"


def run_seconds(names: list[str]) -> None:
    """The seconds figures' grids: every main method, one at a time, given the problem's
    ``SECONDS_BUDGETS`` optimizer seconds or stopped at 1e-8·P*, seeds ``SECONDS_SEEDS``."""
    for name in [n for n in names if n in SECONDS_BUDGETS]:
        grid, seconds = GRIDS[name], SECONDS_BUDGETS[name]
        p_star = p_star_of(grid.problem)
        target = TARGET_RELATIVE * p_star if p_star else None
        stem = seconds_name(name)
        print(
            f"== {stem}: {len(MAIN)} main methods × {len(SECONDS_SEEDS)} seeds, "
            f"{seconds:g} optimizer seconds each",
            flush=True,
        )
        restored = unpack(stem, "paper")
        if restored:
            print(f"   {restored} runs restored from {pack_path(stem, 'paper').name}", flush=True)
        t0 = time.time()
        table = crfopt.compare(
            grid.problem,
            list(MAIN),
            seeds=SECONDS_SEEDS,
            budget=crfopt.Budget(passes=None, seconds=seconds, target_suboptimality=target),
            checkpoints=list(SECONDS_CHECKPOINTS),
            out=run_dir(stem, "paper"),
            problem_params={grid.problem: grid.problem_params} if grid.problem_params else None,
        )
        _summarize_and_pack(table, stem, "paper", t0)


def _by_seeds(grid: Grid, scale: str, optimizers: list[str]) -> list[tuple[tuple, list[str]]]:
    """``optimizers`` grouped by their seeds (one ``crfopt.compare`` call each), in order."""
    groups: dict[tuple[int, ...], list[str]] = {}
    for o in optimizers:
        groups.setdefault(grid.seeds_of(scale, o), []).append(o)
    return list(groups.items())


# ----------------------------------------------------------------------------- packs


#: the pack's column holding each run's metadata (JSON, on the run's first row only):
#: zstd compresses what runs repeat (provenance, configuration), a footer would not
def pack(name: str, scale: str) -> int:
    """Write every stored run of a grid into its pack; returns the pack's size in bytes."""
    return pack_runs(run_dir(name, scale), pack_path(name, scale))


def unpack(name: str, scale: str) -> int:
    """Write the pack's runs missing from the working folder back as run files, so that
    ``crfopt.compare`` sees them and computes only the others. Returns how many."""
    return unpack_runs(pack_path(name, scale), run_dir(name, scale))


# ----------------------------------------------------------------------------- estimate


def _units(name: str, passes: float, runs: int) -> float:
    N, K, a = SIZES[GRIDS[name].problem]
    return runs * passes * N * (K * K + a * K)


def estimate(names: list[str], scale: str) -> tuple[dict[str, float], str]:
    """Seconds each grid should take at ``scale``, and how the figure was obtained.

    Work is counted in effective passes × N(K² + aK) (SIZES); seconds per unit come from
    the stored runs' own seconds (time_s + init_time_s at their last checkpoint) when any
    grid has some, else from the quick reproduction's two hours. A run that stops at the
    1e-8 target early takes less: the estimate is an upper bound in that respect.
    """
    measured_s, measured_u = 0.0, 0.0
    for name in GRIDS:
        for sc in SCALES:
            try:
                df = _load_raw(name, sc)
            except ValueError:
                continue
            if df.empty:
                continue
            last = df.sort_values("checkpoint").groupby("run_id").tail(1)
            secs = last["time_s"].astype(float).fillna(0) + last["init_time_s"].astype(
                float
            ).fillna(0)
            work = last["effective_passes"].astype(float).fillna(0) + last["init_passes"].astype(
                float
            ).fillna(0)
            measured_s += float(secs.sum())
            measured_u += sum(_units(name, float(w), 1) for w in work)
    if measured_u > 0:
        rate = measured_s / measured_u
        how = f"calibrated on the {measured_s / 3600:.1f} h of stored runs"
    else:
        quick = sum(_units(n, GRIDS[n].quick_passes, QUICK_OPTIMIZERS[n]) for n in GRIDS)
        rate = QUICK_HOURS * 3600 / quick
        how = "calibrated on the quick reproduction's ~2 h (no stored runs here)"
    out = {}
    for name in names:
        g = GRIDS[name]
        out[name] = rate * _units(name, g.budget(scale), len(g.runs(scale)))
    return out, how


# ----------------------------------------------------------------------------- numbers


def _load_raw(name: str, scale: str) -> pd.DataFrame:
    """A grid's runs from the working folder, else from its committed pack."""
    folder = run_dir(name, scale)
    if folder.exists() and any(folder.glob("run-*.parquet")):
        return crfopt.read_results(folder)
    if pack_path(name, scale).exists():
        return read_pack(pack_path(name, scale))
    return pd.DataFrame()


def load(name: str, init_offset: bool = True, scale: str = "paper") -> pd.DataFrame:
    """One grid's runs; with ``init_offset`` the axes include initialization work.

    ``iteration_oracle_calls`` keeps the iterations' own oracle calls for the counting
    table; unknown init work (null) shifts by nothing.
    """
    df = _load_raw(name, scale)
    if df.empty:
        return df
    runs = df.attrs["runs"]
    df = df.sort_values(["optimizer", "seed", "checkpoint"]).reset_index(drop=True)
    df["iteration_oracle_calls"] = df["oracle_calls"]
    df = shift_init(df, init_offset)  # the same axes as `crfopt report`
    df["subopt"] = df["suboptimality"]
    df["P0"] = df["run_id"].map(lambda r: runs[r]["P0"])
    df["n"] = df["run_id"].map(lambda r: runs[r]["n"])
    df["gap_ratio"] = df["gap_estimate"] / df["duality_gap"]
    df["ls_evals"] = df["run_id"].map(lambda r: runs[r]["final_counters"].get("ls_evals", 0))
    for end in ("start", "end"):  # recorded since the POS-CoNLL-2000 grid; null before
        df[f"load_{end}"] = (
            df["run_id"]
            .map(lambda r, end=end: (runs[r].get("load_average") or {}).get(end))
            .astype("Float64")
        )
    return df


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
        # the grids run one at a time: several seeds of a method share a seconds median
        seconds_band=True,
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


class IncompleteGrids(RuntimeError):
    """Some grid lacks runs: numbers.md and the figures would mix finished and unfinished
    problems, so they are not rewritten (``--partial`` overrides)."""

    def __init__(self, missing: dict[str, list[tuple[str, int]]], scale: str) -> None:
        self.missing = missing
        parts = []
        for name, runs in missing.items():
            grid = GRIDS.get(name)
            total = len(grid.runs(scale)) if grid else len(MAIN) * len(SECONDS_SEEDS)
            shown = ", ".join(f"{o} seed {s}" for o, s in runs[:3])
            more = f", … ({len(runs) - 3} more)" if len(runs) > 3 else ""
            parts.append(f"{name}: {len(runs)} of {total} runs missing ({shown}{more})")
        grids = " ".join(n for n in missing if n in GRIDS)
        timed = " ".join(n.removesuffix("-seconds") for n in missing if n not in GRIDS)
        how = [f"`python reports/reproduce.py --only {grids}`"] if grids else []
        how += [f"`python reports/reproduce.py --seconds --only {timed}`"] if timed else []
        super().__init__(
            "numbers.md and the figures not rewritten, the grids are incomplete — "
            + "; ".join(parts)
            + f". Compute them with {' and '.join(how)}, or pass "
            "--partial to draw what is there."
        )


def missing_runs(frames: dict[str, pd.DataFrame], scale: str) -> dict[str, list[tuple[str, int]]]:
    """Each grid's (optimizer, seed) runs absent from its loaded frame (a run that failed
    is present: its failure is a result)."""
    out = {}
    for name, grid in GRIDS.items():
        df = frames.get(name)
        have = set()
        if df is not None and not df.empty:
            have = set(zip(df["optimizer"], df["seed"].astype(int)))
        lost = [run for run in grid.runs(scale) if run not in have]
        if lost:
            out[name] = lost
    return out


def make_outputs(init_offset: bool = True, scale: str = "paper", partial: bool = False) -> None:
    """Write numbers.md and the figures from every grid's runs; raises
    :class:`IncompleteGrids` (before writing anything) when a grid lacks runs, unless
    ``partial``."""
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
        f"Generated by `python reports/reproduce.py --scale {scale}`; "
        "P−P* is absolute, P* the certified optimum of `crfopt optimum`. " + axes,
        "",
        "Every reading is the median over the seeds with the min–max range in brackets; "
        "ratios pair seed k of one method with seed k of the other. A range ending in "
        "'not reached' means some seed never got there.",
        "",
    ]
    frames: dict[str, pd.DataFrame] = {}
    loaded = {name: load(name, init_offset, scale) for name in GRIDS}
    loaded_seconds = (
        {name: load(seconds_name(name), init_offset) for name in SECONDS_BUDGETS}
        if scale == "paper"
        else {}
    )
    missing = missing_runs(loaded, scale)
    for name, sdf in loaded_seconds.items():
        have = set(zip(sdf["optimizer"], sdf["seed"].astype(int))) if not sdf.empty else set()
        lost = [(o, s) for o in MAIN for s in SECONDS_SEEDS if (o, s) not in have]
        if lost:
            missing[seconds_name(name)] = lost
    if missing and not partial:
        raise IncompleteGrids(missing, scale)

    def draw(*args, **kwargs) -> Path | None:
        return figure(*args, init_offset=init_offset, **kwargs)

    for name, grid in GRIDS.items():
        df = loaded[name]
        if df.empty:
            out += [f"## {name}", "", "(not run)", ""]
            continue
        frames[name] = df
        budget = grid.budget(scale)
        passes = [p for p in (1, 2, 5, 10, 15, 20, 30, 50) if p <= budget]
        seeds = sorted(int(v) for v in df["seed"].unique())
        out += [
            f"## {name} ({budget:g} passes, seeds {', '.join(map(str, seeds))}; {grid.note})",
            "",
            f"P(0) = {df['P0'].iloc[0]:.6g}",
            "",
            *where_lines(df, SECONDS_METHODS),
            "",
        ]
        out += [*numbers_table(df, sorted(df["optimizer"].unique()), passes), ""]
        main6 = [o for o in MAIN if o != "lbfgs"]
        marks = [m for m in (1, 2, 5, 10, 15) if m <= budget]
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
        sdf = loaded_seconds.get(name)
        if sdf is None or sdf.empty:  # a problem without a seconds grid: its passes budget
            draw(
                df,
                [*main, "lbfgs"],
                f"{name}-seconds",
                f"{name}: sub-optimality against optimizer seconds, runs one at a time "
                f"({budget:g} passes each)",
                axes=("time_s",),
            )
        else:
            seconds = SECONDS_BUDGETS[name]
            draw(
                sdf,
                [*main, "lbfgs"],
                f"{name}-seconds",
                f"{name}: sub-optimality against optimizer seconds, runs one at a time, "
                f"each given {seconds:g} s (or stopped at 1e-8·P*)",
                axes=("time_s",),
            )
            out += [
                f"Seconds figure ({seconds:g} optimizer seconds each, or until P − P* ≤ "
                f"{TARGET_RELATIVE:g}·P*; seeds {', '.join(map(str, SECONDS_SEEDS))}; "
                f"`--seconds`): {where_lines(sdf, SECONDS_METHODS)[0]}",
                "",
                *seconds_lines(sdf, [*main, "lbfgs"], p_star_of(grid.problem) or 0.0, seconds),
                "",
            ]
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
                [f"{m}{s}" for m in ("sg", "sg-nus", "asg", "adagrad") for s in SG_STEPS],
                "ocr-sg-steps",
                "OCR: SG, SG-NUS, ASG, AdaGrad, η₀ = 1 (dotted), 0.1, 0.01 (dashed) (E9)",
                # colour = method, line style = step size
                style={
                    f"{m}{s}": (c, ls)
                    for m, c in (("sg", 6), ("sg-nus", 7), ("asg", 8), ("adagrad", 9))
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
                list(SBA15_FIGURE),
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
    out += [
        "## Verdict readings",
        "",
        "The ratios reports/README.md's verdict table quotes (P−P* of one method over "
        "another's at the same point, paired by seed):",
        "",
        *verdict_lines(frames),
        "",
    ]
    (HERE / "numbers.md").write_text("\n".join(out) + "\n", encoding="utf-8")
    print(f"wrote {HERE / 'numbers.md'} and {len(list(FIGURES.glob('*.png')))} figures")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", nargs="*", choices=list(GRIDS), help="problems to run")
    ap.add_argument("--figures-only", action="store_true", help="redraw from the stored runs")
    ap.add_argument("--list", action="store_true", help="the grids and a compute estimate")
    ap.add_argument(
        "--scale",
        choices=SCALES,
        default="paper",
        help="paper: several seeds, the papers' budgets (default); quick: one seed, scaled down",
    )
    ap.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="worker processes for the runs outside the seconds figures (default 1); the "
        "seconds figures' runs always run one at a time, first",
    )
    ap.add_argument(
        "--seconds",
        action="store_true",
        help="run only the seconds figures' grids (the main methods given the same seconds, "
        "one at a time), then write the outputs",
    )
    ap.add_argument(
        "--partial",
        action="store_true",
        help="write numbers.md and the figures even when some grid lacks runs (a preview: "
        "do not commit it)",
    )
    ap.add_argument(
        "--init-offset",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="add initialization work to the passes and oracle-call axes (default: on)",
    )
    args = ap.parse_args(argv)
    names = args.only or list(GRIDS)
    if args.list:
        list_grids(names, args.scale)
        return 0
    os.environ.setdefault("CRFOPT_DATA", str(HERE.parent.parent / "shared" / "datasets"))
    if args.seconds:
        run_seconds(names)
    elif not args.figures_only:
        run_grids(names, args.scale, args.jobs)
    try:
        make_outputs(args.init_offset, args.scale, args.partial)
    except IncompleteGrids as exc:
        # after a run the runs are stored and packed: only the outputs wait for the rest
        print(("" if args.figures_only else "note: ") + str(exc), file=sys.stderr)
        return 2 if args.figures_only else 0
    return 0


def list_grids(names: list[str], scale: str) -> None:
    """The grids at ``scale``: optimizers, seeds, budget, runs and estimated hours."""
    secs, how = estimate(names, scale)
    total_runs = 0
    for name in names:
        g = GRIDS[name]
        runs = len(g.runs(scale))
        total_runs += runs
        print(
            f"{name}: {g.describe(scale)} = {runs} runs, "
            f"{g.budget(scale):g} passes"
            + (" or 1e-8 relative sub-optimality" if scale == "paper" else "")
            + f"; ~{secs[name] / 3600:.1f} h — {g.note}"
        )
    print(
        f"total: {total_runs} runs, ~{sum(secs.values()) / 3600:.0f} h of one process's "
        f"optimizer seconds ({how}; work ∝ passes·N(K² + aK), an upper bound where runs stop "
        "at the target); evaluating the checkpoints adds about as much again"
    )
    stored = [pack_path(n, scale) for n in names if pack_path(n, scale).exists()]
    if stored:
        size = sum(p.stat().st_size for p in stored)
        print(f"committed packs: {len(stored)}, {size / 1e6:.2f} MB")


if __name__ == "__main__":
    sys.exit(main())
