"""Sections ``P4``, ``P5`` and ``startup``: peak memory of sdca-gap's dual, a grid on
several workers, and the command line's start-up."""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from harness import ok_mark, skipped_note
from targets import STARTUP_TARGET_S

import crfopt


def p4(args: argparse.Namespace) -> dict:
    from conftest import peak_memory

    out = {}
    for dtype in ("float64", "float32"):
        before, peak, state = peak_memory("pos-ewt", f"sdca-gap[dtype={dtype}]")
        out[dtype] = {"rss_before": before, "peak_rss": peak, "optimizer_bytes": state}
    return out


def p5(args: argparse.Namespace) -> dict:
    grid = dict(problems="ocr", optimizers=["sdca-gap"], seeds=[0, 1, 2, 3], passes=6)
    out = {}
    for label, backend, jobs in (
        ("joblib, 1 worker", "joblib", 1),
        ("joblib, 2 workers", "joblib", 2),
        ("dask LocalCluster, 2 workers", "dask", 2),
    ):
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            crfopt.compare(
                grid["problems"],
                grid["optimizers"],
                seeds=grid["seeds"],
                passes=grid["passes"],
                out=tmp,
                backend=backend,
                n_jobs=jobs,
                optimum=False,
            )
            out[label] = time.perf_counter() - t0
    base = out["joblib, 1 worker"]
    return {"seconds": out, "speedup": {k: base / v for k, v in out.items()}}


def startup(args: argparse.Namespace) -> dict:
    """bench_startup.py's two measurements, called as pytest would (a fresh tmp folder)."""
    import bench_startup

    import conftest

    before = set(conftest.RESULTS)
    with tempfile.TemporaryDirectory(prefix="crfopt-startup-") as tmp:
        bench_startup.test_cli_startup(Path(tmp) / "cli")
        (Path(tmp) / "cold").mkdir()
        bench_startup.test_first_compare_cold_and_warm(Path(tmp) / "cold", "sdca-gap")
    return {"groups": {g: dict(rows) for g, rows in conftest.RESULTS.items() if g not in before}}


def startup_section(r: dict) -> list[str]:
    lines = ["## Start-up", ""]
    if skipped_note(r, lines, "Start-up"):
        return lines
    lines += [
        "benchmarks/bench_startup.py's measurements: median wall time of fresh processes "
        "(interpreter start included; `python -c pass` is the baseline); target for "
        "`crfopt --help` and `crfopt list`: under 0.5 s.",
        "",
        "| | seconds | |",
        "|---|---|---|",
    ]
    for group, rows in r["groups"].items():
        lines.append(f"| *{group}* | | |")
        for label, value in rows.items():
            check = ""
            if label.startswith(("crfopt --help", "crfopt list (listing cache)")):
                check = ok_mark(value < STARTUP_TARGET_S)
            lines.append(f"| {label} | {value:.2f} | {check} |")
    return [*lines, ""]
