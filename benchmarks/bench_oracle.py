"""One full oracle pass (value + gradient over all n sequences) at paper sizes.

* OCR size: n = 6000, T ≈ 8, K = 26, 128 dense attributes (OCR itself: n = 6251,
  N = 47535; CRFsuite needs 0.173 s for one value+gradient pass on it here).
* CoNLL-2000 size: n = 9000, T ≈ 24, K = 22, ~20 active of 75,000 sparse attributes.

Reported: seconds per pass for the compiled path on 1 thread and on all threads, and for
the pure-NumPy path, with the ratios to the NumPy path measured in the same run.

Two-thread speed-up of the batch oracle (``CRFProblem.value_and_gradient``) on the real
OCR and CoNLL-2000 problems (synthetic stand-ins of their sizes when the data is
missing): 1-thread and 2-thread passes taken alternately in one process
(``numba.set_num_threads``), so drifts of the machine's load hit both sides alike; the
median ratio and its spread (min, max) are reported with the load average. Standalone::

    python benchmarks/bench_oracle.py --speedup [--rounds 15] [--problems ocr,conll2000]
"""

from __future__ import annotations

import time

import numpy as np
import pytest

import crfopt
from crfopt.bench.evaluator import Evaluator
from crfopt.kernels import _numpy as _kernels_numpy

from conftest import bench_problem, threads

SIZES = {
    "ocr-size": dict(n=6000, labels=26, attributes=128, length=8, dense=True, density=0.3),
    "conll-size": dict(n=9000, labels=22, attributes=75000, length=24, density=20 / 75000),
}

_cache: dict[str, crfopt.CRFProblem] = {}


def problem(size: str) -> crfopt.CRFProblem:
    if size not in _cache:
        _cache[size] = crfopt.make_synthetic(seed=0, **SIZES[size])
    return _cache[size]


def _numpy_pass(p: crfopt.CRFProblem, w: np.ndarray) -> float:
    g = np.empty(p.dim)
    return _kernels_numpy.batch_value_grad(p.data, p._get_transpose(), w, True, g)


def _best_of(fn, rounds: int) -> float:
    best = np.inf
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


@pytest.mark.parametrize("size", list(SIZES))
def test_full_oracle_pass(size, benchmark, recorder):
    p = problem(size)
    w = np.random.default_rng(0).normal(scale=0.01, size=p.dim)
    group = f"full value+gradient pass, {size} (n={p.n}, N={p.n_tokens}, d={p.dim})"
    # The NumPy path first: it is the baseline of the ratios.
    with threads(1):
        recorder(group, "numpy path, 1 thread", _best_of(lambda: _numpy_pass(p, w), 2))
        ev = Evaluator(p)
        ev.value_and_gradient(w)  # compile outside the timed region
        recorder(group, "jit, 1 thread", _best_of(lambda: ev.value_and_gradient(w), 7))
    recorder(group, "jit, all threads", _best_of(lambda: ev.value_and_gradient(w), 7))
    with threads(1):
        benchmark.pedantic(ev.value_and_gradient, args=(w,), rounds=5, iterations=1)


def two_thread_speedup(p: crfopt.CRFProblem, rounds: int = 15) -> dict[str, float]:
    """Median and spread of t(1 thread) / t(2 threads) for one full value+gradient pass.

    Each round times one 1-thread pass and one 2-thread pass back to back (the order
    alternating between rounds), so a change of the machine's load between rounds
    moves both; the median is the figure, min/max its spread on this machine.
    """
    import os

    import numba

    w = np.random.default_rng(0).normal(scale=0.01, size=p.dim)
    old = numba.get_num_threads()
    times: dict[int, list[float]] = {1: [], 2: []}
    try:
        for k in (1, 2):  # compile and fault in both thread counts first
            numba.set_num_threads(k)
            p.value_and_gradient(w)
        for r in range(rounds):
            for k in (1, 2) if r % 2 == 0 else (2, 1):
                numba.set_num_threads(k)
                t0 = time.perf_counter()
                p.value_and_gradient(w)
                times[k].append(time.perf_counter() - t0)
    finally:
        numba.set_num_threads(old)
    ratios = np.array(times[1]) / np.array(times[2])
    return {
        "median": float(np.median(ratios)),
        "min": float(ratios.min()),
        "max": float(ratios.max()),
        "t1_median_s": float(np.median(times[1])),
        "t2_median_s": float(np.median(times[2])),
        "load_1min": os.getloadavg()[0],
        "rounds": rounds,
    }


@pytest.mark.parametrize("name", ["ocr", "conll2000"])
def test_two_thread_speedup(name, recorder):
    import numba

    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("needs 2 cores")
    p, label = bench_problem(name)
    res = two_thread_speedup(p, rounds=9)
    group = f"batch oracle, {label}: t(1 thread) / t(2 threads), alternating rounds"
    recorder(group, "median", res["median"], unit="x")
    recorder(group, "min", res["min"], unit="x")
    recorder(group, "max", res["max"], unit="x")


def main(argv: list[str] | None = None) -> None:
    import argparse
    import os

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--speedup", action="store_true", help="the 1- vs 2-thread ratio table")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--problems", default="ocr,conll2000")
    args = ap.parse_args(argv)
    if not args.speedup:
        ap.error("run the timing table with pytest benchmarks/bench_oracle.py; --speedup here")
    print(f"load average before: {os.getloadavg()}")
    for name in args.problems.split(","):
        p, label = bench_problem(name)
        r = two_thread_speedup(p, rounds=args.rounds)
        print(
            f"{label:32s} 1-thread {r['t1_median_s']:.4f} s  2-thread {r['t2_median_s']:.4f} s  "
            f"ratio median {r['median']:.2f}x (min {r['min']:.2f}, max {r['max']:.2f}, "
            f"{r['rounds']} rounds, load {r['load_1min']:.1f})",
            flush=True,
        )


if __name__ == "__main__":  # the script's folder is on sys.path: conftest imports
    main()
