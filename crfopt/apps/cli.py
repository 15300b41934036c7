"""The ``crfopt`` command line (DESIGN.md "Public surface").

Exit codes, the same for every command (each command's ``--help`` lists its own):
0 success; 1 the command ran but its work failed (a run failed or diverged in
``compare``, training failed, a file could not be fetched, results could not be written)
or an unexpected error; 2 usage or input error, saying what was wrong and what the valid
choices are; 130 interrupted (Ctrl-C).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import click
import pandas as pd
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from crfopt._version import __version__
from crfopt.bench.problems import is_corpus_path, load_from
from crfopt.optim.parse import parse_value
from crfopt.optim.registry import Registry, UnknownNameError, get_registry

# Tables are read in logs and CI output too, where rich would assume 80 columns.
console = Console(stderr=False, highlight=False, width=None if sys.stdout.isatty() else 140)
err_console = Console(stderr=True, highlight=False, soft_wrap=True)

plugin_dir_option = click.option(
    "--plugin-dir",
    "plugin_dirs",
    multiple=True,
    type=click.Path(file_okay=False),
    help="Directory of plugin .py files to load (repeatable).",
)


def corpus_options(func: Any) -> Any:
    """--columns/--template/--test/--label: how to read a corpus given as a file path."""
    for option in reversed(
        [
            click.option(
                "--columns", default=None, help="Column names of a CoNLL file, e.g. word,pos,label."
            ),
            click.option(
                "--template",
                default=None,
                help="Feature template: chunking, ner, pos or a TOML/YAML file.",
            ),
            click.option(
                "--test",
                "test_path",
                default=None,
                type=click.Path(dir_okay=False),
                help="Test file in the same layout as the training file.",
            ),
            click.option(
                "--label",
                "label_column",
                default=None,
                help="Label column (default: the last one; xpos for CoNLL-U).",
            ),
        ]
    ):
        func = option(func)
    return func


def corpus_params(
    columns: str | None, template: str | None, test_path: str | None, label_column: str | None
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if columns:
        out["columns"] = columns
    if template:
        out["template"] = template
    if test_path:
        out["test"] = test_path
    if label_column:
        out["label"] = label_column
    return out


def parse_sets(items: Sequence[str]) -> dict[str, dict[str, Any]]:
    """``NAME.param=value`` items into {NAME: {param: value}}."""
    out: dict[str, dict[str, Any]] = {}
    for item in items:
        if "=" not in item:
            raise click.BadParameter(f"{item!r}: expected NAME.param=value", param_hint="--set")
        lhs, rhs = item.split("=", 1)
        if "." not in lhs:
            raise click.BadParameter(
                f"{item!r}: expected NAME.param=value (NAME is an optimizer or the problem)",
                param_hint="--set",
            )
        name, param = lhs.rsplit(".", 1)
        name, param = name.strip(), param.strip()
        if not name or not param:
            raise click.BadParameter(f"{item!r}: empty name or parameter", param_hint="--set")
        out.setdefault(name, {})[param] = parse_value(rhs.strip())
    return out


def build_registry(plugin_dirs: Sequence[str]) -> Registry:
    reg = get_registry(plugin_dirs)
    for failure in reg.failures:
        err_console.print(
            f"[yellow]warning:[/] plugin [bold]{escape(failure.name)}[/] "
            f"({escape(failure.source)}) failed: {escape(failure.error)}"
        )
    return reg


def load_problem_cli(reg: Registry, name: str, params: dict[str, Any]):
    try:
        return load_from(reg, name, **params)
    except UnknownNameError as exc:
        raise click.BadParameter(str(exc), param_hint="--problem") from None
    except (ValueError, TypeError) as exc:
        raise click.UsageError(str(exc)) from None


def exit_codes(*failures: str) -> str:
    """The "Exit codes" epilog of a command; ``failures`` say when it exits 1.

    ``\\b`` keeps click from re-wrapping the lines into one paragraph.
    """
    ones = [*failures, "an unexpected error (a Python traceback is printed)"]
    lines = ["Exit codes:", "0    success"]
    lines += [f"1    {text}" for text in ones]
    lines += ["2    usage or input error (the message says what and the valid choices)"]
    lines += ["130  interrupted (Ctrl-C)"]
    return "\b\n" + "\n".join(lines)


class CrfoptGroup(click.Group):
    """The command group; Ctrl-C in any command exits 130 (click's own default is 1)."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            err_console.print("[yellow]interrupted[/]")
            raise click.exceptions.Exit(130) from None


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n:.1f} TiB"  # pragma: no cover


