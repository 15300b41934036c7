"""Section ``auto``: ``--optimizer auto`` against the fastest optimizer, in the same run.

For every built-in problem, and CoNLL-2002 Dutch NER read as a user's file (``ner-nl
(file)``: the corpus path with ``--template ner``), with ℓ2 and with ℓ1 + ℓ2 (σ =
λ/2, sklearn-crfsuite's tutorial ratio c1 = c2), at numba's thread count:

1. **P*.** The shipped certified optimum when the problem's fingerprint has one (the
   ℓ2 built-ins); otherwise the first candidate (``sdca-passcode-wild``, which has a
   dual) runs until its duality gap is ≤ 1e-6 of a lower bound on P*, and P* is taken
   as the largest dual value of that run: a lower bound, so the sub-optimality is never
   understated, and off by less than 1e-6 relative.
2. **The candidates** (:data:`CANDIDATES`), seed 0, each with the parameters ``auto``
   gives it (``crfopt.apps.auto.CERTIFIED_STOP``: the SDCA variants' own stopping test
   off), until P(w) ≤ P*(1 + 1e-4)
   (checked every half pass; every pass for the batch methods), or 1.5× the fastest
   so far in optimizer seconds (the runner's clock: the optimizer's blocks and its
   setup, evaluations excluded), or :data:`MAX_PASSES`. Seconds of the runs that
   reached the target form the fitting table.
3. **The rule** (``crfopt.apps.auto``) as shipped — or, with ``--refit``, refitted on
   this run's table, which is then written into that module — picks for each case; the
   pick runs again (its own run, the same way) and its seconds are compared with the
   fastest candidate's: the target is ≤ 1.3×. The leave-one-out column (computed when
   the report is rendered) refits the rule without the case's data, under either
   regularization and either name (NER-nl and its file are one), and reads that pick's
   seconds off step 2.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import re
import subprocess
import sys
import time
from pathlib import Path

from harness import (
    RESULTS,
    ROOT,
    git_tree,
    ok_mark,
    problems_of,
    read_partial,
    save_partial,
    skipped_note,
)

import crfopt
from crfopt.apps import auto as auto_rule

#: the built-in problems (``crfopt list``) and the user-file case
AUTO_PROBLEMS = [
    "synthetic",
    "ocr",
    "sag4crf-ner",
    "sag4crf-conll",
    "ner-nl",
    "ner-nl (file)",
    "conll2000",
    "sag4crf-pos",
    "pos-conll2000",
    "pos-ewt",
]
#: every built-in optimizer a user would reach for on each objective; the others
#: (sg, adagrad, the SDCA samplers of the ablations, OEG's variants) are dominated by
#: their family's default in reports/README.md's comparisons
CANDIDATES = {
    False: ["sdca-passcode-wild", "sag-nus-star", "sdca-gap", "saga-nus", "oeg", "lbfgs"],
    True: ["sdca-passcode-wild", "sdca-gap", "prox-saga", "owlqn"],
}
BATCH = {"lbfgs", "owlqn"}
RELATIVE_TARGET = 1e-4
AUTO_TARGET = 1.3
#: a candidate slower than this multiple of the fastest so far is stopped there
CAP = 1.5
MAX_PASSES = 300.0
#: σ/λ of the ℓ1 + ℓ2 cases
L1_RATIO = 0.5
AUTO_MODULE = ROOT / "crfopt" / "apps" / "auto.py"


def load_case(name: str, l1: bool):
    if name == "ner-nl (file)":
        from crfopt.data.sources import data_roots

        root = data_roots()[0] / "conll2002"
        problem = crfopt.load_problem(
            str(root / "ned.train.gz"),
            template="ner",
            test=str(root / "ned.testb.gz"),
        )
    else:
        problem = crfopt.load_problem(name)
    if l1:
        problem = problem.with_regularization(l1=L1_RATIO * problem.lam)
    return problem


def _run(problem, name: str, params: dict, *, target: float | None, p_ref: float | None,
         seconds: float | None, target_gap: float | None = None) -> dict:  # fmt: skip
    from crfopt.bench.runner import Budget, run

    budget = Budget(
        passes=MAX_PASSES,
        seconds=seconds,
        target_suboptimality=None if target is None else target - p_ref,
        target_gap=target_gap,
    )
    t0 = time.perf_counter()
    res = run(
        problem,
        name,
        params={**auto_rule.CERTIFIED_STOP.get(name, {}), **params},
        budget=budget,
        p_star=p_ref,
        checkpoints="every:1" if name in BATCH else "every:0.5",
        metrics=[],
        train_error=False,
    )
    init = float(res.meta.get("init_seconds") or 0.0)
    trace = res.trace
    return {
        "status": res.status,
        "init_s": init,
        "wall_s_with_evaluations": time.perf_counter() - t0,
        "time_s": [float(t) + init for t in trace["time_s"]],
        "passes": [float(p) for p in trace["effective_passes"]],
        "primal": [float(p) for p in trace["primal"]],
        "gap": [float(g) if g == g else None for g in trace["duality_gap"]],
    }


def crossing(r: dict, target: float) -> tuple[float, float] | None:
    """(seconds, passes) at the run's first checkpoint with P ≤ ``target``."""
    for t, p, primal in zip(r["time_s"], r["passes"], r["primal"]):
        if primal <= target:
            return t, p
    return None


