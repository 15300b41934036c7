"""E2 (LPL18 §6.2, Fig. 8): line-search evaluations per SDCA iteration, as a distribution.

``numbers.md`` gives each SDCA variant's *mean* evaluations per iteration over a run.
LPL18 says sub-precision 0.01 or 0.001 "takes on average 2 iterations", but its code
(sdca4crf) logs the count of a single iteration once every n/5 iterations, so its curve
is a sample of single iterations, not a mean (reports/verdicts_notes.md, E2). This script
runs one SDCA variant step by step and prints, pass by pass, the share of iterations
that took 0, 1, 2, 3 and 4 or more evaluations, with their median and mean:

    python reports/line_search_evals.py                        # sdca-gap on OCR, 10 passes
    python reports/line_search_evals.py --problem ner-nl --passes 5 \\
        --optimizer "sdca-gap[sub_precision=0.01]"

It reads the core's ``ls_evals`` and ``iterations`` counters around each
``run_block(1)``; a step that exits at γ = 0 or 1 without evaluating counts 0.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np

import crfopt
from crfopt.optim.parse import parse_selection

HERE = Path(__file__).resolve().parent
#: columns of the table: 0, 1, 2, 3 evaluations, then "4 or more"
BINS = 4


def evaluations_per_iteration(
    problem: crfopt.CRFProblem, optimizer: str, passes: float, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """(evaluations, pass index) of every iteration of ``passes`` passes, one step at a time.

    The pass index of an iteration is the effective pass it started in (0-based)."""
    name, overrides = parse_selection(optimizer)
    spec = crfopt.get_registry().optimizer(name)
    with problem.initialization():  # the start's work is counted apart, as the runner does
        opt = spec.create(problem, seed, overrides)
    try:
        return _step_by_step(problem, opt, optimizer, passes)
    finally:
        opt.close()


def _step_by_step(
    problem: crfopt.CRFProblem, opt: crfopt.Optimizer, optimizer: str, passes: float
) -> tuple[np.ndarray, np.ndarray]:
    counters = problem.counters
    total = int(passes * problem.n)
    evals = np.zeros(total, dtype=np.int64)
    where = np.zeros(total, dtype=np.int64)
    for t in range(total):
        before = counters.snapshot()
        opt.run_block(1)
        after = counters.snapshot()
        if after.iterations != before.iterations + 1:
            raise RuntimeError(
                f"{optimizer}: run_block(1) made {after.iterations - before.iterations} "
                "iterations; this count needs exactly one"
            )
        evals[t] = after.ls_evals - before.ls_evals
        where[t] = int(before.effective_passes)
        if getattr(opt, "converged", False):
            return evals[: t + 1], where[: t + 1]
    return evals, where


def table(evals: np.ndarray, where: np.ndarray) -> list[str]:
    """Markdown rows: per pass and overall, the share of iterations per evaluation count."""
    head = [str(k) for k in range(BINS)] + [f"≥{BINS}"]
    lines = [
        "| pass | iterations | " + " | ".join(head) + " | median | mean |",
        "|---" * (len(head) + 4) + "|",
    ]

    def row(label: str, e: np.ndarray) -> str:
        counts = np.bincount(np.minimum(e, BINS), minlength=BINS + 1)
        shares = " | ".join(f"{c / len(e):.1%}" for c in counts)
        return f"| {label} | {len(e)} | {shares} | {np.median(e):g} | {e.mean():.2f} |"

    for p in np.unique(where):
        lines.append(row(str(p + 1), evals[where == p]))
    lines.append(row("all", evals))
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--problem", default="ocr")
    ap.add_argument("--optimizer", default="sdca-gap", help='e.g. "sdca-gap[sub_precision=0.01]"')
    ap.add_argument("--passes", type=float, default=10)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    os.environ.setdefault("CRFOPT_DATA", str(HERE.parent.parent / "shared" / "datasets"))
    problem = crfopt.load_problem(args.problem)
    evals, where = evaluations_per_iteration(problem, args.optimizer, args.passes, args.seed)
    print(
        f"{args.optimizer} on {args.problem}, seed {args.seed}: line-search evaluations per "
        f"iteration over {len(evals)} iterations\n"
    )
    print("\n".join(table(evals, where)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
