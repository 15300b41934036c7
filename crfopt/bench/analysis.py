"""Reading and drawing comparison traces: the rules ``crfopt report`` and
``reports/reproduce.py`` share, so a number or a curve reads the same in both.

* **Axes.** :data:`AXES` names the four x axes; with the init offset the passes,
  oracle-call and seconds axes include each run's ``setup()`` work (:data:`INIT_SHIFT`,
  :func:`shift_init`); the update axis is never shifted (setup() makes no counted update).
* **One curve model.** A run's trace is read as the piecewise interpolant of its
  checkpoints: log-linear between two positive values (sub-optimality and gaps decay
  geometrically, so a straight line in log space is the honest guess), linear when
  either is ≤ 0. Checkpoints land where a block of iterations ends, a little past the
  scheduled mark when an iteration costs more than one oracle call (OEG's trials, SAG's
  forward calls); reading "the first checkpoint past x" would report those methods a
  block late. Both readings use the interpolant:

  - :func:`value_at` — the value at x (past the last checkpoint: its value if the run
    converged or ended within ``tolerance`` of x, else nan: the run never got there);
  - :func:`first_reach` — the first x where the value is ≤ a target (inf if never), the
    inverse of :func:`value_at`, so ``value_at(first_reach(t)) == t`` between checkpoints.

  :func:`median_value_at` and :func:`median_reach` take the median over runs (seeds);
  an unreached run counts as inf, so the median is inf when half the runs never got there.
  :func:`spread_value_at`, :func:`spread_reach` and :func:`spread_ratio` return the median
  with the min–max range over the runs (a :class:`Spread`), :func:`format_spread` writes it
  as ``1.2e-03 [9.8e-04–1.5e-03]`` or ``×3.1 [2.5–3.8]``.
* **Seed bands.** :func:`curve_band` puts every run of a curve on one x grid (the union of
  their checkpoints, each run read with :func:`value_at`) and takes the median and the
  min–max over the runs that got to each x — runs of one optimizer do not share x values
  on the oracle-call and seconds axes, so a per-x median of the raw checkpoints would
  only ever see one run. The band is min–max, not the IQR: with 3–5 seeds a quartile is
  an interpolation between two runs, the range is what was observed.
* **One style.** :func:`line_styles` gives each optimizer a (colour, line style);
  LPL18's six methods keep fixed colours everywhere (:data:`FIXED_COLOURS`).
* **One figure routine.** :func:`draw_curves` draws one panel (median over runs, min–max
  band, the init diamond); :func:`curve_figure` lays panels out over several axes.
* **Post-hoc best-of.** :func:`best_of` keeps, of a swept parameter
  (``sg[step_size=1,0.1,0.01]``), only the value with the lowest final relative
  sub-optimality (``crfopt report --best-of sg:step_size``), as SBA15 §6 choose SG steps.
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

#: x axes of a trace and their labels
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

#: LPL18 Fig. 4's six methods keep their tab10 colour in every figure of every report
FIXED_COLOURS = {"sdca": 0, "sdca-gap": 1, "sag-nus": 2, "sag-nus-star": 3, "oeg": 4, "lbfgs": 5}

_DASHES = ("-", "--", ":", "-.")


def axis_label(axis: str, init_offset: bool, per_n: bool = False) -> str:
    """The label of an axis, saying whether it includes initialization work (and /n)."""
    label = AXES.get(axis, axis)
    if per_n and axis in ("updates", "oracle_calls"):
        label += " / n"
    return f"{label}, init + iterations" if init_offset and axis in INIT_SHIFT else label


def shift_init(frame: pd.DataFrame, init_offset: bool = True) -> pd.DataFrame:
    """A float copy of the axis columns, shifted by the init work when ``init_offset``.

    Unknown init work (null, files from before it was stored) shifts by nothing.
    """
    df = frame.copy()
    for axis in AXES:
        df[axis] = df[axis].astype(float)
    if init_offset:
        for axis, init in INIT_SHIFT.items():
            df[axis] = df[axis] + df[init].astype(float).fillna(0.0)
    return df


def line_styles(
    names: Sequence[str], fixed: Mapping[str, int] = FIXED_COLOURS
) -> dict[str, tuple[Any, str]]:
    """(colour, line style) of every name, in the order given.

    Names in ``fixed`` get their tab10 colour, solid. The others take, in order, the tab10
    colours no present fixed name holds; when those run out the whole palette repeats
    dashed, then dotted, then dash-dotted (neighbouring hues of a longer palette would
    not tell lines apart).
    """
    import seaborn as sns

    tab = sns.color_palette("tab10", 10)
    names = list(dict.fromkeys(names))
    pinned = {fixed[n] for n in names if n in fixed}
    free = [k for k in range(10) if k not in pinned]
    out: dict[str, tuple[Any, str]] = {}
    used = 0
    for name in names:
        if name in fixed:
            out[name] = (tab[fixed[name]], "-")
            continue
        if used < len(free):
            out[name] = (tab[free[used]], "-")
        else:
            k = used - len(free)
            out[name] = (tab[k % 10], _DASHES[1 + (k // 10) % 3])
        used += 1
    return out


# --------------------------------------------------------------------------- reading


def _segment(x: float, x0: float, x1: float, y0: float, y1: float) -> float:
    """The interpolant between (x0, y0) and (x1, y1) at x (see the module docstring)."""
    if x1 == x0:
        return y1
    t = (x - x0) / (x1 - x0)
    if y0 > 0 and y1 > 0:
        return float(10 ** (math.log10(y0) + t * (math.log10(y1) - math.log10(y0))))
    return float(y0 + t * (y1 - y0))


def _clean(xs: Sequence[float], ys: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    xs_a, ys_a = np.asarray(xs, dtype=float), np.asarray(ys, dtype=float)
    ok = ~(np.isnan(xs_a) | np.isnan(ys_a))
    order = np.argsort(xs_a[ok], kind="stable")
    return xs_a[ok][order], ys_a[ok][order]


def value_at(
    xs: Sequence[float],
    ys: Sequence[float],
    x: float,
    *,
    converged: bool = False,
    tolerance: float = 0.02,
) -> float:
    """The run's value at ``x`` on the interpolant of its checkpoints (xs, ys).

    Before the first checkpoint: its value. Past the last: its value if the run
    ``converged`` (it holds from then on) or ended within ``tolerance``·x of x (budgets
    on another axis stop a hair short), else nan.
    """
    xs_a, ys_a = _clean(xs, ys)
    if len(xs_a) == 0:
        return math.nan
    if x >= xs_a[-1]:
        if x == xs_a[-1] or converged or xs_a[-1] >= (1.0 - tolerance) * x:
            return float(ys_a[-1])
        return math.nan
    if x <= xs_a[0]:
        return float(ys_a[0])
    j = int(np.searchsorted(xs_a, x, side="right"))  # xs[j-1] <= x < xs[j]
    return _segment(x, xs_a[j - 1], xs_a[j], ys_a[j - 1], ys_a[j])


def first_reach(xs: Sequence[float], ys: Sequence[float], target: float) -> float:
    """The first x where the interpolant of (xs, ys) is ≤ ``target``; inf if never."""
    xs_a, ys_a = _clean(xs, ys)
    hit = np.flatnonzero(ys_a <= target)
    if len(hit) == 0:
        return math.inf
    j = int(hit[0])
    if j == 0:
        return float(xs_a[0])
    x0, x1, y0, y1 = xs_a[j - 1], xs_a[j], ys_a[j - 1], ys_a[j]
    if y0 > 0 and y1 > 0 and target > 0:
        t = (math.log10(target) - math.log10(y0)) / (math.log10(y1) - math.log10(y0))
    else:
        t = (target - y0) / (y1 - y0)
    return float(x0 + t * (x1 - x0))


def _runs(df: pd.DataFrame, by: str) -> list[pd.DataFrame]:
    return [run.sort_values("checkpoint") for _, run in df.groupby(by, sort=True)]


def median_value_at(
    df: pd.DataFrame,
    col: str,
    x: float,
    axis: str = "effective_passes",
    *,
    by: str = "run_id",
    tolerance: float = 0.02,
) -> float:
    """Median over runs (grouped by ``by``) of :func:`value_at`; runs that never got to
    x are left out; nan when none did."""
    return spread_value_at(df, col, x, axis, by=by, tolerance=tolerance).median


def median_reach(
    df: pd.DataFrame,
    col: str,
    target: float,
    axis: str = "effective_passes",
    *,
    by: str = "run_id",
) -> float:
    """Median over runs of :func:`first_reach` (inf for a run that never got there);
    nan for no runs."""
    return spread_reach(df, col, target, axis, by=by).median


@dataclass(frozen=True)
class Spread:
    """A median over runs (seeds) with the min–max range; ``count`` runs contributed."""

    median: float
    low: float
    high: float
    count: int

    @classmethod
    def of(cls, values: Sequence[float]) -> Spread:
        """Median and range of ``values`` (nan left out; inf kept: a run that never got
        there); all nan when there is none."""
        v = np.asarray([x for x in values if not math.isnan(x)], dtype=float)
        if len(v) == 0:
            return cls(math.nan, math.nan, math.nan, 0)
        return cls(float(np.median(v)), float(v.min()), float(v.max()), len(v))


def _per_run(df: pd.DataFrame, by: str, read: Any) -> dict[Any, float]:
    return {key: read(run.sort_values("checkpoint")) for key, run in df.groupby(by, sort=True)}


def _value_reader(col: str, x: float, axis: str, tolerance: float) -> Any:
    def read(run: pd.DataFrame) -> float:
        converged = str(run["status"].iloc[-1]) == "converged"
        return value_at(run[axis], run[col], x, converged=converged, tolerance=tolerance)

    return read


def spread_value_at(
    df: pd.DataFrame,
    col: str,
    x: float,
    axis: str = "effective_passes",
    *,
    by: str = "seed",
    tolerance: float = 0.02,
) -> Spread:
    """:func:`value_at` of every run (grouped by ``by``): median and min–max; runs that
    never got to x are left out (as :func:`median_value_at`, whose median this is)."""
    vals = _per_run(df, by, _value_reader(col, x, axis, tolerance))
    return Spread.of(list(vals.values()))


def spread_reach(
    df: pd.DataFrame,
    col: str,
    target: float,
    axis: str = "effective_passes",
    *,
    by: str = "seed",
) -> Spread:
    """:func:`first_reach` of every run: median and min–max (inf for a run that never got
    there, so a range ending in inf says some seed did not reach it)."""
    vals = _per_run(df, by, lambda run: first_reach(run[axis], run[col], target))
    return Spread.of(list(vals.values()))


def spread_ratio(
    num: pd.DataFrame,
    den: pd.DataFrame,
    col: str,
    x: float,
    axis: str = "effective_passes",
    *,
    by: str = "seed",
    tolerance: float = 0.02,
) -> Spread:
    """Ratio num/den of :func:`value_at` at x, paired by ``by`` (seed k of one method
    against seed k of the other); median and min–max over the pairs both have."""
    read = _value_reader(col, x, axis, tolerance)
    a, b = _per_run(num, by, read), _per_run(den, by, read)
    ratios = [a[k] / b[k] for k in sorted(set(a) & set(b)) if b[k] != 0]
    return Spread.of(ratios)


def format_number(v: float) -> str:
    """3 significant digits; scientific outside [1e-3, 100); '—' for nan, 'not reached'
    for inf."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "—"
    if v == math.inf:
        return "not reached"
    if v == 0:
        return "0"
    if abs(v) >= 100 or abs(v) < 1e-3:
        return f"{v:.2e}"
    return f"{v:.3g}"


