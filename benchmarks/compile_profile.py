"""Where a cold numba cache spends its time: compile seconds per jitted function and pass.

    NUMBA_CACHE_DIR=$(mktemp -d) python benchmarks/compile_profile.py -- \
        compare --problem ocr --optimizers sdca-gap,sag-nus,oeg --passes 2 --out /tmp/o

runs a ``crfopt`` command (the arguments after ``--``) in this process with a listener on
numba's ``numba:compile`` and ``numba:run_pass`` events, then prints, on stderr, the
functions that took longest to compile and the compiler passes that took longest.

Compiles nest: typing a caller compiles its callees inside the caller's event. Each
function is charged its *exclusive* time (its event minus the events nested in it), so the
columns add up to the process's total compile time; ``inclusive`` is the whole event. CPU
seconds of the compiling thread are reported beside wall seconds, since the machine this
runs on is shared and wall time moves with its load. ``--json FILE`` writes every record.
Start it with an empty ``NUMBA_CACHE_DIR`` to see a first install; a warm cache compiles
nothing, and the lists are empty.
"""

from __future__ import annotations

import argparse
import atexit
import json
import sys
import threading
import time
from collections import defaultdict
from typing import Any

from numba.core import event


class CompileProfile(event.Listener):
    """Exclusive and inclusive wall/CPU seconds per compiled signature and per pass."""

    def __init__(self) -> None:
        self._local = threading.local()
        self.t0 = time.perf_counter()
        self.functions: list[dict[str, Any]] = []
        self.passes: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0])
        self._lock = threading.Lock()

    def _stack(self) -> list[list[Any]]:
        if not hasattr(self._local, "stack"):
            self._local.stack = []
        return self._local.stack

    def on_start(self, ev: event.Event) -> None:
        # kind, data, wall and CPU at the start, then the wall and CPU of the events nested
        # in it: all of them (a pass's own time) and the compiles only (a function's own
        # time: its passes are part of it, its callees' compiles are not)
        now_w, now_c = time.perf_counter(), time.thread_time()
        self._stack().append([ev.kind, ev.data, now_w, now_c, 0.0, 0.0, 0.0, 0.0])

    def on_end(self, ev: event.Event) -> None:
        stack = self._stack()
        kind, data, w0, c0, any_w, any_c, sub_w, sub_c = stack.pop()
        wall = time.perf_counter() - w0
        cpu = time.thread_time() - c0
        if stack:
            stack[-1][4] += wall
            stack[-1][5] += cpu
        if kind == "numba:compile":  # charge it to the compile it is nested in, if any
            for outer in reversed(stack):
                if outer[0] == "numba:compile":
                    outer[6] += wall
                    outer[7] += cpu
                    break
        with self._lock:
            if kind == "numba:compile":
                func = data["dispatcher"].py_func
                self.functions.append(
                    {
                        "function": f"{func.__module__}.{func.__qualname__}",
                        "args": str(data.get("args")),
                        "at": w0 - self.t0,
                        "wall": wall,
                        "cpu": cpu,
                        "exclusive_wall": wall - sub_w,
                        "exclusive_cpu": cpu - sub_c,
                        "depth": sum(1 for e in stack if e[0] == "numba:compile"),
                    }
                )
            else:
                name = data["name"] if isinstance(data, dict) else str(data)
                row = self.passes[name]
                row[0] += wall - any_w
                row[1] += cpu - any_c
                row[2] += 1

    def report(self, top: int, out: Any = sys.stderr) -> None:
        total_w = sum(f["exclusive_wall"] for f in self.functions)
        total_c = sum(f["exclusive_cpu"] for f in self.functions)
        print(
            f"\n{len(self.functions)} compiles, {total_w:.1f} s wall, {total_c:.1f} s CPU "
            "(exclusive sums; callees nest inside callers)",
            file=out,
        )
        print(f"{'excl cpu':>9} {'excl wall':>9} {'incl wall':>9} {'at':>7}  function", file=out)
        ranked = sorted(self.functions, key=lambda f: -f["exclusive_cpu"])
        for f in ranked[:top]:
            print(
                f"{f['exclusive_cpu']:9.2f} {f['exclusive_wall']:9.2f} {f['wall']:9.2f} "
                f"{f['at']:7.1f}  {f['function']} {f['args'][:70]}",
                file=out,
            )
        by_name: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
        for f in self.functions:
            by_name[f["function"]][0] += f["exclusive_cpu"]
            by_name[f["function"]][1] += 1
        twice = {k: v for k, v in by_name.items() if v[1] > 1}
        if twice:
            print("\ncompiled more than once (specializations):", file=out)
            for name, (cpu, n) in sorted(twice.items(), key=lambda kv: -kv[1][0]):
                print(f"{cpu:9.2f} s CPU  x{n}  {name}", file=out)
        print(f"\n{'excl cpu':>9} {'excl wall':>9} {'calls':>6}  pass", file=out)
        for name, (w, c, n) in sorted(self.passes.items(), key=lambda kv: -kv[1][1])[:top]:
            print(f"{c:9.2f} {w:9.2f} {n:6d}  {name}", file=out)

    def dump(self, path: str) -> None:
        with open(path, "w") as fh:
            json.dump(
                {
                    "functions": self.functions,
                    "passes": {
                        k: {"wall": v[0], "cpu": v[1], "calls": v[2]}
                        for k, v in self.passes.items()
                    },
                },
                fh,
                indent=1,
            )


def _announce_run_starts() -> None:
    """Print when each run's optimizer is about to be built (after the runner's warm-up
    compile): the moment a run starts, which the CLI shows only once the run ends."""
    from crfopt.bench import runner

    warm_up = runner.warm_up

    def announced(spec: Any, params: Any, problem: Any) -> None:
        warm_up(spec, params, problem)
        print(
            f"[profile] run of {spec.name} starts ({time.process_time():.1f} s CPU so far)",
            file=sys.stderr,
            flush=True,
        )

    runner.warm_up = announced


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    own, command = (
        (argv[: argv.index("--")], argv[argv.index("--") + 1 :]) if "--" in argv else ([], argv)
    )
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--top", type=int, default=30, help="rows per list (30)")
    parser.add_argument("--json", default=None, help="write every record to this file")
    args = parser.parse_args(own)
    profile = CompileProfile()
    event.register("numba:compile", profile)
    event.register("numba:run_pass", profile)

    def done() -> None:
        profile.report(args.top)
        if args.json:
            profile.dump(args.json)

    atexit.register(done)
    _announce_run_starts()
    from crfopt.apps.cli import main as cli  # the click group behind the crfopt command

    try:
        cli.main(args=command, prog_name="crfopt", standalone_mode=True)
    except SystemExit as exit_:
        return int(exit_.code or 0)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
