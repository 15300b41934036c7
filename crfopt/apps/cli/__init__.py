"""The ``crfopt`` command line (docs/architecture.md "Public surface").

One module per command family: :mod:`.problems` (list, info, optimum, fetch),
:mod:`.compare` (compare, report), :mod:`.models` (train, tag, evaluate), :mod:`.kernels`
(compile); what they share (options, the one ``--set`` resolver, consoles, exit codes) is
in :mod:`.options`.

Exit codes, the same for every command (each command's ``--help`` lists its own):
0 success; 1 the command ran but its work failed (a run failed or diverged in
``compare``, training failed, a file could not be fetched, results could not be written)
or an unexpected error; 2 usage or input error (a missing input file included), saying
what was wrong and how to fix it; 3 the Dask scheduler given cannot be reached;
130 interrupted (Ctrl-C). No traceback is printed unless ``--debug`` or ``CRFOPT_DEBUG=1``.
"""

from __future__ import annotations

import sys

import click

from crfopt._version import __version__
from crfopt.apps.cli import compare, kernels, models, problems
from crfopt.apps.cli.options import (
    CrfoptGroup,
    debug_option,
    exit_codes,
    parse_sets,
    resolve_sets,
)

__all__ = ["main", "parse_sets", "resolve_sets", "run"]


@click.group(
    cls=CrfoptGroup,
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog=exit_codes("the command's work failed (see each command's --help)"),
)
@click.version_option(__version__, prog_name="crfopt")
@click.option(
    "--debug",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=debug_option().callback,
    help="Show the Python traceback of an error (also: CRFOPT_DEBUG=1).",
)
def main() -> None:
    """Train linear-chain CRFs and compare their optimizers on equal terms."""


for _command in (
    problems.list_cmd,
    problems.info_cmd,
    problems.optimum_cmd,
    problems.fetch_cmd,
    kernels.compile_cmd,
    compare.compare_cmd,
    compare.report_cmd,
    models.train_cmd,
    models.tag_cmd,
    models.evaluate_cmd,
):
    _command.params.append(debug_option())
    main.add_command(_command)


def run() -> None:  # pragma: no cover - console entry for `python -m crfopt`
    sys.exit(main())