def format_spread(sp: Spread, *, ratio: bool = False, fmt: Any = None) -> str:
    """``1.24e-03 [9.80e-04–1.50e-03]`` (median [min–max] over seeds); ``×3.1 [2.5–3.8]`` for
    a ratio; just the median for a single run (no spread to show). With the default
    format the three numbers share one notation (scientific if any of them needs it), so
    a range reads at a glance."""
    values = (sp.median, sp.low, sp.high)
    if fmt is None:
        finite = [abs(v) for v in values if math.isfinite(v) and v != 0]
        if any(v >= 100 or v < 1e-3 for v in finite):
            fmt = lambda v: f"{v:.2e}" if math.isfinite(v) and v != 0 else format_number(v)  # noqa: E731
        else:
            fmt = format_number
    head = ("×" if ratio else "") + fmt(sp.median)
    if sp.count <= 1 or math.isnan(sp.median):
        return head
    return f"{head} [{fmt(sp.low)}–{fmt(sp.high)}]"


# --------------------------------------------------------------------------- drawing


def curve_band(
    df: pd.DataFrame,
    x: str,
    y: str,
    *,
    by: str = "run_id",
    tolerance: float = 0.02,
) -> pd.DataFrame:
    """Median and min–max of ``y`` over the runs in ``df``, on the union of their x values.

    Each run is read on the common grid with :func:`value_at` (log-linear between its
    checkpoints; nan past its end unless it converged or ended within ``tolerance``);
    a grid point keeps the runs that have a value there. Columns ``x``, ``median``,
    ``low``, ``high``, ``count``, sorted by x.
    """
    runs = _runs(df, by)
    if not runs:
        return pd.DataFrame(columns=["x", "median", "low", "high", "count"])
    grid = np.unique(np.concatenate([run[x].astype(float).dropna().to_numpy() for run in runs]))
    table = np.full((len(runs), len(grid)), np.nan)
    for r, run in enumerate(runs):
        xs, ys = _clean(run[x], run[y])
        if len(xs) == 0:
            continue
        converged = str(run["status"].iloc[-1]) == "converged"
        # before its first checkpoint a run has no value (not its first one): a run shifted
        # by init work must not pull the median at x where it had not started
        table[r] = [
            value_at(xs, ys, g, converged=converged, tolerance=tolerance) if g >= xs[0] else np.nan
            for g in grid
        ]
    count = np.sum(~np.isnan(table), axis=0)
    keep = count > 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-nan columns are dropped below
        med = np.nanmedian(table[:, keep], axis=0)
        low = np.nanmin(table[:, keep], axis=0)
        high = np.nanmax(table[:, keep], axis=0)
    return pd.DataFrame(
        {"x": grid[keep], "median": med, "low": low, "high": high, "count": count[keep]}
    )


