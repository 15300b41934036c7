"""Sections ``epochs``, ``floor``, ``pos-passes`` and ``threads``: one epoch of the
stochastic methods in full passes of the same tree (before → after, fresh processes per
tree), the floors of the dual methods' epochs (benchmarks/epoch_floor.py), an sdca-gap
effective pass against a sag-nus-star one where K is large, and the batch oracle on 2
threads against 1."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from typing import Any

import epoch_floor
from harness import label_of, ok_mark, problems_of, skipped_note
from targets import EPOCH_TARGETS, POS_PASS_RATIO_TARGET, TARGETS

#: fresh processes the ``floor`` section measures in (one process's floor moves by up to
#: 10 %, more than its distance to a target: benchmarks/epoch_floor.py)
FLOOR_PROCESSES = 3
#: the problems of the sections that take a list (``--problems`` narrows them)
EPOCH_PROBLEMS = ["ocr", "conll2000"]
EPOCH_OPTIMIZERS = ["sdca-gap", "oeg", "sag-nus-star"]
#: issue 47 item 2: the large label sets, where SDCA's K² work per entry shows (K = 49, 44)
POS_PASS_PROBLEMS = ["pos-ewt", "pos-conll2000"]
POS_PASS_OPTIMIZERS = ["sdca-gap", "sag-nus-star"]
#: shown beside them, no target: how much of the pass is the stored duals' memory
POS_PASS_VARIANTS = ["sdca-gap[dtype=float32]"]
#: timed epochs per optimizer, after one untimed epoch (SAG-NUS*'s line search settles
#: its Lipschitz estimates in the first, where it makes about twice the forward calls)
POS_PASS_EPOCHS = 3

# Runs in a fresh process per problem (sdca-gap's duals on POS-EWT take 4 GiB, returned
# to the system when it ends): CPU seconds per effective pass, one thread.
_PASS_CHILD = r"""
import json, sys, time
import numba
import crfopt
from crfopt.optim.parse import parse_selection
from threadpoolctl import threadpool_limits
numba.set_num_threads(1)
threadpool_limits(1)
problem = crfopt.load_problem(sys.argv[1])
epochs = int(sys.argv[3])
w = problem.zeros()
problem.value_and_gradient(w)
full = []
for _ in range(3):
    c0 = time.process_time()
    problem.value_and_gradient(w)
    full.append(time.process_time() - c0)
out = {"full_pass_s": min(full), "optimizers": {}}
for name in sys.argv[2].split(";"):
    base, params = parse_selection(name)
    opt = crfopt.get_registry().optimizer(base).create(problem, 0, params)
    opt.run_block(problem.n)
    rows = []
    for _ in range(epochs):
        s0 = problem.counters.snapshot()
        c0 = time.process_time()
        opt.run_block(problem.n)
        dt = time.process_time() - c0
        s1 = problem.counters.snapshot()
        rows.append([dt, s1.effective_passes - s0.effective_passes])
    opt.close()
    del opt
    out["optimizers"][name] = {
        "epochs": rows,
        "per_pass_s": sum(r[0] for r in rows) / sum(r[1] for r in rows),
    }