def deep_reference(problem, first: str) -> tuple[float, dict]:
    from crfopt.bench.runner import Budget, run

    # a lower bound on P* first: the dual value after two passes
    pre = run(problem, first, budget=Budget(passes=2.0), checkpoints=[2.0], metrics=[],
              train_error=False, params=auto_rule.CERTIFIED_STOP.get(first, {}))  # fmt: skip
    last = pre.trace.iloc[-1]
    lower = max(float(last["primal"] - last["duality_gap"]), 1e-3 * float(last["primal"]))
    deep = _run(problem, first, {}, target=None, p_ref=None, seconds=None,
                target_gap=1e-6 * lower)  # fmt: skip
    duals = [p - g for p, g in zip(deep["primal"], deep["gap"]) if g is not None]
    return max(duals), deep


def measure_case(name: str, l1: bool, log) -> dict:
    problem = load_case(name, l1)
    features = auto_rule.Features.of(problem)
    candidates = CANDIDATES[l1]
    runs: dict[str, dict] = {}
    from crfopt.bench.optimum import shipped_optimum

    known = None if l1 else shipped_optimum(problem)
    if known is not None:
        p_ref, source = known.p_star, "shipped certified P*"
    else:
        log(f"    P* by {candidates[0]} to a gap of 1e-6 of a lower bound")
        p_ref, deep = deep_reference(problem, candidates[0])
        bracket = min(deep["primal"]) - p_ref
        source = f"largest dual of {candidates[0]}'s run (P − P* ≤ {bracket / p_ref:.1e} P*)"
        runs[candidates[0]] = deep
    target = p_ref * (1 + RELATIVE_TARGET)
    fastest = math.inf
    for c in candidates:
        if c not in runs:
            cap = None if not math.isfinite(fastest) else CAP * fastest
            log(f"    {c}" + (f" (cap {cap:.1f} s)" if cap else ""))
            runs[c] = _run(problem, c, {}, target=target, p_ref=p_ref, seconds=cap)
        hit = crossing(runs[c], target)
        runs[c]["reached_s"], runs[c]["reached_passes"] = hit if hit else (None, None)
        if hit:
            fastest = min(fastest, hit[0])
    return {
        "problem": name,
        "l1": l1,
        "sigma": problem.l1,
        "lam": problem.lam,
        "features": {
            k: getattr(features, k) for k in ("n", "tokens", "labels", "dim", "l1", "threads")
        },
        "p_star": p_ref,
        "p_star_source": source,
        "target": target,
        "runs": runs,
    }


def compact(run: dict) -> dict:
    """``run`` without its per-checkpoint lists, with its last checkpoint's passes."""
    if "passes" in run:
        run["final_passes"] = run["passes"][-1]
        run["final_seconds"] = run["time_s"][-1]
    for key in ("time_s", "passes", "primal", "gap"):
        run.pop(key, None)
    return run


