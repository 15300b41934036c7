"""Reports: figures and tables from any results folder (docs/architecture.md "Report").

``crfopt report RESULTS --out DIR`` (or :func:`make_report`) writes, for every problem in
the results:

* ``<problem>-suboptimality.{png,svg}``: log10 relative sub-optimality (P(w) - P*)/P(0)
  against oracle calls, parameter updates, effective passes and optimizer seconds — one
  panel per axis, one line per optimizer, the seeds' range as a band;
* ``<problem>-gap.{png,svg}`` (dual methods): the true duality gap and the gap estimate
  against passes, and their ratio;
* ``<problem>-test-error.{png,svg}``: test error against passes, and
  ``<problem>-<metric>.{png,svg}`` for every other metric plugin's column (``chunk_f1``
  on tagging problems): its value against passes, checkpoints where a sparse (expensive)
  metric was not computed skipped;
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
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from crfopt.bench.analysis import (
    AXES,
    INIT_SHIFT,
    axis_label,
    best_of,
    curve_figure,
    draw_curves,
    legend_outside,
    line_styles,
    median_reach,
    shift_init,
)
from crfopt.bench.interactive import write_interactive
from crfopt.bench.results import COLUMNS, read_results

__all__ = [
    "AXES",
    "INIT_SHIFT",
    "MixedTimingWarning",
    "Report",
    "axis_label",
    "make_report",
    "plot_frame",
    "timing_warnings",
]

THRESHOLDS = (1e-2, 1e-4, 1e-6)


@dataclass
class Report:
    """What :func:`make_report` wrote."""

    out_dir: Path
    figures: list[Path] = field(default_factory=list)
    summary: pd.DataFrame = field(default_factory=pd.DataFrame)
    markdown: Path | None = None
    html: Path | None = None
    interactive: Path | None = None


def plot_frame(frame: pd.DataFrame, init_offset: bool = True) -> pd.DataFrame:
    """The results as the report plots and tabulates them (see the module docstring).

    Float columns, P(0) from the run metadata, relative sub-optimality and gap; with
    ``init_offset`` the passes, oracle-call and seconds columns include each run's
    initialization work. ``iteration_passes`` always holds the iterations' passes alone.
    """
    df = _prepare(frame)
    df["iteration_passes"] = df["effective_passes"]
    return shift_init(df, init_offset)


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
    df.attrs["metric_columns"] = metric_columns(frame)
    for col in df.attrs["metric_columns"]:
        df[col] = df[col].astype(float)
    p0 = df["run_id"].map(lambda r: (runs.get(r) or {}).get("P0"))
    df["P0"] = p0.astype(float)
    df["relative_suboptimality"] = df["suboptimality"] / df["P0"]
    df["relative_gap"] = df["duality_gap"] / df["P0"]
    return df


def metric_columns(frame: pd.DataFrame) -> list[str]:
    """Metric plugins' columns beyond ``test_error`` (``chunk_f1``…), sorted, of a results
    frame (:func:`plot_frame` keeps them in ``attrs["metric_columns"]``; its own derived
    columns are not metrics)."""
    return sorted(
        c
        for c in frame.columns
        if c not in COLUMNS
        and not str(c).startswith("param.")
        and pd.api.types.is_numeric_dtype(frame[c])
    )


def metric_label(frame: pd.DataFrame, name: str) -> str:
    """A metric's axis label: its summary as recorded in the runs' metadata, else its name."""
    for meta in frame.attrs.get("runs", {}).values():
        summary = ((meta or {}).get("metrics") or {}).get(name, {}).get("summary")
        if summary:
            return str(summary)
    return name


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


def summary_table(df: pd.DataFrame) -> pd.DataFrame:
    """Per problem and optimizer: effort to reach each threshold, final test error.

    The effort is the first point where the interpolated curve of a run reaches the
    threshold (:func:`crfopt.bench.analysis.first_reach`), median over seeds; nan when
    the median seed never reached it.

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
                # interpolated between checkpoints (crfopt.bench.analysis); a median
                # over seeds that did not get there is inf, shown as —
                v = median_reach(grp, "relative_suboptimality", thr, axis)
                row[f"{label} to {thr:g}"] = v if math.isfinite(v) else math.nan
        finals = [r.iloc[-1] for r in runs]
        row["final rel. sub-opt."] = float(np.median([f["relative_suboptimality"] for f in finals]))
        row["final test error"] = float(np.median([f["test_error"] for f in finals]))
        for col in df.attrs.get("metric_columns", []):  # a sparse metric's is the last one's
            lasts = [r[col].dropna() for r in runs]
            vals = [float(v.iloc[-1]) for v in lasts if len(v)]
            row[f"final {col}"] = float(np.median(vals)) if vals else math.nan
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


