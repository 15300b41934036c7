"""Shared machinery of the benchmarks: thread control and a ratio table at the end.

Run with ``pytest benchmarks`` (see README). Every figure is a ratio against a baseline
measured in the same run; seconds are reported for scale only.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
from collections import defaultdict
from datetime import date
from pathlib import Path

import numba
import pytest
from threadpoolctl import threadpool_limits

RESULTS: dict[str, dict[str, float]] = defaultdict(dict)
UNITS: dict[str, str] = {}


@contextlib.contextmanager
def threads(k: int):
    """Limit numba and BLAS to ``k`` threads."""
    old = numba.get_num_threads()
    numba.set_num_threads(min(k, numba.config.NUMBA_NUM_THREADS))
    try:
        with threadpool_limits(limits=k):
            yield
    finally:
        numba.set_num_threads(old)


def record(group: str, label: str, value: float, unit: str = "s") -> None:
    """A measurement; the first one of a group is the baseline of its ratios."""
    RESULTS[group][label] = value
    UNITS[group] = unit


@pytest.fixture
def recorder():
    return record


# Stand-ins of the paper benchmarks' sizes, used when the real data cannot be loaded.
STAND_INS = {
    "ocr": dict(n=6000, labels=26, attributes=128, length=8, dense=True, density=0.3),
    "conll2000": dict(n=9000, labels=22, attributes=75000, length=24, density=20 / 75000),
}


def bench_problem(name: str):
    """The real problem if its data is available, else a synthetic one of the same size."""
    import crfopt

    try:
        return crfopt.load_problem(name), name
    except Exception:
        return crfopt.make_synthetic(seed=0, **STAND_INS[name]), f"{name}-size synthetic"


def time_epoch(optimizer, n: int, repeats: int = 2) -> float:
    """Best wall time of one epoch (n iterations) after a first, untimed epoch."""
    import time

    optimizer.run_block(n)
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        optimizer.run_block(n)
        best = min(best, time.perf_counter() - t0)
    return best


def record_epochs(recorder, group: str, problem, variants) -> None:
    """Record one epoch (n iterations) of each optimizer variant, e.g. ``"sdca-gap[rho=1]"``,
    on a fresh copy of ``problem`` (after a warm-up and one untimed epoch)."""
    import crfopt
    from crfopt.bench.compare import parse_optimizer
    from crfopt.bench.runner import warm_up

    reg = crfopt.get_registry()
    for text in variants:
        variant, overrides = parse_optimizer(text)
        spec = reg.optimizer(variant)
        q = problem.with_lam(problem.lam)
        warm_up(spec, spec.resolve(overrides), q)
        with q.initialization():
            opt = spec.create(q, 0, overrides)
        recorder(group, f"{text} epoch", time_epoch(opt, q.n))


def record_epochs_vs_full_pass(recorder, family: str, problem_name: str, variants) -> None:
    """Single-threaded, on the named bench problem: one full oracle pass (value+gradient),
    then :func:`record_epochs`, so each epoch reads against the pass timed in the same
    run; the group is "<family> epoch vs full oracle pass, <problem> (n=…, d=…)"."""
    problem, label = bench_problem(problem_name)
    group = f"{family} epoch vs full oracle pass, {label} (n={problem.n}, d={problem.dim})"
    with threads(1):
        recorder(group, "full oracle pass (value+gradient)", time_full_pass(problem))
        record_epochs(recorder, group, problem, variants)


PEAK_SCRIPT = """
import sys, crfopt, numpy as np
from crfopt.bench.compare import parse_optimizer
from crfopt.bench.evaluator import Evaluator

def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024

def state_bytes(obj, seen=None):
    seen = set() if seen is None else seen
    if id(obj) in seen:
        return 0
    seen.add(id(obj))
    if isinstance(obj, np.ndarray):
        return obj.nbytes if obj.base is None else 0
    if isinstance(obj, (list, tuple)):
        return sum(state_bytes(x, seen) for x in obj)
    if isinstance(obj, dict):
        return sum(state_bytes(x, seen) for x in obj.values())
    if hasattr(obj, "__dict__") and not isinstance(obj, (crfopt.CRFProblem, np.random.Generator)):
        return state_bytes(vars(obj), seen)
    return 0

problem = crfopt.load_problem(sys.argv[1])
Evaluator(problem).value_and_gradient(problem.zeros())  # compile the kernels first
name, overrides = parse_optimizer(sys.argv[2])
spec = crfopt.get_registry().optimizer(name)
crfopt.bench.runner.warm_up(spec, spec.resolve(overrides), problem)
current = status("VmRSS")
with problem.initialization():
    opt = spec.create(problem, 0, overrides)
opt.run_block(problem.n)
print(current, status("VmHWM"), state_bytes(opt))
"""


def peak_memory(problem_name: str, optimizer: str) -> tuple[float, float, float]:
    """Bytes: (resident before the optimizer, peak resident after one epoch, the
    optimizer's own arrays). Measured in a fresh process; numba's allocations bypass
    tracemalloc, so the kernel's own accounting (/proc/self/status) is used.
    """
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-c", PEAK_SCRIPT, problem_name, optimizer],
        capture_output=True,
        text=True,
        check=True,
    )
    current, peak, state = (float(x) for x in out.stdout.split()[-3:])
    return current, peak, state


def time_full_pass(problem, repeats: int = 5) -> float:
    import time

    import numpy as np

    from crfopt.bench.evaluator import Evaluator

    w = np.random.default_rng(0).normal(scale=0.01, size=problem.dim)
    Evaluator(problem).value_and_gradient(w)
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        Evaluator(problem).value_and_gradient(w)
        best = min(best, time.perf_counter() - t0)
    return best


def pytest_terminal_summary(terminalreporter):
    if not RESULTS:
        return
    tr = terminalreporter
    tr.section("crfopt benchmark ratios (same run)")
    for group, rows in RESULTS.items():
        base_label = next(iter(rows))
        base = rows[base_label]
        unit = UNITS.get(group, "s")
        tr.write_line(f"{group}:")
        for label, value in rows.items():
            shown = f"{value * 1e3:10.2f} ms" if unit == "s" else f"{value / 2**20:10.1f} MiB"
            tr.write_line(f"  {label:<44s} {shown}   ratio to {base_label}: {value / base:8.3f}")
    out = Path(os.environ.get("CRFOPT_BENCH_OUT", ".benchmarks/crfopt-ratios.json"))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps(
            {
                "date": str(date.today()),
                "machine": platform.processor() or platform.machine(),
                "cpus": os.cpu_count(),
                "results": RESULTS,
                "units": UNITS,
            },
            indent=2,
        )
    )
    tr.write_line(f"written to {out}")