def measurement_of(case: dict) -> auto_rule.Measurement:
    return auto_rule.Measurement(
        case["problem"] + (" l1" if case["l1"] else ""),
        auto_rule.Features(**case["features"]),
        {c: r["reached_s"] for c, r in case["runs"].items()},
    )


def write_table(cases: list[dict], path: Path = AUTO_MODULE) -> None:
    """Replace the MEASURED block of crfopt/apps/auto.py with this run's table (then
    ``ruff format`` it, when ruff is installed, so the module stays formatted)."""
    lines = ["MEASURED: tuple[Measurement, ...] = ("]
    for case in cases:
        f = case["features"]
        feats = (f["n"], f["tokens"], f["labels"], f["dim"], f["l1"], f["threads"])
        secs = {
            c: None if r["reached_s"] is None else round(r["reached_s"], 3)
            for c, r in case["runs"].items()
        }
        name = case["problem"] + (" l1" if case["l1"] else "")
        lines.append(f"    _m({name!r}, {feats!r}, {secs!r}),")
    lines.append(")")
    text = path.read_text(encoding="utf-8")
    new, count = re.subn(
        r"(# BEGIN MEASURED\n).*?(\n# END MEASURED)",
        lambda m: m.group(1) + "\n".join(lines) + m.group(2),
        text,
        flags=re.S,
    )
    if count != 1:
        raise RuntimeError(f"{path}: the MEASURED markers were not found")
    path.write_text(new, encoding="utf-8")
    with contextlib.suppress(OSError):
        subprocess.run([sys.executable, "-m", "ruff", "format", "-q", str(path)], check=False)


PARTIAL = RESULTS.with_name("auto-partial.json")


def warm_up() -> None:
    """One-time costs of a process off the clock: each candidate's first run loads its
    kernels (seconds) and starts numba's thread pool, which the runner's own warm-up on
    a two-sequence problem does not cover."""
    from crfopt.bench.runner import run

    for dense in (False, True):
        tiny = crfopt.make_synthetic(n=256, seed=0, dense=dense)  # 2 parts of ≥ 64
        for l1, names in CANDIDATES.items():
            problem = tiny.with_regularization(l1=L1_RATIO * tiny.lam) if l1 else tiny
            for name in names:
                run(problem, name, passes=2.0, checkpoints="every:0.5", metrics=[])


def auto(args: argparse.Namespace) -> dict:
    def log(msg: str) -> None:
        print(msg, flush=True)

    warm_up()
    # each case is saved as it ends: a crash or an interrupt loses one case, and
    # --resume takes the saved ones back (the run's tree is kept with each)
    saved = read_partial(PARTIAL) if args.resume else {}
    cases, failed = [], {}
    for name in problems_of(args, AUTO_PROBLEMS):
        for l1 in (False, True):
            key, label = f"{name}|{int(l1)}", f"{name}, {'ℓ1 + ℓ2' if l1 else 'ℓ2'}"
            if key in saved:
                log(f"  auto: {label}: taken back, measured at {saved[key]['tree']}")
                cases.append(saved[key])
                continue
            log(f"  auto: {label}")
            try:
                case = measure_case(name, l1, log)
            except Exception as exc:  # one problem's failure is reported, the rest run
                failed[key] = f"{type(exc).__name__}: {exc}"
                log(f"    failed: {failed[key]}")
                continue
            case["tree"] = git_tree()
            cases.append(case)
            saved[key] = case
            save_partial(PARTIAL, saved)
    if not cases:
        return {"skipped": f"--problems names none of {', '.join(AUTO_PROBLEMS)}"}
    table = [measurement_of(c) for c in cases]
    if args.refit:
        write_table(cases)
        rule = auto_rule.fit(table)
    else:
        rule = auto_rule.RULE
    for case, m in zip(cases, table):
        problem = load_case(case["problem"], case["l1"])
        choice = rule.choose(auto_rule.Features.of(problem))
        best = m.fastest()
        cap = 3 * best[1] if best else None
        log(f"    auto on {m.problem}: {choice.optimizer}")
        r = _run(problem, choice.optimizer, dict(choice.params), target=case["target"],
                 p_ref=case["p_star"], seconds=cap)  # fmt: skip
        hit = crossing(r, case["target"])
        case["auto"] = {
            "optimizer": choice.optimizer,
            "reason": choice.reason,
            "reached_s": hit[0] if hit else None,
            "reached_passes": hit[1] if hit else None,
            "ratio": hit[0] / best[1] if hit and best else None,
            "status": r["status"],
        }
        del problem
    for case in cases:  # the report keeps each run's outcome, not its whole trace
        for run in case["runs"].values():
            compact(run)
    return {
        "failed": failed,
        "refit": bool(args.refit),
        "rule": {
            key: {
                "tree": f.tree.describe(),
                "worst": _finite(f.worst),
                "mean": _finite(f.mean),
                "fitted_on": f.fitted_on,
            }
            for key, f in (("l2", rule.l2), ("l1", rule.l1))
        },
        "cases": cases,
    }