print(json.dumps(out))
"""


#: the commit before issue 19's speed work (tests/golden/traces.json was written from it)
BEFORE = "2fe8d3c"


def epochs(args: argparse.Namespace) -> dict:
    """Epochs in full passes of the same tree, before (``args.ref``) → after (working tree)."""
    import before_after

    out: dict[str, Any] = {
        "ref": args.ref,
        "unit": "instructions (callgrind)" if args.callgrind else "CPU seconds, one thread",
        "problems": {},
    }
    for name in problems_of(args, EPOCH_PROBLEMS):
        ba = argparse.Namespace(
            ref=args.ref,
            new=None,
            problem=name,
            optimizers=",".join(EPOCH_OPTIMIZERS),
            rounds=1 if args.callgrind else args.rounds,
            epochs=1 if args.callgrind else 3,
            callgrind=args.callgrind,
            keep=args.keep,
        )
        runs = before_after.measure(ba)
        fp = {t: before_after.least(runs, t, "full_pass") for t in ("old", "new")}
        rows = {"full_pass": {"before": fp["old"], "after": fp["new"]}}
        for opt in EPOCH_OPTIMIZERS:
            old, new = (before_after.least(runs, t, opt) for t in ("old", "new"))
            rows[opt] = {
                "before": old,
                "after": new,
                "before_passes": old / fp["old"],
                "after_passes": new / fp["new"],
            }
        out["problems"][name] = rows
    return out


def floor(args: argparse.Namespace) -> dict:
    """The floors of ``sdca-gap``'s and ``oeg``'s epochs with their iterates kept:
    benchmarks/epoch_floor.py on the working tree in ``FLOOR_PROCESSES`` fresh processes
    (one thread, the least of ``--rounds`` in each)."""
    problems = problems_of(args, EPOCH_PROBLEMS)
    return {"runs": epoch_floor.measure_in_processes(problems, args.rounds, FLOOR_PROCESSES)}


def pos_passes(args: argparse.Namespace) -> dict:
    """An sdca-gap effective pass against a sag-nus-star one on POS-EWT and POS-CoNLL, in
    a fresh process per problem: CPU seconds of ``POS_PASS_EPOCHS`` epochs over the
    effective passes they made ((oracle + forward calls)/n), after an untimed epoch."""
    out: dict[str, Any] = {
        "unit": "CPU seconds per effective pass, one thread",
        "epochs": POS_PASS_EPOCHS,
        "problems": {},
    }
    names = ";".join(POS_PASS_OPTIMIZERS + POS_PASS_VARIANTS)
    for name in problems_of(args, POS_PASS_PROBLEMS):
        cmd = [sys.executable, "-c", _PASS_CHILD, name, names, str(POS_PASS_EPOCHS)]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
            raise SystemExit(f"pos-passes on {name}: the measuring process failed: {tail}")
        r = json.loads(done.stdout.strip().splitlines()[-1])
        sdca, sag = (r["optimizers"][o]["per_pass_s"] for o in POS_PASS_OPTIMIZERS)
        out["problems"][name] = {**r, "ratio": sdca / sag}
    return out


def pos_pass_rows(r: dict) -> list[str]:
    """The summary table's rows of the ``pos-passes`` section."""
    rows = []
    for name, x in r.get("problems", {}).items():
        sdca, sag = (x["optimizers"][o]["per_pass_s"] for o in POS_PASS_OPTIMIZERS)
        rows.append(
            f"| K² | {label_of(name)}: sdca-gap effective pass vs sag-nus-star's, 1 thread | "
            f"{sdca:.2f} s | {sag:.2f} s | {x['ratio']:.1f}× | ≤ {POS_PASS_RATIO_TARGET:g}× | "
            f"{ok_mark(x['ratio'] <= POS_PASS_RATIO_TARGET)} |"
        )
    return rows


def pos_pass_section(r: dict) -> list[str]:
    lines = ["## SDCA's K² work: an effective pass where K is large", ""]
    if skipped_note(r, lines, "The per-pass ratios"):
        return lines
    names = list(r["problems"])
    lines += [
        f"CPU seconds per effective pass ((oracle + forward calls)/n) of {r['epochs']} epochs "
        "after an untimed one, one thread, in a fresh process per problem; in brackets the "
        "same in full value+gradient passes of that process.",
        "",
        "| | " + " | ".join(label_of(p) for p in names) + " |",
        "|---|" + "---|" * len(names),
        "| one full pass (s) | "
        + " | ".join(f"{r['problems'][p]['full_pass_s']:.3f}" for p in names)
        + " |",
    ]
    for opt in POS_PASS_OPTIMIZERS + POS_PASS_VARIANTS:
        if any(opt not in r["problems"][p]["optimizers"] for p in names):
            continue
        cells = []
        for p in names:
            x = r["problems"][p]
            per = x["optimizers"][opt]["per_pass_s"]
            made = sum(e[1] for e in x["optimizers"][opt]["epochs"]) / r["epochs"]
            cells.append(f"{per:.3f} s ({per / x['full_pass_s']:.2f}; {made:.2f} passes an epoch)")
        lines.append(f"| `{opt}` | " + " | ".join(cells) + " |")
    lines.append(
        f"| ratio of the first two (target ≤ {POS_PASS_RATIO_TARGET:g}) | "
        + " | ".join(f"**{r['problems'][p]['ratio']:.1f}×**" for p in names)
        + " |"
    )
    return [*lines, ""]


