"""A real Dask cluster started apart from the caller (issue 18, "must show").

The scheduler and its worker are separate processes started in working directories of
their own, as `dask scheduler` / `dask worker ADDRESS` would be on another machine; the
caller runs `crfopt compare --scheduler ADDRESS --out relative/dir` from a third one.
Every run file must land under the caller's relative/dir: a worker resolving the relative
path in its own working directory would scatter them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # starts three Python processes and compiles in the worker


def _dask_cli() -> list[str]:
    """The `dask` command of this environment (the venv's, not whatever is on PATH)."""
    exe = Path(sys.executable).with_name("dask")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "dask"]


def _wait(predicate, timeout: float, what: str, procs) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        for p in procs:
            if p.poll() is not None:
                raise AssertionError(f"{what}: {p.args} exited with {p.returncode}")
        time.sleep(0.2)
    raise AssertionError(f"{what}: not within {timeout:g} s")


def test_remote_workers_write_under_the_callers_relative_out(tmp_path):
    from distributed import Client

    import crfopt

    dirs = {name: tmp_path / name for name in ("scheduler-cwd", "worker-cwd", "caller-cwd")}
    for d in dirs.values():
        d.mkdir()
    env = {**os.environ, "CRFOPT_CACHE": str(tmp_path / "cache")}
    env.pop("CRFOPT_DEBUG", None)
    scheduler_file = tmp_path / "scheduler.json"
    logs = {name: open(tmp_path / f"{name}.log", "w") for name in ("scheduler", "worker")}  # noqa: SIM115
    procs: list[subprocess.Popen] = []
    try:
        procs.append(
            subprocess.Popen(
                [
                    *_dask_cli(),
                    "scheduler",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    "0",
                    "--no-dashboard",
                    "--scheduler-file",
                    str(scheduler_file),
                ],
                cwd=dirs["scheduler-cwd"],
                env=env,
                stdout=logs["scheduler"],
                stderr=subprocess.STDOUT,
            )
        )
        _wait(scheduler_file.exists, 60, "scheduler start", procs)
        address = json.loads(scheduler_file.read_text())["address"]
        procs.append(
            subprocess.Popen(
                [
                    *_dask_cli(),
                    "worker",
                    address,
                    "--nworkers",
                    "1",
                    "--nthreads",
                    "1",
                    "--no-dashboard",
                ],
                cwd=dirs["worker-cwd"],
                env=env,
                stdout=logs["worker"],
                stderr=subprocess.STDOUT,
            )
        )
        with Client(address, timeout=30) as client:
            client.wait_for_workers(1, timeout=90)
            workers = set(client.scheduler_info()["workers"])
        caller = subprocess.run(
            [sys.executable, "-m", "crfopt", "compare", "--problem", "synthetic",
             "--set", "synthetic.n=30", "--optimizers", "lbfgs,sag", "--passes", "1",
             "--scheduler", address, "--out", "relative/dir", "--quiet"],
            cwd=dirs["caller-cwd"], env=env, capture_output=True, text=True, timeout=600,
        )  # fmt: skip
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in reversed(procs):
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for f in logs.values():
            f.close()
    assert caller.returncode == 0, caller.stdout + caller.stderr
    out = dirs["caller-cwd"] / "relative" / "dir"
    everywhere = sorted(tmp_path.rglob("run-*.parquet"))
    assert len(everywhere) == 2, everywhere
    assert all(f.parent == out for f in everywhere), everywhere
    assert not (dirs["worker-cwd"] / "relative").exists()
    assert not (dirs["scheduler-cwd"] / "relative").exists()
    # and each run says where it was computed: on the Dask worker, with its one thread
    table = crfopt.read_results(out)
    assert set(table["backend"]) == {"dask"}
    assert set(table["worker"]) == workers
    assert set(table["threads"]) == {1}
