"""Reports: figures and tables from any results folder (DESIGN.md "Report").

``crfopt report RESULTS --out DIR`` (or :func:`make_report`) writes, for every problem in
the results:

* ``<problem>-suboptimality.{png,svg}``: log10 relative sub-optimality (P(w) - P*)/P(0)
  against oracle calls, parameter updates, effective passes and optimizer seconds — one
  panel per axis, one line per optimizer, the seeds' range as a band;
* ``<problem>-gap.{png,svg}`` (dual methods): the true duality gap and the gap estimate
  against passes, and their ratio;
* ``<problem>-test-error.{png,svg}``: test error against passes;
* ``summary.md`` and ``report.html``: passes / oracle calls / seconds to reach 1e-2,
  1e-4, 1e-6 relative sub-optimality (median over seeds) and the final test error; the
  HTML page embeds every figure, so it is one self-contained file.

Initialization work. An optimizer's ``setup()`` work (a dual initialization, a warm start)
is stored per run in the ``init_*`` columns and is not part of ``effective_passes``,
``oracle_calls`` or ``time_s``, which count the iterations. With ``init_offset=True`` (the
default; ``--no-init-offset`` turns it off) the report charges it: the passes axis is
``init_passes + effective_passes``, the oracle-call axis ``init_oracle_calls +
oracle_calls``, the seconds axis ``init_time_s + time_s``, so a curve starts where its
initialization ended, marked with a diamond; the update axis is not shifted (setup() makes
no counted updates). The summary table's passes / oracle calls / seconds are read on the
same axes, and its ``init passes`` column shows the work either way. Unknown init work
(null, e.g. files from before it was stored) shifts by nothing.

Colours are assigned to optimizers once, from the sorted list of all optimizer names in
the results, so an optimizer has the same colour in every figure.
"""

from __future__ import annotations

import base64
import html
import io
import json
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from crfopt.bench.results import read_results

THRESHOLDS = (1e-2, 1e-4, 1e-6)
AXES = {
    "oracle_calls": "oracle calls",
    "updates": "parameter updates",
    "effective_passes": "effective passes",
    "time_s": "optimizer time (s)",
}

#: axis column → the init_* column added to it when the offset is on
INIT_SHIFT = {
    "effective_passes": "init_passes",
    "oracle_calls": "init_oracle_calls",
    "time_s": "init_time_s",
}


def axis_label(axis: str, init_offset: bool) -> str:
    """The label of an axis, saying whether it includes the initialization work."""
    label = AXES[axis]
    return f"{label}, init + iterations" if init_offset and axis in INIT_SHIFT else label


@dataclass
class Report:
    """What :func:`make_report` wrote."""

    out_dir: Path
    figures: list[Path] = field(default_factory=list)
    summary: pd.DataFrame = field(default_factory=pd.DataFrame)
    markdown: Path | None = None
    html: Path | None = None


def plot_frame(frame: pd.DataFrame, init_offset: bool = True) -> pd.DataFrame:
    """The results as the report plots and tabulates them (see the module docstring).

    Float columns, P(0) from the run metadata, relative sub-optimality and gap; with
    ``init_offset`` the passes, oracle-call and seconds columns include each run's
    initialization work. ``iteration_passes`` always holds the iterations' passes alone.
    """
    df = _prepare(frame)
    df["iteration_passes"] = df["effective_passes"]
    if init_offset:
        for axis, init in INIT_SHIFT.items():
            df[axis] = df[axis] + df[init].fillna(0.0)
    return df


def _prepare(frame: pd.DataFrame) -> pd.DataFrame:
    """Float columns, P(0) from the run metadata, relative sub-optimality."""
    df = frame.copy()
    runs = frame.attrs.get("runs", {})
    for col in (
        "effective_passes",
        "time_s",
        "primal",
        "suboptimality",
        "dual",
        "duality_gap",
        "gap_estimate",
        "train_error",
        "test_error",
    ):
        df[col] = df[col].astype(float)
    for col in (
        "oracle_calls",
        "updates",
        "iterations",
        "forward_calls",
        "init_oracle_calls",
        "init_forward_calls",
        "init_passes",
        "init_time_s",
    ):
        df[col] = df[col].astype(float)
    p0 = df["run_id"].map(lambda r: (runs.get(r) or {}).get("P0"))
    df["P0"] = p0.astype(float)
    df["relative_suboptimality"] = df["suboptimality"] / df["P0"]
    df["relative_gap"] = df["duality_gap"] / df["P0"]
    return df


def palette_for(names: Sequence[str]) -> dict[str, Any]:
    """One colour per optimizer name, stable across figures and problems.

    tab10 in name order; beyond ten names the colours repeat and :func:`linestyles_for`
    tells the repeats apart (neighbouring hues of a continuous palette would not).
    """
    import seaborn as sns

    names = sorted(set(names))
    colors = sns.color_palette("tab10", 10)
    return {name: colors[k % 10] for k, name in enumerate(names)}