def threads(args: argparse.Namespace) -> dict:
    """The batch oracle on 2 threads against 1: bench_oracle.py's own measurement
    (``two_thread_speedup``: alternating 1- and 2-thread passes in one process)."""
    import bench_oracle

    from conftest import bench_problem

    measure = getattr(bench_oracle, "two_thread_speedup", None)
    if measure is None:
        return {
            "skipped": "benchmarks/bench_oracle.py has no two_thread_speedup() "
            "(the 2-thread measurement of issue 19 item 2) in this tree"
        }
    out: dict[str, Any] = {"problems": {}}
    for name in problems_of(args, EPOCH_PROBLEMS):
        problem, label = bench_problem(name)  # a stand-in of the same size without the data
        out["problems"][name] = {"label": label, **measure(problem, rounds=15)}
    return out


def epoch_section(r: dict) -> list[str]:
    lines = [
        "## Epochs in full passes, before → after",
        "",
        f"One epoch (n iterations) in value+gradient passes of the same tree: before = commit "
        f"`{r['ref']}` (before issue 19's speed work), after = the working tree measured; "
        f"{r['unit']}, each tree in fresh processes (benchmarks/before_after.py's worktrees), "
        "the least figure over rounds.",
        "",
    ]
    if skipped_note(r, lines, "Epochs"):
        return lines
    names = list(r["problems"])
    lines += [
        "| | " + " | ".join(label_of(p) for p in names) + " | target |",
        "|---|" + "---|" * len(names) + "---|",
    ]
    passes = [r["problems"][p]["full_pass"] for p in names]
    fp = " | ".join(f"{x['before']:.4g} → {x['after']:.4g}" for x in passes)
    lines.append(
        f"| one full pass ({'instructions' if 'callgrind' in r['unit'] else 's'}) | {fp} | |"
    )
    for opt in EPOCH_OPTIMIZERS:
        cells = []
        for p in names:
            x = r["problems"][p][opt]
            goal = EPOCH_TARGETS[opt].get(p)
            mark = "" if goal is None else (" ✓" if x["after_passes"] <= goal else " ✗")
            cells.append(f"{x['before_passes']:.2f} → **{x['after_passes']:.2f}**{mark}")
        goals = " / ".join(f"≤ {EPOCH_TARGETS[opt][p]:g}" for p in names if p in EPOCH_TARGETS[opt])
        lines.append(f"| `{opt}` | " + " | ".join(cells) + f" | {goals} |")
    # The pass unit moves with the full pass itself: a faster batch oracle makes an
    # unchanged epoch look dearer. The absolute cost says whether the epoch got cheaper.
    unit = "instructions" if "callgrind" in r["unit"] else "CPU s"
    lines += [
        "",
        f"The same epochs in {unit} (before → after, and how many times cheaper):",
        "",
        "| | " + " | ".join(label_of(p) for p in names) + " |",
        "|---|" + "---|" * len(names),
    ]
    for opt in EPOCH_OPTIMIZERS:
        cells = []
        for p in names:
            x = r["problems"][p][opt]
            cells.append(f"{x['before']:.4g} → {x['after']:.4g} ({x['before'] / x['after']:.2f}×)")
        lines.append(f"| `{opt}` | " + " | ".join(cells) + " |")
    return [*lines, ""]


