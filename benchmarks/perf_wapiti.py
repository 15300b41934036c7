"""Section ``wapiti``: Wapiti trained on exactly crfopt's feature map and λ (raw
observation mode), each of its algorithms timed to P*(1 + 1e-4) against crfopt's best
(benchmarks/wapiti.py builds and runs it)."""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

import wapiti as wapiti_tool
from crfsuite import crfsuite_reference
from harness import (
    RESULTS,
    label_of,
    now_utc,
    ok_mark,
    problems_of,
    progress_printer,
    read_partial,
    save_partial,
    skipped_note,
)
from perf_baselines import P3_PROBLEMS, _time_to_target
from targets import RELATIVE_TARGET, WAPITI_TARGET

import crfopt

#: Wapiti's training algorithms (``rprop`` is ``rprop+``: weight backtracking); ``-sparse``
#: adds its sparse forward-backward (``-s``)
WAPITI_ALGORITHMS = ["l-bfgs", "l-bfgs-sparse", "rprop+", "rprop-", "bcd", "sgd-l1"]


def _wapiti_objective(problem, model: Path) -> float:
    """crfopt's P at the weights of a raw-mode Wapiti model."""
    from crfopt.bench.evaluator import Evaluator

    w = wapiti_tool.weights_from_raw(problem, wapiti_tool.dump(model))
    return Evaluator(problem).primal(w)


def _wapiti_algorithm(
    problem, data: Path, model: Path, name: str, threads: int, target: float, cap: float
) -> dict:
    """One Wapiti algorithm until its objective is ≤ ``target`` (crfopt's P scale), or
    ``cap`` seconds. Wapiti prints n·P for L-BFGS and R-PROP, which stop there; BCD and
    SGD-L1 print no objective, so they run again with 1, 2, 4… iterations and crfopt
    evaluates P at each run's weights. Times are Wapiti's own clock, which includes the
    training-error evaluation it makes after each iteration."""
    algorithm, sparse = (
        (name[: -len("-sparse")], True) if name.endswith("-sparse") else (name, False)
    )
    n_target = problem.n * target
    common = dict(rho2=problem.n * problem.lam, threads=threads, sparse=sparse)
    out: dict[str, Any] = {"algorithm": algorithm, "sparse": sparse, "cap_s": cap}
    if algorithm in ("bcd", "sgd-l1"):
        tries, spent, m = [], 0.0, 1
        while spent < cap:
            run = wapiti_tool.train(
                data, model, algorithm=algorithm, maxiter=m, timeout=cap - spent, **common
            )
            spent += run.wall_s
            if run.crashed or run.timed_out or not run.iterations:
                break
            p = _wapiti_objective(problem, model)
            tries.append({"iterations": m, "seconds": run.iterations[-1].seconds, "primal": p})
            print(f"    {name}: {m} iteration(s), P = {p:.8f}", flush=True)
            if p <= target:
                break
            m *= 2
        out.update(tries=tries, returncode=run.returncode, crashed=run.crashed)
        reached = [t for t in tries if t["primal"] <= target]
        out["seconds_to_target"] = reached[0]["seconds"] if reached else None
        out["iterations_to_target"] = reached[0]["iterations"] if reached else None
    else:
        run = wapiti_tool.train(
            data,
            model,
            algorithm=algorithm,
            stop=lambda it: it.objective is not None and it.objective <= n_target,
            timeout=cap,
            echo=progress_printer(f"{name}: "),
            **common,
        )
        first = next(
            (it for it in run.iterations if it.objective is not None and it.objective <= n_target),
            None,
        )
        out.update(
            returncode=run.returncode,
            crashed=run.crashed,
            iterations=len(run.iterations),
            last_objective=run.final_objective,
            seconds_to_target=first.seconds if first else None,
            iterations_to_target=first.number if first else None,
        )
        if run.iterations:
            out["seconds_per_iteration"] = run.iterations[-1].seconds / len(run.iterations)
    if out["crashed"]:
        print(f"    Wapiti {name} crashed: {out['crashed']}", flush=True)
    return out


