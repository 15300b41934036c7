"""The ``crfopt`` command line (DESIGN.md "Public surface").

Usage errors exit with status 2 and say what was wrong and what the valid choices are.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from . import __version__
from .registry import Registry, UnknownNameError, get_registry

console = Console(stderr=False, highlight=False)
err_console = Console(stderr=True, highlight=False)

plugin_dir_option = click.option(
    "--plugin-dir",
    "plugin_dirs",
    multiple=True,
    type=click.Path(file_okay=False),
    help="Directory of plugin .py files to load (repeatable).",
)


def parse_value(text: str) -> Any:
    """A --set value: int, float (1e-3 too), true/false, none/null, or the text itself."""
    low = text.strip().lower()
    if low in {"none", "null", "~"}:
        return None
    if low in {"true", "false"}:
        return low == "true"
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


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
            f"[yellow]warning:[/] plugin [bold]{failure.name}[/] ({failure.source}) "
            f"failed: {failure.error}"
        )
    return reg


def load_problem_cli(reg: Registry, name: str, params: dict[str, Any]):
    try:
        return reg.load_problem(name, **params)
    except UnknownNameError as exc:
        raise click.BadParameter(str(exc), param_hint="--problem") from None
    except (ValueError, TypeError) as exc:
        raise click.UsageError(str(exc)) from None


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n:.1f} TiB"  # pragma: no cover


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="crfopt")
def main() -> None:
    """Train linear-chain CRFs and compare their optimizers on equal terms."""


@main.command("list")
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
            table.add_row(name, spec.summary, params, spec.source)
        console.print(table)
    if what in ("problems", "all"):
        table = Table(title="problems")
        for col in ("name", "summary", "source"):
            table.add_column(col, overflow="fold")
        for name in sorted(reg.problems):
            spec = reg.problems[name]
            table.add_row(name, spec.summary, spec.source)
        console.print(table)
    if reg.failures:
        table = Table(title="plugins that failed to load")
        for col in ("plugin", "source", "error"):
            table.add_column(col, overflow="fold")
        for f in reg.failures:
            table.add_row(f.name, f.source, f.error)
        console.print(table)


@main.command("info")
@click.option("--problem", "problem_name", required=True, help="Problem name or corpus path.")
@click.option("--set", "sets", multiple=True, help="Problem parameter, e.g. synthetic.n=500.")
@plugin_dir_option
def info_cmd(problem_name: str, sets: Sequence[str], plugin_dirs: Sequence[str]) -> None:
    """Sizes of a problem (n, tokens, labels, attributes, d, λ), dual memory, provenance."""
    reg = build_registry(plugin_dirs)
    overrides = parse_sets(sets)
    params = overrides.pop(problem_name, {})
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
    for key, value in problem.metadata.items():
        rows.append((key, str(value)))
    for k, v in rows:
        table.add_row(k, v)
    console.print(table)


def run() -> None:  # pragma: no cover - console entry for `python -m crfopt`
    sys.exit(main())
