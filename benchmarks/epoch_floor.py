"""How cheap can an epoch of ``sdca-gap`` or ``oeg`` be that keeps its iterates? Measured.

    python benchmarks/epoch_floor.py [--problems ocr,conll2000] [--rounds 5] [--processes 3]

Issue 19 asks for ``sdca-gap`` and ``oeg`` epochs of at most 4 (OCR) and 3 (CoNLL-2000)
full value+gradient passes while every iterate stays what it was. This script measures,
for each, the work no such epoch can skip (its floor), each part timed alone in a
compiled loop over every sequence of the problem, one sequence's tables at a time (so
they stay in cache, as in the real loop), and adds the parts up. Everything else is
left out, so a real epoch costs more than its floor.

``sdca-gap`` (docs/algorithms.md §3.1–3.2). For each entry of sequence i's node and
pairwise tables an iteration must compute:

* one oracle call, for ν_i (``kernels.oracle_marginals``);
* one log per Newton evaluation: f'(γ) = ⟨δ, log ν - log(μ + γδ)⟩ needs log(μ + γδ) at
  every evaluated γ, and no evaluation can be skipped without moving γ;
* one transcendental to store μ_γ and have both μ_i and log μ_i at the next visit (the
  KLs g_i and r_i need log μ_i): stored as logs, as crfopt does, a log at the step and
  an exp at the next load (two); stored linear, a log at the next load (the entropy
  H̃(μ_γ) then deferred to the checkpoints); in both forms, at twice the memory, a log
  at the step. One at least.

The floor counts one (any storage); the column beside it counts the two of the stored
logs. The number of Newton evaluations per iteration is the one the measured epochs
made (the ``LS_EVALS`` counter). Left out: reading and writing the stored duals, the
KLs, the direction, the move of w, the curvature's division.

``oeg`` (docs/algorithms.md §3.8) accepts a trial when the dual does not decrease. Since
issue 47 its defaults take the trial's linear marginals from the oracle's messages
(``linear_marginals``: equal to the exp of the log-marginals to rounding, admitted by
the per-pass convergence check), so each trial must compute:

* the oracle on the trial scores with its linear marginals and no log-marginals (formed,
  then ``kernels.oracle_scores_bonus(..., linear=True, logs=False)``);
* ⟨θ', μ'⟩, one product per entry (the entropy H' = log Z' − ⟨θ', μ'⟩ the test reads).

The number of trials per iteration is the one the measured epochs made (oracle calls
per iteration). Left out: w's scores, the gain's products (Xᵀ of the marginal
difference, its norms), the summed pairwise marginals, the accept's stores. (Before
issue 47 the floor also held an exp per pairwise entry, and ⟨θ', μ'⟩ summed in order,
since the accept test read their rounding.)

CPU seconds on one thread, the least over ``--rounds``, in full passes measured in the
same process. One process's figures move by up to 10 % from the next's (OCR's
``sdca-gap`` floor read 3.74 to 4.38 full passes in seven processes on one quiet
machine), more than a floor's distance to its target, so the script measures in
``--processes`` fresh processes and gives each column's median and the floor's range
over them. Printed: a Markdown table per optimizer (benchmarks/performance.py's
``floor`` section shows the same in reports/performance.md).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

import numpy as np

import crfopt
import crfopt_plugins.oeg as oeg_plugin
from crfopt import jit, kernels
from crfopt.kernels.counters import ITERATIONS, LS_EVALS, ORACLE_CALLS
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


@jit(cache=False)
def _trial_oracle_sweep(data, counters, st, wk, c_init, K):
    """One OEG trial's oracle per sequence, on the trial scores its state gives now, with
    the linear marginals of the default ``linear_marginals``."""
    n = data.offsets.shape[0] - 1
    acc = 0.0
    for i in range(n):
        T = data.offsets[i + 1] - data.offsets[i]
        kernels.unary_scores(data, i, st.w, wk.s_w)
        wk.W_T[:, :] = kernels.transition_matrix(data, st.w)
        e_i = st.eta[i]
        rho = oeg_plugin._trial_scores(data, st, wk, i, T, K, 1.0 - e_i, e_i)
        acc += kernels.oracle_scores_bonus(
            data, counters, i, wk.t_n[:T], wk.t_base, rho * c_init,
            wk.t_e, wk.ln, wk.le, wk.nodes_new, wk.edges_lin, True, False,
        )  # fmt: skip
    return acc


@jit(cache=False)
def _unary_sweep(data, st, wk):
    """w's scores per sequence: what :func:`_trial_oracle_sweep` does besides the oracle."""
    n = data.offsets.shape[0] - 1
    for i in range(n):
        kernels.unary_scores(data, i, st.w, wk.s_w)
        wk.W_T[:, :] = kernels.transition_matrix(data, st.w)


