"""Threads on small work (issue 51): the figures behind ``crfopt.kernels.threads``.

    python benchmarks/threads_contention.py                       # both measurements
    python benchmarks/threads_contention.py --blas                # dot products only
    python benchmarks/threads_contention.py --openmp --sentences 700 5000 --json out.json

* ``--blas``: one dot product of n entries (n = 10⁴ … 1.6·10⁷, NumPy's BLAS) on 1 and on 2
  BLAS threads (threadpoolctl), rounds alternating: median and mean microseconds. The
  mean shows the stalls a loaded machine adds, the cost an optimizer's loop pays at
  every call; a size where 2 threads win on both is where threads would pay.
* ``--openmp``: one value+gradient pass (``CRFProblem.value_and_gradient``) of the
  sklearn-crfsuite tutorial's features on the first N CoNLL-2002 Dutch sentences
  (``$CRFOPT_DATA``), on 1 and 2 numba threads alternating, in a fresh process per
  libgomp spin count: 300,000 (libgomp's own default) and crfopt's
  ``GOMP_SPINCOUNT`` (libgomp reads it once, when numba first loads it).

Ratios within one process are what to read; the load average is printed with them, and
on a quiet machine the 2-thread figures are the ones that move.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
os.environ.setdefault("CRFOPT_DATA", str(HERE.parents[1] / "shared" / "datasets"))

SIZES = (10_000, 100_000, 1_000_000, 4_000_000, 16_000_000)
#: libgomp's documented default spin count (OMP_WAIT_POLICY unset)
LIBGOMP_DEFAULT_SPINCOUNT = 300_000


def blas(rounds: int = 3) -> list[dict[str, float]]:
    """Median and mean seconds of one dot product on 1 and 2 BLAS threads, per size."""
    from threadpoolctl import threadpool_limits

    rng = np.random.default_rng(0)
    out = []
    for n in SIZES:
        a, b = rng.random(n), rng.random(n)
        reps = max(5, int(3e7 // n))
        times: dict[int, list[float]] = {1: [], 2: []}
        for r in range(2 * rounds):
            k = 1 + (r % 2)
            with threadpool_limits(k, user_api="blas"):
                for _ in range(reps):
                    t0 = time.perf_counter()
                    float(a @ b)
                    times[k].append(time.perf_counter() - t0)
        row: dict[str, float] = {"n": n}
        for k, ts in times.items():
            row[f"median_us_{k}"] = float(np.median(ts) * 1e6)
            row[f"mean_us_{k}"] = float(np.mean(ts) * 1e6)
        out.append(row)
        print(
            f"n={n:>10,}: 1 thread median {row['median_us_1']:9.1f} µs, mean "
            f"{row['mean_us_1']:9.1f} | 2 threads median {row['median_us_2']:9.1f}, mean "
            f"{row['mean_us_2']:9.1f}",
            flush=True,
        )
    return out


def _pass_times(sentences: int, rounds: int) -> dict[str, Any]:
    """In this process: median and mean seconds of one pass on 1 and 2 numba threads."""
    import numba

    sys.path.insert(0, str(HERE))
    from bench_sklearn import load_split

    import crfopt

    X, y = load_split("train")
    problem, _ = crfopt.CRF(bias=False)._training_problem(X[:sentences], y[:sentences])
    w = np.random.default_rng(0).normal(scale=0.01, size=problem.dim)
    times: dict[int, list[float]] = {1: [], 2: []}
    for k in (1, 2):  # compile or load, and fault everything in, before timing
        numba.set_num_threads(k)
        problem.value_and_gradient(w)
    for r in range(rounds):
        for k in (1, 2) if r % 2 == 0 else (2, 1):
            numba.set_num_threads(k)
            for _ in range(max(3, 2000 // sentences)):
                t0 = time.perf_counter()
                problem.value_and_gradient(w)
                times[k].append(time.perf_counter() - t0)
    return {
        "sentences": sentences,
        "tokens": problem.n_tokens,
        "dim": problem.dim,
        "spincount": os.environ.get("GOMP_SPINCOUNT"),
        **{f"median_ms_{k}": float(np.median(v) * 1e3) for k, v in times.items()},
        **{f"mean_ms_{k}": float(np.mean(v) * 1e3) for k, v in times.items()},
    }


def openmp(sentences: list[int], rounds: int) -> list[dict[str, Any]]:
    """:func:`_pass_times` in a fresh process per (spin count, corpus size)."""
    from crfopt.kernels.threads import GOMP_SPINCOUNT

    out = []
    for spin in (LIBGOMP_DEFAULT_SPINCOUNT, GOMP_SPINCOUNT):
        for n in sentences:
            env = {**os.environ, "GOMP_SPINCOUNT": str(spin)}
            env.pop("OMP_WAIT_POLICY", None)
            cmd = [sys.executable, __file__, "--_pass", str(n), "--rounds", str(rounds)]
            res = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True)
            row = json.loads(res.stdout.strip().splitlines()[-1])
            out.append(row)
            print(
                f"GOMP_SPINCOUNT={spin:>7,}, {n:>6,} sentences ({row['tokens']:,} tokens): "
                f"1 thread median {row['median_ms_1']:7.2f} ms, mean {row['mean_ms_1']:7.2f} | "
                f"2 threads median {row['median_ms_2']:7.2f}, mean {row['mean_ms_2']:7.2f}",
                flush=True,
            )
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--blas", action="store_true", help="the dot products only")
    ap.add_argument("--openmp", action="store_true", help="the passes only")
    ap.add_argument("--sentences", type=int, nargs="+", default=[700, 5000])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", type=Path, help="also write the figures here")
    ap.add_argument("--_pass", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args._pass:
        print(json.dumps(_pass_times(args._pass, args.rounds)))
        return 0
    both = not (args.blas or args.openmp)
    out: dict[str, Any] = {"load_before": os.getloadavg()}
    print(f"load average {out['load_before']}", flush=True)
    if args.blas or both:
        out["blas"] = blas(args.rounds)
    if args.openmp or both:
        out["openmp"] = openmp(args.sentences, args.rounds)
    out["load_after"] = os.getloadavg()
    print(f"load average {out['load_after']}")
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