@click.group(
    cls=CrfoptGroup,
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog=exit_codes("the command's work failed (see each command's --help)"),
)
@click.version_option(__version__, prog_name="crfopt")
def main() -> None:
    """Train linear-chain CRFs and compare their optimizers on equal terms."""


@main.command("list", epilog=exit_codes())
@click.argument("what", type=click.Choice(["optimizers", "problems", "all"]), default="all")
@plugin_dir_option
def list_cmd(what: str, plugin_dirs: Sequence[str]) -> None:
    """List registered optimizers and problems, their defaults and where they come from."""
    reg = build_registry(plugin_dirs)
    if what in ("optimizers", "all"):
        table = Table(title="optimizers", show_lines=False)
        for col in ("name", "summary", "parameters (defaults)", "source"):
            table.add_column(col, overflow="fold")
        for name in sorted(reg.optimizers):
            spec = reg.optimizers[name]
            params = ", ".join(f"{k}={v.default}" for k, v in spec.parameters().items())
            table.add_row(*map(escape, (name, spec.summary, params, spec.source)))
        console.print(table)
    if what in ("problems", "all"):
        table = Table(title="problems")
        for col in ("name", "summary", "source"):
            table.add_column(col, overflow="fold")
        for name in sorted(reg.problems):
            spec = reg.problems[name]
            table.add_row(*map(escape, (name, spec.summary, spec.source)))
        console.print(table)
    if reg.failures:
        table = Table(title="plugins that failed to load")
        for col in ("plugin", "source", "error"):
            table.add_column(col, overflow="fold")
        for f in reg.failures:
            table.add_row(*map(escape, (f.name, f.source, f.error)))
        console.print(table)


@main.command("info", epilog=exit_codes())
@click.option("--problem", "problem_name", required=True, help="Problem name or corpus path.")
@click.option("--set", "sets", multiple=True, help="Problem parameter, e.g. synthetic.n=500.")
@corpus_options
@plugin_dir_option
def info_cmd(
    problem_name: str,
    sets: Sequence[str],
    columns: str | None,
    template: str | None,
    test_path: str | None,
    label_column: str | None,
    plugin_dirs: Sequence[str],
) -> None:
    """Sizes of a problem (n, tokens, labels, attributes, d, λ), dual memory, provenance."""
    reg = build_registry(plugin_dirs)
    overrides = parse_sets(sets)
    params = {
        **overrides.pop(problem_name, {}),
        **corpus_params(columns, template, test_path, label_column),
    }
    if overrides:
        raise click.BadParameter(
            f"--set names {', '.join(overrides)}; here only {problem_name}.param=value applies",
            param_hint="--set",
        )
    problem = load_problem_cli(reg, problem_name, params)
    info = problem.info()
    table = Table(title=f"problem {problem.name}", show_header=False)
    table.add_column("quantity")
    table.add_column("value", overflow="fold")
    rows = [
        ("sequences n", f"{info['n']:,}"),
        ("tokens N", f"{info['tokens']:,}"),
        ("labels K", str(info["labels"])),
        ("attributes A", f"{info['attributes']:,}"),
        ("max active attributes a", str(info["max_active"])),
        ("dimension d", f"{info['dim']:,}"),
        ("λ", f"{info['lam']:.6g}"),
        ("bias block", "yes" if info["bias"] else "no"),
        ("embedding", info["embedding"]),
        ("P(0) = (N/n) log K", f"{info['P(0)']:.6f}"),
        ("dual memory (float64)", human_bytes(info["dual_memory_float64"])),
        ("dual memory (float32)", human_bytes(info["dual_memory_float32"])),
    ]
    for split in problem.splits[1:]:
        rows.append(
            (f"{split} split", f"{info[f'{split}_n']:,} seq / {info[f'{split}_tokens']:,} tok")
        )
    spec = reg.problems.get(problem_name)
    if spec is not None:
        rows.append(("source", spec.source))
        if spec.reference:
            rows.append(("reference", spec.reference))
        if spec.notes:
            rows.append(("notes", spec.notes))
    meta = problem.metadata
    for f in meta.pop("files", []) or []:
        rows.append(
            (
                f"file {f['file']}",
                f"{f['path']}\nsha256 {f['sha256'][:16]}…"
                + (f"\nupstream {f['url']}" if f.get("url") else "")
                + (f"\nlicence: {f['licence']}" if f.get("licence") else ""),
            )
        )
    for key, value in meta.items():
        rows.append((key, str(value)))
    for k, v in rows:
        table.add_row(escape(k), escape(v))
    console.print(table)


