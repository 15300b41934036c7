"""The interactive report: one self-contained HTML page to explore a results folder.

``crfopt report RESULTS --out DIR`` writes ``DIR/interactive.html`` (through
:func:`write_interactive`, called by :func:`crfopt.bench.report.make_report`). The reader
picks the problem, the x axis (oracle calls, parameter updates, effective passes,
seconds), the y quantity (relative sub-optimality, duality gap, gap estimate, test
error, and every metric plugin's column) and log/linear scales, and toggles optimizers
(checkboxes or a click on the legend). Hovering a run's point shows its run id, seed,
status and parameters.

The page draws what the static figures draw, from the same frame
(:func:`crfopt.bench.report.plot_frame`): the same axes with the same init-offset rule
(passes, oracle calls and seconds include ``setup()`` work when ``init_offset``; a ◇ marks
where a shifted curve starts, on the seconds axis where each run starts), per optimizer
the median over seeds with the min–max band on the counted axes and every run alone on
the seconds axis (runs share no time stamps), the colours of
:func:`crfopt.bench.analysis.line_styles`, and points ≤ 0 left off a log axis (counted in
a note under the plot). Gaps and the gap estimate are divided by P(0), as in the static
gap figure.

Why plotly. Its Python wheel carries the whole plotly.js bundle, so the page inlines
it and opens with no network; ``Plotly.react`` lets a short controller redraw any
(problem, axis, quantity, scales, optimizers) choice from one embedded data set, where
plotly's own ``updatemenus`` would need every combination precomputed as a trace set;
hover templates and legend groups (one entry toggles a method's band, median and runs)
are built in. Vega-Lite through altair would need three JS libraries inlined through
``vl-convert`` (a large native wheel) and parameter-driven field switches for the axes.

The data sit in the page as JSON (``<script type="application/json"
id="crfopt-data">``, built by :func:`interactive_data`): tests parse it back and compare
it with the results.
"""

from __future__ import annotations

import html
import json
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from crfopt.bench.analysis import AXES, INIT_SHIFT, axis_label, line_styles

__all__ = ["QUANTITIES", "interactive_data", "interactive_html", "write_interactive"]

#: y quantities the reader can pick: column of the interactive frame → (label, log by default)
QUANTITIES: dict[str, tuple[str, bool]] = {
    "relative_suboptimality": ("relative sub-optimality (P(w) − P*) / P(0)", True),
    "relative_gap": ("duality gap / P(0)", True),
    "relative_gap_estimate": ("gap estimate / P(0)", True),
    "test_error": ("test error (per token)", False),
}

_DASH = {"-": "solid", "--": "dash", ":": "dot", "-.": "dashdot"}


def _num(v: Any) -> float | None:
    """A JSON number: NaN and ±inf become null (JSON has neither; JS reads null as a gap)."""
    f = float(v)
    return f if math.isfinite(f) else None


def _nums(values: Any) -> list[float | None]:
    return [_num(v) for v in values]


def _hex(color: Any) -> str:
    r, g, b = (round(255 * float(c)) for c in tuple(color)[:3])
    return f"#{r:02x}{g:02x}{b:02x}"


def _params(text: Any) -> dict[str, Any]:
    if isinstance(text, str) and text:
        try:
            value = json.loads(text)
        except ValueError:
            return {"params": text}
        return value if isinstance(value, dict) else {"params": value}
    return {}


def _bands(sub: pd.DataFrame, x: str, y: str, positive: bool) -> dict[str, list[float | None]]:
    """Median, min and max of ``y`` over the runs at each ``x`` (what draw_curves fills)."""
    rows = sub[[x, y]].dropna()
    if positive:
        rows = rows[rows[y] > 0]
    g = rows.groupby(x)[y]
    med = g.median()
    return {
        "x": _nums(med.index),
        "median": _nums(med.values),
        "min": _nums(g.min().values),
        "max": _nums(g.max().values),
        "count": [int(c) for c in g.count().values],
    }


