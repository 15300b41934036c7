"""The reference SDCA code (sdca4crf, MIT), run from a temporary copy for P2: its own
"iteration per second" log gives its epoch."""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness import ROOT, read_optional

#: the reference sdca4crf code, relative to the repository (``--sdca4crf`` / env overrides)
SDCA4CRF_DEFAULT = ROOT.parent / "shared" / "reference" / "sdca4crf"


_TB_SPEED = re.compile(r"^TB (\S+) (\d+) iteration per second (\S+)\s*$")


def sdca4crf_speed(source: Path, timeout: float = 1800.0) -> dict:
    """sdca4crf's gap-sampler SDCA (ρ = 0.8, Newton line search 1e-3, its defaults) for one
    epoch on its own OCR split, single-threaded, run from a temporary copy of ``source``
    (it writes ``logs/`` beside itself). Its speed is taken from its own log lines
    ("iteration per second", every n/5 iterations): iterations between the first and the
    last such line over the time between them, which leaves out its start-up and the
    first interval (sampler construction)."""
    with tempfile.TemporaryDirectory(prefix="sdca4crf-") as tmp:
        copy = Path(tmp) / "sdca4crf"
        shutil.copytree(source, copy)
        for folder, dirs, files in os.walk(copy):  # the shared copy is read-only
            for name in [".", *dirs, *files]:
                p = Path(folder, name)
                p.chmod(p.stat().st_mode | stat.S_IWUSR)
        env = {
            **os.environ,
            "PYTHONPATH": str(copy),
            "OMP_NUM_THREADS": "1",
            "OPENBLAS_NUM_THREADS": "1",
            "MKL_NUM_THREADS": "1",
        }
        cmd = [sys.executable, "main.py", "--dataset", "ocr", "--npass", "1"]
        t0 = time.perf_counter()
        done = subprocess.run(
            cmd, cwd=copy, env=env, capture_output=True, text=True, timeout=timeout
        )
        wall = time.perf_counter() - t0
    if done.returncode != 0:
        tail = "\n".join(done.stderr.strip().splitlines()[-8:])
        raise RuntimeError(f"sdca4crf ({source}) failed with exit code {done.returncode}:\n{tail}")
    marks = [
        (float(m.group(1)), int(m.group(2)), float(m.group(3)))
        for m in map(_TB_SPEED.match, done.stderr.splitlines())
        if m
    ]
    size = re.search(r"Size of training set: sequences (\d+)", done.stdout)
    if len(marks) < 2 or not size:
        raise RuntimeError(
            f"sdca4crf ({source}) printed fewer than two 'iteration per second' lines or no "
            f"training-set size; its output ends:\n{done.stderr[-800:]}"
        )
    (t_first, s_first, _), (t_last, s_last, _) = marks[0], marks[-1]
    per_s = (s_last - s_first) / (t_last - t_first)
    n = int(size.group(1))
    return {
        "path": str(source),
        "commit": read_optional(source / "COMMIT"),
        "n": n,
        "iterations_timed": s_last - s_first,
        "iterations_per_s": per_s,
        "logged_iterations_per_s": [v for _, _, v in marks],
        "epoch_s": n / per_s,
        "process_wall_s": wall,
    }