def draw_curves(
    ax: Any,
    df: pd.DataFrame,
    x: str,
    y: str,
    styles: Mapping[str, tuple[Any, str]],
    *,
    log: bool = True,
    x_scale: float = 1.0,
    init_marker: bool = False,
    label: str = "{}",
    seconds_band: bool = False,
) -> tuple[int, bool]:
    """One panel: per optimizer in ``styles`` order, the median over runs with the
    min–max band (:func:`curve_band`); on the seconds axis each run drawn alone, unless
    ``seconds_band`` (several seeds of a run measured one at a time: their median time).

    ``x_scale`` divides the x values (e.g. by n); ``init_marker`` draws a diamond where
    a shifted curve starts after counted setup() work. Returns (points ≤ 0 hidden on a
    log axis, whether a diamond was drawn).
    """
    hidden, marked = 0, False
    for opt, (color, ls) in styles.items():
        sub = df[df["optimizer"] == opt]
        sub = sub[sub[y].notna()]  # checkpoints without the value (a sparse metric)
        if sub.empty:
            continue
        if log:
            ok = sub[y] > 0
            hidden += int((~ok & sub[y].notna()).sum())
            sub = sub[ok]
        if sub.empty:
            continue
        name = label.format(opt)
        if x == "time_s" and not seconds_band:
            for k, (_, run) in enumerate(sub.groupby("run_id")):
                run = run.sort_values(x)
                ax.plot(
                    run[x] / x_scale, run[y], color=color, ls=ls, lw=1.4, alpha=0.85,
                    label=name if k == 0 else None,
                )  # fmt: skip
        elif sub["run_id"].nunique() > 1:
            # several seeds: the median over the runs on a common grid and its min–max band
            band = curve_band(sub, x, y)
            ax.plot(band["x"] / x_scale, band["median"], color=color, ls=ls, lw=1.6, label=name)
            ax.fill_between(
                band["x"] / x_scale, band["low"], band["high"], color=color, alpha=0.2, lw=0
            )
        else:
            run = sub.sort_values(x)
            ax.plot(run[x] / x_scale, run[y], color=color, ls=ls, lw=1.6, label=name)
        if init_marker and x in INIT_SHIFT:
            first = sub[(sub["checkpoint"] == 0) & (sub["init_passes"].astype(float) > 0)]
            if len(first):
                ax.plot(
                    [float(first[x].median()) / x_scale], [float(first[y].median())],
                    marker="D", ms=6, mfc="none", mec=color, mew=1.5, ls="none",
                )  # fmt: skip
                marked = True
    return hidden, marked


