"""The reproduction's tables: its stored runs read as ``crfopt report`` reads them (median
over seeds with the min–max range) and written as the Markdown of ``numbers.md``
(reports/reproduce.py assembles them)."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
from repro_grids import OEG_SBA15

from crfopt.bench.analysis import (
    Spread,
    format_number,
    format_spread,
    spread_ratio,
    spread_reach,
    spread_value_at,
)


def at(df: pd.DataFrame, opt: str, col: str, x: float, axis: str = "effective_passes") -> Spread:
    """Value of ``col`` at ``axis`` = x for ``opt`` over seeds (median, min–max), read as
    ``crfopt report`` reads it: interpolated between the checkpoints around x
    (:func:`crfopt.bench.analysis.spread_value_at`; runs that never got to x left out)."""
    return spread_value_at(df[df["optimizer"] == opt], col, x, axis, by="seed")


def reach(
    df: pd.DataFrame,
    opt: str,
    threshold: float,
    axis: str = "effective_passes",
    col: str = "subopt",
    scale: float = 1.0,
) -> Spread:
    """First ``axis`` value (/ ``scale``) where ``col`` ≤ threshold for ``opt`` over seeds
    (:func:`crfopt.bench.analysis.spread_reach`); inf for a seed that never got there."""
    sp = spread_reach(df[df["optimizer"] == opt], col, threshold, axis, by="seed")
    return Spread(sp.median / scale, sp.low / scale, sp.high / scale, sp.count)


def fmt(v: float | Spread, percent: bool = False) -> str:
    """A number, or a spread as ``median [min–max]`` over seeds."""
    if isinstance(v, Spread):
        if percent:
            return format_spread(v, fmt=lambda x: f"{100 * x:.2f} %" if x == x else "—")
        return format_spread(v)
    return format_number(v)


def numbers_table(df: pd.DataFrame, opts: list[str], passes: list[float]) -> list[str]:
    n = int(df["n"].iloc[0]) if "n" in df else 1
    p0 = float(df["P0"].iloc[0])
    head = (
        "| optimizer | seeds | init passes | "
        + " | ".join(f"P−P* @{p:g} passes" for p in passes)
        + " | passes to 1e-3·P(0) | updates/n to 1e-3·P(0) | oracle calls/n to 1e-3·P(0) "
        "| final test error |"
    )
    lines = [head, "|" + "---|" * (len(passes) + 7)]
    for opt in opts:
        sub = df[df["optimizer"] == opt]
        if sub.empty:
            continue
        init = sub["init_passes"].astype(float)
        row = [str(sub["seed"].nunique())]
        row.append(fmt(float(init.median())) if init.notna().all() else "—")
        row += [fmt(at(df, opt, "subopt", p)) for p in passes]
        thr = 1e-3 * p0
        row.append(fmt(reach(df, opt, thr)))
        row.append(fmt(reach(df, opt, thr, axis="updates", scale=n)))
        row.append(fmt(reach(df, opt, thr, axis="oracle_calls", scale=n)))
        last = sub.groupby("seed").tail(1)
        row.append(fmt(Spread.of(list(last["test_error"].astype(float))), percent=True))
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
            row = [fmt(at(df, opt, "test_error", m), percent=True) for m in marks]
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
        ratio = [fmt(at(df, opt, "gap_ratio", p)) for p in passes]
        last = sub.groupby("seed").tail(1)
        ls = Spread.of(
            list(last["ls_evals"].astype(float) / last["iterations"].astype(float).clip(lower=1))
        )
        lines.append(f"| {opt} | " + " | ".join(ratio) + f" | {fmt(ls)} |")
    return lines


def counting_lines(df: pd.DataFrame) -> list[str]:
    """E10's counting ratios, from each optimizer's lowest seed (they are counts, not
    readings of a noisy curve)."""
    lines = [
        "| optimizer | oracle calls / iteration | updates / iteration | "
        "forward calls / iteration, first → last pass |",
        "|---|---|---|---|",
    ]
    for opt, sub in df.groupby("optimizer"):
        sub = sub[(sub["seed"] == sub["seed"].min()) & (sub["iterations"] > 0)]
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


def where_lines(df: pd.DataFrame, seconds_methods: Sequence[str]) -> list[str]:
    """Where the seconds were measured: backend, threads and worker of the seconds
    figure's runs (those of ``seconds_methods``) and of the others, and the load average
    the former saw."""
    last = df.groupby("run_id").tail(1)
    timed = last["optimizer"].isin(list(seconds_methods))
    out = []
    for label, part in (("the seconds figure's", last[timed]), ("the other", last[~timed])):
        if part.empty:
            continue
        place = []
        for col in ("backend", "threads", "worker"):
            vals = sorted({str(v) for v in part[col].dropna()}) if col in part else []
            place.append(f"{col} {', '.join(vals) if vals else 'not recorded'}")
        out.append(f"{label.capitalize()} {len(part)} runs: " + "; ".join(place) + ".")
    part = last[timed]
    if "load_end" in part and part["load_end"].notna().any():
        rec = part.dropna(subset=["load_start", "load_end"])
        out.append(
            f"The 1-minute load average at their start was {rec['load_start'].min():.2f}–"
            f"{rec['load_start'].max():.2f} and at their end {rec['load_end'].min():.2f}–"
            f"{rec['load_end'].max():.2f} ({len(rec)} of {len(part)} runs recorded it; a run "
            "alone on the machine reads about its own thread count)."
        )
    elif not part.empty:
        out.append("The load average was not recorded for these runs (before it was).")
    if not part.empty and set(part["backend"].dropna().astype(str)) - {"serial"}:
        out.append(
            "**Some of the seconds figure's runs did not run one at a time**: their seconds "
            "are not comparable."
        )
    return [" ".join(out)]


#: The readings the verdict table quotes, as ratios paired by seed: (claim, problem,
#: numerator, denominator, axis, x per n or passes). "×3.1 [2.5–3.8]": the numerator's
#: P − P* is 3.1 times the denominator's (median over seeds, min–max).
VERDICT_RATIOS: tuple[tuple[str, str, str, str, str, float], ...] = (
    ("E2", "ocr", "sdca-gap[sub_precision=0.01]", "sdca-gap", "effective_passes", 30),
    ("E2", "ocr", "sdca-gap[sub_precision=1e-05]", "sdca-gap", "effective_passes", 30),
    ("E2", "ocr", "sdca-gap[sub_precision=0.5]", "sdca-gap", "effective_passes", 30),
    ("E2", "ocr", "sdca-gap[start=previous]", "sdca-gap", "effective_passes", 30),
    ("E2", "ner-nl", "sdca-gap[sub_precision=0.5]", "sdca-gap", "effective_passes", 15),
    ("E2", "conll2000", "sdca-gap[sub_precision=0.5]", "sdca-gap", "effective_passes", 15),
    ("E3", "ocr", "sdca-gapimp", "sdca-gap", "effective_passes", 30),
    ("E3", "ocr", "sdca-importance", "sdca", "effective_passes", 30),
    ("E3", "ocr", "sdca-max", "sdca-gap", "effective_passes", 30),
    ("E4", "ner-nl", "sdca-gap[non_uniformity=1.0]", "sdca-gap", "effective_passes", 10),
    ("E4", "ner-nl", "sdca-gap[refresh_period=1]", "sdca-gap", "effective_passes", 10),
    ("E6", "ocr", "sag-nus-star", "sdca-gap", "oracle_calls", 15),
    ("E6", "conll2000", "sag-nus-star", "sdca-gap", "oracle_calls", 5),
    ("E6", "ner-nl", "sag-nus-star", "sdca-gap", "oracle_calls", 5),
    ("E6", "pos-ewt", "sag-nus-star", "sdca-gap", "oracle_calls", 5),
    ("E6", "pos-conll2000", "sag-nus-star", "sdca-gap", "oracle_calls", 2),
    ("E7", "ocr", "oeg", "sdca", "updates", 5),
    ("E7", "conll2000", "oeg", "sdca", "updates", 5),
    ("E7", "ner-nl", "oeg", "sdca", "updates", 5),
    ("E7", "pos-ewt", "oeg", "sdca", "updates", 5),
    ("E7", "pos-conll2000", "oeg", "sdca", "updates", 2),
    ("E7", "conll2000", "sag-nus-star", "sdca-gap", "updates", 5),
    ("E7", "ner-nl", "sag-nus-star", "sdca-gap", "updates", 5),
    ("E7", "pos-ewt", "sag-nus-star", "sdca-gap", "updates", 5),
    ("E9", "ocr", "sag-nus", "sag-nus-star", "effective_passes", 30),
    ("E9", "conll2000", "sag-nus", "sag-nus-star", "effective_passes", 15),
    ("E9", "ner-nl", "sag-nus", "sag-nus-star", "effective_passes", 15),
    ("E9", "pos-ewt", "sag-nus", "sag-nus-star", "effective_passes", 10),
    ("E9", "ocr", "oeg-norp", "oeg", "effective_passes", 30),
    ("E9", "conll2000", "oeg-norp", "oeg", "effective_passes", 15),
    ("E9", "ner-nl", "oeg-norp", "oeg", "effective_passes", 15),
    ("E9", "pos-ewt", "oeg-norp", "oeg", "effective_passes", 10),
    ("E9", "ocr", "saga-nus", "sag-nus-star", "effective_passes", 30),
    # SBA15 Fig. 1's plain OEG is the uniform start (LPL18 fn. 8): oeg-c0
    ("E9", "ocr", "oeg-c0", "sag-nus-star", "effective_passes", 30),
    ("E9", "conll2000", "oeg-c0", "sag-nus-star", "effective_passes", 15),
    ("E9", "ner-nl", "oeg-c0", "sag-nus-star", "effective_passes", 15),
    ("E9", "pos-ewt", "oeg-c0", "sag-nus-star", "effective_passes", 10),
    ("E9", "ocr", OEG_SBA15, "sag-nus-star", "effective_passes", 30),
    ("E9", "conll2000", OEG_SBA15, "sag-nus-star", "effective_passes", 15),
    ("E9", "ner-nl", OEG_SBA15, "sag-nus-star", "effective_passes", 15),
    ("E9", "pos-ewt", OEG_SBA15, "sag-nus-star", "effective_passes", 10),
    ("E9", "ner-nl", OEG_SBA15, "oeg", "effective_passes", 15),
    ("E9", "ocr", "sg-nus", "sg", "effective_passes", 30),
    ("E9", "ocr", "sg-nus[skipping=true]", "sg", "effective_passes", 30),
    ("E9", "conll2000", "sg-nus", "sg", "effective_passes", 15),
    ("E9", "ner-nl", "sg-nus", "sg", "effective_passes", 15),
    ("E9", "pos-ewt", "sg-nus", "sg", "effective_passes", 10),
    ("E9", "ocr", "sg-nus[step_size=0.01]", "sg[step_size=0.01]", "effective_passes", 30),
    ("E9", "ocr", "sg-nus[step_size=1.0]", "sg[step_size=1.0]", "effective_passes", 30),
    ("E9", "ocr", "sag-nus-star[initial_lipschitz=0.001]", "sag-nus-star", "effective_passes", 30),
    ("E11", "ocr", "sdca-cyclic", "sdca", "effective_passes", 30),
    ("E11", "ocr", "sdca-perm", "sdca", "effective_passes", 30),
)

_AXIS_WORDS = {
    "effective_passes": "passes",
    "oracle_calls": "oracle calls/n",
    "updates": "updates/n",
}


def verdict_lines(frames: dict[str, pd.DataFrame]) -> list[str]:
    """The ratios the verdict table quotes, each with its spread over paired seeds."""
    lines = [
        "| | problem | P−P* of | over | at | ratio, median [min–max] over seeds | seeds |",
        "|---|---|---|---|---|---|---|",
    ]
    for claim, problem, num, den, axis, x in VERDICT_RATIOS:
        df = frames.get(problem)
        if df is None or df.empty:
            continue
        have = set(df["optimizer"])
        if num not in have or den not in have:
            continue
        scale = float(df["n"].iloc[0]) if axis != "effective_passes" else 1.0
        sp = spread_ratio(
            df[df["optimizer"] == num], df[df["optimizer"] == den], "subopt", x * scale, axis
        )
        lines.append(
            f"| {claim} | {problem} | {num} | {den} | {x:g} {_AXIS_WORDS[axis]} | "
            f"{format_spread(sp, ratio=True)} | {sp.count} |"
        )
    return lines


#: the relative sub-optimalities (P − P*)/P* the seconds tables read the time to
SECONDS_LEVELS = (1e-2, 1e-3, 1e-4, 1e-6)


def seconds_lines(
    df: pd.DataFrame, opts: Sequence[str], p_star: float, seconds: float
) -> list[str]:
    """The seconds grid's table: per method, the optimizer seconds to each relative
    sub-optimality of ``SECONDS_LEVELS``, the seconds per effective pass and the passes
    made in the budget (median over seeds, min–max)."""
    levels = " | ".join(f"s to {lv:.0e}" for lv in SECONDS_LEVELS)
    out = [
        f"| method | {levels} | s per effective pass | passes in {seconds:g} s |",
        "|---|" + "---|" * (len(SECONDS_LEVELS) + 2),
    ]
    last = df.groupby("run_id").tail(1)
    for opt in opts:
        if opt not in set(df["optimizer"]):
            continue
        cells = [fmt(reach(df, opt, lv * p_star, axis="time_s")) for lv in SECONDS_LEVELS]
        mine = last[last["optimizer"] == opt]
        per_pass = Spread.of(list(mine["time_s"] / mine["effective_passes"]))
        passes = Spread.of(list(mine["effective_passes"]))
        made = format_spread(passes, fmt=lambda x: f"{x:.0f}")
        out.append(f"| {opt} | " + " | ".join(cells) + f" | {fmt(per_pass)} | {made} |")
    return out
