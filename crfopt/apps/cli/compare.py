"""Commands about comparisons: ``compare`` (run a grid, store every trace) and
``report`` (figures and tables from stored results)."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import click
from rich.markup import escape
from rich.table import Table

from crfopt.apps.cli.options import (
    build_registry,
    config_option,
    console,
    corpus_options,
    err_console,
    exit_codes,
    l1_option,
    plugin_dir_option,
    resolve_sets,
    with_l1,
)


class RichReporter:
    """Progress of a comparison: a bar for the grid and one line per finished run."""

    def __init__(self, budget_passes: float | None, quiet: bool = False) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self.quiet = quiet
        self.budget_passes = budget_passes
        self.progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=err_console,
            transient=False,
            disable=quiet,
        )
        self.grid_task = None
        self.run_task = None
        self.current = None
        self.failures: list[dict[str, Any]] = []

    def __enter__(self) -> RichReporter:
        self.progress.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.progress.stop()

    def message(self, text: str) -> None:
        if not self.quiet:
            err_console.print(f"[dim]{escape(text)}[/]")

    def planned(self, plan: Any) -> None:
        done = len(plan.tasks) - len(plan.pending)
        self.message(
            f"{len(plan.tasks)} runs in the grid; {done} already in {plan.out_dir} (kept, not "
            f"rerun); {len(plan.pending)} to run"
        )
        self.grid_task = self.progress.add_task("grid", total=len(plan.pending))

    def started(self, task: Any, meta: dict[str, Any]) -> None:
        """A run begins: its bar shows now, not at its first checkpoint (its setup, a
        dual initialization or a first compile, can take minutes)."""
        if self.run_task is not None:
            self.progress.remove_task(self.run_task)
        label = escape(f"{task.label} (setup)")
        self.run_task = self.progress.add_task(label, total=self.budget_passes or 1.0)
        self.current = task.run_id

    def checkpoint(self, task: Any, row: dict[str, Any]) -> None:
        total = self.budget_passes or 1.0
        if self.current != task.run_id:
            if self.run_task is not None:
                self.progress.remove_task(self.run_task)
            self.run_task = self.progress.add_task(escape(task.label), total=total)
            self.current = task.run_id
        sub = row.get("suboptimality")
        extra = f" P-P*={sub:.3g}" if sub is not None else ""
        self.progress.update(
            self.run_task,
            completed=min(row["effective_passes"], total),
            description=escape(f"{task.label}{extra}"),
        )

    def finished(self, summary: dict[str, Any]) -> None:
        if self.grid_task is not None:
            self.progress.advance(self.grid_task)
        status = summary["status"]
        if status == "failed":
            self.failures.append(summary)
            first = (summary.get("error") or "").splitlines()[:1]
            err_console.print(
                f"[red]failed[/] {escape(summary['label'])}: "
                f"{escape(first[0]) if first else 'unknown error'}"
            )
        elif not self.quiet:
            err_console.print(f"{status:>9s} {escape(summary['label'])}")


def summary_table(table: Any) -> Table:
    """Final row of every run: the table printed at the end of ``compare``."""
    import pandas as pd

    out = Table(
        title="comparison summary (last checkpoint of every run)",
        caption="passes, oracle calls, time: the iterations; init: the optimizer's setup() work; "
        "duality gap: P(w) - D at each method's own dual point (primal methods: "
        "|∇P(w)|²/(2λ), large next to P(w) - P*), docs/algorithms.md §1.4",
    )
    cols = {
        "problem": "problem",
        "optimizer": "optimizer",
        "seed": "seed",
        "status": "status",
        "effective_passes": "passes",
        "init_passes": "init passes",
        "oracle_calls": "oracle calls",
        "time_s": "time (s)",
        "init_time_s": "init (s)",
        "suboptimality": "P(w) - P*",
        "duality_gap": "duality gap",
        "test_error": "test error",
    }
    for header in cols.values():
        out.add_column(header, overflow="fold")
    if len(table) == 0:
        return out
    last = table.sort_values("checkpoint").groupby("run_id", sort=False).tail(1)
    last = last.sort_values(["problem", "optimizer", "seed"])
    for _, r in last.iterrows():
        cells = []
        for c in cols:
            v = r[c]
            if pd.isna(v):
                cells.append("—")
            elif isinstance(v, float):
                cells.append(f"{v:.4g}")
            else:
                cells.append(escape(str(v)))
        out.add_row(*cells)
    return out


def _csv_ints(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise click.BadParameter(f"{text!r}: expected comma-separated integers") from None


@click.command(
    "compare",
    short_help="Run optimizers on problems and store every trace.",
    epilog=exit_codes(
        "a run of the grid failed or diverged (named in the summary), unless\n"
        "     --allow-failures; runs kept from earlier invocations count too",
        "results cannot be written (runs finished before are kept)",
        extra=["3    the Dask scheduler of --scheduler cannot be reached"],
    ),
)
@config_option
@click.option(
    "--problem", "problems", required=True, help="Problem name(s) or corpus path, comma-separated."
)
@click.option(
    "--optimizers",
    required=True,
    help="Variants, comma-separated; NAME[param=value,...] sets parameters and "
    "NAME[param=v1,v2,...] sweeps one (a run per value; several swept parameters: every "
    "combination).",
)
@click.option("--passes", type=float, default=None, help="Budget in effective passes (default 10).")
@click.option("--oracle-calls", type=int, default=None, help="Budget in oracle calls.")
@click.option("--updates", type=int, default=None, help="Budget in parameter updates.")
@click.option("--seconds", type=float, default=None, help="Budget in optimizer seconds.")
@click.option("--target-suboptimality", type=float, default=None, help="Stop at P(w)-P* ≤ this.")
@click.option("--target-gap", type=float, default=None, help="Stop at a duality gap ≤ this.")
@click.option("--seeds", default="0", show_default=True, help="Comma-separated seeds.")
@click.option(
    "--set", "sets", multiple=True, help="NAME.param=value for an optimizer or the problem."
)
@click.option(
    "--checkpoints",
    default="default",
    help="When to evaluate a run: 'default' (every 0.25 pass, then every pass; the "
    "default), 'log' (log-spaced passes) or 'every:X' (every X passes).",
)
@click.option(
    "--out",
    default="results",
    show_default=True,
    type=click.Path(file_okay=False),
    help="Results folder (one Parquet file per run).",
)
@click.option(
    "--backend",
    type=click.Choice(["serial", "joblib", "dask"]),
    default=None,
    help="Where runs execute: serial (one after the other, live progress), joblib (local "
    "processes) or dask (a LocalCluster, or --scheduler). Default: dask with --scheduler, "
    "else serial. Parallel runs use one thread each, so seconds differ from serial ones.",
)
@click.option("--n-jobs", type=int, default=None, help="Parallel workers (joblib / LocalCluster).")
@click.option(
    "--scheduler",
    default=None,
    help="Address of a running Dask scheduler (implies --backend dask), e.g. "
    "tcp://10.0.0.5:8786; workers write under --out made absolute.",
)
@click.option("--no-optimum", is_flag=True, help="Do not compute P* (no sub-optimality column).")
@click.option("--retry-failed", is_flag=True, help="Rerun runs stored with status 'failed'.")
@click.option(
    "--allow-failures",
    is_flag=True,
    help="Exit 0 even when runs failed or diverged (they are still named in the summary).",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Hard wall-clock limit per run (s); a run past it is killed and stored as failed.",
)
@click.option(
    "--max-memory",
    default=None,
    help="Memory limit of an optimizer's state, e.g. 2G or 512M; an optimizer that would "
    "exceed it declines the run, stored as 'skipped' (not a failure). Default: no limit.",
)
@click.option("--quiet", is_flag=True, help="No progress display.")
@l1_option
@corpus_options
@plugin_dir_option
def compare_cmd(
    problems: str,
    optimizers: str,
    passes: float | None,
    oracle_calls: int | None,
    updates: int | None,
    seconds: float | None,
    target_suboptimality: float | None,
    target_gap: float | None,
    seeds: str,
    sets: Sequence[str],
    checkpoints: str,
    out: str,
    backend: str | None,
    n_jobs: int | None,
    scheduler: str | None,
    no_optimum: bool,
    retry_failed: bool,
    allow_failures: bool,
    timeout: float | None,
    max_memory: str | None,
    quiet: bool,
    l1: float | None,
    corpus: dict[str, Any],
    plugin_dirs: Sequence[str],
) -> None:
    """Run a grid of problems × optimizers × seeds and store every trace.

    Runs already in --out are kept and not rerun; Ctrl-C keeps finished runs. In the
    summary, passes, oracle calls and time count the optimizers' iterations (the budget
    too); "init passes" and "init (s)" are the work of each optimizer's setup(), which
    `crfopt report` adds to its axes.

    Examples:

    \b
      crfopt compare --problem ocr --optimizers sdca-gap,sag-nus,oeg --out results/ocr
      crfopt compare --problem conll2000 --optimizers "lbfgs,sdca-gap[sampler=gap]" \\
          --passes 20 --seeds 0,1,2 --backend joblib --n-jobs 2 --out results/conll
      crfopt compare --problem train.conll --template ner --test test.conll \\
          --optimizers sdca-gap --out results/mine
      crfopt compare --problem synthetic --optimizers "sg[step_size=1,0.1,0.01]" \\
          --passes 5 --out results/sweep
    """
    from crfopt.bench.compare import (
        compare,
        far_from_optimum,
        skipped_runs,
        unsuccessful_runs,
    )
    from crfopt.bench.problems import is_corpus_path
    from crfopt.bench.runner import Budget
    from crfopt.optim.contract import ParameterError
    from crfopt.optim.parse import parse_sweep, split_list
    from crfopt.optim.registry import UnknownNameError

    problem_list = split_list(problems)
    try:
        selected = [parse_sweep(text)[0] for text in split_list(optimizers)]
    except ParameterError as exc:
        raise click.UsageError(str(exc)) from None
    problem_params, overrides = resolve_sets(sets, problems=problem_list, optimizers=selected)
    if corpus:
        reg0 = build_registry(plugin_dirs)
        paths = [p for p in problem_list if is_corpus_path(reg0, p)]
        if not paths:
            raise click.UsageError(
                "--columns/--template/--test/--label apply to corpus files given as --problem PATH"
            )
        for p in paths:
            problem_params[p] = {**problem_params.get(p, {}), **corpus}
    if l1 is not None:
        problem_params = {p: with_l1(problem_params.get(p, {}), l1) for p in problem_list}
    if all(v is None for v in (passes, oracle_calls, updates, seconds)) and (
        target_suboptimality is None and target_gap is None
    ):
        passes = 10.0
    try:
        budget = Budget(
            passes=passes,
            oracle_calls=oracle_calls,
            updates=updates,
            seconds=seconds,
            target_suboptimality=target_suboptimality,
            target_gap=target_gap,
        )
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    build_registry(plugin_dirs)  # report broken plugins once, up front
    reporter = RichReporter(budget.passes, quiet=quiet)
    try:
        with reporter:
            table = compare(
                problem_list,
                split_list(optimizers),
                seeds=_csv_ints(seeds),
                budget=budget,
                checkpoints=checkpoints,
                out=out,
                backend=backend,
                n_jobs=n_jobs,
                scheduler=scheduler,
                plugin_dirs=plugin_dirs,
                overrides=overrides,
                problem_params=problem_params,
                optimum=not no_optimum,
                retry_failed=retry_failed,
                timeout=timeout,
                max_memory=max_memory,
                reporter=reporter,
            )
    except KeyboardInterrupt:
        err_console.print(
            f"[yellow]interrupted[/]: finished runs are kept in {out}; run the same command "
            "again to resume"
        )
        sys.exit(130)
    except (UnknownNameError, ParameterError, ValueError) as exc:
        # compare() checks its arguments (and a corpus's layout or template) with these;
        # a missing input, an unwritable --out or an unreachable scheduler are their own
        # errors, described by the command group (options.describe_error).
        raise click.UsageError(str(exc)) from None
    console.print(summary_table(table))
    console.print(f"{table['run_id'].nunique()} runs, {len(table)} rows in {escape(out)}")
    skipped = skipped_runs(table)
    if len(skipped):
        err_console.print(f"[yellow]{len(skipped)} run(s) skipped[/] (declined, not a failure):")
        for _, r in skipped.iterrows():
            err_console.print(
                f"  skipped {escape(str(r['problem']))} · {escape(str(r['optimizer']))} · "
                f"seed {r['seed']}: {escape(str(r['reason']))}"
            )
    far = far_from_optimum(table)
    if len(far):
        err_console.print(
            f"[yellow]{len(far)} run(s) stopped on the budget far from the optimum[/] "
            "(raise --passes, or set --target-gap / --target-suboptimality):"
        )
        for _, r in far.iterrows():
            err_console.print(
                f"  {escape(str(r['problem']))} · {escape(str(r['optimizer']))} · seed "
                f"{r['seed']}: after {r['effective_passes']:.3g} passes, {r['measure']} = "
                f"{r['value']:.3g} = {r['relative']:.2g} × P(0)"
            )
    bad = unsuccessful_runs(table)
    if len(bad):
        verdict = "allowed by --allow-failures" if allow_failures else "exit status 1"
        err_console.print(f"[red]{len(bad)} run(s) failed or diverged[/] ({verdict}):")
        for _, r in bad.iterrows():
            err_console.print(
                f"  {r['status']:>8s} {escape(str(r['problem']))} · "
                f"{escape(str(r['optimizer']))} · seed {r['seed']} (run {r['run_id']}): "
                f"{escape(str(r['error']))}"
            )
        if not allow_failures:
            sys.exit(1)


@click.command("report", short_help="Figures and tables from stored results.", epilog=exit_codes())
@click.argument("results", type=click.Path(exists=True))
@click.option("--out", required=True, type=click.Path(file_okay=False), help="Output folder.")
@click.option(
    "--format",
    "formats",
    default="png,svg",
    show_default=True,
    help="Figure formats, comma-separated (png, svg, pdf).",
)
@click.option("--title", default=None, help="Title of the report.")
@click.option(
    "--init-offset/--no-init-offset",
    default=True,
    show_default=True,
    help="Add each optimizer's setup() work to the passes, oracle-call and seconds axes "
    "(curves start where it ended, marked ◇) and to the table; off: iterations only.",
)
@click.option(
    "--best-of",
    "best",
    multiple=True,
    metavar="NAME:PARAM",
    help="Of a swept parameter (e.g. sg:step_size after --optimizers "
    "'sg[step_size=1,0.1,0.01]'), show per problem only the value with the lowest final "
    "relative sub-optimality (median over seeds), as SBA15 pick SG steps; repeatable.",
)
def report_cmd(
    results: str,
    out: str,
    formats: str,
    title: str | None,
    init_offset: bool,
    best: Sequence[str],
) -> None:
    """Figures, a Markdown summary and a self-contained HTML page from RESULTS (a
    folder written by `crfopt compare`, or one of its run files).

    Examples:

    \b
      crfopt report results/ocr --out report/ocr --format png,pdf
      crfopt report results/sweep --out report/sweep --best-of sg:step_size
    """
    from crfopt.bench.report import make_report

    try:
        rep = make_report(
            results,
            out,
            formats=[f.strip() for f in formats.split(",") if f.strip()],
            title=title,
            init_offset=init_offset,
            best=best,
        )
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    console.print(escape(f"{len(rep.figures)} figures, {rep.markdown} and {rep.html}"))
