"""``crfopt compile``: compile the numba kernels once, ahead of the first comparison."""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence

import click
from rich.markup import escape

from crfopt.apps.cli.options import (
    build_registry,
    console,
    err_console,
    exit_codes,
    plugin_dir_option,
)


@click.command(
    "compile",
    short_help="Compile the kernels once, after installing.",
    epilog=exit_codes("an optimizer failed to run on the tiny problems (the others compiled)"),
)
@click.option(
    "--optimizers",
    default=None,
    metavar="NAMES",
    help="Comma-separated variants to compile for (default: every registered variant).",
)
@click.option(
    "--kinds",
    default="dense,sparse",
    show_default=True,
    help="Problem kinds to compile for: dense attributes (ocr) and/or sparse ones (the "
    "text corpora).",
)
@plugin_dir_option
def compile_cmd(optimizers: str | None, kinds: str, plugin_dirs: Sequence[str]) -> None:
    """Compile every kernel a comparison runs into numba's on-disk cache, so that the
    first `crfopt compare` or `CRF.fit` starts at once instead of compiling for about two
    minutes. Run once after installing (and after upgrading crfopt or numba); later
    processes load the machine code. The cache is numba's: NUMBA_CACHE_DIR if set, else
    __pycache__ folders beside the package's modules.

    Examples:

    \b
      crfopt compile
      crfopt compile --optimizers sdca-gap,sag-nus,oeg --kinds dense
    """
    from crfopt.bench.warmup import KINDS, compile_kernels
    from crfopt.kernels.jit import JIT_ENABLED

    if not JIT_ENABLED:
        console.print("the JIT is disabled (CRFOPT_DISABLE_JIT): nothing to compile")
        return
    chosen = [k.strip() for k in kinds.split(",") if k.strip()]
    unknown = [k for k in chosen if k not in KINDS]
    if unknown or not chosen:
        raise click.BadParameter(
            f"unknown kind(s) {', '.join(unknown) or '(none given)'}; choose from "
            f"{', '.join(KINDS)}",
            param_hint="--kinds",
        )
    reg = build_registry(plugin_dirs)
    names = [n.strip() for n in optimizers.split(",") if n.strip()] if optimizers else None
    if names:
        from crfopt.optim.registry import UnknownNameError

        for name in names:
            try:
                reg.optimizer(name)
            except UnknownNameError as exc:
                raise click.BadParameter(str(exc), param_hint="--optimizers") from None
    t0 = time.perf_counter()
    failures = compile_kernels(
        names, chosen, registry=reg, progress=lambda m: console.print(escape(m))
    )
    seconds = time.perf_counter() - t0
    if failures:
        for label, error in failures.items():
            err_console.print(f"[red]{escape(label)}: {escape(error)}[/]")
        sys.exit(1)
    console.print(f"kernels compiled and cached in {seconds:.0f} s")