@jit(cache=False)
def _log_sweep(offsets, K, x, out):
    """One log per node and pairwise entry of every sequence, a sequence at a time."""
    n = offsets.shape[0] - 1
    for i in range(n):
        T = offsets[i + 1] - offsets[i]
        vlog(x, out, (T - 1) * K * K + T * K)


@jit(cache=False)
def _exp_sweep(offsets, K, x, out, nodes):
    """One exp per pairwise entry (and per node entry if ``nodes``) of every sequence."""
    n = offsets.shape[0] - 1
    for i in range(n):
        T = offsets[i + 1] - offsets[i]
        vexp(x, out, (T - 1) * K * K + (T * K if nodes else 0))


@jit(cache=False, fastmath=True)
def _sum_sweep(offsets, K, a, b):
    """Σ a_j b_j over every node and pairwise entry of every sequence."""
    n = offsets.shape[0] - 1
    acc = 0.0
    for i in range(n):
        T = offsets[i + 1] - offsets[i]
        for j in range((T - 1) * K * K + T * K):
            acc += a[j] * b[j]
    return acc


def _least(f: Callable[[], object], rounds: int) -> float:
    best = np.inf
    for _ in range(rounds):
        c0 = time.process_time()
        f()
        best = min(best, time.process_time() - c0)
    return float(best)


def _epochs(
    problem: crfopt.CRFProblem, name: str, rounds: int
) -> tuple[crfopt.Optimizer, float, float, np.ndarray]:
    """A full pass, then ``name``'s epochs after a warm-up block: (the optimizer, the
    least full pass and epoch in CPU seconds, the counters the epochs added)."""
    w = problem.zeros()
    problem.value_and_gradient(w)
    full_pass = _least(lambda: problem.value_and_gradient(w), rounds)
    opt = crfopt.get_registry().optimizer(name).create(problem, 0, {})
    opt.run_block(50)  # compile and warm up, as benchmarks/before_after.py does
    before = problem.counters.array.copy()
    epoch = _least(lambda: opt.run_block(problem.n), rounds)
    return opt, full_pass, epoch, problem.counters.array - before


def _tables(problem: crfopt.CRFProblem, rng: np.random.Generator):
    """Inputs of the sweeps, sized for the longest sequence: probabilities (vlog's fast
    path: positive normal numbers), their logs, and other factors."""
    K = problem.n_labels
    L = int(problem.data.max_len)
    size = (L - 1) * K * K + L * K
    probabilities = rng.random(size) * 0.999 + 1e-12
    return probabilities, np.log(probabilities), rng.random(size), np.empty(size)


