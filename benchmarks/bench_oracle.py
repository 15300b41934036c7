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

On a loaded machine the wall-clock ratio measures the scheduler more than the code (a
fork–join region waits for its slowest thread's next time slice). ``--cpu`` adds a
load-robust estimate from Linux's per-thread CPU clocks (/proc/self/task/*/schedstat):
1-thread CPU seconds over the busiest thread's CPU seconds at 2 threads, with
``OMP_WAIT_POLICY=passive`` so waiting threads do not burn CPU (set it before Python
starts: ``OMP_WAIT_POLICY=passive python benchmarks/bench_oracle.py --speedup --cpu``).
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
    return _kernels_numpy.batch_value_grad(p.data, p.transpose, w, True, g)


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


def _task_cpu_s() -> dict[int, float]:
    """CPU seconds of every thread of this process (Linux schedstat, ns resolution)."""
    import os

    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/schedstat") as f:
                out[int(tid)] = int(f.read().split()[0]) / 1e9
        except OSError:  # a thread that ended meanwhile
            pass
    return out


def cpu_speedup_estimate(p: crfopt.CRFProblem, passes: int = 5, rounds: int = 4) -> dict:
    """1-thread CPU seconds / busiest thread's CPU seconds at 2 threads, per pass.

    Also the work inflation (all threads' CPU at 2 threads over 1 thread's): what the
    parallel version computes on top of the serial one.
    """
    import numba

    w = np.random.default_rng(0).normal(scale=0.01, size=p.dim)
    old = numba.get_num_threads()
    res: dict[int, list[tuple[float, float]]] = {1: [], 2: []}
    try:
        for k in (1, 2):
            numba.set_num_threads(k)
            p.value_and_gradient(w)
        for r in range(rounds):
            for k in (1, 2) if r % 2 == 0 else (2, 1):
                numba.set_num_threads(k)
                a = _task_cpu_s()
                for _ in range(passes):
                    p.value_and_gradient(w)
                b = _task_cpu_s()
                d = [(b[t] - a.get(t, 0.0)) / passes for t in b]
                res[k].append((sum(d), max(d)))
    finally:
        numba.set_num_threads(old)
    total1 = float(np.median([t for t, _ in res[1]]))
    total2 = float(np.median([t for t, _ in res[2]]))
    busiest2 = float(np.median([m for _, m in res[2]]))
    return {"estimate": total1 / busiest2, "inflation": total2 / total1, "cpu1_s": total1}


def main(argv: list[str] | None = None) -> None:
    import argparse
    import os

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--speedup", action="store_true", help="the 1- vs 2-thread ratio table")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--problems", default="ocr,conll2000")
    ap.add_argument("--cpu", action="store_true", help="also the per-thread CPU estimate")
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
        if args.cpu:
            c = cpu_speedup_estimate(p)
            print(
                f"{label:32s} CPU estimate {c['estimate']:.2f}x (1-thread CPU "
                f"{c['cpu1_s']:.4f} s per pass, work inflation at 2 threads "
                f"{c['inflation']:.2f}, OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY')})",
                flush=True,
            )


if __name__ == "__main__":  # the script's folder is on sys.path: conftest imports
    main()