def same_data(a: str, b: str) -> bool:
    """Whether two cases are one problem's data (NER-nl built-in and read as a file)."""
    return a.removesuffix(" (file)") == b.removesuffix(" (file)")


def leave_one_out(table: list[auto_rule.Measurement], k: int) -> tuple[str, float]:
    """The pick for case ``k`` of the rule refitted without its problem's data (either
    regularization), and that pick's ratio to the fastest, read off the candidates."""
    base = table[k].problem.removesuffix(" l1")
    others = [m for m in table if not same_data(m.problem.removesuffix(" l1"), base)]
    pick = auto_rule.fit(others).choose(table[k].features).optimizer
    return pick, table[k].ratio(pick)


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def _s(x: float | None) -> str:
    return "—" if x is None else f"{x:.2f}"


def auto_section(r: dict) -> list[str]:
    lines = ["## `auto` against the fastest optimizer", ""]
    if skipped_note(r, lines, "auto"):
        return lines
    lines += [
        "`crfopt train`'s default optimizer, `auto` (crfopt/apps/auto.py), against every "
        "candidate, each until (P − P*)/P* ≤ 1e-4, seed 0, in optimizer seconds "
        "(benchmarks/perf_auto.py's docstring gives the set-up). "
        + ("The rule was refitted on this run's candidates (`--refit`). " if r["refit"] else "")
        + "Ratio: `auto`'s seconds (its own run) over the fastest candidate's; "
        "leave-one-out: the rule refitted without the problem, its pick's seconds "
        "read off the candidates' runs.",
        "",
        "| problem | fastest | every candidate (s; — not within 1.5× the fastest) | "
        "auto's pick | auto s | ratio | | leave-one-out pick (ratio) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    table = [measurement_of(case) for case in r["cases"]]
    for k, case in enumerate(r["cases"]):
        m = table[k]
        best = m.fastest()
        loo, loo_ratio = leave_one_out(table, k)
        a = case["auto"]
        every = ", ".join(f"`{c}` {_s(run['reached_s'])}" for c, run in case["runs"].items())
        ratio = a["ratio"]
        lines.append(
            f"| {m.problem.replace(' l1', ', ℓ1 + ℓ2')} | "
            + (f"`{best[0]}` {best[1]:.2f} s" if best else "none")
            + f" | {every} | `{a['optimizer']}` | {_s(a['reached_s'])} | "
            + ("—" if ratio is None else f"**{ratio:.2f}**")
            + f" | {ok_mark(ratio is not None and ratio <= AUTO_TARGET)} | "
            + f"`{loo}` ({_s(_finite(loo_ratio))}) |"
        )
    lines.append("")
    for key, why in r.get("failed", {}).items():
        name, l1 = key.split("|")
        lines.append(f"- {name}, {'ℓ1 + ℓ2' if l1 == '1' else 'ℓ2'}: not measured ({why}).")
    for key, label in (("l2", "ℓ2"), ("l1", "ℓ1 + ℓ2")):
        s = r["rule"][key]
        if s["worst"] is None:
            lines.append(f"- Rule for {label}: no rule reached the target everywhere.")
            continue
        lines.append(
            f"- Rule for {label}: {s['tree']} (worst {s['worst']:.2f}×, geometric mean "
            f"{s['mean']:.2f}× the fastest over {s['fitted_on']} problems)."
        )
    lines.append("")
    return lines