def legend_outside(fig: Any, ax: Any) -> None:
    """One legend right of the figure, so no panel is covered however many lines."""
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        fig.legend(
            handles, labels, loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8,
            frameon=False, ncol=1 if len(labels) <= 24 else 2,
        )  # fmt: skip


def curve_figure(
    df: pd.DataFrame,
    y: str,
    styles: Mapping[str, tuple[Any, str]],
    *,
    axes: Sequence[str] = ("effective_passes",),
    log: bool = True,
    init_offset: bool = True,
    per_n: float | None = None,
    ylabel: str | None = None,
    skip: Mapping[str, Sequence[str]] | None = None,
    panel_size: tuple[float, float] = (4.2, 4.2),
    seconds_band: bool = False,
) -> tuple[Any, list[Any], int, bool]:
    """A figure of ``y`` against each of ``axes`` (one panel each, shared y).

    ``per_n`` divides the update and oracle-call axes by n; ``skip`` maps an axis to
    optimizers left off that panel. Returns (figure, panels, hidden points, diamonds
    drawn); the caller adds titles, limits and reference lines, and saves.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import seaborn as sns

    sns.set_theme(style="whitegrid", context="notebook")
    w, h = panel_size
    fig, grid = plt.subplots(1, len(axes), figsize=(w * len(axes), h), sharey=True, squeeze=False)
    panels = list(grid[0])
    hidden, marked = 0, False
    for ax, x in zip(panels, axes):
        left_off = set((skip or {}).get(x, ()))
        shown = {k: v for k, v in styles.items() if k not in left_off}
        scale = per_n if per_n and x in ("updates", "oracle_calls") else 1.0
        h_, m_ = draw_curves(
            ax, df, x, y, shown, log=log, x_scale=scale, init_marker=init_offset,
            seconds_band=seconds_band,
        )  # fmt: skip
        hidden += h_
        marked |= m_
        if log:
            ax.set_yscale("log")
        ax.set_xlabel(axis_label(x, init_offset, per_n=bool(per_n)))
    if ylabel:
        panels[0].set_ylabel(ylabel)
    legend_outside(fig, panels[-1])
    return fig, panels, hidden, marked


# --------------------------------------------------------------------------- best-of


@dataclass(frozen=True)
class BestOf:
    """One post-hoc choice of :func:`best_of`: on ``problem``, of the runs of variant
    ``optimizer`` (with the other parameters ``fixed``), those with ``param = best`` were
    kept out of ``values``; ``scores`` are the criterion per value (inf: not reached)."""

    problem: str
    optimizer: str
    param: str
    best: Any
    values: tuple[Any, ...]
    scores: tuple[float, ...]
    fixed: str = ""

    @property
    def note(self) -> str:
        """``sg: best step_size=0.1 of 1, 0.1`` (the note figures and summary.md show)."""
        where = f" ({self.fixed})" if self.fixed else ""
        return (
            f"{self.optimizer}{where}: best {self.param}={format_value(self.best)} of "
            f"{', '.join(format_value(v) for v in self.values)}"
        )


def format_value(v: Any) -> str:
    """A parameter value as the selection grammar writes it (1, 0.1, 1e-05, true, none)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return "none"
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


