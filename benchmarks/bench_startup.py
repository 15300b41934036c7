"""Start-up of the command line against the interpreter's own, same run (issue 19 item 5:
``crfopt --help`` and ``crfopt list`` under 0.5 s; the first ``compare`` compiles only
what it runs).

Every figure is the median wall time of fresh processes, from ``subprocess.run`` to
exit, so it includes the interpreter start that ``python -c pass`` (the baseline of
the group) measures alone. ``crfopt list`` is timed served from its listing cache (the
usual case: every call after the first) and with the cache off (a first call, or one
after a plugin changed), which imports every plugin and so numba.

The ``compare`` group times one small comparison twice with the same, initially empty,
numba cache folder: cold (every kernel it runs compiled and written to the cache) and
warm (loaded from it); the cold run also writes the Python bytecode of the modules it
imports (below), seconds beside numba's minutes.

Children run with Python's bytecode cache on, in a folder of their own
(``PYTHONPYCACHEPREFIX``): an installed package has its ``.pyc`` files, and under
``PYTHONDONTWRITEBYTECODE=1`` every process would compile numba, pandas and scipy from
source again (measured: ``import numba`` 2.9 s that way on a loaded machine).
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import record

REPEATS = 10


def child_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {**os.environ, "PYTHONPYCACHEPREFIX": str(tmp_path / "pycache"), **extra}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def crfopt_command() -> list[str]:
    """The installed ``crfopt`` script beside this interpreter (what users run), else
    ``python -m crfopt``."""
    script = Path(sys.executable).with_name("crfopt")
    found = str(script) if script.is_file() else shutil.which("crfopt")
    return [found] if found else [sys.executable, "-m", "crfopt"]


def wall_time(args: list[str], env: dict[str, str] | None = None) -> float:
    t0 = time.perf_counter()
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL, env=env)
    return time.perf_counter() - t0


def median_time(args: list[str], env: dict[str, str] | None = None, repeats: int = REPEATS):
    wall_time(args, env)  # page cache and .pyc files warm, a listing cache filled
    return statistics.median(wall_time(args, env) for _ in range(repeats))


def test_cli_startup(tmp_path):
    env = child_env(tmp_path, CRFOPT_CACHE=str(tmp_path / "cache"))
    crfopt = crfopt_command()
    group = "start-up vs python -c pass (median of 10 fresh processes)"
    record(group, "python -c pass", median_time([sys.executable, "-c", "pass"], env))
    record(group, "crfopt --help", median_time([*crfopt, "--help"], env))
    record(group, "crfopt compare --help", median_time([*crfopt, "compare", "--help"], env))
    record(group, "crfopt list (listing cache)", median_time([*crfopt, "list"], env))
    uncached = {**env, "CRFOPT_NO_LIST_CACHE": "1"}
    record(group, "crfopt list (no cache)", median_time([*crfopt, "list"], uncached, 3))
    numba = [sys.executable, "-c", "import numba"]
    record(group, "python -c 'import numba'", median_time(numba, env))


@pytest.mark.parametrize("optimizer", ["sdca-gap"])
def test_first_compare_cold_and_warm(tmp_path, optimizer):
    env = child_env(
        tmp_path, CRFOPT_CACHE=str(tmp_path / "cache"), NUMBA_CACHE_DIR=str(tmp_path / "numba")
    )
    args = [
        *crfopt_command(),
        "compare",
        "--problem",
        "synthetic",
        "--optimizers",
        optimizer,
        "--passes",
        "1",
        "--quiet",
    ]
    group = f"first `compare --problem synthetic --optimizers {optimizer} --passes 1`"
    cold = wall_time([*args, "--out", str(tmp_path / "cold")], env)
    warm = statistics.median(
        wall_time([*args, "--out", str(tmp_path / f"warm{i}")], env) for i in range(3)
    )
    record(group, "warm numba cache", warm)  # the baseline: recorded first
    record(group, "cold numba cache (empty NUMBA_CACHE_DIR)", cold)
