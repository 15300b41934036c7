"""Seconds per effective pass of the docs' lazy SAG plugin against the built-in sag-nus-star.

The plugin is the code block of docs/plugins.md ("A compiled, sparse, lazy example"),
written to a temporary folder exactly as a user would save it. Both optimizers run in
this process on fresh copies of the same problem, single-threaded, each warmed up
(numba compiled on a tiny problem, then one untimed epoch). Then epochs of n iterations
alternate between the two (the order flips every round, so a machine whose load drifts
does not favour one); an epoch's time is divided by the effective passes it made,
(oracle calls + forward calls)/n, which charges line-search trials in full (SBA15 §6).
The figure is the ratio of the two medians; the spread is the range of the per-round
ratios.

    CRFOPT_DATA=/path/to/datasets python benchmarks/plugin_example.py --epochs 9
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))  # docs_examples: the docs' code blocks
sys.path.insert(0, str(HERE))  # conftest: thread control shared with the benchmarks

BASELINE = "sag-nus-star"
EXAMPLE = "my-lazy-sag"


def time_epoch(optimizer, problem) -> tuple[float, float]:
    """(wall seconds, effective passes) of one epoch of n iterations."""
    c = problem.counters
    before = c.effective_passes
    t0 = time.perf_counter()
    optimizer.run_block(problem.n)
    seconds = time.perf_counter() - t0
    return seconds, c.effective_passes - before


def measure(problem_name: str, epochs: int) -> dict[str, list[tuple[float, float]]]:
    from docs_examples import write_lazy_sag_plugin

    import crfopt
    from crfopt.bench.runner import warm_up

    from conftest import threads

    problem = crfopt.load_problem(problem_name)
    with tempfile.TemporaryDirectory() as tmp:
        write_lazy_sag_plugin(Path(tmp))
        registry = crfopt.get_registry([tmp])
        optimizers = {}
        with threads(1):
            for name in (BASELINE, EXAMPLE):
                spec = registry.optimizer(name)
                q = problem.with_lam(problem.lam)  # fresh counters, same data
                warm_up(spec, spec.resolve({}), q)
                with q.initialization():
                    opt = spec.create(q, 0, {})
                opt.run_block(q.n)  # untimed first epoch: first visits, caches
                optimizers[name] = (opt, q)
            times: dict[str, list[tuple[float, float]]] = {BASELINE: [], EXAMPLE: []}
            for r in range(epochs):
                order = (BASELINE, EXAMPLE) if r % 2 == 0 else (EXAMPLE, BASELINE)
                for name in order:
                    opt, q = optimizers[name]
                    times[name].append(time_epoch(opt, q))
    return times


def main(argv: list[str] | None = None) -> float:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problem", default="sag4crf-conll")
    parser.add_argument("--epochs", type=int, default=7, help="timed epochs per optimizer")
    args = parser.parse_args(argv)
    if args.epochs < 1:
        parser.error("--epochs must be at least 1")
    epochs = measure(args.problem, args.epochs)
    per_pass = {name: [s / p for s, p in runs] for name, runs in epochs.items()}
    base, ex = per_pass[BASELINE], per_pass[EXAMPLE]
    per_round = [e / b for e, b in zip(ex, base)]
    ratio = statistics.median(ex) / statistics.median(base)
    print(f"problem {args.problem}, {args.epochs} timed epochs each, 1 thread")
    for name, ts in per_pass.items():
        passes = statistics.mean(p for _, p in epochs[name])
        print(
            f"  {name:<14s} median {statistics.median(ts) * 1e3:8.1f} ms per effective pass"
            f"  (min {min(ts) * 1e3:.1f}, max {max(ts) * 1e3:.1f});"
            f" {passes:.2f} effective passes per epoch of n iterations"
        )
    print(
        f"ratio {EXAMPLE} / {BASELINE} of medians: {ratio:.3f}"
        f"  (per-round ratios {min(per_round):.3f} to {max(per_round):.3f})"
    )
    return ratio


if __name__ == "__main__":
    main()