#: the convergence check's stop: Wapiti's objective moved less than this, relatively,
#: over its last 5 iterations (its gradient test, ‖g‖ ≤ 1e-5 max(‖w‖, 1) on n·P, can take
#: thousands of iterations past the point where n·P has settled)
WAPITI_CONVERGED = 1e-10
#: ... or its printed n·P, plus the half unit its two decimals may hide, came within this
#: of n·P*: its weights are then within 1e-6 of P* for certain, without the hundreds of
#: iterations that settling to WAPITI_CONVERGED takes on CoNLL-2000 or POS-EWT (2-20 s
#: each). Without the half unit, CoNLL-2000's check stopped at 1.2e-6 (2026-12-08).
WAPITI_CHECK_RELATIVE = 5e-7


def _wapiti_converged(problem, data: Path, model: Path, p_star: float, cap: float) -> dict:
    """Wapiti's L-BFGS (1 thread) until its printed n·P is within
    :data:`WAPITI_CHECK_RELATIVE` of n·P* or it has settled (:data:`WAPITI_CONVERGED`):
    its feature count against d and its objective against n·P*, printed (two decimals)
    and at its weights (exact)."""
    n_p_star = problem.n * p_star
    run = wapiti_tool.train(
        data,
        model,
        rho2=problem.n * problem.lam,
        timeout=cap,
        options=["--stopeps", repr(WAPITI_CONVERGED)],
        # the printed 7832.13 may be n·P = 7832.1349: half a unit of the second decimal
        stop=lambda it: (
            it.objective is not None
            and it.objective + 0.005 <= n_p_star * (1 + WAPITI_CHECK_RELATIVE)
        ),
        keep_model=True,
        echo=progress_printer("l-bfgs: "),
    )
    target = n_p_star * (1 + RELATIVE_TARGET)
    first = next(
        (it for it in run.iterations if it.objective is not None and it.objective <= target), None
    )
    out = {
        # the same run times 1-thread L-BFGS to P*(1 + 1e-4): its trajectory is the one a
        # run stopped there would follow
        "l-bfgs": {
            "algorithm": "l-bfgs",
            "sparse": False,
            "cap_s": cap,
            "returncode": run.returncode,
            "crashed": run.crashed,
            "iterations": len(run.iterations),
            "last_objective": run.final_objective,
            "seconds_to_target": first.seconds if first else None,
            "iterations_to_target": first.number if first else None,
        },
        "features": run.features,
        "dim": problem.dim,
        "iterations": len(run.iterations),
        "seconds": run.iterations[-1].seconds if run.iterations else None,
        "timed_out": run.timed_out,
        "crashed": run.crashed,
        "printed_objective": run.final_objective,
        "n_p_star": n_p_star,
    }
    if run.returncode == 0:
        p = _wapiti_objective(problem, model)
        out["crfopt_P_at_wapiti_weights"] = p
        out["relative_difference"] = (p - p_star) / p_star
    return out


#: the problems measured so far by a wapiti run that has not ended (a crash or an
#: interrupt loses one problem; --resume takes the others back)
WAPITI_PARTIAL = RESULTS.with_name("wapiti-partial.json")