def floor_section(r: dict) -> list[str]:
    lines = ["## The floor of an epoch that keeps its iterates", ""]
    if skipped_note(r, lines, "The floors"):
        return lines
    runs = r.get("runs", [r])  # a single process's figures before the median of several
    combined = epoch_floor.combine(runs)
    n_runs = len(runs)
    lines += [
        "The work an epoch cannot skip without changing its iterates, each part timed alone "
        "over every sequence, one sequence's tables at a time (benchmarks/epoch_floor.py, "
        "whose docstring gives the reasoning); everything else is left out, so a real "
        "epoch costs more. In full passes of the same process (CPU seconds, one thread, "
        f"the least over rounds), measured in {n_runs} fresh process"
        f"{'es' if n_runs > 1 else ''}: each column gives the median, the floor also the "
        "range (one process's figures move by up to 10 %).",
        "",
        "`sdca-gap`: the oracle sweep (ν_i), one log per entry for each Newton evaluation "
        "(as many as the measured epochs made), and one transcendental per entry to store "
        "μ_γ and have μ_i and its log at the next visit (kept as logs, as now, that takes "
        "two: a log at the step, an exp at the load; the column before the floor counts "
        "them).",
        "",
        *epoch_floor.table("sdca-gap", combined["sdca-gap"], EPOCH_TARGETS["sdca-gap"], label_of),
        "",
        "`oeg` with its defaults since issue 47 (linear trial marginals, docs/algorithms.md "
        "§3.8): per trial (as many as the measured epochs made), the oracle on the trial "
        "scores with its linear marginals, and ⟨θ', μ'⟩, one product per entry.",
        "",
        *epoch_floor.table("oeg", combined["oeg"], EPOCH_TARGETS["oeg"], label_of),
        "",
    ]
    for opt in epoch_floor.OPTIMIZERS:
        goals = EPOCH_TARGETS[opt]
        floors = {name: x["floor"] for name, x in combined[opt].items()}
        above = [
            f"{label_of(p)} ({min(f):.2f} > {goals[p]:g})"
            for p, f in floors.items()
            if min(f) > goals[p]
        ]
        below = [
            f"{label_of(p)} ({max(f):.2f} ≤ {goals[p]:g})"
            for p, f in floors.items()
            if max(f) <= goals[p]
        ]
        straddle = [
            f"{label_of(p)} ({min(f):.2f}–{max(f):.2f} against {goals[p]:g})"
            for p, f in floors.items()
            if min(f) <= goals[p] < max(f)
        ]
        if above:
            lines.append(
                f"- `{opt}`: even the lowest floor lies above the epoch target on "
                + ", ".join(above)
                + ": with these kernels, an epoch that keeps its iterates misses that "
                "target even if everything beyond the floor costs nothing."
            )
        if straddle:
            lines.append(
                f"- `{opt}`: the floor straddles the epoch target on "
                + ", ".join(straddle)
                + ": it does not rule the target out, and it leaves no room for the "
                "rest of an epoch's work."
            )
        if below:
            lines.append(
                f"- `{opt}`: even the highest floor is within the epoch target on "
                + ", ".join(below)
                + ": the floor does not rule that target out."
            )
    return [*lines, ""]


def threads_section(r: dict) -> list[str]:
    lines = ["## Both cores: the batch oracle on 2 threads", ""]
    if skipped_note(r, lines, "The 2-thread ratios"):
        return lines
    lines += [
        "One full value+gradient pass on 1 thread against 2 (benchmarks/bench_oracle.py's "
        "`two_thread_speedup`: passes alternating in one process; median of the per-round "
        "ratios, their spread, and the load average when measured).",
        "",
        "| | 1 thread | 2 threads | speed-up (min–max) | load | target | |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, m in r["problems"].items():
        s = m["median"]
        label = label_of(name) + ("" if m.get("label", name) == name else f" ({m['label']})")
        lines.append(
            f"| {label} | {m['t1_median_s'] * 1e3:.1f} ms | {m['t2_median_s'] * 1e3:.1f} ms | "
            f"{s:.2f}× ({m['min']:.2f}–{m['max']:.2f}) | {m['load_1min']:.1f} | ≥ 1.7× | "
            f"{ok_mark(s >= TARGETS['threads'])} |"
        )
    return [*lines, ""]
