"""What limits ``sdca-passcode-wild``'s speed-up on two cores, one figure per cause.

    python benchmarks/passcode_limits.py [--problems ocr,conll2000] [--epochs 3]

Every figure is a ratio to ``sdca-gap``'s epoch (n iterations) on one kernel thread,
measured in the same process (the least of ``--epochs`` epochs, after a warm-up
epoch), in wall time and in CPU time of the whole process (which a loaded machine
disturbs less), with the load average beside it:

1. **the parallel machinery, idle**: ``sdca-passcode-wild`` with two parts run by one
   kernel thread (the parts one after the other): what the private increments Δ_t,
   the per-thread samplers and the block-end restore of w cost when nothing runs in
   parallel;
2. **the speed-up**: the same on two kernel threads; the issue's ideal is 0.5;
3. **the machine's own two-core scaling**: two ``sdca-gap`` processes started together,
   each on its own copy of the problem (no memory shared, only the hardware: the L3
   cache, the memory bus, the clock under two busy cores); their epoch over the epoch
   of one alone;
4. **shared cache lines of w**: the drift of the shared w at block ends, ‖ε‖/‖move‖
   (HYD15's ε: the adds lost to two threads writing one coordinate at once, which the
   restore puts back), and w's size against the L2 cache;
5. **the K² tables**: the bytes of one iteration's tables (a ``dual.blocks.Scratch`` of
   the mean sequence, 7 tables of T·K + (T−1)·K² entries) against the L2 cache of a core;
6. **memory bandwidth**: the bytes of stored duals an iteration reads and writes (μ_i's
   (T·K + (T−1)·K²) entries, twice), at the 2-thread iteration rate, against a
   single-thread copy's bandwidth measured here;
7. **why Wild and not Atomic**: the move of w (``kernels.add_local``) with plain adds
   against the same with an atomic add per entry (LLVM's ``atomicrmw fadd``, a
   compare-and-swap loop on x86; numba has no atomic float add), per iteration.

The seconds are only meaningful on a quiet machine (a 2-thread figure needs both cores);
the drift and the byte counts are not timed.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numba
import numpy as np
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

import crfopt
from crfopt import kernels


def _make(problem: Any, name: str, **params: Any) -> Any:
    q = problem.with_lam(problem.lam)
    spec = crfopt.get_registry().optimizer(name)
    with q.initialization():
        return spec.create(q, 0, params)


def epoch_seconds(
    opt: Any, epochs: int, after: Callable[[], None] | None = None
) -> tuple[float, float]:
    """The least wall time and the least CPU time (every thread of the process) of
    ``epochs`` epochs, after one untimed epoch; ``after`` runs off the clock after each."""
    n = opt.problem.n
    opt.run_block(n)
    wall = cpu = float("inf")
    for _ in range(epochs):
        t0, c0 = time.perf_counter(), time.process_time()
        opt.run_block(n)
        wall = min(wall, time.perf_counter() - t0)
        cpu = min(cpu, time.process_time() - c0)
        if after is not None:
            after()
    return wall, cpu


def _concurrent_epoch(args: tuple[str, int, Any]) -> tuple[float, float]:
    from conftest import bench_problem

    name, epochs, barrier = args
    numba.set_num_threads(1)
    problem, _ = bench_problem(name)
    opt = _make(problem, "sdca-gap")
    opt.run_block(problem.n)  # compile, warm
    barrier.wait()
    return epoch_seconds(opt, epochs)


def two_processes(name: str, epochs: int) -> list[tuple[float, float]]:
    """Each of two fresh processes' ``sdca-gap`` epoch, run at the same time."""
    ctx = multiprocessing.get_context("spawn")
    with ctx.Manager() as manager:
        barrier = manager.Barrier(2)
        with ctx.Pool(2) as pool:
            return pool.map(_concurrent_epoch, [(name, epochs, barrier)] * 2)


