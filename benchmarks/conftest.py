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
