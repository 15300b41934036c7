"""How often SDCA's line search rejects its first Newton step (docs/algorithms.md §7.14).

crfopt's safeguarded Newton search narrows its bracket with its first evaluation; REF and
*rtsafe* do not, and when the first Newton step leaves (0, 1) they evaluate the start
point a second time. This script counts the searches where that happens, so the
difference in ``ls_evals`` between the two rules is a measured figure:

    CRFOPT_DISABLE_JIT=1 python reports/first_newton_step.py            # sdca-gap on OCR
    CRFOPT_DISABLE_JIT=1 python reports/first_newton_step.py --problem conll2000 \\
        --iterations 3000 --optimizer "sdca-gap[start=previous]"

It runs on the pure-NumPy path, where the plugin's search is a Python function that this
script wraps: each search's first Newton step is formed once more from the same tables
(outside the counters, so the run counts what it always counts) and checked against
the safeguard. Printed: searches, first steps rejected, evaluations, and the share of
evaluations REF's rule would add, per block of ``--every`` iterations and overall.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import crfopt
from crfopt.kernels.jit import JIT_ENABLED
from crfopt.optim.parse import parse_selection

HERE = Path(__file__).resolve().parent


def count(
    problem: crfopt.CRFProblem, optimizer: str, iterations: int, every: int, seed: int = 0
) -> list[dict[str, int]]:
    """Per block of ``every`` iterations: searches, first Newton steps rejected, and
    line-search evaluations (as the run counts them)."""
    if JIT_ENABLED:
        raise RuntimeError(
            "the search is compiled into the SDCA loop with the JIT on: run with "
            "CRFOPT_DISABLE_JIT=1 (the NumPy path runs the same search; its iterates agree "
            "with the compiled ones to rounding)"
        )
    from crfopt.optim.dual import search  # where SDCA's Newton search lives (crfopt.dual)

    tally = {"searches": 0, "rejected": 0}
    rtsafe = search._rtsafe

    def wrapped(x0, sub_precision, max_iter, lna, sc, T, K, seg, m, tau):
        newton = search._newton_step(x0, 1.0, 0.0, sc, T, K, lna, seg, m, tau)[0]
        candidate = x0 - newton
        # the safeguard of the first step: inside the bracket (0, 1), at most half the
        # initial step history (1)
        tally["searches"] += 1
        tally["rejected"] += 0 if (0.0 < candidate < 1.0 and abs(newton) <= 0.5) else 1
        return rtsafe(x0, sub_precision, max_iter, lna, sc, T, K, seg, m, tau)

    name, overrides = parse_selection(optimizer)
    with problem.initialization():
        opt = crfopt.get_registry().optimizer(name).create(problem, seed, overrides)
    blocks = []
    search._rtsafe = wrapped
    try:
        done = 0
        while done < iterations:
            k = min(every, iterations - done)
            before = problem.counters.snapshot()
            tally.update(searches=0, rejected=0)
            opt.run_block(k)
            evals = problem.counters.snapshot().ls_evals - before.ls_evals
            blocks.append({"iterations": k, **tally, "ls_evals": int(evals)})
            done += k
    finally:
        search._rtsafe = rtsafe
        opt.close()
    return blocks


def table(blocks: list[dict[str, int]]) -> list[str]:
    """Markdown rows per block and overall."""
    lines = [
        "| iterations | searches | first step rejected | evaluations | REF's rule adds |",
        "|---|---|---|---|---|",
    ]
    start = 0
    total = {"searches": 0, "rejected": 0, "ls_evals": 0}

    def row(label: str, b: dict[str, int]) -> str:
        share = b["rejected"] / b["ls_evals"] if b["ls_evals"] else 0.0
        return (
            f"| {label} | {b['searches']} | {b['rejected']} "
            f"({b['rejected'] / max(b['searches'], 1):.2%}) | {b['ls_evals']} | {share:.2%} |"
        )

    for b in blocks:
        lines.append(row(f"{start + 1}–{start + b['iterations']}", b))
        start += b["iterations"]
        for key in total:
            total[key] += b[key]
    lines.append(row("all", total))
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--problem", default="ocr")
    ap.add_argument("--optimizer", default="sdca-gap", help='e.g. "sdca-gap[start=previous]"')
    ap.add_argument("--iterations", type=int, default=6000)
    ap.add_argument("--every", type=int, default=1500, help="iterations per table row")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    os.environ.setdefault("CRFOPT_DATA", str(HERE.parent.parent / "shared" / "datasets"))
    problem = crfopt.load_problem(args.problem)
    try:
        blocks = count(problem, args.optimizer, args.iterations, args.every, args.seed)
    except RuntimeError as err:
        sys.exit(f"reports/first_newton_step.py: {err}")
    print(f"{args.optimizer} on {args.problem}, seed {args.seed}\n")
    print("\n".join(table(blocks)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