@intrinsic
def _atomic_add(typingctx, arr, idx, val):
    """arr[idx] += val as one atomic read-modify-write (``atomicrmw fadd``)."""
    sig = types.void(arr, idx, val)

    def codegen(context, builder, signature, args):
        aryty = signature.args[0]
        ary = context.make_array(aryty)(context, builder, args[0])
        ptr = cgutils.get_item_pointer(context, builder, aryty, ary, [args[1]], wraparound=False)
        builder.atomic_rmw("fadd", ptr, args[2], "monotonic")
        return context.get_dummy_value()

    return sig, codegen


@numba.njit
def _add_local_atomic(data, i, w, scale, E_loc, trans_loc):
    """``kernels.add_local`` with an atomic add per entry."""
    K = data.n_labels
    lo, hi = kernels.support_bounds(data, i)
    for j in range(hi - lo):
        base = np.int64(data.support[lo + j]) * K
        for k in range(K):
            _atomic_add(w, base + k, scale * E_loc[j, k])
    base = data.n_kernel_attributes * K
    for k in range(K):
        for q in range(K):
            _atomic_add(w, base + k * K + q, scale * trans_loc[k, q])


@numba.njit
def _moves(data, idx, w, E_loc, trans_loc, atomic):
    for i in idx:
        if atomic:
            _add_local_atomic(data, i, w, 1e-9, E_loc, trans_loc)
        else:
            kernels.add_local(data, i, w, 1e-9, E_loc, trans_loc)


def move_seconds(problem: Any, atomic: bool, iterations: int = 3000) -> float:
    """Seconds per move of w on sequences drawn uniformly (the least of 3 rounds)."""
    kd = problem.data
    K = problem.n_labels
    E = np.random.default_rng(0).random((crfopt.pieces.max_support(kd), K))
    tr = np.random.default_rng(1).random((K, K))
    idx = np.random.default_rng(2).integers(problem.n, size=iterations)
    w = np.zeros(problem.dim)
    _moves(kd, idx[:5], w, E, tr, atomic)
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        _moves(kd, idx, w, E, tr, atomic)
        best = min(best, (time.perf_counter() - t0) / iterations)
    return best