def interactive_data(
    df: pd.DataFrame, *, init_offset: bool = True, title: str | None = None
) -> dict[str, Any]:
    """The page's data set from a :func:`crfopt.bench.report.plot_frame`.

    Per problem: every run (id, optimizer, seed, parameters, status, its checkpoints'
    values on each axis and quantity) and per optimizer, axis and quantity the median /
    min / max over runs at each x (``all``; ``positive``: only values > 0, what a log
    axis shows, present when it differs) and the ◇ start after init work.
    """
    df = df.copy()
    df["relative_gap_estimate"] = df["gap_estimate"].astype(float) / df["P0"].astype(float)
    # metric plugins' columns (plot_frame lists them in attrs) are quantities too, linear
    quantities = dict(QUANTITIES)
    for col in df.attrs.get("metric_columns", []):
        quantities.setdefault(str(col), (str(col), False))
    names = sorted(df["optimizer"].astype(str).unique())
    styles = line_styles(names)
    problems: dict[str, Any] = {}
    for problem, pdf in df.groupby("problem", sort=True):
        pdf = pdf.sort_values(["run_id", "checkpoint"])
        runs = []
        for run_id, run in pdf.groupby("run_id", sort=True):
            first = run.iloc[0]
            seed = first["seed"]
            runs.append(
                {
                    "run_id": str(run_id),
                    "optimizer": str(first["optimizer"]),
                    "seed": None if pd.isna(seed) else int(seed),
                    "params": _params(first["params"]),
                    "status": str(run["status"].iloc[-1]),
                    "checkpoint": [int(c) for c in run["checkpoint"]],
                    "x": {a: _nums(run[a]) for a in AXES},
                    "y": {q: _nums(run[q]) for q in quantities},
                }
            )
        bands: dict[str, Any] = {}
        starts: dict[str, Any] = {}
        for opt, sub in pdf.groupby("optimizer", sort=True):
            bands[str(opt)] = per_axis = {}
            for a in AXES:
                if a == "time_s":
                    continue  # drawn run by run, like the static figures
                per_axis[a] = {}
                for q in quantities:
                    entry = {"all": _bands(sub, a, q, positive=False)}
                    if (sub[q] <= 0).any():
                        entry["positive"] = _bands(sub, a, q, positive=True)
                    per_axis[a][q] = entry
            # the ◇: where a curve shifted by counted setup() work starts (draw_curves)
            first = sub[(sub["checkpoint"] == 0) & (sub["init_passes"].astype(float) > 0)]
            if init_offset and len(first):
                starts[str(opt)] = {
                    a: {q: [_num(first[a].median()), _num(first[q].median())] for q in quantities}
                    for a in INIT_SHIFT
                }
        problems[str(problem)] = {
            "runs": runs,
            "bands": bands,
            "starts": starts,
            "optimizers": sorted(pdf["optimizer"].astype(str).unique()),
        }
    return {
        "title": title or "crfopt comparison report",
        "init_offset": bool(init_offset),
        "axes": {a: axis_label(a, init_offset) for a in AXES},
        "quantities": {q: {"label": lab, "log": log} for q, (lab, log) in quantities.items()},
        "optimizers": {
            n: {"color": _hex(c), "dash": _DASH.get(ls, "solid")} for n, (c, ls) in styles.items()
        },
        "problems": problems,
    }