# --------------------------------------------------------------------------- config files


def _load_config(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    """``--config FILE``: YAML whose keys are the command's long options (e.g. passes: 20)."""
    if not value:
        return
    import yaml

    try:
        with open(value, encoding="utf-8") as f:
            data = yaml.safe_load(f) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise click.BadParameter(f"cannot read {value}: {exc}", param_hint="--config") from None
    if not isinstance(data, dict):
        raise click.BadParameter(f"{value}: expected a mapping of options", param_hint="--config")
    # Keys are the long option names users type (problem, set, plugin-dir, n-jobs…).
    by_option: dict[str, click.Parameter] = {}
    for p in ctx.command.params:
        if isinstance(p, click.Option) and p.name != "config":
            for opt in p.opts:
                if opt.startswith("--"):
                    by_option[opt[2:]] = p
    defaults = {}
    for key, v in data.items():
        opt = by_option.get(str(key)) or by_option.get(str(key).replace("_", "-"))
        if opt is None:
            raise click.BadParameter(
                f"{value}: unknown option {key!r}; options: " + ", ".join(sorted(by_option)),
                param_hint="--config",
            )
        if isinstance(v, list) and not opt.multiple:
            v = ",".join(str(x) for x in v)
        defaults[opt.name] = v
    ctx.default_map = {**(ctx.default_map or {}), **defaults}


config_option = click.option(
    "--config",
    type=click.Path(exists=True, dir_okay=False),
    is_eager=True,
    expose_value=False,
    callback=_load_config,
    help="YAML file of options (keys are the long option names); the command line wins.",
)


# --------------------------------------------------------------------------- compare


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
    out = Table(
        title="comparison summary (last checkpoint of every run)",
        caption="passes, oracle calls, time: the iterations; init: the optimizer's setup() work",
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


@main.command(
    "compare",
    epilog=exit_codes(
        "a run of the grid failed or diverged (named in the summary), unless\n"
        "     --allow-failures; runs kept from earlier invocations count too",
        "results cannot be written (runs finished before are kept)",
    ),
)
@config_option
@click.option(
    "--problem", "problems", required=True, help="Problem name(s) or corpus path, comma-separated."
)
@click.option(
    "--optimizers", required=True, help="Variants, comma-separated; NAME[param=value,...] allowed."
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
    show_default=True,
    help="'default' (every 0.25 pass, then every pass), 'log', or 'every:X'.",
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
    default="serial",
    show_default=True,
)
@click.option("--n-jobs", type=int, default=None, help="Parallel workers (joblib / LocalCluster).")
@click.option("--scheduler", default=None, help="Address of a running Dask scheduler.")
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
@click.option("--quiet", is_flag=True, help="No progress display.")
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
    backend: str,
    n_jobs: int | None,
    scheduler: str | None,
    no_optimum: bool,
    retry_failed: bool,
    allow_failures: bool,
    timeout: float | None,
    quiet: bool,
    columns: str | None,
    template: str | None,
    test_path: str | None,
    label_column: str | None,
    plugin_dirs: Sequence[str],
) -> None:
    """Run a grid of problems × optimizers × seeds and store every trace.

    Runs already in --out are kept and not rerun; Ctrl-C keeps finished runs. In the
    summary, passes, oracle calls and time count the optimizers' iterations (the budget
    too); "init passes" and "init (s)" are the work of each optimizer's setup(), which
    `crfopt report` adds to its axes.
    """
    from crfopt.bench.compare import compare, split_list, unsuccessful_runs
    from crfopt.bench.runner import Budget
    from crfopt.optim.contract import ParameterError

    problem_list = split_list(problems)
    overrides = parse_sets(sets)
    problem_params = {p: overrides.pop(p) for p in list(overrides) if p in problem_list}
    extra = corpus_params(columns, template, test_path, label_column)
    if extra:
        reg0 = build_registry(plugin_dirs)
        paths = [p for p in problem_list if is_corpus_path(reg0, p)]
        if not paths:
            raise click.UsageError(
                "--columns/--template/--test/--label apply to corpus files given as --problem PATH"
            )
        for p in paths:
            problem_params[p] = {**problem_params.get(p, {}), **extra}
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
                reporter=reporter,
            )
    except KeyboardInterrupt:
        err_console.print(
            f"[yellow]interrupted[/]: finished runs are kept in {out}; run the same command "
            "again to resume"
        )
        sys.exit(130)
    except UnknownNameError as exc:
        raise click.UsageError(str(exc)) from None
    except ParameterError as exc:
        raise click.UsageError(str(exc)) from None
    except OSError as exc:
        err_console.print(
            f"[red]error:[/] cannot write results to {escape(out)}: {escape(str(exc))}. "
            "Runs finished before this are kept; free space or fix permissions, then rerun."
        )
        sys.exit(1)
    console.print(summary_table(table))
    console.print(f"{table['run_id'].nunique()} runs, {len(table)} rows in {out}")
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


