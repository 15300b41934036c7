"""Commands about models: ``train`` (one model, saved), ``tag`` and ``evaluate``."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import click
from rich.markup import escape
from rich.table import Table

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


@click.command(
    "train",
    short_help="Train one model and save it.",
    epilog=exit_codes("training failed or diverged (no model is saved)"),
)
@click.option("--problem", "problem_name", required=True, help="Problem name or corpus path.")
@click.option(
    "--optimizer",
    default="auto",
    show_default=True,
    help="Optimizer variant, or 'auto': the one crfopt's measured seconds say is fastest "
    "for this problem's size, ℓ1 weight and thread count (it prints its choice and why; "
    "docs/api/auto.md).",
)
@click.option(
    "--passes",
    type=float,
    default=None,
    help="Budget in effective passes [default: 30; with auto, 200 as a cap on top of its "
    "certified stop].",
)
@click.option(
    "--target-gap",
    type=float,
    default=None,
    help="Stop once the duality gap (every optimizer has one: a primal method's is that of "
    "its own iterate) is ≤ this × P(0), i.e. relative to the objective at w = 0 (the same "
    "meaning as CRF(target_gap=...); compare's --target-gap is absolute) [default: none; "
    "with auto, 1e-6].",
)
@click.option(
    "--seed", type=int, default=0, show_default=True, help="Seed of the optimizer's sampling."
)
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
@click.option(
    "--prune/--no-prune",
    default=True,
    show_default=True,
    help="Leave out of the saved model the attributes whose weights are all zero (as "
    "CRFsuite does; ℓ1 training leaves many): the same predictions from a smaller file. "
    "--no-prune keeps the whole dictionary.",
)
@l1_option
@corpus_options
@plugin_dir_option
def train_cmd(
    problem_name: str,
    optimizer: str,
    passes: float | None,
    target_gap: float | None,
    seed: int,
    sets: Sequence[str],
    model_path: str,
    quiet: bool,
    prune: bool,
    l1: float | None,
    corpus: dict[str, Any],
    plugin_dirs: Sequence[str],
) -> None:
    """Train one model and save it (weights, dictionaries, template, labels).

    Examples:

    \b
      crfopt train --problem conll2000 --model chunker.crfopt
      crfopt train --problem conll2000 --optimizer sdca-gap --passes 30 --model chunker.crfopt
      crfopt train --problem train.conll --encoding latin-1 --model mine.crfopt
    """
    from crfopt.apps import auto
    from crfopt.apps.train import TrainingError, train
    from crfopt.optim.contract import ParameterError
    from crfopt.optim.registry import UnknownNameError

    reg = build_registry(plugin_dirs)
    chosen = optimizer == auto.AUTO
    if not chosen:
        try:
            reg.optimizer(optimizer)
        except UnknownNameError as exc:
            raise click.BadParameter(
                f"{exc} (or {auto.AUTO!r}: crfopt picks one)", param_hint="--optimizer"
            ) from None
    # auto's pick is not known before the problem is: --set then names the problem only
    problem_sets, optimizer_sets = resolve_sets(
        sets, problems=[problem_name], optimizers=[] if chosen else [optimizer]
    )
    params = {
        **problem_sets.get(problem_name, {}),
        **corpus,
    }
    problem = load_problem_cli(reg, problem_name, with_l1(params, l1))
    optimizer_params = optimizer_sets.get(optimizer, {})
    if chosen:
        choice = auto.choose(problem)
        err_console.print(escape(choice.line()))
        optimizer, optimizer_params = choice.optimizer, dict(choice.params)
        if target_gap is None:
            target_gap = auto.DEFAULT_TARGET_GAP
        if passes is None:
            passes = auto.DEFAULT_PASSES
    elif passes is None:
        passes = DEFAULT_PASSES
    spec = reg.optimizer(optimizer)

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
        trained = train(
            problem,
            spec,
            passes=passes,
            target_gap=target_gap,
            seed=seed,
            params=optimizer_params,
            on_checkpoint=progress,
        )
    except (ParameterError, ValueError) as exc:
        raise click.UsageError(str(exc)) from None
    except TrainingError as exc:
        err_console.print(f"[red]error:[/] {escape(str(exc))}; no model saved")
        sys.exit(1)
    model = trained.model
    if chosen:
        model.training["auto"] = choice.reason
    info = model.training
    saved = model.pruned() if prune else model
    path = saved.save(model_path, prune=False)
    table = Table(title=escape(f"{optimizer} on {problem.name}"), show_header=False)
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
            table.add_row(key, f"{value:.6g}" if isinstance(value, float) else escape(str(value)))
    table.add_row("model", escape(f"{path} ({human_bytes(path.stat().st_size)})"))
    if prune:
        kept = len(saved.attributes)
        table.add_row(
            "attributes",
            f"{kept:,} saved, {len(model.attributes) - kept:,} with all weights zero left out",
        )
    console.print(table)
    gap = info.get("duality_gap")
    target = trained.absolute_target_gap
    if (
        target is not None
        and gap is not None
        and info.get("status") == "converged"
        and gap > target
    ):
        err_console.print(
            f"[yellow]note:[/] {escape(optimizer)} stopped on its own convergence test with a "
            f"duality gap of {gap:.3g}, above the target {target:.3g}: the target is not "
            "certified; rerun with the optimizer's own test off (e.g. --set "
            f"{escape(optimizer)}.tolerance=0 for SDCA) or with --optimizer auto"
        )
    if info.get("status") == "budget":
        from crfopt.bench.compare import FAR_FROM_OPTIMUM, distance_from_optimum

        found = distance_from_optimum(info, problem.primal_at_zero())
        if found is not None and found[2] > FAR_FROM_OPTIMUM:
            measure, value, relative = found
            err_console.print(
                f"[yellow]note:[/] training stopped on its budget of {passes:g} passes with "
                f"{measure} = {value:.3g} = {relative:.2g} × P(0): the model may be far from "
                "the optimum; raise --passes or set --target-gap"
            )
    if model.template is None:
        err_console.print(
            "[yellow]note:[/] this problem has no text template: `crfopt tag` cannot use the "
            "model; load it with crfopt.Model.load"
        )


#: ``crfopt train``'s pass budget for a named optimizer
DEFAULT_PASSES = 30.0


def _load_model(path: str):
    from crfopt.apps.model import Model, ModelFormatError

    try:
        return Model.load(path)
    except ModelFormatError as exc:
        raise click.BadParameter(str(exc), param_hint="--model") from None


def _apply_to_input(
    apply: Any, model_path: str, input_path: str, columns: str | None, encoding: str, labelled: bool
) -> tuple[Any, Any, str]:
    """(model, ``apply(model, corpus)``, input format) for ``tag`` and ``evaluate``; a
    model file, input or label set they cannot work with is a usage error."""
    from crfopt.apps.tagging import TaggingError, read_input
    from crfopt.data.readers import DataFormatError

    model = _load_model(model_path)
    try:
        corpus, fmt = read_input(
            model, input_path, columns=columns, encoding=encoding, labelled=labelled
        )
    except (DataFormatError, TaggingError) as exc:
        raise click.UsageError(str(exc)) from None
    for column, share, example in _unseen_columns(model, corpus):
        err_console.print(
            f"[yellow]warning:[/] column {escape(column)!r} of {escape(input_path)}: "
            f"{share:.0%} of its tokens hold values the model never saw there in training "
            f"(e.g. {escape(example)!r}); is the file in the model's layout "
            f"({escape(', '.join(corpus.columns))})? If not, name its columns with --columns"
        )
    try:
        return model, apply(model, corpus), fmt
    except TaggingError as exc:
        raise click.UsageError(str(exc)) from None


#: Above this share of tokens with values unknown to the model, a (closed-class) column
#: is more likely another column than new vocabulary: a `word label` file read as
#: `word pos` has labels where the model expects POS tags, all unseen.
UNSEEN_COLUMN_SHARE = 0.5


def _unseen_columns(model: Any, corpus: Any) -> list[tuple[str, float, str]]:
    """(column, share of tokens, an example) of each non-word column of ``corpus`` whose
    values at the token itself are mostly unknown to the model's attribute dictionary.

    Checked through the template's plain features at offset 0 (``pos[0]=NN``): the
    column counts may match the model's layout while the columns themselves do not.
    """
    from crfopt.apps.tagging import model_template
    from crfopt.data.readers import WORD_COLUMN

    try:
        template = model_template(model)
        tables = model.text_encoder().tables  # per feature: known value → column
    except Exception:  # no text template: tag/evaluate report that themselves
        return []
    out = []
    for feat, known in zip(template.features, tables):
        if len(feat.parts) != 1 or not isinstance(known, dict):
            continue
        part = feat.parts[0]
        if part.transform != "identity" or part.offset != 0 or part.column == WORD_COLUMN:
            continue
        if part.column not in corpus.columns:
            continue
        j = corpus.columns.index(part.column)
        values = [tok[j] for sent in corpus.sentences for tok in sent]
        unseen = [v for v in values if v not in known]
        if values and len(unseen) / len(values) > UNSEEN_COLUMN_SHARE:
            out.append((part.column, len(unseen) / len(values), unseen[0]))
    return out


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
    click.option(
        "--encoding",
        default="utf-8",
        show_default=True,
        help="Text encoding of INPUT, e.g. latin-1.",
    ),
]


def with_input_options(func: Any) -> Any:
    for option in reversed(input_options):
        func = option(func)
    return func


@click.command("tag", short_help="Tag a file with a trained model.", epilog=exit_codes())
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
    the model's label field (xpos or upos).

    Example:

    \b
      crfopt tag --model chunker.crfopt test.txt > tagged.txt
    """
    from crfopt.apps.tagging import tag_corpus, write_tagged

    model, predictions, fmt = _apply_to_input(
        tag_corpus, model_path, input_path, columns, encoding, labelled=False
    )
    label = (model.training.get("corpus") or {}).get("label")
    with click.open_file(out_path, "w", encoding="utf-8", atomic=out_path != "-") as out:
        write_tagged(input_path, fmt, predictions, out, label=label, encoding=encoding)