def sdca(problem: crfopt.CRFProblem, rounds: int = 5) -> dict[str, float]:
    """``sdca-gap``: full pass, epoch, Newton evaluations per iteration, the floor's parts
    and the floor (CPU seconds; the sweeps' oracle calls are counted apart from the
    problem's)."""
    K = problem.n_labels
    data = problem.data
    max_len = int(data.max_len)
    opt, full_pass, epoch, made = _epochs(problem, "sdca-gap", rounds)
    evals = float(made[LS_EVALS] / made[ITERATIONS])
    probabilities, logs, _, out = _tables(problem, np.random.default_rng(0))
    counters = np.zeros_like(problem.counters.array)  # the sweep's calls are not the run's
    w = np.ascontiguousarray(opt.w)
    oracle = _least(lambda: _oracle_sweep(data, counters, w, K, max_len), rounds + 1)
    log = _least(lambda: _log_sweep(data.offsets, K, probabilities, out), rounds + 1)
    exp = _least(lambda: _exp_sweep(data.offsets, K, logs, out, True), rounds + 1)
    return {
        "full_pass_s": full_pass,
        "epoch_s": epoch,
        "evals_per_iteration": evals,
        "oracle_s": oracle,
        "log_s": log,
        "exp_s": exp,
        "floor_s": oracle + (evals + 1.0) * log,
        "floor_log_storage_s": oracle + (evals + 1.0) * log + exp,
    }


def oeg(problem: crfopt.CRFProblem, rounds: int = 5) -> dict[str, float]:
    """``oeg``: full pass, epoch, trials per iteration, the floor's parts and the floor
    (CPU seconds; the sweeps' oracle calls are counted apart from the problem's)."""
    K = problem.n_labels
    data = problem.data
    opt, full_pass, epoch, made = _epochs(problem, "oeg", rounds)
    trials = float(made[ORACLE_CALLS] / made[ITERATIONS])
    _, logs, factors, _ = _tables(problem, np.random.default_rng(0))
    counters = np.zeros_like(problem.counters.array)
    st, wk, c_init = opt._state, opt._work, opt._opts.c_init
    # the trial oracle's sweep forms w's scores too (the trial scores need them): they
    # are timed apart and taken off
    both = _least(lambda: _trial_oracle_sweep(data, counters, st, wk, c_init, K), rounds + 1)
    scores = _least(lambda: _unary_sweep(data, st, wk), rounds + 1)
    oracle = max(both - scores, 0.0)
    inner = _least(lambda: _sum_sweep(data.offsets, K, logs, factors), rounds + 1)
    return {
        "full_pass_s": full_pass,
        "epoch_s": epoch,
        "trials_per_iteration": trials,
        "oracle_s": oracle,
        "sum_s": inner,
        "floor_s": trials * (oracle + inner),
    }


MEASURES = {"sdca-gap": sdca, "oeg": oeg}
OPTIMIZERS = tuple(MEASURES)

#: (column header, key, multiply by the full pass's reciprocal) per optimizer
COLUMNS = {
    "sdca-gap": [
        ("Newton evaluations per iteration", "evals_per_iteration", False),
        ("oracle sweep", "oracle_s", True),
        ("log sweep", "log_s", True),
        ("exp sweep", "exp_s", True),
    ],
    "oeg": [
        ("trials per iteration", "trials_per_iteration", False),
        ("trial oracle sweep, linear marginals", "oracle_s", True),
        ("⟨θ', μ'⟩ sweep", "sum_s", True),
    ],
}


def combine(runs: list[dict[str, dict[str, dict[str, float]]]]) -> dict[str, dict[str, dict]]:
    """Per optimizer and problem, over processes (``runs``: what :func:`measure` returned
    in each): the median full pass (s) and the medians of every other figure, those in
    seconds as full passes of their own process; ``floor`` (and, for ``sdca-gap``,
    ``floor_log_storage``) as the list of every process's floor in full passes."""
    out: dict[str, dict[str, dict]] = {}
    for name in runs[0]:
        out[name] = {}
        for problem in runs[0][name]:
            rs = [run[name][problem] for run in runs]
            c: dict = {"processes": len(rs)}
            c["full_pass_s"] = statistics.median(r["full_pass_s"] for r in rs)
            for key in rs[0]:
                if key == "full_pass_s":
                    continue
                per_pass = key.endswith("_s")
                values = [r[key] / r["full_pass_s"] if per_pass else r[key] for r in rs]
                if key.startswith("floor"):
                    c[key.removesuffix("_s")] = values
                else:
                    c[key] = statistics.median(values)
            out[name][problem] = c
    return out


