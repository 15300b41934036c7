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


def record(group: str, label: str, seconds: float) -> None:
    RESULTS[group][label] = seconds


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


def time_full_pass(problem, repeats: int = 5) -> float:
    import time

    import numpy as np

    w = np.random.default_rng(0).normal(scale=0.01, size=problem.dim)
    problem.uncounted.value_and_gradient(w)
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        problem.uncounted.value_and_gradient(w)
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
        tr.write_line(f"{group}:")
        for label, sec in rows.items():
            tr.write_line(
                f"  {label:<40s} {sec * 1e3:10.2f} ms   ratio to {base_label}: {sec / base:8.3f}"
            )
    out = Path(os.environ.get("CRFOPT_BENCH_OUT", ".benchmarks/crfopt-ratios.json"))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps(
            {
                "date": str(date.today()),
                "machine": platform.processor() or platform.machine(),
                "cpus": os.cpu_count(),
                "results": RESULTS,
            },
            indent=2,
        )
    )
    tr.write_line(f"written to {out}")