def linestyles_for(names: Sequence[str]) -> dict[str, str]:
    """Solid for the first ten names, then dashed, dotted, dash-dotted (see palette_for)."""
    names = sorted(set(names))
    return {name: ("-", "--", ":", "-.")[(k // 10) % 4] for k, name in enumerate(names)}


def _legend_outside(fig: Any, ax: Any) -> None:
    """One legend right of the figure, so no panel is covered however many lines."""
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        fig.legend(
            handles,
            labels,
            loc="center left",
            bbox_to_anchor=(1.0, 0.5),
            fontsize=8,
            frameon=False,
            ncol=1 if len(labels) <= 24 else 2,
        )


def _band(
    ax: Any, sub: pd.DataFrame, x: str, y: str, color: Any, label: str, log: bool, ls: str = "-"
) -> int:
    """Median over seeds with the min–max band; returns the number of hidden points."""
    hidden = 0
    if log:
        ok = sub[y] > 0
        hidden = int((~ok & sub[y].notna()).sum())
        sub = sub[ok]
    if sub.empty:
        return hidden
    if x == "time_s":
        # seeds do not share time stamps: draw each seed, label once
        for k, (_, run) in enumerate(sub.groupby("run_id")):
            run = run.sort_values(x)
            ax.plot(
                run[x],
                run[y],
                color=color,
                ls=ls,
                lw=1.4,
                alpha=0.85,
                label=label if k == 0 else None,
            )
        return hidden
    g = sub.groupby(x)[y]
    med = g.median()
    lo = g.min()
    hi = g.max()
    ax.plot(med.index, med.values, color=color, ls=ls, lw=1.6, label=label)
    if sub["run_id"].nunique() > 1:
        ax.fill_between(med.index, lo.values, hi.values, color=color, alpha=0.2, lw=0)
    return hidden


def _init_marker(ax: Any, sub: pd.DataFrame, x: str, y: str, color: Any, log: bool) -> bool:
    """A diamond where a curve starts after initialization work (median over seeds).

    Only on shifted axes, and only for runs whose setup() did counted work; returns
    whether a marker was drawn.
    """
    if x not in INIT_SHIFT:
        return False
    first = sub[(sub["checkpoint"] == 0) & (sub["init_passes"] > 0)]
    if log:
        first = first[first[y] > 0]
    if first.empty:
        return False
    ax.plot(
        [float(first[x].median())],
        [float(first[y].median())],
        marker="D",
        ms=6,
        mfc="none",
        mec=color,
        mew=1.5,
        ls="none",
    )
    return True


def _save(fig: Any, out_dir: Path, stem: str, formats: Sequence[str]) -> list[Path]:
    paths = []
    for fmt in formats:
        path = out_dir / f"{stem}.{fmt}"
        fig.savefig(path, dpi=100 if fmt == "png" else None, bbox_inches="tight")
        paths.append(path)
    return paths


def _png_b64(fig: Any) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
    return base64.b64encode(buf.getvalue()).decode()


def _first_reach(run: pd.DataFrame, threshold: float, axis: str) -> float:
    hit = run[run["relative_suboptimality"] <= threshold]
    return float(hit[axis].iloc[0]) if len(hit) else math.nan


def summary_table(df: pd.DataFrame) -> pd.DataFrame:
    """Per problem and optimizer: effort to reach each threshold, final test error.

    ``df`` is a :func:`plot_frame`: the efforts are read on its axes, so they include
    the initialization work when it was made with ``init_offset=True``.
    """
    rows = []
    for (problem, opt), grp in df.groupby(["problem", "optimizer"], sort=True):
        runs = [r.sort_values("checkpoint") for _, r in grp.groupby("run_id")]
        init = [float(r["init_passes"].iloc[0]) for r in runs]
        row: dict[str, Any] = {
            "problem": problem,
            "optimizer": opt,
            "seeds": grp["run_id"].nunique(),
            # null when a run's init work is unknown (files from before it was stored)
            "init passes": math.nan if any(map(math.isnan, init)) else float(np.median(init)),
        }
        for thr in THRESHOLDS:
            for axis, label in (
                ("effective_passes", "passes"),
                ("oracle_calls", "oracle calls"),
                ("time_s", "seconds"),
            ):
                vals = [_first_reach(r, thr, axis) for r in runs]
                reached = [v for v in vals if not math.isnan(v)]
                row[f"{label} to {thr:g}"] = (
                    float(np.median(reached)) if len(reached) == len(vals) else math.nan
                )
        finals = [r.iloc[-1] for r in runs]
        row["final rel. sub-opt."] = float(np.median([f["relative_suboptimality"] for f in finals]))
        row["final test error"] = float(np.median([f["test_error"] for f in finals]))
        row["final passes"] = float(np.median([f["effective_passes"] for f in finals]))
        statuses = sorted({str(f["status"]) for f in finals})
        row["status"] = ",".join(statuses)
        rows.append(row)
    return pd.DataFrame(rows)


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        if math.isnan(v):
            return "—"
        if v == 0 or 1e-3 <= abs(v) < 1e5:
            return f"{v:.4g}"
        return f"{v:.2e}"
    return str(v)


def init_note(table: pd.DataFrame, init_offset: bool) -> str:
    """One sentence saying what the passes / oracle-call / seconds axes include."""
    with_init = table[table["init passes"].fillna(0.0) > 0]
    which = ", ".join(
        f"{r['optimizer']} ({_fmt(float(r['init passes']))})" for _, r in with_init.iterrows()
    )
    if init_offset:
        text = (
            "Passes, oracle calls and seconds (axes and table) include each optimizer's "
            "initialization work (setup()), so curves start where it ended (◇)"
        )
    else:
        text = (
            "Passes, oracle calls and seconds (axes and table) count the optimizers' "
            "iterations only; initialization work (setup()) is left off them"
        )
    if which:
        return f"{text}. Initialization work in passes: {which}."
    return f"{text}. No optimizer here did initialization work."


def to_markdown(table: pd.DataFrame) -> str:
    cols = list(table.columns)
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for _, r in table.iterrows():
        lines.append("| " + " | ".join(_fmt(r[c]) for c in cols) + " |")
    return "\n".join(lines) + "\n"


def make_report(
    results: str | os.PathLike[str] | pd.DataFrame,
    out: str | os.PathLike[str],
    *,
    formats: Sequence[str] = ("png", "svg"),
    title: str | None = None,
    init_offset: bool = True,
) -> Report:
    """Figures, a Markdown summary and a self-contained HTML page for a results folder.

    With ``init_offset`` (default) the passes, oracle-call and seconds axes and the
    table's efforts include each optimizer's initialization work (module docstring).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import seaborn as sns

    frame = read_results(results) if not isinstance(results, pd.DataFrame) else results
    if len(frame) == 0:
        raise ValueError(f"no results found in {results}")
    bad = [f for f in formats if f not in ("png", "svg", "pdf")]
    if bad:
        raise ValueError(f"unknown figure formats {bad}; use png, svg, pdf")
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    df = plot_frame(frame, init_offset)
    colors = palette_for(df["optimizer"].unique())
    styles = linestyles_for(df["optimizer"].unique())
    sns.set_theme(style="whitegrid", context="notebook")
    report = Report(out_dir)
    sections: list[str] = []
    for problem, pdf in df.groupby("problem", sort=True):
        pdf = pdf.sort_values(["run_id", "checkpoint"])
        opts = sorted(pdf["optimizer"].unique())
        parts: list[str] = [f"<h2>{html.escape(str(problem))}</h2>"]
        # 1. sub-optimality against the four axes
        if pdf["relative_suboptimality"].notna().any():
            fig, axes = plt.subplots(1, 4, figsize=(17, 4.2), sharey=True)
            hidden = 0
            marked = False
            for ax, x in zip(axes, AXES):
                for opt in opts:
                    sub = pdf[pdf["optimizer"] == opt]
                    hidden += _band(
                        ax,
                        sub,
                        x,
                        "relative_suboptimality",
                        colors[opt],
                        opt,
                        log=True,
                        ls=styles[opt],
                    )
                    if init_offset:
                        marked |= _init_marker(
                            ax, sub, x, "relative_suboptimality", colors[opt], log=True
                        )
                ax.set_yscale("log")
                ax.set_xlabel(axis_label(x, init_offset))
            axes[0].set_ylabel("(P(w) − P*) / P(0)")
            _legend_outside(fig, axes[-1])
            note = (
                f" ({hidden // 4} points ≤ 0, i.e. below P*'s certificate, not shown)"
                if hidden
                else ""
            )
            if marked:
                note += "; ◇ = start after initialization work"
            fig.suptitle(f"{problem}: relative primal sub-optimality{note}", fontsize=11)
            report.figures += _save(fig, out_dir, f"{problem}-suboptimality", formats)
            parts.append(f'<img alt="sub-optimality" src="data:image/png;base64,{_png_b64(fig)}">')
            plt.close(fig)
        # 2. gaps of dual methods
        dual = pdf[pdf["gap_estimate"].notna()]
        if len(dual):
            fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
            dual = dual.assign(ratio=dual["gap_estimate"] / dual["duality_gap"])
            for opt in sorted(dual["optimizer"].unique()):
                sub = dual[dual["optimizer"] == opt]
                _band(
                    axes[0],
                    sub,
                    "effective_passes",
                    "relative_gap",
                    colors[opt],
                    f"{opt} true gap",
                    log=True,
                )
                if init_offset:
                    _init_marker(
                        axes[0], sub, "effective_passes", "relative_gap", colors[opt], True
                    )
                est = sub.assign(relative_est=sub["gap_estimate"] / sub["P0"])
                g = est.groupby("effective_passes")["relative_est"].median()
                g = g[g > 0]
                axes[0].plot(
                    g.index, g.values, color=colors[opt], lw=1.2, ls="--", label=f"{opt} estimate"
                )
                _band(
                    axes[1],
                    sub[sub["iteration_passes"] > 0],  # the estimate starts as a constant
                    "effective_passes",
                    "ratio",
                    colors[opt],
                    opt,
                    log=True,
                )
            axes[0].set_yscale("log")
            axes[0].set_xlabel(axis_label("effective_passes", init_offset))
            axes[0].set_ylabel("gap / P(0)")
            _legend_outside(fig, axes[0])
            axes[1].set_yscale("log")
            axes[1].axhspan(0.5, 2.0, color="grey", alpha=0.12, lw=0)
            axes[1].set_xlabel(axis_label("effective_passes", init_offset))
            axes[1].set_ylabel("gap estimate / true gap")
            fig.suptitle(f"{problem}: duality gap and its estimate (band: factor 2)", fontsize=11)
            report.figures += _save(fig, out_dir, f"{problem}-gap", formats)
            parts.append(f'<img alt="gaps" src="data:image/png;base64,{_png_b64(fig)}">')
            plt.close(fig)
        # 3. test error
        if pdf["test_error"].notna().any():
            fig, ax = plt.subplots(figsize=(6, 4.2))
            for opt in opts:
                sub = pdf[pdf["optimizer"] == opt]
                _band(
                    ax,
                    sub,
                    "effective_passes",
                    "test_error",
                    colors[opt],
                    opt,
                    log=False,
                    ls=styles[opt],
                )
                if init_offset:
                    _init_marker(ax, sub, "effective_passes", "test_error", colors[opt], False)
            # around the final errors: they differ in the second digit, the start is ~1
            final = pdf.sort_values("checkpoint").groupby("run_id")["test_error"].last()
            if final.notna().any() and final.max() > 0:
                ax.set_ylim(0.8 * float(final.min()), min(1.0, 3.0 * float(final.max())))
            ax.set_xlabel(axis_label("effective_passes", init_offset))
            ax.set_ylabel("test error (per token)")
            _legend_outside(fig, ax)
            fig.suptitle(f"{problem}: test error", fontsize=11)
            report.figures += _save(fig, out_dir, f"{problem}-test-error", formats)
            parts.append(f'<img alt="test error" src="data:image/png;base64,{_png_b64(fig)}">')
            plt.close(fig)
        sections.append("\n".join(parts))
    table = summary_table(df)
    report.summary = table
    heading = title or "crfopt comparison report"
    axes_note = init_note(table, init_offset)
    md = [
        f"# {heading}",
        "",
        "Effort to reach a relative primal sub-optimality (P(w) − P*)/P(0) (median over "
        "seeds; — = not reached by every seed), and the final state.",
        "",
        axes_note,
        "",
        to_markdown(table),
    ]
    for fig_path in report.figures:
        if fig_path.suffix == ".png":
            md.append(f"![{fig_path.stem}]({fig_path.name})")
    report.markdown = out_dir / "summary.md"
    report.markdown.write_text("\n".join(md) + "\n", encoding="utf-8")
    table_html = table.to_html(index=False, na_rep="—", float_format=_fmt, border=0)
    runs = frame.attrs.get("runs", {})
    provenance = next(iter(runs.values()), {}).get("provenance", {}) if runs else {}
    page = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(heading)}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2em; max-width: 1200px; }}
img {{ max-width: 100%; display: block; margin: 1em 0; }}
table {{ border-collapse: collapse; font-size: 0.85em; }}
td, th {{ padding: 0.25em 0.6em; border-bottom: 1px solid #ddd; text-align: right; }}
</style></head><body>
<h1>{html.escape(heading)}</h1>
<p>Relative primal sub-optimality is (P(w) − P*)/P(0) with the certified reference optimum
P*; duality gaps are true gaps evaluated at each checkpoint (not counted, not timed).</p>
<p>{html.escape(axes_note)}</p>
{table_html}
{"".join(sections)}
<p style="color:#777;font-size:0.8em">provenance: {html.escape(json.dumps(provenance))}</p>
</body></html>
"""
    report.html = out_dir / "report.html"
    report.html.write_text(page, encoding="utf-8")
    return report
