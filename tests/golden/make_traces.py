"""Write the golden traces that tests/test_epoch_traces.py compares against.

Every registered optimizer runs a few passes on two small synthetic problems (sparse and
dense embeddings, a different size from kernel_replay's) with a fixed seed; the trace's
counted columns and objective values, and the final weights, are stored in traces.json.

The speed work on the optimizers' epochs (issue 19; reports/performance.md) must not
change what they compute, so the golden file is written once from the commit *before*
that work and never regenerated to make a test pass::

    git worktree add /tmp/base 2fe8d3c && mkdir /tmp/path && cd /tmp/path
    ln -s /tmp/base/crfopt crfopt; ln -s /tmp/base/plugins crfopt_plugins
    ln -s /tmp/base/datasets crfopt_datasets
    cd /tmp/base && PYTHONPATH=/tmp/path python $REPO/tests/golden/make_traces.py OUT.json

(the symlink folder puts the old tree's packages first on the path, as
benchmarks/before_after.py does).

A new optimizer (not in the file) is added by running the script with ``--add NAME``,
which keeps every existing entry unchanged.

One exception, set by issue 47: a speed change may move an optimizer's iterates within
the method's own tolerance once the per-pass convergence check
(``benchmarks/convergence_check.py``) has admitted it. That optimizer's entries are then
re-recorded once from the new tree with ``--rerecord NAME… --why TEXT``; the file keeps
the commit and the reason of each re-recording beside the original commit.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

PASSES = 3.0
SEED = 7
COLUMNS = ("effective_passes", "oracle_calls", "updates", "primal", "dual", "duality_gap")


def problems() -> dict[str, Any]:
    import crfopt

    return {
        kind: crfopt.make_synthetic(
            n=24, labels=4, attributes=15, length=6, dense=dense, density=0.35, seed=11
        )
        for kind, dense in (("sparse", False), ("dense", True))
    }


def trace_of(problem: Any, name: str) -> dict[str, Any]:
    import pandas as pd

    import crfopt

    res = crfopt.run(problem, name, passes=PASSES, seed=SEED, checkpoints=[0.5, 1, 1.5, 2, 2.5])
    rows = res.trace
    return {
        "status": res.status,
        "columns": {
            c: [None if pd.isna(v) else float(v) for v in rows[c]] for c in COLUMNS if c in rows
        },
        "w": [float(v) for v in res.w] if res.w is not None else None,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--add", nargs="*", default=None, help="only these optimizers, kept merged")
    ap.add_argument(
        "--rerecord",
        nargs="+",
        default=None,
        metavar="NAME",
        help="replace these optimizers' entries from this tree (needs --why)",
    )
    ap.add_argument("--why", default=None, help="why the re-recorded iterates moved")
    args = ap.parse_args()
    if args.rerecord is not None:
        if not args.why:
            ap.error("--rerecord needs --why: the change and the check that admitted it")
        args.add = args.rerecord
    import numba

    import crfopt

    numba.set_num_threads(1)
    names = sorted(crfopt.get_registry().optimizers) if args.add is None else args.add
    old = json.loads(args.out.read_text()) if args.add is not None and args.out.exists() else {}
    runs = old.get("runs", {})
    rerecorded = old.get("rerecorded", [])
    if args.rerecord is not None:
        unknown = sorted(set(args.rerecord) - {k.split("/")[0] for k in runs})
        if unknown:
            ap.error(f"not in {args.out}: {', '.join(unknown)} (add them with --add)")
        runs = {k: v for k, v in runs.items() if k.split("/")[0] not in args.rerecord}
    for kind, p in problems().items():
        for name in names:
            key = f"{name}/{kind}"
            if key in runs:
                continue
            runs[key] = trace_of(p, name)
            print(key, runs[key]["status"], file=sys.stderr)
    commit = subprocess.run(
        ["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    if args.rerecord is not None:
        rerecorded.append({"optimizers": sorted(args.rerecord), "commit": commit, "why": args.why})
    out = {
        "about": "golden traces of tests/golden/make_traces.py; never regenerate to pass a test",
        "commit": old.get("commit", commit),
        "passes": PASSES,
        "seed": SEED,
        "runs": runs,
    }
    if rerecorded:
        out["rerecorded"] = rerecorded
    args.out.write_text(json.dumps(out, indent=0, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
