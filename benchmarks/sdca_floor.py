"""How cheap can an exact-iterate ``sdca-gap`` epoch be? Its transcendental floor, measured.

    python benchmarks/sdca_floor.py [--problems ocr,conll2000] [--rounds 5]

Issue 19 asks for ``sdca-gap`` epochs of at most 4 (OCR) and 3 (CoNLL-2000) full
value+gradient passes while every iterate stays what it was (traces equal to rounding).
An iteration that keeps its iterates must do, for each entry of sequence i's node and
pairwise tables (docs/algorithms.md §3.1–3.2):

* one oracle call, for ν_i;
* one exp, to bring μ_i back from its stored logs (or, with μ_i stored in linear form,
  one log for the KLs g_i and r_i: one transcendental either way, unless both forms are
  stored, which doubles the duals' memory);
* one log per Newton evaluation: f'(γ) = ⟨δ, log ν - log(μ + γδ)⟩ needs log(μ + γδ) at
  every evaluated γ, and no evaluation can be skipped without moving γ;
* one log at the step taken, the log μ_γ stored for the next visit.

The floor adds exactly those, each timed alone in a compiled loop over every sequence
of the problem (a sequence's tables at a time, so they stay in cache, as in the real
loop): the oracle sweep (``kernels.oracle_marginals``), ``vlog`` and ``vexp`` over
tables the size of each sequence's. The number of Newton evaluations per iteration is
the one the measured epochs themselves made (the ``LS_EVALS`` counter). Nothing else
is counted: no reading or writing of the stored duals, no KLs, no direction, no update
of w, so a real epoch costs more than its floor. Everything is CPU seconds on one
thread, the least over ``--rounds``, in full passes measured in the same process.
Printed: a Markdown table (docs and reports/performance_notes.md quote it).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numba
import numpy as np
from threadpoolctl import threadpool_limits

import crfopt
from crfopt import jit, kernels
from crfopt.kernels.counters import ITERATIONS, LS_EVALS
from crfopt.kernels.vmath import vexp, vlog


@jit(cache=False)  # a script's module has no importable name for numba's cache
def _oracle_sweep(data, counters, w, K, max_len):
    """ν_i for every sequence: the oracle work of one SDCA epoch (n draws, one each)."""
    ln = np.empty((max_len, K))
    le = np.empty((max(max_len - 1, 1), K, K))
    nn = np.empty((max_len, K))
    ne = np.empty((max(max_len - 1, 1), K, K))
    n = data.offsets.shape[0] - 1
    acc = 0.0
    for i in range(n):
        acc += kernels.oracle_marginals(data, counters, i, w, ln, le, nn, ne)[0]
    return acc


@jit(cache=False)  # a script's module has no importable name for numba's cache
def _log_sweep(offsets, K, x, out):
    """One log per node and pairwise entry of every sequence, a sequence at a time."""
    n = offsets.shape[0] - 1
    for i in range(n):
        T = offsets[i + 1] - offsets[i]
        vlog(x, out, (T - 1) * K * K + T * K)


@jit(cache=False)  # a script's module has no importable name for numba's cache
def _exp_sweep(offsets, K, x, out):
    """One exp per node and pairwise entry of every sequence, a sequence at a time."""
    n = offsets.shape[0] - 1
    for i in range(n):
        T = offsets[i + 1] - offsets[i]
        vexp(x, out, (T - 1) * K * K + T * K)


def _least(f: Callable[[], object], rounds: int) -> float:
    best = np.inf
    for _ in range(rounds):
        c0 = time.process_time()
        f()
        best = min(best, time.process_time() - c0)
    return float(best)


def floor(problem: crfopt.CRFProblem, rounds: int = 5) -> dict[str, float]:
    """Measure one problem: full pass, ``sdca-gap`` epoch, its evaluations and its floor
    (CPU seconds; the sweeps' oracle calls are counted apart from the problem's)."""
    K = problem.n_labels
    data = problem.data
    max_len = int(data.max_len)
    w = problem.zeros()
    problem.value_and_gradient(w)
    full_pass = _least(lambda: problem.value_and_gradient(w), rounds)

    opt = crfopt.get_registry().optimizer("sdca-gap").create(problem, 0, {})
    opt.run_block(50)  # compile and warm up, as benchmarks/before_after.py does
    before = problem.counters.array.copy()
    epoch = _least(lambda: opt.run_block(problem.n), rounds)
    made = problem.counters.array - before
    evals = float(made[LS_EVALS] / made[ITERATIONS])

    size = (max_len - 1) * K * K + max_len * K
    rng = np.random.default_rng(0)
    probabilities = rng.random(size) * 0.999 + 1e-12  # positive normals: vlog's fast path
    logs = np.log(probabilities)
    out = np.empty(size)
    counters = np.zeros_like(problem.counters.array)  # the sweep's calls are not the run's
    w_run = np.ascontiguousarray(opt.w)
    _oracle_sweep(data, counters, w_run, K, max_len)
    _log_sweep(data.offsets, K, probabilities, out)
    _exp_sweep(data.offsets, K, logs, out)
    oracle = _least(lambda: _oracle_sweep(data, counters, w_run, K, max_len), rounds)
    log = _least(lambda: _log_sweep(data.offsets, K, probabilities, out), rounds)
    exp = _least(lambda: _exp_sweep(data.offsets, K, logs, out), rounds)
    lower = oracle + (evals + 1.0) * log + exp
    return {
        "full_pass_s": full_pass,
        "epoch_s": epoch,
        "evals_per_iteration": evals,
        "oracle_s": oracle,
        "log_s": log,
        "exp_s": exp,
        "floor_s": lower,
        "floor_both_forms_s": oracle + (evals + 1.0) * log,
    }


def table(
    results: dict[str, dict[str, float]],
    targets: dict[str, float],
    label: Callable[[str], str] = str,
) -> list[str]:
    """The Markdown table of :func:`floor`'s figures in full passes, beside the epoch
    ``targets`` (problems named by ``label``)."""
    lines = [
        "| | full pass (s) | `sdca-gap` epoch | Newton evaluations per iteration | oracle sweep "
        "| log sweep | exp sweep | floor | floor, μ stored in both forms | target |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, r in results.items():
        fp = r["full_pass_s"]
        goal = targets.get(name)
        lines.append(
            f"| {label(name)} | {fp:.4f} | {r['epoch_s'] / fp:.2f} "
            f"| {r['evals_per_iteration']:.2f} "
            f"| {r['oracle_s'] / fp:.2f} | {r['log_s'] / fp:.2f} | {r['exp_s'] / fp:.2f} "
            f"| **{r['floor_s'] / fp:.2f}** | {r['floor_both_forms_s'] / fp:.2f} "
            f"| {'' if goal is None else f'≤ {goal:g}'} |"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--problems", default="ocr,conll2000", help="comma-separated")
    parser.add_argument("--rounds", type=int, default=5, help="repetitions; the least counts")
    args = parser.parse_args(argv)
    numba.set_num_threads(1)  # epochs are single-threaded: so is their unit
    with threadpool_limits(1):
        results = {
            name: floor(crfopt.load_problem(name), args.rounds) for name in args.problems.split(",")
        }
    from performance import EPOCH_TARGETS  # the script's folder is on sys.path

    print("\n".join(table(results, EPOCH_TARGETS["sdca-gap"])))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
