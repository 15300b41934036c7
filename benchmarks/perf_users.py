"""Sections ``L1`` and ``tagging``: what a sklearn-crfsuite or CRFsuite user meets, ℓ1
fits and a model search against sklearn-crfsuite (benchmarks/l1_search.py), tagging
speed and a trained model's memory against CRFsuite's tagger (benchmarks/bench_tagging.py)."""

from __future__ import annotations

import argparse

from harness import label_of, mib, ok_mark, problems_of, skipped_note
from targets import TAGGING_TARGET


def l1(args: argparse.Namespace) -> dict:
    """benchmarks/l1_search.py's measurements (sklearn-crfsuite and the NER data needed)."""
    try:
        import sklearn_crfsuite  # noqa: F401
    except ImportError:
        return {"skipped": "sklearn-crfsuite is not installed (the bench extra)"}
    import l1_search

    from crfopt.data.sources import DataNotFoundError

    try:
        return l1_search.measure(args.rounds)
    except DataNotFoundError as exc:
        return {"skipped": f"CoNLL-2002 Dutch is missing ({exc.__class__.__name__})"}


def tagging(args: argparse.Namespace) -> dict:
    """bench_tagging.py's measurement: the tagging table (CoNLL-2000) and the memory
    table (CoNLL-2000 and POS-EWT), every CRFsuite figure from the same run."""
    import bench_tagging

    problems = problems_of(args, bench_tagging.PROBLEMS)
    if not problems:
        return {"skipped": f"--problems names none of {', '.join(bench_tagging.PROBLEMS)}"}
    return bench_tagging.measure(
        problems, rounds=args.rounds, retrain_crfsuite=args.retrain_crfsuite
    )


#: the tagging table's comparisons: (ratio key, crfopt's row, CRFsuite's row, title)
TAGGING_ROWS = [
    ("tag", "crfopt tag", "crfsuite tag", "`crfopt tag` vs CRFsuite's `Tagger.tag`"),
    ("predict", "CRF.predict", "crfsuite tag (dicts)", "`CRF.predict` vs `Tagger.tag` (dicts)"),
    (
        "marginals",
        "CRF.predict_marginals",
        "crfsuite marginals",
        "`CRF.predict_marginals` vs `Tagger.marginal`",
    ),
]


