"""Sections ``epochs``, ``floor`` and ``threads``: one epoch of the stochastic methods in
full passes of the same tree (before → after, fresh processes per tree), the floors of
the dual methods' epochs (benchmarks/epoch_floor.py), and the batch oracle on 2
threads against 1."""

from __future__ import annotations

import argparse
from typing import Any

import epoch_floor
from harness import label_of, ok_mark, problems_of, skipped_note
from targets import EPOCH_TARGETS, TARGETS

#: fresh processes the ``floor`` section measures in (one process's floor moves by up to
#: 10 %, more than its distance to a target: benchmarks/epoch_floor.py)
FLOOR_PROCESSES = 3
#: the problems of the sections that take a list (``--problems`` narrows them)
EPOCH_PROBLEMS = ["ocr", "conll2000"]
EPOCH_OPTIMIZERS = ["sdca-gap", "oeg", "sag-nus-star"]
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