@main.command("optimum", epilog=exit_codes())
@click.option("--problem", "problem_name", required=True, help="Problem name or corpus path.")
@click.option("--set", "sets", multiple=True, help="Problem parameter, e.g. synthetic.n=500.")
@click.option("--recompute", is_flag=True, help="Ignore the cached value.")
@click.option(
    "--tol", type=float, default=1e-10, show_default=True, help="Target certificate gap_P(w)/P(w)."
)
@plugin_dir_option
def optimum_cmd(
    problem_name: str, sets: Sequence[str], recompute: bool, tol: float, plugin_dirs: Sequence[str]
) -> None:
    """Compute (or show the cached) certified reference optimum P* of a problem."""
    from crfopt.bench.optimum import _cache_file, reference_optimum

    reg = build_registry(plugin_dirs)
    overrides = parse_sets(sets)
    problem = load_problem_cli(reg, problem_name, overrides.pop(problem_name, {}))

    def progress(it: int, value: float, cert: float) -> None:
        err_console.print(f"[dim]L-BFGS {it} iterations: P = {value:.10g}, gap_P = {cert:.3g}[/]")

    ref = reference_optimum(problem, recompute=recompute, tol=tol, progress=progress)
    table = Table(title=f"reference optimum of {problem.name}", show_header=False)
    table.add_column("quantity")
    table.add_column("value")
    for k, v in [
        ("P*", f"{ref.p_star:.10f}"),
        ("certificate gap_P(w_ref)", f"{ref.certificate:.3g}"),
        ("relative certificate", f"{ref.relative_certificate:.3g}"),
        ("best dual value seen", "—" if ref.best_dual is None else f"{ref.best_dual:.10f}"),
        ("L-BFGS iterations / evaluations", f"{ref.iterations} / {ref.evaluations}"),
        ("seconds", f"{ref.seconds:.1f}"),
        ("λ", f"{ref.lam:.6g}"),
        ("cache", str(_cache_file(problem))),
    ]:
        table.add_row(k, v)
    console.print(table)