def tagging_section(r: dict) -> list[str]:
    lines = ["## Tagging and the memory of a trained model", ""]
    if skipped_note(r, lines, "Tagging"):
        return lines
    st = r["settings"]
    lines += [
        f"Each tool trains its own model on the same attributes (crfopt's template; CRFsuite "
        f"gets the bias block as three attributes): L-BFGS for {st['iterations']} iterations "
        f"at c2 = nλ/2 (ℓ2), and OWL-QN as long with c1 = {st['c1']:g} (ℓ1 + ℓ2, crfopt's "
        "σ = c1/n); benchmarks/bench_tagging.py's docstring gives the details.",
        "",
    ]
    sp = r.get("speed")
    if sp:
        lines += [
            f"Tokens per second on the {label_of(sp['problem'])} test set ({sp['tokens']:,} "
            f"tokens, {sp['sentences']:,} sentences), ℓ2 models, the best of {sp['rounds']} "
            "rounds alternating the taggers. crfopt's featurization encodes the text into "
            "the model's columns; CRFsuite's forms the attribute strings (crfopt's template "
            "code, `crfopt tag` rows only) and runs `Tagger.set`, which converts the items, "
            "looks the attributes up and computes the state scores. Decoding: crfopt's "
            "scores and Viterbi (or forward–backward and the dicts of marginals); CRFsuite's "
            "`Tagger.tag()` (or its `Tagger.marginal` calls) after `set`. The ratio is "
            "crfopt's total rate over CRFsuite's, paired within each round: the median "
            "(range) over the rounds.",
            "",
            "| | featurization | decoding | total | vs CRFsuite | |",
            "|---|---|---|---|---|---|",
        ]
        for what, ours, base, title in TAGGING_ROWS:
            lines.append(f"| *{title}* | | | | | |")
            b = sp["rows"][f"{base}, 1 thread"]
            lines.append(
                f"| CRFsuite | {b['featurize_tok_s']:,.0f} | {b['decode_tok_s']:,.0f} | "
                f"{b['total_tok_s']:,.0f} | 1 | |"
            )
            for k, label in ((1, "1 thread"), (2, "2 threads")):
                o = sp["rows"][f"{ours}, {label}"]
                q = sp["ratios"][f"{what}|{k}"]
                check = f" {ok_mark(q['median'] >= TAGGING_TARGET)} |" if k == 1 else " |"
                lines.append(
                    f"| crfopt, {label} | {o['featurize_tok_s']:,.0f} | "
                    f"{o['decode_tok_s']:,.0f} | {o['total_tok_s']:,.0f} | "
                    f"**{q['median']:.2f}×** ({q['min']:.2f}–{q['max']:.2f}) |{check}"
                )
        ot = sp["one_time"]
        acc = sp.get("accuracy") or {}
        ps = sp.get("per_sentence")
        lines += [
            "",
            *(
                [
                    f"One sentence per call (`CRF.predict_single` against `Tagger.tag`, the "
                    f"whole call, 1 thread): crfopt {ps['crfopt']:,.0f} tokens/s, CRFsuite "
                    f"{ps['crfsuite']:,.0f}, **{ps['ratio']:.2f}×** (no target; a call's "
                    "fixed cost weighs on a sentence of 24 tokens).",
                    "",
                ]
                if ps
                else []
            ),
            f"Once per model: crfopt reads its file in {ot['crfopt_load_s']:.2f} s and builds "
            f"its lookup tables in {ot['crfopt_encoder_tables_s']:.2f} s (template) / "
            f"{ot['crfopt_vocabulary_s']:.2f} s (dicts); CRFsuite opens its file in "
            f"{ot['crfsuite_open_s']:.3f} s. "
            + (
                f"Test accuracy of the two models: crfopt {100 * acc['crfopt']:.2f} %, "
                f"CRFsuite {100 * acc['crfsuite']:.2f} % (their tags agree on "
                f"{100 * sp['crfopt_crfsuite_agreement']:.2f} % of the tokens). "
                if acc
                else ""
            )
            + "Load average (1 min) over the rounds: "
            + ", ".join(f"{x:.2f}" for x in sp["load_1min_rounds"])
            + ".",
            "",
        ]
    lines += [
        "The saved model and a tagger process on the test set: crfopt's file as saved "
        "(attributes whose weights are all zero left out; unpruned in parentheses) and "
        "CRFsuite's; the peak resident memory (VmHWM) of `crfopt tag` and of a Python "
        "process tagging the same attribute strings with CRFsuite, with each process's "
        "resident memory before it opens the model in parentheses (the interpreter and "
        "libraries: numba and NumPy for crfopt), and each process's wall time.",
        "",
        "| | crfopt file | CRFsuite file | crfopt attributes saved / all | CRFsuite features "
        "| crfopt tagger peak | CRFsuite tagger peak | crfopt process | CRFsuite process |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, m in r["memory"].items():
        for kind, title in (("l2", "ℓ2"), ("l1", "ℓ1 + ℓ2")):
            x = m[kind]
            co, cs = x["crfopt_tagger"], x["crfsuite_tagger"]
            feats = x.get("crfsuite_active_features")
            lines.append(
                f"| {label_of(name)}, {title} | {mib(x['crfopt_file'])} "
                f"({mib(x['crfopt_file_unpruned'])}) | {mib(x['crfsuite_file'])} | "
                f"{x['crfopt_attributes_saved']:,} / {x['crfopt_attributes']:,} | "
                + (f"{feats:,}" if feats is not None else "—")
                + f" | {mib(co['peak_rss'])} ({mib(co['rss_before_model'])}) | "
                f"{mib(cs['peak_rss'])} ({mib(cs['rss_before_model'])}) | "
                f"{co['wall_s']:.1f} s | {cs['wall_s']:.1f} s |"
            )
    return [*lines, ""]


def l1_section(r: dict) -> list[str]:
    import l1_search

    lines: list[str] = []
    if skipped_note(r, lines, "ℓ1 and search"):
        return ["## ℓ1 and search", "", *lines]
    return l1_search.table(r)
