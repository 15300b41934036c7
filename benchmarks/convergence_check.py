"""Per-pass convergence of new defaults against old ones, on the real problems.

    python benchmarks/convergence_check.py [--problems ocr,conll2000,ner-nl]
        [--optimizer sdca-gap] [--old start=half] [--new ""]

Issue 47's rule for a speed change that moves the iterates within the method's own
tolerance: over 3 seeds, the new defaults' median relative sub-optimality after 5, 10
and 20 effective passes must lie within the old defaults' min–max over the same seeds
(``crfopt.bench.convergence.per_pass_check``). Prints a Markdown table per problem and
a JSON line with the figures; counts, not seconds, so a loaded machine changes nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
os.environ.setdefault("CRFOPT_DATA", str(HERE.parent.parent / "shared" / "datasets"))

import crfopt  # noqa: E402
from crfopt.bench.convergence import PASSES, SEEDS, per_pass_check  # noqa: E402
from crfopt.optim.parse import parse_value  # noqa: E402


def parse_overrides(text: str) -> dict:
    """``k=v,k2=v2`` as parameter overrides (values read as the CLI's ``--set`` reads them)."""
    pairs = (item.split("=", 1) for item in text.split(",") if item.strip())
    return {k.strip(): parse_value(v.strip()) for k, v in pairs}


def table(problem: str, df) -> list[str]:
    lines = [
        f"| {problem} | passes | old min | old median | old max | new median | within |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in df.itertuples():
        verdict = "yes" if r.within else ("below (faster)" if r.not_worse else "**above**")
        lines.append(
            f"| | {r.passes:g} | {r.old_min:.3e} | {r.old_median:.3e} | {r.old_max:.3e} | "
            f"{r.new_median:.3e} | {verdict} |"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--problems", default="ocr,conll2000,ner-nl")
    parser.add_argument("--optimizer", default="sdca-gap")
    parser.add_argument("--old", default="start=half", help="k=v,... overrides")
    parser.add_argument("--new", default="", help="k=v,... overrides ('' = the defaults)")
    args = parser.parse_args(argv)
    old = parse_overrides(args.old) if args.old else {}
    new = parse_overrides(args.new) if args.new else {}
    out = {}
    for name in args.problems.split(","):
        problem = crfopt.load_problem(name)
        df = per_pass_check(problem, args.optimizer, old, new, seeds=SEEDS, passes=PASSES)
        print("\n".join(table(name, df)), end="\n\n", flush=True)
        out[name] = df.to_dict(orient="list")
    print(json.dumps({"optimizer": args.optimizer, "old": old, "new": new, "results": out}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
