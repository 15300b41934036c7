"""What every command shares: consoles, common options, the one ``--set`` resolver,
registry and problem loading, the exit-code epilog, the command group class.

Like every module of the CLI, this one imports only click and rich at module level:
``crfopt --help`` and the help of every command build from these modules alone, and the
layers below (numba, pandas, scipy, the plugins) load inside the command that runs.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import click
from rich.console import Console
from rich.markup import escape

if TYPE_CHECKING:
    from crfopt.optim.registry import Registry

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


l1_option = click.option(
    "--l1",
    "l1",
    type=click.FloatRange(min=0.0),
    default=None,
    metavar="SIGMA",
    help="ℓ1 weight σ of every problem: P adds σ‖w‖₁ over all weights (elastic net; "
    "CRFsuite's c1 = σ·n). Only optimizers that handle ℓ1 run (owlqn, prox-saga, every "
    "sdca variant: marked in `crfopt list optimizers`); the others are "
    "skipped with the reason. The same as --set PROBLEM.l1=SIGMA.",
)


def with_l1(params: dict[str, Any], l1: float | None) -> dict[str, Any]:
    """A problem's parameters with ``--l1`` applied (unchanged when it is not given)."""
    return params if l1 is None else {**params, "l1": l1}


def corpus_options(func: Any) -> Any:
    """--columns/--template[-format]/--test/--label/--encoding: how to read a corpus file.

    The command receives them as one ``corpus`` keyword: the problem parameters they set
    (:func:`corpus_params`), empty when none is given.
    """

    @functools.wraps(func)
    def command(
        *args: Any,
        columns: str | None,
        template: str | None,
        template_format: str | None,
        test_path: str | None,
        label_column: str | None,
        encoding: str | None,
        **kwargs: Any,
    ) -> Any:
        corpus = corpus_params(
            columns, template, test_path, label_column, encoding, template_format
        )
        return func(*args, corpus=corpus, **kwargs)

    for option in reversed(
        [
            click.option(
                "--columns", default=None, help="Column names of a CoNLL file, e.g. word,pos,label."
            ),
            click.option(
                "--template",
                default=None,
                help="Feature template: chunking, ner, pos, a TOML/YAML file, or a CRF++ "
                "template or Wapiti pattern file (docs/patterns.md).",
            ),
            click.option(
                "--template-format",
                type=click.Choice(["crfpp", "wapiti", "crfsuite"]),
                default=None,
                help="How to read the --template file: CRF++, Wapiti, or crfopt's "
                "CRFsuite-style TOML/YAML (default: by suffix and content).",
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
            click.option(
                "--encoding",
                default=None,
                help="Text encoding of the corpus files, e.g. latin-1 (default: utf-8).",
            ),
        ]
    ):
        command = option(command)
    return command


def corpus_params(
    columns: str | None,
    template: str | None,
    test_path: str | None,
    label_column: str | None,
    encoding: str | None = None,
    template_format: str | None = None,
) -> dict[str, Any]:
    """The problem parameters the corpus options set; only those given (a built-in
    problem takes none of them)."""
    out: dict[str, Any] = {}
    if columns:
        out["columns"] = columns
    if template:
        out["template"] = template
    if template_format:
        out["template_format"] = template_format
    if test_path:
        out["test"] = test_path
    if label_column:
        out["label"] = label_column
    if encoding:
        out["encoding"] = encoding
    return out


def parse_sets(items: Sequence[str]) -> dict[str, dict[str, Any]]:
    """``NAME.param=value`` items into {NAME: {param: value}} (``crfopt.optim.parse``'s
    grammar; a malformed item is a usage error of ``--set``)."""
    from crfopt.optim.contract import ParameterError
    from crfopt.optim.parse import parse_assignments

    try:
        return parse_assignments(items)
    except ParameterError as exc:
        raise click.BadParameter(str(exc), param_hint="--set") from None


def resolve_sets(
    items: Sequence[str], *, problems: Sequence[str], optimizers: Sequence[str] = ()
) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """The one reading of ``--set`` for every command: (problem params, optimizer params).

    ``NAME`` must be one of the problems or optimizers the command works on; any other
    name is a usage error naming the valid ones, so a typo never silently runs with the
    defaults. A name that is both a problem and an optimizer counts as the problem.
    """
    parsed = parse_sets(items)
    valid = list(dict.fromkeys([*problems, *optimizers]))
    unknown = [name for name in parsed if name not in valid]
    if unknown:
        raise click.BadParameter(
            f"unknown name(s) {', '.join(sorted(unknown))}: here --set NAME.param=value "
            f"applies to {', '.join(valid) if valid else 'nothing'}",
            param_hint="--set",
        )
    problem_params = {name: v for name, v in parsed.items() if name in problems}
    optimizer_params = {name: v for name, v in parsed.items() if name not in problems}
    return problem_params, optimizer_params


def build_registry(plugin_dirs: Sequence[str]) -> Registry:
    """Every plugin loaded (built-ins, entry points, ``plugin_dirs``); failures are warned
    about on stderr and the others stay usable."""
    from crfopt.optim.registry import get_registry

    reg = get_registry(plugin_dirs)
    for failure in reg.failures:
        err_console.print(
            f"[yellow]warning:[/] plugin [bold]{escape(failure.name)}[/] "
            f"({escape(failure.source)}) failed: {escape(failure.error)}"
        )
    return reg


def load_problem_cli(reg: Registry, name: str, params: dict[str, Any]) -> Any:
    from crfopt.bench.problems import load_from
    from crfopt.optim.registry import UnknownNameError

    try:
        return load_from(reg, name, **params)
    except UnknownNameError as exc:
        raise click.BadParameter(str(exc), param_hint="--problem") from None
    except (ValueError, TypeError) as exc:
        raise click.UsageError(str(exc)) from None


#: exit status of a Dask scheduler that cannot be reached (retrying later may work)
EXIT_UNREACHABLE = 3


def exit_codes(*failures: str, extra: Sequence[str] = ()) -> str:
    """The "Exit codes" epilog of a command; ``failures`` say when it exits 1, ``extra``
    lists further ``"N    meaning"`` lines.

    ``\\b`` keeps click from re-wrapping the lines into one paragraph.
    """
    ones = [*failures, "an unexpected error (its traceback with --debug or CRFOPT_DEBUG=1)"]
    lines = ["Exit codes:", "0    success"]
    lines += [f"1    {text}" for text in ones]
    lines += [
        "2    usage or input error, a missing input file included (the message says what",
        "     and how to fix it)",
    ]
    lines += list(extra)
    lines += ["130  interrupted (Ctrl-C)"]
    return "\b\n" + "\n".join(lines)


# --------------------------------------------------------------------------- errors

DEBUG_ENV = "CRFOPT_DEBUG"


def _set_debug(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    if value:
        ctx.find_root().meta["crfopt.debug"] = True


def debug_option() -> click.Option:
    """``--debug``, accepted by the group and by every command (users add it at the end)."""
    return click.Option(
        ["--debug"],
        is_flag=True,
        expose_value=False,
        is_eager=True,
        callback=_set_debug,
        help=f"Show the Python traceback of an error (also: {DEBUG_ENV}=1).",
    )


def debug_requested(ctx: click.Context | None) -> bool:
    if os.environ.get(DEBUG_ENV, "").strip() not in ("", "0"):
        return True
    return bool(ctx is not None and ctx.find_root().meta.get("crfopt.debug"))


def describe_error(exc: BaseException) -> tuple[int, str]:
    """(exit status, message) of an error that reached the command line unhandled.

    Each cause gets its own message: a missing input names the file and how to get it,
    an unreachable scheduler names the address, an unwritable results folder says what
    to free or fix; anything else is unexpected. Messages are rich markup (escaped).
    """
    from crfopt.bench.backends import SchedulerUnreachableError
    from crfopt.bench.compare import ResultsNotWritableError
    from crfopt.data.paths import DataNotFoundError
    from crfopt.data.readers import DataFormatError
    from crfopt.data.sources import ChecksumError

    text = escape(str(exc))
    if isinstance(exc, DataNotFoundError):
        hint = ""
        if "crfopt fetch" not in str(exc):
            hint = (
                "\n  `crfopt fetch PROBLEM` downloads the files of a built-in problem whose "
                "source is known; otherwise put the file where the message says"
            )
        return 2, f"[red]error:[/] missing input: {text}{escape(hint)}"
    if isinstance(exc, ResultsNotWritableError):
        return 1, (
            f"[red]error:[/] {text}. Runs finished before this are kept; free space or fix "
            "permissions, then rerun."
        )
    if isinstance(exc, SchedulerUnreachableError):
        return EXIT_UNREACHABLE, f"[red]error:[/] {text}"
    if isinstance(exc, FileNotFoundError):
        return 2, f"[red]error:[/] missing input: {text}"
    if isinstance(exc, ChecksumError):
        return 2, f"[red]error:[/] input file is not the expected one: {text}"
    if isinstance(exc, DataFormatError):
        return 2, f"[red]error:[/] {text}"
    return 1, (
        f"[red]error:[/] unexpected {escape(type(exc).__name__)}: {text}\n"
        f"  rerun with --debug (or {DEBUG_ENV}=1) to see the traceback, and please report it"
    )


class CrfoptGroup(click.Group):
    """The command group: Ctrl-C in any command exits 130 (click's own default is 1),
    and an error no command turned into a message is described by :func:`describe_error`
    without a traceback (unless ``--debug`` or ``CRFOPT_DEBUG=1``)."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            err_console.print("[yellow]interrupted[/]")
            raise click.exceptions.Exit(130) from None
        except (click.exceptions.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except Exception as exc:
            if debug_requested(ctx):
                raise
            code, message = describe_error(exc)
            err_console.print(message)
            raise click.exceptions.Exit(code) from None


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n:.1f} TiB"  # pragma: no cover


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