def copy_bandwidth(megabytes: int = 512) -> float:
    """Bytes per second (read + write) of one thread's large array copy."""
    a = np.ones(megabytes * 2**20 // 8)
    b = np.empty_like(a)
    np.copyto(b, a)
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        np.copyto(b, a)
        best = min(best, time.perf_counter() - t0)
    return 2 * a.nbytes / best


def l2_bytes() -> int | None:
    """A core's L2 cache from sysfs (None where it is not readable)."""
    for index in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*"):
        try:
            if (index / "level").read_text().strip() == "2":
                text = (index / "size").read_text().strip().upper()
                return int(text.rstrip("K")) * 1024 if text.endswith("K") else int(text)
        except OSError:
            return None
    return None


def limits(name: str, epochs: int) -> dict[str, Any]:
    # benchmarks/conftest.py (the script's folder is on sys.path), imported here: under
    # pytest, "conftest" at import time is the tests' one
    from conftest import bench_problem, threads

    problem, label = bench_problem(name)
    kd = problem.data
    K = problem.n_labels
    lengths = np.diff(kd.offsets).astype(float)
    out: dict[str, Any] = {"problem": label, "n": problem.n, "K": K, "dim": problem.dim}
    out["load_before"] = os.getloadavg()[0]
    with threads(1):
        base = epoch_seconds(_make(problem, "sdca-gap"), epochs)
        serial = epoch_seconds(_make(problem, "sdca-passcode-wild", threads=2), epochs)
    with threads(2):
        par_opt = _make(problem, "sdca-passcode-wild", threads=2)
        drifts: list[float] = []

        def read_drift() -> None:
            eps, move = par_opt.drift
            drifts.append(eps / move if move else 0.0)

        parallel, cpu = epoch_seconds(par_opt, epochs, after=read_drift)
    both = two_processes(name, epochs)
    out["load_after"] = os.getloadavg()[0]
    out["epoch_s"], out["epoch_cpu_s"] = base
    # wall-time ratios, and CPU-time ratios (less sensitive to the machine's load)
    out["machinery_idle"] = serial[0] / base[0]
    out["machinery_idle_cpu"] = serial[1] / base[1]
    out["speedup_ratio"] = parallel / base[0]
    out["parallel_work_cpu"] = cpu / base[1]
    out["two_processes"] = max(b[0] for b in both) / base[0]
    out["two_processes_cpu"] = max(b[1] for b in both) / base[1]
    out["drift_max"] = max(drifts)
    l2 = l2_bytes()
    out["w_bytes"] = 8 * problem.dim
    # one iteration's tables: 7 of (T·K + (T−1)·K²) doubles for the mean sequence
    entries = lengths * K + (lengths - 1) * K * K
    out["scratch_bytes"] = float(7 * 8 * entries.mean())
    out["l2_bytes"] = l2
    # stored duals read and written per iteration, at the 2-thread iteration rate
    dual_bytes = 2 * 8 * float(entries.mean())
    out["dual_traffic_gbs"] = dual_bytes * problem.n / parallel / 1e9
    out["copy_bandwidth_gbs"] = copy_bandwidth() / 1e9
    out["move_plain_us"] = move_seconds(problem, atomic=False) * 1e6
    out["move_atomic_us"] = move_seconds(problem, atomic=True) * 1e6
    out["iteration_us"] = base[1] / problem.n * 1e6
    return out


def report(r: dict[str, Any]) -> str:
    l2 = f"{r['l2_bytes'] / 2**20:.2f} MiB" if r["l2_bytes"] else "unknown"
    return "\n".join(
        [
            f"{r['problem']} (n={r['n']}, K={r['K']}, d={r['dim']}), "
            f"load {r['load_before']:.2f} → {r['load_after']:.2f}; "
            f"sdca-gap epoch {r['epoch_s']:.3f} s wall, {r['epoch_cpu_s']:.3f} s CPU "
            f"({r['iteration_us']:.1f} CPU µs an iteration); ratios wall (CPU):",
            f"  1. machinery, 2 parts on 1 thread: {r['machinery_idle']:.3f}× "
            f"({r['machinery_idle_cpu']:.3f}×) sdca-gap's epoch",
            f"  2. 2 threads: {r['speedup_ratio']:.3f}× (ideal 0.5); the work of both threads "
            f"{r['parallel_work_cpu']:.3f}× (ideal 1)",
            f"  3. two sdca-gap processes at once: {r['two_processes']:.3f}× "
            f"({r['two_processes_cpu']:.3f}×) one alone (ideal 1)",
            f"  4. w: {r['w_bytes'] / 2**20:.2f} MiB (L2 {l2}); largest drift at a block end "
            f"‖ε‖/‖move‖ = {r['drift_max']:.2e}",
            f"  5. K² tables of the mean sequence: {r['scratch_bytes'] / 2**20:.2f} MiB a thread",
            f"  6. stored duals at the 2-thread rate: {r['dual_traffic_gbs']:.2f} GB/s; "
            f"one thread's copy: {r['copy_bandwidth_gbs']:.1f} GB/s",
            f"  7. move of w: {r['move_plain_us']:.2f} µs plain, {r['move_atomic_us']:.2f} µs "
            f"atomic ({r['move_atomic_us'] / r['iteration_us']:.2f} of an iteration added)",
        ]
    )


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--problems", default="ocr,conll2000")
    ap.add_argument("--epochs", type=int, default=3, help="timed epochs (the least counts)")
    args = ap.parse_args(argv)
    print(f"crfopt {crfopt.__version__}; load average before: {os.getloadavg()}", flush=True)
    for name in args.problems.split(","):
        print(report(limits(name, args.epochs)), flush=True)


if __name__ == "__main__":
    main()