def parse_best_of(text: str) -> tuple[str, str]:
    """``"sg:step_size"`` → (``"sg"``, ``"step_size"``), the ``--best-of`` notation."""
    name, sep, param = text.partition(":")
    if not sep or not name.strip() or not param.strip() or ":" in param:
        raise ValueError(f"bad --best-of {text!r}: expected NAME:PARAM, e.g. sg:step_size")
    return name.strip(), param.strip()


def variant_of(label: str) -> str:
    """The variant of an optimizer label: ``sg[step_size=0.1]`` → ``sg``."""
    return str(label).split("[", 1)[0]


def _value_order(values: Sequence[Any]) -> list[Any]:
    """Numbers largest first (a step grid reads 1, 0.1, 0.01), then the rest by text."""
    nums = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    rest = [v for v in values if v not in nums]
    return sorted(nums, reverse=True) + sorted(rest, key=format_value)


def best_of(
    frame: pd.DataFrame,
    choices: Sequence[tuple[str, str] | str],
    *,
    column: str = "relative_suboptimality",
) -> tuple[pd.DataFrame, list[BestOf]]:
    """Keep, per problem and variant NAME, only the runs of the best value of PARAM.

    ``choices`` are (NAME, PARAM) pairs or ``"NAME:PARAM"`` texts. Runs of NAME (labels
    ``NAME`` or ``NAME[...]``) are grouped by problem and by their other parameters (so
    ``sg[step_size=1,0.1,schedule=constant,decaying]`` keeps one step per schedule); in
    each group the value of PARAM (read from the run's resolved ``params``) with the
    lowest **final relative sub-optimality** ``column`` — the last checkpoint of each
    run, median over seeds — is kept and the runs of the other values are dropped.
    Why this criterion: SBA15 §6 choose the SG step post hoc as the one reaching the best
    final objective, and the final sub-optimality relative to P(0) is that objective
    compared on one scale across problems. A run whose final value is missing (failed,
    diverged) counts as +inf, so a diverging step is never chosen; ties go to the first
    value in :class:`BestOf` order (numbers largest first).

    Pure: returns (the kept rows, with ``frame.attrs``; one :class:`BestOf` per group).
    Raises ValueError naming the problem and variant when NAME has no runs, PARAM is not
    one of its parameters, or no run has a final value (results made without P*).
    """
    pairs = [parse_best_of(c) if isinstance(c, str) else tuple(c) for c in choices]
    names = [n for n, _ in pairs]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ValueError(f"--best-of names {', '.join(dup)} more than once")
    if column not in frame.columns:
        raise ValueError(f"best-of needs the {column!r} column, absent from the results")
    variants = frame["optimizer"].map(variant_of)
    params = frame["params"].map(lambda t: json.loads(t) if isinstance(t, str) else {})
    drop = pd.Series(False, index=frame.index)
    notes: list[BestOf] = []
    for name, param in pairs:
        mine = variants == name
        if not mine.any():
            present = ", ".join(sorted(set(variants)))
            raise ValueError(f"--best-of {name}:{param}: no runs of {name!r}; present: {present}")
        known = sorted({k for d in params[mine] for k in d})
        if param not in known:
            raise ValueError(
                f"--best-of {name}:{param}: {name} has no parameter {param!r}; its "
                f"parameters: {', '.join(known)}"
            )
        sub = frame[mine].assign(
            _value=params[mine].map(lambda d, p=param: d.get(p)),
            _fixed=params[mine].map(
                lambda d, p=param: ",".join(
                    f"{k}={format_value(v)}" for k, v in sorted(d.items()) if k != p
                )
            ),
        )
        for (problem, fixed), grp in sub.groupby(["problem", "_fixed"], sort=True):
            last = grp.sort_values("checkpoint").groupby("run_id").tail(1)
            finals = last[column].astype(float).where(lambda x: np.isfinite(x), math.inf)
            values = _value_order(list(dict.fromkeys(last["_value"])))
            scores = [
                float(np.median(finals[last["_value"].map(lambda v, u=u: _same(v, u))]))
                for u in values
            ]
            if not any(math.isfinite(x) for x in scores):
                raise ValueError(
                    f"--best-of {name}:{param}: on {problem}, no run of {name} has a final "
                    f"{column.replace('_', ' ')} (results made with --no-optimum, or every "
                    "value failed)"
                )
            best = values[int(np.argmin(scores))]
            losers = grp.index[~grp["_value"].map(lambda v, b=best: _same(v, b))]
            drop[losers] = True
            varied = _fixed_note(fixed, sub[sub["problem"] == problem]["_fixed"])
            notes.append(
                BestOf(str(problem), name, param, best, tuple(values), tuple(scores), varied)
            )
    kept = frame[~drop].copy()
    kept.attrs = dict(frame.attrs)
    return kept, notes


def _same(a: Any, b: Any) -> bool:
    """Equal values of one parameter (True is not 1 here)."""
    return isinstance(a, bool) == isinstance(b, bool) and a == b


def _fixed_note(fixed: str, all_fixed: pd.Series) -> str:
    """The other parameters of a group, only those that differ between its groups."""
    groups = [dict(p.split("=", 1) for p in f.split(",") if p) for f in set(all_fixed)]
    if len(groups) < 2:
        return ""
    mine = dict(p.split("=", 1) for p in fixed.split(",") if p)
    varies = [k for k in mine if len({g.get(k) for g in groups}) > 1]
    return ",".join(f"{k}={mine[k]}" for k in varies)