@main.command(
    "fetch",
    epilog=exit_codes("a file could not be found, downloaded or verified (the others are done)"),
)
@click.argument("names", nargs=-1)
@click.option("--all", "fetch_all", is_flag=True, help="Every registered problem's files.")
@click.option("--force", is_flag=True, help="Download again even if the file is cached.")
@plugin_dir_option
def fetch_cmd(
    names: Sequence[str], fetch_all: bool, force: bool, plugin_dirs: Sequence[str]
) -> None:
    """Download and verify the raw files of problems into the data cache."""
    from crfopt.data.sources import ChecksumError, fetch, locate, verify

    reg = build_registry(plugin_dirs)
    if fetch_all:
        names = sorted(reg.problems)
    if not names:
        raise click.UsageError(
            "name the problems to fetch (or --all); problems: " + ", ".join(sorted(reg.problems))
        )
    failed = False
    for name in names:
        try:
            spec = reg.problem(name)
        except UnknownNameError as exc:
            raise click.BadParameter(str(exc), param_hint="NAMES") from None
        if not spec.files:
            console.print(f"{escape(name)}: nothing to download")
        for df in spec.files:
            label = f"{name}: {df.folder}/{df.name}"
            try:
                if not force:
                    path = locate(df)
                    verify(df, path)
                    console.print(f"{escape(label)}: present and verified at {escape(str(path))}")
                    continue
            except FileNotFoundError:
                pass
            except ChecksumError as exc:
                console.print(f"[yellow]{escape(label)}: {escape(str(exc))}; downloading[/]")
            if df.url is None:
                err_console.print(
                    f"[red]{escape(label)}: not found and no download URL is "
                    "known; put the file under CRFOPT_DATA (see PROVENANCE)[/]"
                )
                failed = True
                continue
            try:
                path = fetch(df, progress=sys.stderr.isatty(), force=True)
            except (ChecksumError, OSError) as exc:
                err_console.print(f"[red]{escape(label)}: {escape(str(exc))}[/]")
                failed = True
                continue
            console.print(f"{escape(label)}: downloaded and verified to {escape(str(path))}")
            if df.licence:
                console.print(f"  licence: {escape(df.licence)}")
    if failed:
        sys.exit(1)


@main.command("report", epilog=exit_codes())
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
def report_cmd(results: str, out: str, formats: str, title: str | None, init_offset: bool) -> None:
    """Figures, a Markdown summary and a self-contained HTML page from RESULTS."""
    from crfopt.bench.report import make_report

    try:
        rep = make_report(
            results,
            out,
            formats=[f.strip() for f in formats.split(",") if f.strip()],
            title=title,
            init_offset=init_offset,
        )
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    console.print(f"{len(rep.figures)} figures, {rep.markdown} and {rep.html}")