def _picks(chosen: Sequence[Any], problem: Any) -> str:
    """A figure title's second line naming the post-hoc choices on ``problem``."""
    picks = "; ".join(b.note for b in chosen if b.problem == str(problem))
    return f"\n{picks} (lowest final sub-optimality, post hoc)" if picks else ""


def _best_of_lines(chosen: Sequence[Any]) -> list[str]:
    """summary.md's paragraph on post-hoc choices (``--best-of``), or nothing."""
    if not chosen:
        return []
    lines = [
        "Post-hoc best-of (--best-of): of each swept parameter, only the value with the "
        "lowest final relative sub-optimality (median over seeds) is shown:",
        "",
    ]
    lines += [f"- {b.problem}: {b.note}" for b in chosen]
    return [*lines, ""]


class MixedTimingWarning(UserWarning):
    """The seconds axis of one problem mixes runs timed on different backends or with
    different thread counts, so their seconds are not comparable."""


def timing_warnings(frame: pd.DataFrame) -> list[str]:
    """One sentence per problem whose runs were timed on more than one backend or thread
    count (the ``backend``/``threads`` columns; null, in files from before them, is
    unknown and mixes with nothing)."""
    if "backend" not in frame or "threads" not in frame:
        return []
    found = []
    runs = frame.drop_duplicates("run_id")
    for problem, pdf in runs.groupby("problem", sort=True):
        mixed = []
        for col, what in (("backend", "backends"), ("threads", "thread counts")):
            counts = pdf[col].dropna().value_counts().sort_index()
            if len(counts) > 1:
                mixed.append(f"{what} ({', '.join(f'{v}: {n} runs' for v, n in counts.items())})")
        if mixed:
            found.append(
                f"{problem}: the seconds axis mixes {' and '.join(mixed)}; seconds are "
                "comparable only between runs of one backend and thread count (compare "
                "passes or oracle calls instead, or rerun on one backend)"
            )
    return found


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
    best: Sequence[str | tuple[str, str]] = (),
) -> Report:
    """Figures, a Markdown summary and a self-contained HTML page for a results folder.

    With ``init_offset`` (default) the passes, oracle-call and seconds axes and the
    table's efforts include each optimizer's initialization work (module docstring).
    ``best`` (``"NAME:PARAM"``, ``--best-of``) keeps only the best value of a swept
    parameter per problem (:func:`crfopt.bench.analysis.best_of`: lowest final relative
    sub-optimality, median over seeds); figures and summary.md say which was kept.
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
    df, chosen = best_of(df, best) if best else (df, [])
    # one (colour, line style) per optimizer for the whole report, from the sorted names
    styles = line_styles(sorted(df["optimizer"].unique()))
    sns.set_theme(style="whitegrid", context="notebook")
    report = Report(out_dir)
    sections: list[str] = []
    for problem, pdf in df.groupby("problem", sort=True):
        pdf = pdf.sort_values(["run_id", "checkpoint"])
        mine = {o: styles[o] for o in sorted(pdf["optimizer"].unique())}
        parts: list[str] = [f"<h2>{html.escape(str(problem))}</h2>"]
        # 1. sub-optimality against the four axes
        if pdf["relative_suboptimality"].notna().any():
            fig, _, hidden, marked = curve_figure(
                pdf,
                "relative_suboptimality",
                mine,
                axes=tuple(AXES),
                init_offset=init_offset,
                ylabel="(P(w) − P*) / P(0)",
                panel_size=(17 / 4, 4.2),
            )
            note = (
                f" ({hidden // 4} points ≤ 0, i.e. below P*'s certificate, not shown)"
                if hidden
                else ""
            )
            if marked:
                note += "; ◇ = start after initialization work"
            note += _picks(chosen, problem)
            fig.suptitle(f"{problem}: relative primal sub-optimality{note}", fontsize=11)
            report.figures += _save(fig, out_dir, f"{problem}-suboptimality", formats)
            parts.append(f'<img alt="sub-optimality" src="data:image/png;base64,{_png_b64(fig)}">')
            plt.close(fig)
        # 2. gaps of dual methods
        dual = pdf[pdf["gap_estimate"].notna()]
        if len(dual):
            fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
            dual = dual.assign(ratio=dual["gap_estimate"] / dual["duality_gap"])
            duals = {o: mine[o] for o in sorted(dual["optimizer"].unique())}
            x = "effective_passes"
            draw_curves(
                axes[0], dual, x, "relative_gap", duals, init_marker=init_offset,
                label="{} true gap",
            )  # fmt: skip
            for opt, (color, _) in duals.items():
                sub = dual[dual["optimizer"] == opt]
                est = sub.assign(relative_est=sub["gap_estimate"] / sub["P0"])
                g = est.groupby(x)["relative_est"].median()
                g = g[g > 0]
                axes[0].plot(
                    g.index, g.values, color=color, lw=1.2, ls="--", label=f"{opt} estimate"
                )
            # the estimate starts as a constant: its ratio means something after iterations
            draw_curves(axes[1], dual[dual["iteration_passes"] > 0], x, "ratio", duals)
            axes[0].set_yscale("log")
            axes[0].set_xlabel(axis_label(x, init_offset))
            axes[0].set_ylabel("gap / P(0)")
            legend_outside(fig, axes[0])
            axes[1].set_yscale("log")
            axes[1].axhspan(0.5, 2.0, color="grey", alpha=0.12, lw=0)
            axes[1].set_xlabel(axis_label(x, init_offset))
            axes[1].set_ylabel("gap estimate / true gap")
            fig.suptitle(f"{problem}: duality gap and its estimate (band: factor 2)", fontsize=11)
            report.figures += _save(fig, out_dir, f"{problem}-gap", formats)
            parts.append(f'<img alt="gaps" src="data:image/png;base64,{_png_b64(fig)}">')
            plt.close(fig)
        # 3. test error and the other metric plugins' columns
        for col in ["test_error", *df.attrs.get("metric_columns", [])]:
            if not pdf[col].notna().any():
                continue  # the metric does not apply to this problem
            label = "test error (per token)" if col == "test_error" else metric_label(frame, col)
            fig, panels, _, _ = curve_figure(
                pdf,
                col,
                mine,
                log=False,
                init_offset=init_offset,
                ylabel=label,
                panel_size=(6, 4.2),
            )
            if col == "test_error":
                # around the final errors: they differ in the second digit, the start is ~1
                final = pdf.sort_values("checkpoint").groupby("run_id")[col].last()
                if final.notna().any() and final.max() > 0:
                    panels[0].set_ylim(0.8 * float(final.min()), min(1.0, 3.0 * float(final.max())))
            # not `title`: that is the report's own, used for the heading below
            shown = "test error" if col == "test_error" else label
            fig.suptitle(f"{problem}: {shown}{_picks(chosen, problem)}", fontsize=11)
            stem = f"{problem}-test-error" if col == "test_error" else f"{problem}-{col}"
            report.figures += _save(fig, out_dir, stem, formats)
            parts.append(
                f'<img alt="{html.escape(shown)}" src="data:image/png;base64,{_png_b64(fig)}">'
            )
            plt.close(fig)
        sections.append("\n".join(parts))
    table = summary_table(df)
    report.summary = table
    heading = title or "crfopt comparison report"
    axes_note = init_note(table, init_offset)
    timing = timing_warnings(frame)
    for text in timing:
        warnings.warn(text, MixedTimingWarning, stacklevel=2)
    timing_md = [*(f"**Warning:** {text}." for text in timing), ""] if timing else []
    gap_note = (
        "duality_gap is a true gap; which dual point it uses (the optimizer's own μ for "
        "SDCA and OEG, the model's marginals ν(w) for primal methods, whose gap is "
        "‖∇P(w)‖²/(2λ)) is in docs/algorithms.md §1.4."
    )
    # the same frame as the figures (axes, init offset), explorable: crfopt.bench.interactive
    picks = [line for line in _best_of_lines(chosen) if line]
    report.interactive = write_interactive(
        df, out_dir, init_offset=init_offset, title=heading, note=" ".join([axes_note, *picks])
    )
    md = [
        f"# {heading}",
        "",
        "Effort to reach a relative primal sub-optimality (P(w) − P*)/P(0) (median over "
        "seeds, read between checkpoints on the interpolated curve; — = the median seed "
        "did not reach it), and the final state.",
        "",
        axes_note,
        "",
        gap_note,
        "",
        *timing_md,
        "Interactive view (pick problem, axis, quantity, scales, optimizers): "
        "[interactive.html](interactive.html).",
        "",
        *_best_of_lines(chosen),
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
<p>{html.escape(gap_note)}</p>
<p>{html.escape(axes_note)}</p>
{"".join(f'<p style="color:#a40"><b>Warning:</b> {html.escape(t)}.</p>' for t in timing)}
<p><a href="interactive.html">Interactive view</a>: pick the problem, axis, quantity, scales
and optimizers; hover a point for its run, seed and parameters.</p>
{"".join(f"<p>{html.escape(line)}</p>" for line in _best_of_lines(chosen) if line)}
{table_html}
{"".join(sections)}
<p style="color:#777;font-size:0.8em">provenance: {html.escape(json.dumps(provenance))}</p>
</body></html>
"""
    report.html = out_dir / "report.html"
    report.html.write_text(page, encoding="utf-8")
    return report
