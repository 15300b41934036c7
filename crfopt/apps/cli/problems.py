"""Commands about problems: ``list``, ``info``, ``optimum`` and ``fetch``."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import click
from rich.markup import escape
from rich.table import Table

# OptimizerFamily and optimizer_families lived here; kept importable from this module
from crfopt.apps.cli.listing import OptimizerFamily, listing, optimizer_families  # noqa: F401
from crfopt.apps.cli.options import (
    build_registry,
    console,
    corpus_options,
    err_console,
    exit_codes,
    human_bytes,
    l1_option,
    load_problem_cli,
    plugin_dir_option,
    resolve_sets,
    with_l1,
)


@click.command("list", short_help="List optimizers and problems.", epilog=exit_codes())
@click.argument("what", type=click.Choice(["optimizers", "problems", "all"]), default="all")
@click.argument("name", required=False, metavar="[NAME]")
@plugin_dir_option
def list_cmd(what: str, name: str | None, plugin_dirs: Sequence[str]) -> None:
    """List registered optimizers and problems, their defaults and where they come from
    (WHAT: optimizers, problems or all, the default).

    Variants of one optimizer family are listed together: the parameters they share
    once, then what each variant sets differently; then every parameter of each family
    with its type, default, accepted values and help line. `list optimizers NAME` shows
    one variant in full: summary, reference, capabilities and every parameter.

    Examples:

    \b
      crfopt list optimizers
      crfopt list optimizers sdca-gap
      crfopt list problems --plugin-dir my_plugins/
    """
    rows = listing(plugin_dirs)
    if name is not None:
        if what != "optimizers":
            raise click.UsageError(f"NAME is read by 'list optimizers NAME' only, not by {what!r}")
        details = {n: d for fam in rows["optimizers"] for n, d in fam["details"].items()}
        if name not in details:
            raise click.BadParameter(
                f"unknown optimizer {name!r}; registered: {', '.join(sorted(details))}",
                param_hint="NAME",
            )
        console.print(_detail_table(name, details[name]))
        return
    if what in ("optimizers", "all"):
        table = Table(
            title="optimizers",
            caption="a family's shared parameters are on its first row; each variant "
            "lists only what it sets differently",
        )
        for col in ("name", "summary", "parameters (defaults)", "source"):
            table.add_column(col, overflow="fold")
        for fam in rows["optimizers"]:
            several = len(fam["variants"]) > 1
            if several:
                table.add_section()
                table.add_row(
                    f"[bold]{escape(fam['name'])}[/] family",
                    escape(f"{len(fam['variants'])} variants; shared parameters →"),
                    escape(fam["shared"]),
                    escape(fam["source"]),
                )
            for name, summary, text in fam["variants"]:
                table.add_row(
                    escape(("  " if several else "") + name),
                    escape(summary),
                    escape(text),
                    "" if several else escape(fam["source"]),
                )
        console.print(table)
        for fam in rows["optimizers"]:
            several = len(fam["variants"]) > 1
            title = f"parameters of {fam['name']}{' family' if several else ''}"
            table = _parameter_table(f"{title} (NAME[param=value]; sweep: NAME[param=v1,v2])")
            for row in fam["parameters"]:
                table.add_row(*map(escape, row))
            console.print(table)
    if what in ("problems", "all"):
        table = Table(title="problems")
        for col in ("name", "summary", "source"):
            table.add_column(col, overflow="fold")
        for p in rows["problems"]:
            table.add_row(*map(escape, (p["name"], p["summary"], p["source"])))
        console.print(table)
    if rows["failures"]:
        table = Table(title="plugins that failed to load")
        for col in ("plugin", "source", "error"):
            table.add_column(col, overflow="fold")
        for f in rows["failures"]:
            table.add_row(*map(escape, (f["name"], f["source"], f["error"])))
        console.print(table)


def _parameter_table(title: str) -> Table:
    table = Table(title=escape(title), title_justify="left")
    # type and accepted values never wrap (a range or a choice list is read whole, and
    # pasted into --optimizers); names, defaults and help lines wrap between words
    for col in ("parameter", "type", "default", "accepts", "help"):
        table.add_column(col, no_wrap=col in ("type", "accepts"), overflow="fold")
    return table


def _detail_table(name: str, detail: dict[str, Any]) -> Table:
    """``crfopt list optimizers NAME``: the variant's summary, reference, source and
    capabilities above a table of every parameter."""
    console.print(f"[bold]{escape(name)}[/]: {escape(detail['summary'])}")
    console.print(f"reference: {escape(detail['reference'] or '—')}")
    console.print(f"source: {escape(detail['source'])}")
    console.print(f"capabilities: {escape(', '.join(detail['capabilities']) or 'none')}")
    console.print(f"regularizers: {escape(', '.join(detail.get('regularizers', ['l2'])))}")
    table = _parameter_table(f"parameters of {name} (set: {name}[param=value])")
    for row in detail["parameters"]:
        table.add_row(*map(escape, row))
    return table


def template_rules(spec: dict[str, Any]) -> list[str]:
    """A template's canonical form as one readable rule per attribute family.

    Single-column features with one name, column and transform merge into one line
    with their offsets (``w = word at -2 -1 0 +1 +2``); conjunctions list their windows
    (``w|w = word[-1] & word[0]; word[0] & word[+1]``). A CRF++/Wapiti pattern file
    lists its patterns, each with what crfopt makes of it.
    """
    if "format" in spec:
        from crfopt.data.patterns import PatternTemplate

        return PatternTemplate.from_spec(spec).rules()

    def part_text(column: str, transform: str, offset: int | None) -> str:
        where = "" if offset is None else f"[{offset:+d}]".replace("[+0]", "[0]")
        return column + where if transform == "identity" else f"{transform}({column}{where})"

    rules: dict[tuple[Any, ...], list[Any]] = {}
    for feat in spec.get("features", []):
        parts = [tuple(p) for p in feat["parts"]]
        if len(parts) == 1:
            column, transform, offset = parts[0]
            rules.setdefault(("one", feat["name"], column, transform), []).append(offset)
        else:
            text = " & ".join(part_text(c, t, o) for c, t, o in parts)
            rules.setdefault(("many", feat["name"]), []).append(text)
    lines = []
    for key, items in rules.items():
        if key[0] == "one":
            _, name, column, transform = key
            offsets = " ".join(f"{o:+d}" if o else "0" for o in items)
            lines.append(f"{name} = {part_text(column, transform, None)} at {offsets}")
        else:
            lines.append(f"{key[1]} = " + "; ".join(items))
    return lines


@click.command("info", short_help="Sizes, memory and provenance of a problem.", epilog=exit_codes())
@click.option("--problem", "problem_name", required=True, help="Problem name or corpus path.")
@click.option("--set", "sets", multiple=True, help="Problem parameter, e.g. synthetic.n=500.")
@corpus_options
@plugin_dir_option
def info_cmd(
    problem_name: str,
    sets: Sequence[str],
    corpus: dict[str, Any],
    plugin_dirs: Sequence[str],
) -> None:
    """Sizes of a problem (n, tokens, labels, attributes, d, λ), dual memory, provenance,
    and the feature template of a text problem as rules.

    Examples:

    \b
      crfopt info --problem conll2000
      crfopt info --problem my.conll --columns word,pos,label --template ner
      crfopt info --problem train.txt --template patterns.txt --template-format wapiti
    """
    reg = build_registry(plugin_dirs)
    problem_sets, _ = resolve_sets(sets, problems=[problem_name])
    params = {
        **problem_sets.get(problem_name, {}),
        **corpus,
    }
    problem = load_problem_cli(reg, problem_name, params)
    info = problem.info()
    table = Table(title=escape(f"problem {problem.name}"), show_header=False)
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
    spec_of_template = meta.pop("template_spec", None)
    if isinstance(spec_of_template, dict):
        rows.append(("template rules", "\n".join(template_rules(spec_of_template))))
    for key, value in meta.items():
        rows.append((key, str(value)))
    for k, v in rows:
        table.add_row(escape(k), escape(v))
    console.print(table)


@click.command("optimum", short_help="The certified reference optimum P*.", epilog=exit_codes())
@click.option("--problem", "problem_name", required=True, help="Problem name or corpus path.")
@click.option("--set", "sets", multiple=True, help="Problem parameter, e.g. synthetic.n=500.")
@click.option("--recompute", is_flag=True, help="Ignore the cached value.")
@click.option(
    "--tol", type=float, default=1e-10, show_default=True, help="Target certificate gap_P(w)/P(w)."
)
@l1_option
@plugin_dir_option
def optimum_cmd(
    problem_name: str,
    sets: Sequence[str],
    recompute: bool,
    tol: float,
    l1: float | None,
    plugin_dirs: Sequence[str],
) -> None:
    """Compute (or show the cached) certified reference optimum P* of a problem.

    Example:

    \b
      crfopt optimum --problem ocr
    """
    from crfopt.bench.optimum import _cache_file, reference_optimum

    reg = build_registry(plugin_dirs)
    problem_sets, _ = resolve_sets(sets, problems=[problem_name])
    problem = load_problem_cli(reg, problem_name, with_l1(problem_sets.get(problem_name, {}), l1))

    def progress(it: int, value: float, cert: float) -> None:
        err_console.print(f"[dim]L-BFGS {it} iterations: P = {value:.10g}, gap_P = {cert:.3g}[/]")

    ref = reference_optimum(problem, recompute=recompute, tol=tol, progress=progress)
    table = Table(title=escape(f"reference optimum of {problem.name}"), show_header=False)
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
        *([("σ (l1)", f"{ref.l1:.6g}")] if ref.l1 else []),
        ("cache", str(_cache_file(problem))),
    ]:
        table.add_row(k, escape(v))
    console.print(table)


@click.command(
    "fetch",
    short_help="Download and verify problems' data files.",
    epilog=exit_codes("a file could not be found, downloaded or verified (the others are done)"),
)
@click.argument("names", nargs=-1, metavar="[NAMES]...")
@click.option("--all", "fetch_all", is_flag=True, help="Every registered problem's files.")
@click.option("--force", is_flag=True, help="Download again even if the file is cached.")
@plugin_dir_option
def fetch_cmd(
    names: Sequence[str], fetch_all: bool, force: bool, plugin_dirs: Sequence[str]
) -> None:
    """Download and verify the raw files of the problems NAMES into the data cache.

    Examples:

    \b
      crfopt fetch conll2000 ocr
      crfopt fetch --all
    """
    from crfopt.data.sources import ChecksumError, fetch, locate, missing_file_error, verify
    from crfopt.optim.registry import UnknownNameError

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
                    path = locate(df, download=False)
                    verify(df, path)
                    console.print(f"{escape(label)}: present and verified at {escape(str(path))}")
                    continue
            except FileNotFoundError:
                pass
            except ChecksumError as exc:
                console.print(f"[yellow]{escape(label)}: {escape(str(exc))}; downloading[/]")
            if df.url is None:
                err_console.print(f"[red]{escape(label)}: {escape(str(missing_file_error(df)))}[/]")
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