def _spread(values: list[float]) -> str:
    """The median, and the range when more than one process measured."""
    mid = f"{statistics.median(values):.2f}"
    return mid if len(values) == 1 else f"{mid} ({min(values):.2f}–{max(values):.2f})"


def table(
    name: str,
    combined: dict[str, dict],
    targets: dict[str, float],
    label: Callable[[str], str] = str,
) -> list[str]:
    """The Markdown table of optimizer ``name``'s figures in full passes (``combined``:
    :func:`combine`'s entry for it), beside its epoch ``targets`` (problems named by
    ``label``)."""
    columns = COLUMNS[name]
    extra = ["floor, μ stored as logs (as now)"] if name == "sdca-gap" else []
    head = ["full pass (s)", f"`{name}` epoch", *(c[0] for c in columns), *extra, "floor"]
    lines = ["| | " + " | ".join(head) + " | target |", "|---|" + "---|" * (len(head) + 1)]
    for problem, r in combined.items():
        cells = [f"{r['full_pass_s']:.4f}", f"{r['epoch_s']:.2f}"]
        cells += [f"{r[key]:.2f}" for _, key, _ in columns]
        if extra:
            cells.append(_spread(r["floor_log_storage"]))
        cells.append(f"**{_spread(r['floor'])}**")
        goal = targets.get(problem)
        cells.append("" if goal is None else f"≤ {goal:g}")
        lines.append(f"| {label(problem)} | " + " | ".join(cells) + " |")
    return lines


def measure(problems: list[str], rounds: int) -> dict[str, dict[str, dict[str, float]]]:
    """Every optimizer's figures on every problem, in this process, on one thread."""
    from conftest import threads  # the script's folder is on sys.path

    with threads(1):  # epochs are single-threaded: so is their unit
        return {
            name: {p: fn(crfopt.load_problem(p), rounds) for p in problems}
            for name, fn in MEASURES.items()
        }


def measure_in_processes(
    problems: list[str], rounds: int, processes: int
) -> list[dict[str, dict[str, dict[str, float]]]]:
    """:func:`measure` in ``processes`` fresh processes of this script, one after the
    other; their results in order."""
    runs = []
    for _ in range(processes):
        argv = [sys.executable, __file__, "--json", "--processes", "1"]
        argv += ["--problems", ",".join(problems), "--rounds", str(rounds)]
        done = subprocess.run(argv, capture_output=True, text=True)
        if done.returncode != 0:  # the child's own error, not just its exit status
            tail = "\n".join(done.stderr.strip().splitlines()[-15:])
            raise RuntimeError(f"{' '.join(argv[1:])} failed (exit {done.returncode}):\n{tail}")
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    return runs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--problems", default="ocr,conll2000", help="comma-separated")
    parser.add_argument("--rounds", type=int, default=5, help="repetitions; the least counts")
    parser.add_argument(
        "--processes", type=int, default=3, help="fresh processes measured; the median counts"
    )
    parser.add_argument("--json", action="store_true", help="print the raw figures as JSON")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.processes < 1:
        parser.error("--rounds and --processes must be positive")
    problems = args.problems.split(",")
    if args.processes == 1:
        runs = [measure(problems, args.rounds)]
    else:
        runs = measure_in_processes(problems, args.rounds, args.processes)
    if args.json:
        print(json.dumps(runs[0] if len(runs) == 1 else runs))
        return 0
    from targets import EPOCH_TARGETS  # the script's folder is on sys.path

    for name, results in combine(runs).items():
        print("\n".join(table(name, results, EPOCH_TARGETS[name])), end="\n\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