@click.command("evaluate", short_help="Score a model on a labelled file.", epilog=exit_codes())
@with_input_options
@click.option("--json", "as_json", is_flag=True, help="Print the scores as JSON.")
def evaluate_cmd(
    input_path: str, model_path: str, columns: str | None, encoding: str, as_json: bool
) -> None:
    """Score the model on labelled INPUT: token accuracy, and chunk/entity precision,
    recall and F1 as CoNLL's conlleval counts them (for IOB/IOE label sets).

    Example:

    \b
      crfopt evaluate --model chunker.crfopt test.txt
    """
    import json

    from crfopt.apps.tagging import evaluate_corpus, is_chunk_tagset

    model, scores, _ = _apply_to_input(
        evaluate_corpus, model_path, input_path, columns, encoding, labelled=True
    )
    chunked = is_chunk_tagset(model.labels)
    result = scores.as_dict()
    if not chunked:
        result = {k: result[k] for k in ("tokens", "accuracy")}
    if as_json:
        click.echo(json.dumps(result, indent=2))
        return
    table = Table(title=escape(f"{model_path} on {input_path}"))
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
            if not kind:  # untyped chunks (B I O): the row above already
                continue
            p, r, f = scores.prf(gold, pred, right)
            table.add_row(
                escape(kind),
                f"{100 * p:.2f}",
                f"{100 * r:.2f}",
                f"{100 * f:.2f}",
                str(gold),
                str(pred),
            )
        console.print(table)