def _script_json(obj: Any) -> str:
    """JSON safe inside <script>: with every '<' written as \\u003c no text (a title, a
    parameter) can close the element or open the parser's escaped states ('<!--', '<script')."""
    text = json.dumps(obj, allow_nan=False, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _plotly_js() -> str:
    try:
        from plotly.offline import get_plotlyjs
    except ImportError as exc:  # a core dependency; a broken install should say what to do
        raise ImportError(
            "the interactive report needs plotly (a crfopt dependency): pip install 'plotly>=5.15'"
        ) from exc
    return get_plotlyjs()


# The controller: builds the traces of one (problem, axis, quantity, scales, optimizers)
# choice from the embedded data and hands them to Plotly.react. Kept free of template
# braces so it can be written as plain JS.
_CONTROLLER = r"""
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("crfopt-data").textContent);
  var el = function (id) { return document.getElementById(id); };
  var state = { problem: null, x: "effective_passes", y: "relative_suboptimality",
                xlog: false, ylog: true, hidden: {} };

  function option(select, value, label) {
    var o = document.createElement("option");
    o.value = value; o.textContent = label; select.appendChild(o);
  }
  function fmtParams(p) {
    var keys = Object.keys(p).sort();
    if (!keys.length) return "defaults";
    // a few per line: a variant's resolved parameters can be a dozen
    return keys.map(function (k, i) {
      return (i && i % 4 === 0 ? "<br>" : "") + k + "=" + JSON.stringify(p[k]);
    }).join(", ");
  }
  function rgba(hex, a) {
    var n = parseInt(hex.slice(1), 16);
    return "rgba(" + (n >> 16 & 255) + "," + (n >> 8 & 255) + "," + (n & 255) + "," + a + ")";
  }
  function keep(x, y) {
    return x !== null && y !== null && (!state.xlog || x > 0) && (!state.ylog || y > 0);
  }

  function traces() {
    var prob = data.problems[state.problem], out = [], dropped = 0, empty = [];
    prob.optimizers.forEach(function (opt) {
      var style = data.optimizers[opt], shown = !state.hidden[opt], legend = true;
      var runs = prob.runs.filter(function (r) { return r.optimizer === opt; });
      var any = false;
      runs.forEach(function (run) {
        var xs = [], ys = [], cd = [];
        run.x[state.x].forEach(function (x, i) {
          var y = run.y[state.y][i];
          if (x === null || y === null) return;
          if (!keep(x, y)) { dropped += 1; return; }
          xs.push(x); ys.push(y); cd.push(run.checkpoint[i]);
        });
        if (!xs.length) return;
        any = true;
        var alone = state.x === "time_s";
        // runs share no time stamps: each run's own start after init work gets the ◇
        var mark = alone && prob.starts[opt];
        out.push({
          type: "scatter", mode: alone ? "lines+markers" : "markers", x: xs, y: ys,
          name: opt, legendgroup: opt, showlegend: alone && legend, visible: shown,
          line: { color: style.color, dash: style.dash, width: 1.4 },
          marker: {
            color: style.color, opacity: alone ? 0.85 : 0.55,
            symbol: cd.map(function (c) { return mark && c === 0 ? "diamond-open" : "circle"; }),
            size: cd.map(function (c) { return mark && c === 0 ? 11 : alone ? 5 : 6; }),
            line: { color: style.color, width: cd.map(function (c) { return mark && !c ? 2 : 0; }) }
          },
          customdata: cd,
          meta: [run.run_id, run.seed === null ? "—" : run.seed, fmtParams(run.params),
                 run.status, opt],
          hovertemplate: "<b>%{meta[4]}</b> run %{meta[0]}<br>seed %{meta[1]} · %{meta[3]}" +
            "<br>%{meta[2]}<br>checkpoint %{customdata}<br>x = %{x:.4g}<br>y = %{y:.4g}" +
            "<extra></extra>"
        });
        if (alone) legend = false;
      });
      if (!any) { empty.push(opt); return; }
      var axis = prob.bands[opt] && prob.bands[opt][state.x];
      if (axis) {
        var entry = axis[state.y];
        var b = (state.ylog && entry.positive) ? entry.positive : entry.all;
        var bx = [], lo = [], hi = [], med = [], cnt = [];
        b.x.forEach(function (x, i) {
          if (b.median[i] === null || !keep(x, b.median[i]) || !keep(x, b.min[i])) return;
          bx.push(x); lo.push(b.min[i]); hi.push(b.max[i]);
          med.push(b.median[i]); cnt.push(b.count[i]);
        });
        if (runs.length > 1 && bx.length) {
          out.push({
            type: "scatter", mode: "lines", x: bx.concat(bx.slice().reverse()),
            y: hi.concat(lo.slice().reverse()), fill: "toself", fillcolor: rgba(style.color, 0.2),
            line: { width: 0 }, hoverinfo: "skip", name: opt + " seed range",
            legendgroup: opt, showlegend: false, visible: shown
          });
        }
        out.push({
          type: "scatter", mode: "lines", x: bx, y: med, name: opt, legendgroup: opt,
          showlegend: true, visible: shown, customdata: cnt,
          line: { color: style.color, dash: style.dash, width: 2 },
          hovertemplate: "<b>" + opt + "</b> median of %{customdata} run(s)<br>x = %{x:.4g}" +
            "<br>y = %{y:.4g}<extra></extra>"
        });
      }
      var start = state.x !== "time_s" && (prob.starts[opt] || {})[state.x];
      start = start && start[state.y];
      if (start && start[1] !== null && keep(start[0], start[1])) {
        out.push({
          type: "scatter", mode: "markers", x: [start[0]], y: [start[1]],
          name: opt + " start after init", legendgroup: opt, showlegend: false, visible: shown,
          marker: { symbol: "diamond-open", size: 11, color: style.color, line: { width: 2 } },
          hovertemplate: "<b>" + opt + "</b> starts after its initialization work<extra></extra>"
        });
      }
    });
    return { traces: out, dropped: dropped, empty: empty };
  }

  function redraw() {
    var built = traces();
    var q = data.quantities[state.y];
    var layout = {
      title: { text: state.problem + ": " + q.label },
      xaxis: { title: { text: data.axes[state.x] }, type: state.xlog ? "log" : "linear",
               gridcolor: "#e5e5e5" },
      yaxis: { title: { text: q.label }, type: state.ylog ? "log" : "linear",
               exponentformat: "power", gridcolor: "#e5e5e5" },
      legend: { title: { text: "optimizer (click to toggle)" } },
      hovermode: "closest", margin: { t: 50 }, plot_bgcolor: "white"
    };
    var notes = [];
    if (built.dropped) notes.push(built.dropped + " point(s) ≤ 0 not shown on the log scale.");
    if (built.empty.length) notes.push("No " + q.label + " for: " + built.empty.join(", ") + ".");
    el("notes").textContent = notes.join(" ");
    return Plotly.react("plot", built.traces, layout, { responsive: true, displaylogo: false });
  }

  function optimizerBoxes() {
    var box = el("optimizers");
    box.innerHTML = "";
    data.problems[state.problem].optimizers.forEach(function (opt) {
      var label = document.createElement("label"), cb = document.createElement("input");
      cb.type = "checkbox"; cb.checked = !state.hidden[opt]; cb.value = opt;
      cb.dataset.optimizer = opt;
      cb.addEventListener("change", function () { state.hidden[opt] = !cb.checked; redraw(); });
      var swatch = document.createElement("span");
      swatch.className = "swatch"; swatch.style.background = data.optimizers[opt].color;
      label.appendChild(cb); label.appendChild(swatch);
      label.appendChild(document.createTextNode(opt));
      box.appendChild(label);
    });
  }

  var problems = Object.keys(data.problems).sort();
  problems.forEach(function (p) { option(el("problem"), p, p); });
  Object.keys(data.axes).forEach(function (a) { option(el("xaxis"), a, data.axes[a]); });
  Object.keys(data.quantities).forEach(function (q) {
    option(el("yquantity"), q, data.quantities[q].label);
  });
  state.problem = problems[0];
  el("xaxis").value = state.x; el("yquantity").value = state.y;
  el("problem").addEventListener("change", function (e) {
    state.problem = e.target.value; optimizerBoxes(); redraw();
  });
  el("xaxis").addEventListener("change", function (e) { state.x = e.target.value; redraw(); });
  el("yquantity").addEventListener("change", function (e) {
    state.y = e.target.value;
    state.ylog = data.quantities[state.y].log;  // each quantity opens on its own scale
    el("ylog").checked = state.ylog;
    redraw();
  });
  el("xlog").addEventListener("change", function (e) { state.xlog = e.target.checked; redraw(); });
  el("ylog").addEventListener("change", function (e) { state.ylog = e.target.checked; redraw(); });
  el("ylog").checked = state.ylog; el("xlog").checked = state.xlog;
  optimizerBoxes();
  redraw().then(function () {
    // a legend click toggles the optimizer through the same state as its checkbox
    el("plot").on("plotly_legendclick", function (ev) {
      var opt = ev.data[ev.curveNumber].legendgroup;
      state.hidden[opt] = !state.hidden[opt];
      document.querySelectorAll("#optimizers input").forEach(function (cb) {
        if (cb.value === opt) cb.checked = !state.hidden[opt];
      });
      redraw();
      return false;
    });
    document.body.dataset.ready = "1";
  });
  window.crfoptReport = { data: data, state: state, redraw: redraw };
})();
"""

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5em; max-width: 1300px; }
#controls { display: flex; flex-wrap: wrap; gap: 0.6em 1.6em; align-items: center;
            font-size: 0.9em; margin: 0.8em 0; }