@main.command("train", epilog=exit_codes("training failed or diverged (no model is saved)"))
@click.option("--problem", "problem_name", required=True, help="Problem name or corpus path.")
@click.option("--optimizer", default="sdca-gap", show_default=True, help="Optimizer variant.")
@click.option(
    "--passes", type=float, default=30.0, show_default=True, help="Budget in effective passes."
)
@click.option(
    "--target-gap",
    type=float,
    default=None,
    help="Stop once the duality gap is ≤ this (methods with a dual; absolute, as in compare).",
)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option(
    "--set", "sets", multiple=True, help="NAME.param=value for the optimizer or the problem."
)
@click.option(
    "--model",
    "model_path",
    required=True,
    type=click.Path(dir_okay=False),
    help="Where to save the model (.crfopt).",
)
@click.option("--quiet", is_flag=True, help="No progress lines.")
@corpus_options
@plugin_dir_option
def train_cmd(
    problem_name: str,
    optimizer: str,
    passes: float,
    target_gap: float | None,
    seed: int,
    sets: Sequence[str],
    model_path: str,
    quiet: bool,
    columns: str | None,
    template: str | None,
    test_path: str | None,
    label_column: str | None,
    plugin_dirs: Sequence[str],
) -> None:
    """Train one model and save it (weights, dictionaries, template, labels).

    Example: crfopt train --problem conll2000 --optimizer sdca-gap --passes 30
    --model chunker.crfopt
    """
    from crfopt.apps.model import Model
    from crfopt.bench.runner import Budget, run
    from crfopt.optim.contract import ParameterError

    reg = build_registry(plugin_dirs)
    overrides = parse_sets(sets)
    params = {
        **overrides.pop(problem_name, {}),
        **corpus_params(columns, template, test_path, label_column),
    }
    try:
        spec = reg.optimizer(optimizer)
    except UnknownNameError as exc:
        raise click.BadParameter(str(exc), param_hint="--optimizer") from None
    opt_params = overrides.pop(optimizer, {})
    if overrides:
        raise click.BadParameter(
            f"unknown name(s) {', '.join(sorted(overrides))}: --set applies to the optimizer "
            f"{optimizer!r} or the problem {problem_name!r}",
            param_hint="--set",
        )
    problem = load_problem_cli(reg, problem_name, params)
    try:
        budget = Budget(passes=passes, target_gap=target_gap)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None

    def progress(row: dict[str, Any]) -> None:
        if quiet:
            return
        gap = row.get("duality_gap")
        test = row.get("test_error")
        err_console.print(
            f"[dim]{row['effective_passes']:7.2f} passes  P = {row['primal']:.6g}"
            + ("" if gap is None or gap != gap else f"  gap = {gap:.3g}")
            + ("" if test is None or test != test else f"  test error = {test:.4f}")
            + f"  {row['time_s']:.1f} s[/]"
        )

    try:
        result = run(
            problem,
            spec,
            seed=seed,
            params=opt_params,
            budget=budget,
            on_checkpoint=progress,
        )
    except ParameterError as exc:
        raise click.UsageError(str(exc)) from None
    if result.status in ("failed", "diverged") or result.w is None:
        why = result.meta.get("error_summary") or "non-finite weights"
        err_console.print(f"[red]error:[/] training {result.status}: {escape(why)}; no model saved")
        sys.exit(1)
    info = {**result.summary(), "problem": problem.name, "lam": problem.lam}
    model = Model.from_problem(problem, result.w, info)
    path = model.save(model_path)
    table = Table(title=f"{optimizer} on {problem.name}", show_header=False)
    table.add_column("quantity")
    table.add_column("value")
    for key in (
        "status",
        "effective_passes",
        "seconds",
        "primal",
        "duality_gap",
        "train_error",
        "test_error",
    ):
        value = info.get(key)
        if value is not None:
            table.add_row(key, f"{value:.6g}" if isinstance(value, float) else str(value))
    table.add_row("model", f"{path} ({human_bytes(path.stat().st_size)})")
    console.print(table)
    if model.template is None:
        err_console.print(
            "[yellow]note:[/] this problem has no text template: `crfopt tag` cannot use the "
            "model; load it with crfopt.Model.load"
        )


def _load_model(path: str):
    from crfopt.apps.model import Model, ModelFormatError

    try:
        return Model.load(path)
    except ModelFormatError as exc:
        raise click.BadParameter(str(exc), param_hint="--model") from None


def _read_for_model(model: Any, path: str, columns: str | None, encoding: str, labelled: bool):
    from crfopt.apps.tagging import TaggingError, read_input
    from crfopt.data.readers import DataFormatError

    try:
        return read_input(model, path, columns=columns, encoding=encoding, labelled=labelled)
    except (DataFormatError, TaggingError) as exc:
        raise click.UsageError(str(exc)) from None


