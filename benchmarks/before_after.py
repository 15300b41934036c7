"""Epoch cost of this tree against an earlier commit, measured in the same session.

    python benchmarks/before_after.py --ref 6465620 [--new HEAD] [--problem ocr]
    python benchmarks/before_after.py --ref 6465620 --callgrind --keep ~/.cache/crfopt-ba

A refactoring must not slow the optimizers down. This script checks out ``--ref`` (and
``--new``, else the working tree is used) into git worktrees and runs one fresh process
per tree. Each process loads the problem and measures one full value+gradient pass and
epochs (``run_block(n)``) of each optimizer after a warm-up block, with numba and BLAS on
one thread. It prints per-tree figures, epochs in full-pass units of the same tree, and
the new/old ratios.

Two measures:

* ``seconds`` (default): CPU seconds (``time.process_time``), ``--rounds`` processes per
  tree, alternating old and new so that the machine's drift hits both alike; the minimum
  across rounds is reported. On a quiet machine this is the figure users feel.
* ``--callgrind``: instructions executed, counted by valgrind's callgrind around each
  measured region only (``--instr-atstart=no``, then ``callgrind_control`` switches
  instrumentation on and dumps after each region). Counts repeat exactly whatever else the
  machine runs, so a 5 % change is visible on a loaded 2-core machine where seconds move
  by 30 %. The kernels are compiled for the CPU valgrind emulates (no AVX-512), the same for
  both trees, and the first run of a tree compiles them under valgrind (about 15 minutes):
  ``--keep DIR`` keeps the worktrees and their numba caches for later runs.

Each tree is put first on ``sys.path`` through a folder of symlinks named like the
installed packages (``crfopt``, ``crfopt_plugins``, ``crfopt_datasets``), so the installed
entry points import that tree's plugins.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {"crfopt": "crfopt", "crfopt_plugins": "plugins", "crfopt_datasets": "datasets"}

# Runs inside each child process: the tree's own crfopt is the one on sys.path first.
CHILD = r"""
import json, os, subprocess, sys, time
import numba
import crfopt
from threadpoolctl import threadpool_limits
numba.set_num_threads(1)  # epochs are single-threaded: so is their unit
threadpool_limits(1)
problem = crfopt.load_problem(sys.argv[1])
names = sys.argv[2].split(",")
epochs = int(sys.argv[3])
callgrind = sys.argv[4] == "callgrind"

def ctl(*args):
    subprocess.run(["callgrind_control", *args, str(os.getpid())], check=True, capture_output=True)

def measure(label, f):
    if callgrind:
        f()
        ctl("-d", label)
        return None
    c0 = time.process_time()
    f()
    return time.process_time() - c0

w = problem.zeros()
problem.value_and_gradient(w)
optimizers = {}
for name in names:
    opt = crfopt.get_registry().optimizer(name).create(problem, 0, {})
    opt.run_block(50)  # compile and warm up
    optimizers[name] = opt
if callgrind:
    ctl("-i", "on")
    ctl("-z")
out = {"crfopt": crfopt.__file__}
full_pass = lambda: problem.value_and_gradient(w)  # noqa: E731
out["full_pass"] = [measure("full_pass", full_pass) for _ in range(epochs)]
for name, opt in optimizers.items():
    out[name] = [measure(name, lambda: opt.run_block(problem.n)) for _ in range(epochs)]
if callgrind:
    ctl("-i", "off")