#controls label { white-space: nowrap; }
#optimizers label { margin-right: 0.9em; }
.swatch { display: inline-block; width: 0.9em; height: 0.9em; margin: 0 0.3em;
          vertical-align: -0.1em; border-radius: 2px; }
#plot { width: 100%; height: 600px; }
#notes, .note { color: #666; font-size: 0.85em; }
"""


def interactive_html(data: Mapping[str, Any], *, note: str = "") -> str:
    """The page: controls, a plot div, the data as JSON, plotly.js and the controller inlined."""
    title = html.escape(str(data["title"]))
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{title} (interactive)</title>
<style>{_STYLE}</style></head><body>
<h1>{title}</h1>
<p class="note">Interactive view of the results (the static figures and tables are in
<a href="report.html">report.html</a>). Lines: median over seeds, band: min–max across
seeds, dots: each run's checkpoints (hover for run id, seed and parameters); on the
seconds axis every run is drawn alone. {html.escape(note)}</p>
<div id="controls">
  <label>problem <select id="problem"></select></label>
  <label>x axis <select id="xaxis"></select></label>
  <label>y <select id="yquantity"></select></label>
  <label><input type="checkbox" id="xlog"> log x</label>
  <label><input type="checkbox" id="ylog"> log y</label>
  <span id="optimizers"></span>
</div>
<div id="plot"></div>
<p id="notes"></p>
<script type="application/json" id="crfopt-data">{_script_json(data)}</script>
<script>{_plotly_js()}</script>
<script>{_CONTROLLER}</script>
</body></html>
"""


def write_interactive(
    df: pd.DataFrame,
    out_dir: str | os.PathLike[str],
    *,
    init_offset: bool = True,
    title: str | None = None,
    note: str = "",
    name: str = "interactive.html",
) -> Path:
    """Write ``out_dir/interactive.html`` from a :func:`crfopt.bench.report.plot_frame`."""
    missing = [c for c in ("P0", "relative_suboptimality", "relative_gap") if c not in df]
    if missing:
        raise ValueError(
            f"write_interactive needs crfopt.bench.report.plot_frame's columns; missing {missing}"
        )
    path = Path(out_dir) / name
    page = interactive_html(interactive_data(df, init_offset=init_offset, title=title), note=note)
    path.write_text(page, encoding="utf-8")
    return path