input_options = [
    click.argument("input_path", metavar="INPUT", type=click.Path(exists=True, dir_okay=False)),
    click.option(
        "--model",
        "model_path",
        required=True,
        type=click.Path(exists=True, dir_okay=False),
        help="A model saved by `crfopt train` or CRF.save.",
    ),
    click.option(
        "--columns",
        default=None,
        help="Column names of INPUT if they differ from the training file's, e.g. word,pos.",
    ),
    click.option("--encoding", default="utf-8", show_default=True),
]


def with_input_options(func: Any) -> Any:
    for option in reversed(input_options):
        func = option(func)
    return func


@main.command("tag", epilog=exit_codes())
@with_input_options
@click.option(
    "--out",
    "out_path",
    default="-",
    type=click.Path(dir_okay=False, allow_dash=True),
    help="Output file (default: standard output).",
)
def tag_cmd(
    input_path: str, model_path: str, columns: str | None, encoding: str, out_path: str
) -> None:
    """Tag INPUT (CoNLL or CoNLL-U) and write it with the predicted labels.

    CoNLL input gets the prediction as a last column; in CoNLL-U the predicted tag fills
    the model's label field (xpos or upos). Example: crfopt tag --model chunker.crfopt
    test.txt > tagged.txt
    """
    from crfopt.apps.tagging import TaggingError, tag_corpus, write_tagged

    model = _load_model(model_path)
    corpus, fmt = _read_for_model(model, input_path, columns, encoding, labelled=False)
    try:
        predictions = tag_corpus(model, corpus)
    except TaggingError as exc:
        raise click.UsageError(str(exc)) from None
    label = (model.training.get("corpus") or {}).get("label")
    with click.open_file(out_path, "w", encoding="utf-8", atomic=out_path != "-") as out:
        write_tagged(input_path, fmt, predictions, out, label=label, encoding=encoding)


@main.command("evaluate", epilog=exit_codes())
@with_input_options
@click.option("--json", "as_json", is_flag=True, help="Print the scores as JSON.")
def evaluate_cmd(
    input_path: str, model_path: str, columns: str | None, encoding: str, as_json: bool
) -> None:
    """Score the model on labelled INPUT: token accuracy, and chunk/entity precision,
    recall and F1 as CoNLL's conlleval counts them (for IOB/IOE label sets)."""
    import json

    from crfopt.apps.tagging import TaggingError, evaluate_corpus, is_chunk_tagset

    model = _load_model(model_path)
    corpus, _ = _read_for_model(model, input_path, columns, encoding, labelled=True)
    try:
        scores = evaluate_corpus(model, corpus)
    except TaggingError as exc:
        raise click.UsageError(str(exc)) from None
    chunked = is_chunk_tagset(model.labels)
    result = scores.as_dict()
    if not chunked:
        result = {k: result[k] for k in ("tokens", "accuracy")}
    if as_json:
        click.echo(json.dumps(result, indent=2))
        return
    table = Table(title=f"{model_path} on {input_path}")
    table.add_column("")
    for name in ("precision", "recall", "F1", "gold", "predicted"):
        table.add_column(name, justify="right")
    console.print(f"tokens {scores.tokens}, accuracy {100 * scores.accuracy:.2f}%")
    if chunked:
        p, r, f = scores.precision_recall_f1
        table.add_row(
            "all chunks",
            f"{100 * p:.2f}",
            f"{100 * r:.2f}",
            f"{100 * f:.2f}",
            str(scores.gold_chunks),
            str(scores.pred_chunks),
        )
        for kind, (gold, pred, right) in sorted(scores.per_type.items()):
            p, r, f = scores.prf(gold, pred, right)
            table.add_row(
                kind, f"{100 * p:.2f}", f"{100 * r:.2f}", f"{100 * f:.2f}", str(gold), str(pred)
            )
        console.print(table)


def run() -> None:  # pragma: no cover - console entry for `python -m crfopt`
    sys.exit(main())
