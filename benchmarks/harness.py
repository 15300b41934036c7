"""The harness of the performance report: where results go, what a section records
about its run (tree, time, machine, versions), the report's small formatting helpers,
and reading an earlier report back.

Every section of benchmarks/performance.py is a ``measure(args) -> dict`` in one of the
``perf_*`` modules plus a ``*_section(result) -> lines`` that renders it; this module
holds what they share.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
from datetime import datetime, timezone
from pathlib import Path

#: the sections of the report, in its order (``--only`` names them)
SECTIONS = [
    "epochs",
    "floor",
    "pos-passes",
    "threads",
    "P1",
    "P2",
    "P3",
    "parallel",
    "parallel-limits",
    "auto",
    "wapiti",
    "P4",
    "P5",
    "startup",
    "L1",
    "tagging",
]

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
# the raw figures of the last run; they stay out of the repository (.benchmarks/ is ignored)
RESULTS = ROOT / ".benchmarks" / "performance.json"
#: CRFsuite is single-threaded: wall seconds above this multiple of its CPU seconds = load
LOADED = 1.25


def problems_of(args: argparse.Namespace, default: list[str]) -> list[str]:
    return [p for p in default if not args.problems or p in args.problems]


def read_partial(path: Path) -> dict:
    """What an interrupted section saved (``--resume``): {} when nothing readable is there."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def save_partial(path: Path, saved: dict) -> None:
    """Save a section's finished cases at once, atomically: a crash loses one case."""
    from crfopt.data.fileio import atomic_write

    with atomic_write(path) as out:
        out.write(json.dumps(saved).encode())


def read_optional(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8").strip()
    except OSError:
        return None


def from_report(path: str | Path) -> dict:
    """An earlier run's figures read back from its report's Details (``--only`` where
    .benchmarks/ is empty, e.g. a fresh clone: the other sections stay in the report)."""
    text = read_optional(Path(path)) or ""
    _, found, details = text.partition("\n## Details\n")
    if not found:
        return {}
    blocks = re.finditer(r"^### (\S+)\n\n```json\n(.*?)\n```$", details, re.S | re.M)
    return {m.group(1): json.loads(m.group(2)) for m in blocks if m.group(1) in SECTIONS}


def git_tree() -> str:
    """The measured tree: its commit, "-dirty" when it has uncommitted changes."""
    try:
        out = subprocess.run(
            ["git", "describe", "--always", "--dirty", "--abbrev=7"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        )
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return out.stdout.strip()


def now_utc() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def dist_version(dist: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return "not installed"


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            names = [ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")]
        cpu = names[0] if names else cpu
    except OSError:
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{cpu}, {os.cpu_count()} cores, {mem:.0f} GiB, Python {platform.python_version()}"


def ok_mark(flag: bool) -> str:
    return "met" if flag else "**missed**"


LABELS = {
    "ocr": "OCR",
    "conll2000": "CoNLL-2000",
    "ner-nl": "NER-nl",
    "pos-ewt": "POS-EWT",
    "pos-conll2000": "POS-CoNLL",
}


def label_of(name: str) -> str:
    return LABELS.get(name, name)


def skipped_note(r: dict, lines: list[str], title: str) -> bool:
    if "skipped" in r:
        lines += [f"{title}: not measured — {r['skipped']}.", ""]
        return True
    return False


def mib(n: float) -> str:
    return f"{n / 2**20:,.1f} MiB"


def progress_printer(prefix: str):
    """An echo for wapiti_tool.train: every 50th iteration line and every error line."""

    def echo(line: str) -> None:
        m = re.match(r"\s*\[\s*(\d+)\]", line)
        if (m and int(m.group(1)) % 50 == 0) or "error" in line.lower() or "fatal" in line:
            print(f"    {prefix}{line.strip()}", flush=True)

    return echo