def _measure_problem(args: argparse.Namespace, name: str) -> dict[str, Any]:
    """One problem: CRFsuite's training, Wapiti's check, then on each thread count every
    Wapiti algorithm and crfopt's optimizers to P*(1 + 1e-4)."""
    from crfopt.bench.optimum import cached_optimum, shipped_optimum

    from conftest import threads as limit_threads

    problem = crfopt.load_problem(name)
    known = cached_optimum(problem) or shipped_optimum(problem)
    if known is None:
        return {"skipped": f"no certified P*: run crfopt optimum --problem {name}"}
    p_star = known.p_star
    target = p_star * (1 + RELATIVE_TARGET)
    cs = crfsuite_reference(problem, retrain=args.retrain_crfsuite)
    entry: dict[str, Any] = {
        "measured_at": now_utc(),
        "n": problem.n,
        "dim": problem.dim,
        "lam": problem.lam,
        "rho2": problem.n * problem.lam,
        "p_star": p_star,
        "target": target,
        # CRFsuite's L-BFGS to its own convergence, as in P3 (cached: not measured now)
        "crfsuite": {k: cs.get(k) for k in ("train_s", "objective", "cached", "measured_at")},
        "threads": {},
    }
    with tempfile.TemporaryDirectory(prefix="crfopt-wapiti-") as tmp:
        data, model = Path(tmp) / "train.txt", Path(tmp) / "model"
        wapiti_tool.write_raw(problem, data)
        print(f"  {name}: Wapiti L-BFGS to n·P* or convergence (the equality check)", flush=True)
        entry["check"] = _wapiti_converged(problem, data, model, p_star, args.wapiti_check_seconds)
        print(f"  {name}: {json.dumps(entry['check'])}", flush=True)
        for k in args.threads:
            algos: dict[str, Any] = {}
            for algo in args.wapiti_algorithms:
                if k == 1 and algo == "l-bfgs":
                    algos[algo] = entry["check"].pop("l-bfgs")
                    continue
                print(f"  {name}, {k} thread(s): Wapiti {algo}", flush=True)
                algos[algo] = _wapiti_algorithm(
                    problem, data, model, algo, k, target, args.wapiti_seconds
                )
            reached = {a: r for a, r in algos.items() if r["seconds_to_target"] is not None}
            fastest = (
                min(reached, key=lambda a: reached[a]["seconds_to_target"]) if reached else None
            )
            # crfopt runs no longer than Wapiti's fastest or CRFsuite, whichever is longer
            cap = max(
                reached[fastest]["seconds_to_target"] if fastest else args.wapiti_seconds,
                cs["train_s"],
            )
            runs = {}
            with limit_threads(k):
                for opt in args.optimizers:
                    print(f"  {name}, {k} thread(s): crfopt {opt}", flush=True)
                    runs[opt] = _time_to_target(problem, opt, target, p_star, args.passes, cap)
            ours = {o: r for o, r in runs.items() if r["reached"]}
            best = min(ours, key=lambda o: ours[o]["optimizer_s"]) if ours else None
            entry["threads"][str(k)] = {
                "wapiti": algos,
                "wapiti_fastest": fastest,
                "crfopt": runs,
                "crfopt_best": best,
                "ratio": (
                    ours[best]["optimizer_s"] / reached[fastest]["seconds_to_target"]
                    if best and fastest
                    else None
                ),
                "ratio_crfsuite": ours[best]["optimizer_s"] / cs["train_s"] if best else None,
            }
    return entry


def wapiti(args: argparse.Namespace) -> dict:
    """Wapiti on crfopt's feature map and λ (raw observation mode), 1 and 2 threads, and
    CRFsuite on the same problems in the same run.

    Each problem is saved as it ends (:data:`WAPITI_PARTIAL`), and ``--resume`` takes
    those back. A run narrowed by ``--problems`` keeps the earlier run's other problems,
    each with its own date: POS-EWT alone takes hours."""
    try:
        binary = wapiti_tool.wapiti_binary()
    except wapiti_tool.WapitiUnavailable as exc:
        return {"skipped": f"Wapiti unavailable: {exc}"}
    earlier = read_partial(RESULTS).get("wapiti", {}).get("problems", {})
    saved = read_partial(WAPITI_PARTIAL) if args.resume else {}
    for name in problems_of(args, P3_PROBLEMS):
        if name in saved:
            print(f"  {name}: taken back from {WAPITI_PARTIAL}", flush=True)
            continue
        saved[name] = _measure_problem(args, name)
        save_partial(WAPITI_PARTIAL, saved)
    merged = {**{n: e for n, e in earlier.items() if "skipped" not in e}, **saved}
    WAPITI_PARTIAL.unlink(missing_ok=True)
    order = [n for n in P3_PROBLEMS if n in merged] + [n for n in merged if n not in P3_PROBLEMS]
    return {
        "binary": str(binary),
        "version": wapiti_tool.SDIST,
        "problems": {n: merged[n] for n in order},
    }