print(json.dumps(out))
"""


def _worktree(ref: str, where: Path) -> Path:
    """A detached worktree of ``ref`` at ``where`` (reused when it is already there).

    ``ref`` is resolved in this repository first: inside a kept worktree ``HEAD`` or
    ``HEAD~1`` would name the worktree's own commit, and the comparison would silently
    run against whatever commit an earlier run left there.
    """
    commit = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--verify", f"{ref}^{{commit}}"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    if (where / ".git").exists():
        subprocess.run(["git", "-C", str(where), "checkout", "-q", "--detach", commit], check=True)
        return where
    subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(where), commit],
        check=True,
        capture_output=True,
    )
    return where


def _path_folder(tree: Path, folder: Path) -> Path:
    """A folder whose entries are named like the installed packages and point into ``tree``."""
    folder.mkdir(parents=True, exist_ok=True)
    for package, source in PACKAGES.items():
        link = folder / package
        if link.is_symlink():
            link.unlink()
        link.symlink_to(tree / source)
    return folder


def _callgrind_counts(folder: Path) -> dict[str, list[float]]:
    """Instructions per dumped region, from the ``callgrind.out.*.N`` files in ``folder``."""
    counts: dict[str, list[float]] = {}
    dumps = sorted(folder.glob("callgrind.out.*.*"), key=lambda p: int(p.suffix[1:]))
    for dump in dumps:
        text = dump.read_text(errors="replace")
        label = re.search(r"^desc: Trigger: .*dump (\S+)", text, re.M)
        total = re.search(r"^summary: (\d+)", text, re.M)
        if label and total:
            counts.setdefault(label.group(1), []).append(float(total.group(1)))
    return counts


def _run(folder: Path, args: argparse.Namespace) -> dict:
    env = dict(os.environ, PYTHONPATH=str(folder), PYTHONDONTWRITEBYTECODE="1")
    mode = "callgrind" if args.callgrind else "seconds"
    cmd = [sys.executable, "-c", CHILD, args.problem, args.optimizers, str(args.epochs), mode]
    work = folder / "out"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    if args.callgrind:
        cmd = ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--smc-check=all-non-file"]
        cmd += [sys.executable, "-c", CHILD, args.problem, args.optimizers, str(args.epochs), mode]
    done = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True, cwd=str(work))
    out = json.loads(done.stdout.strip().splitlines()[-1])
    if args.callgrind:
        out.update(_callgrind_counts(work))
    return out


@contextlib.contextmanager
def _trees(args: argparse.Namespace) -> Iterator[dict[str, Path]]:
    """The symlink folders of the old and new trees (worktrees removed afterwards unless kept)."""
    base = (
        Path(args.keep).expanduser() if args.keep else Path(tempfile.mkdtemp(prefix="crfopt-ba-"))
    )
    trees = {"old": _worktree(args.ref, base / "tree-old")}
    trees["new"] = _worktree(args.new, base / "tree-new") if args.new else ROOT
    try:
        yield {label: _path_folder(tree, base / f"path-{label}") for label, tree in trees.items()}
    finally:
        if not args.keep:
            for tree in trees.values():
                if tree != ROOT:
                    subprocess.run(
                        ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)],
                        check=False,
                        capture_output=True,
                    )
            shutil.rmtree(base, ignore_errors=True)


def measure(args: argparse.Namespace) -> dict[str, list[dict]]:
    """One child process per tree and round (old and new alternating): ``{"old": [...],
    "new": [...]}``, each entry the child's figures per region (``full_pass`` and each
    optimizer name: seconds, or instructions under callgrind). Used by this script's
    ``main`` and by benchmarks/performance.py. ``args`` holds ``ref``, ``new``, ``problem``,
    ``optimizers`` (comma-separated), ``rounds``, ``epochs``, ``callgrind`` and ``keep``.
    """
    runs: dict[str, list[dict]] = {"old": [], "new": []}
    with _trees(args) as folders:
        for r in range(args.rounds):
            for label in ("old", "new"):
                runs[label].append(_run(folders[label], args))
                print(f"round {r + 1}/{args.rounds}: {label} done", file=sys.stderr)
    for label, label_runs in runs.items():
        for run in label_runs:
            if f"path-{label}" not in run["crfopt"]:
                raise SystemExit(f"the {label} process imported another crfopt: {run['crfopt']}")
    return runs


def least(runs: dict[str, list[dict]], label: str, name: str) -> float:
    """The least figure of region ``name`` over every round of tree ``label``."""
    return min(min(r[name]) for r in runs[label])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ref", required=True, help="the earlier commit to compare with")
    parser.add_argument("--new", default=None, help="a later commit (default: the working tree)")
    parser.add_argument("--problem", default="ocr")
    parser.add_argument("--optimizers", default="sdca-gap,sag-nus-star,oeg")
    parser.add_argument("--rounds", type=int, default=3, help="processes per tree (seconds)")
    parser.add_argument(
        "--epochs", type=int, default=None, help="measured epochs per process (3; callgrind: 1)"
    )
    parser.add_argument("--callgrind", action="store_true", help="count instructions instead")
    parser.add_argument("--keep", default=None, help="keep the worktrees (and caches) here")
    args = parser.parse_args(argv)
    if args.callgrind:
        args.rounds = 1  # counts repeat exactly
    if args.epochs is None:
        args.epochs = 1 if args.callgrind else 3
    names = args.optimizers.split(",")
    runs = measure(args)
    unit = "instructions (callgrind)" if args.callgrind else "CPU seconds, one thread"
    print(f"\n{args.problem}: old = {args.ref}, new = {args.new or 'the working tree'}; {unit}\n")
    print("| | old | new | new/old | old, full passes | new, full passes |")
    print("|---|---|---|---|---|---|")
    fp = {label: least(runs, label, "full_pass") for label in runs}
    print(
        f"| full pass | {fp['old']:.4g} | {fp['new']:.4g} | {fp['new'] / fp['old']:.3f} | 1 | 1 |"
    )
    for name in names:
        old, new = least(runs, "old", name), least(runs, "new", name)
        print(
            f"| {name} epoch | {old:.4g} | {new:.4g} | {new / old:.3f} "
            f"| {old / fp['old']:.2f} | {new / fp['new']:.2f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