def _wapiti_cell(r: dict) -> str:
    """One Wapiti algorithm's outcome: seconds to the target, or why not."""
    if r.get("crashed"):
        return f"crashed ({r['crashed']})"
    if r["seconds_to_target"] is not None:
        return f"{r['seconds_to_target']:.1f} s ({r['iterations_to_target']} it.)"
    if r.get("tries"):
        last = r["tries"][-1]
        return f"not in {r['cap_s']:.0f} s (P = {last['primal']:.6g} at {last['iterations']} it.)"
    return f"not in {r['cap_s']:.0f} s ({r.get('iterations', 0)} it.)"


def wapiti_section(r: dict) -> list[str]:
    lines = ["## Wapiti on crfopt's feature map", ""]
    if skipped_note(r, lines, "Wapiti"):
        return lines
    lines += [
        f"Wapiti 1.5 (built from the PyPI sdist {r['version']} by benchmarks/wapiti.py) in raw "
        "observation mode: each token's attributes as `u:` observations, the bias block as "
        "three more, one constant `b` observation whose K × K features are the transitions; "
        "ρ₁ = 0, ρ₂ = nλ, Wapiti's error-rate and progress stops off (`--stopwin 0 --stopeps "
        "0`). The check: its feature count against crfopt's d and its L-BFGS objective (1 "
        "thread, run until its printed n·P, plus the 0.005 its two decimals may hide, is "
        f"within {WAPITI_CHECK_RELATIVE:g} of n·P* (the runs of 2026-12-07/08 stopped at a "
        "printed n·P within 1e-7 of n·P* + 0.005, which let CoNLL-2000's stop 1.2e-6 above "
        f"P*), or it moves less than {WAPITI_CONVERGED:g} relatively over 5 iterations, or "
        "its time cap ends, then interrupted as Ctrl-C does, which keeps the last "
        "iteration's weights) against n·P*, printed (two "
        "decimals) and evaluated by crfopt at its weights. Then each algorithm until "
        "P ≤ P*(1 + 1e-4), on Wapiti's own clock (which includes the training-error pass "
        "it makes after each iteration), and the best crfopt optimizer (seed 0, optimizer "
        "seconds, evaluations excluded) to the same point. BCD and SGD-L1 print no "
        "objective: they run again with 1, 2, 4… iterations and crfopt evaluates P at their "
        "weights. SGD-L1 ignores ρ₂ (sgdl1.c applies the ℓ1 penalty only), so it minimizes "
        "another objective. CRFsuite: its L-BFGS to its own convergence on the same "
        "features (c2 = nλ/2), trained in the same run as the problem's Wapiti runs unless "
        "marked cached, as in P3. Ratios: crfopt's best / Wapiti's fastest algorithm, and "
        f"crfopt's best / CRFsuite (target ≤ {WAPITI_TARGET:g} for both).",
        "",
        "| | measured | features (d) | Wapiti n·P (it., s) | n·P* | "
        "P at Wapiti's weights − P*, rel. |",
        "|---|---|---|---|---|---|",
    ]
    for name, e in r["problems"].items():
        if "skipped" in e:
            lines.append(f"| {label_of(name)} | {e['skipped']} | | | | |")
            continue
        c = e["check"]
        rel = c.get("relative_difference")
        feat = f"{c['features']:,} ({c['dim']:,})" + ("" if c["features"] == c["dim"] else " ✗")
        secs = f"{c['seconds']:.1f} s" if c.get("seconds") is not None else "—"
        state = " (timed out)" if c.get("timed_out") else ""
        lines.append(
            f"| {label_of(name)} | {e.get('measured_at', '—')} | {feat} | "
            f"{c['printed_objective']} ({c['iterations']} it., {secs}){state} | "
            f"{c['n_p_star']:.2f} | "
            + (f"{rel:.1e} {'✓' if abs(rel) <= 1e-6 else '✗'}" if rel is not None else "—")
            + " |"
        )
    algos = sorted(
        {
            a
            for e in r["problems"].values()
            for t in e.get("threads", {}).values()
            for a in t["wapiti"]
        },
        key=lambda a: WAPITI_ALGORITHMS.index(a) if a in WAPITI_ALGORITHMS else 99,
    )
    lines += [
        "",
        "Time to P*(1 + 1e-4):",
        "",
        "| | threads | "
        + " | ".join(f"Wapiti `{a}`" for a in algos)
        + " | CRFsuite | best crfopt | ratio to Wapiti | ratio to CRFsuite |",
        "|---|---|" + "---|" * len(algos) + "---|---|---|---|",
    ]
    for name, e in r["problems"].items():
        cs = e.get("crfsuite")
        crfsuite = (
            f"{cs['train_s']:.1f} s" + (" (cached)" if cs.get("cached") else "") if cs else "—"
        )
        for k, t in e.get("threads", {}).items():
            cells = [_wapiti_cell(t["wapiti"][a]) if a in t["wapiti"] else "—" for a in algos]
            best = t["crfopt_best"]
            ours = f"`{best}` {t['crfopt'][best]['optimizer_s']:.2f} s" if best else "not reached"
            ratios = [
                f"**{t[key]:.3f}**" if t.get(key) is not None else "—"
                for key in ("ratio", "ratio_crfsuite")
            ]
            lines.append(
                f"| {label_of(name)} | {k} | "
                + " | ".join([*cells, crfsuite, ours, *ratios])
                + " |"
            )
    return [*lines, ""]


def wapiti_summary_rows(r: dict) -> list[str]:
    """The summary's rows: crfopt's best against Wapiti's fastest and against CRFsuite,
    per problem and thread count."""
    rows = []
    for name, e in r["problems"].items():
        for k, t in e.get("threads", {}).items():
            what = f"{label_of(name)}, {k} thread{'s' if k != '1' else ''}: time to P*(1+1e-4)"
            fast, best = t["wapiti_fastest"], t["crfopt_best"]
            if not best:
                rows.append(
                    f"| W | {what}: no crfopt run reached it | | | | ≤ {WAPITI_TARGET:g} | "
                    "**missed** |"
                )
                continue
            c_s = t["crfopt"][best]["optimizer_s"]
            if fast:
                w_s = t["wapiti"][fast]["seconds_to_target"]
                rows.append(
                    f"| W | {what}, {best} vs Wapiti's fastest ({fast}) | {c_s:.2f} s | "
                    f"{w_s:.1f} s | {t['ratio']:.3f} | ≤ {WAPITI_TARGET:g} | "
                    f"{ok_mark(t['ratio'] <= WAPITI_TARGET)} |"
                )
            else:
                cap = max(a.get("cap_s", 0.0) for a in t["wapiti"].values())
                rows.append(
                    f"| W | {what}, {best} vs Wapiti: no algorithm reached it in {cap:.0f} s | "
                    f"{c_s:.2f} s | > {cap:.0f} s | < {c_s / cap:.3f} | ≤ {WAPITI_TARGET:g} | "
                    f"{ok_mark(c_s / cap <= WAPITI_TARGET)} |"
                )
            if t.get("ratio_crfsuite") is not None:
                rows.append(
                    f"| W | {what}, {best} vs CRFsuite | {c_s:.2f} s | "
                    f"{e['crfsuite']['train_s']:.1f} s | {t['ratio_crfsuite']:.3f} | "
                    f"≤ {WAPITI_TARGET:g} | {ok_mark(t['ratio_crfsuite'] <= WAPITI_TARGET)} |"
                )
    return rows
