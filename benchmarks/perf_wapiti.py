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
from harness import label_of, problems_of, progress_printer, skipped_note
from perf_baselines import P3_PROBLEMS, _time_to_target
from targets import RELATIVE_TARGET

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


def _wapiti_converged(problem, data: Path, model: Path, p_star: float, cap: float) -> dict:
    """Wapiti's L-BFGS (1 thread) to convergence (:data:`WAPITI_CONVERGED`): its feature
    count against d and its objective against n·P*, printed (two decimals) and at its
    weights (exact)."""
    run = wapiti_tool.train(
        data,
        model,
        rho2=problem.n * problem.lam,
        timeout=cap,
        options=["--stopeps", repr(WAPITI_CONVERGED)],
        echo=progress_printer("l-bfgs: "),
    )
    target = problem.n * p_star * (1 + RELATIVE_TARGET)
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
        "n_p_star": problem.n * p_star,
    }
    if run.returncode == 0:
        p = _wapiti_objective(problem, model)
        out["crfopt_P_at_wapiti_weights"] = p
        out["relative_difference"] = (p - p_star) / p_star
    return out


def wapiti(args: argparse.Namespace) -> dict:
    """Wapiti on crfopt's feature map and λ (raw observation mode), 1 and 2 threads."""
    from crfopt.bench.optimum import cached_optimum, shipped_optimum

    from conftest import threads as limit_threads

    try:
        binary = wapiti_tool.wapiti_binary()
    except wapiti_tool.WapitiUnavailable as exc:
        return {"skipped": f"Wapiti unavailable: {exc}"}
    out: dict[str, Any] = {"binary": str(binary), "version": wapiti_tool.SDIST, "problems": {}}
    for name in problems_of(args, P3_PROBLEMS):
        problem = crfopt.load_problem(name)
        known = cached_optimum(problem) or shipped_optimum(problem)
        if known is None:
            out["problems"][name] = {
                "skipped": f"no certified P*: run crfopt optimum --problem {name}"
            }
            continue
        p_star = known.p_star
        target = p_star * (1 + RELATIVE_TARGET)
        entry: dict[str, Any] = {
            "n": problem.n,
            "dim": problem.dim,
            "lam": problem.lam,
            "rho2": problem.n * problem.lam,
            "p_star": p_star,
            "target": target,
            "threads": {},
        }
        with tempfile.TemporaryDirectory(prefix="crfopt-wapiti-") as tmp:
            data, model = Path(tmp) / "train.txt", Path(tmp) / "model"
            wapiti_tool.write_raw(problem, data)
            print(f"  {name}: Wapiti L-BFGS to convergence (the equality check)", flush=True)
            entry["check"] = _wapiti_converged(
                problem, data, model, p_star, args.wapiti_check_seconds
            )
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
                cap = reached[fastest]["seconds_to_target"] if fastest else args.wapiti_seconds
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
                }
        out["problems"][name] = entry
        del problem
    return out


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


def wapiti_section(r: dict, p3: dict | None) -> list[str]:
    lines = ["## Wapiti on crfopt's feature map", ""]
    if skipped_note(r, lines, "Wapiti"):
        return lines
    lines += [
        f"Wapiti 1.5 (built from the PyPI sdist {r['version']} by benchmarks/wapiti.py) in raw "
        "observation mode: each token's attributes as `u:` observations, the bias block as "
        "three more, one constant `b` observation whose K × K features are the transitions; "
        "ρ₁ = 0, ρ₂ = nλ, Wapiti's error-rate and progress stops off (`--stopwin 0 --stopeps "
        "0`). The check: its feature count against crfopt's d and its L-BFGS objective (1 "
        f"thread, run until it moves less than {WAPITI_CONVERGED:g} relatively over 5 "
        "iterations) against n·P*, printed (two decimals) and evaluated by crfopt at its "
        "weights. Then each algorithm until P ≤ P*(1 + 1e-4), on Wapiti's own clock "
        "(which includes the training-error pass it makes after each iteration), and the "
        "best crfopt optimizer (seed 0, optimizer seconds, evaluations excluded) to the same "
        "point. Ratio = crfopt / Wapiti's fastest algorithm. BCD and SGD-L1 print no "
        "objective: they run again with 1, 2, 4… iterations and crfopt evaluates P at their "
        "weights. SGD-L1 ignores ρ₂ (sgdl1.c applies the ℓ1 penalty only), so it minimizes "
        "another objective.",
        "",
        "| | features (d) | Wapiti n·P (it., s) | n·P* | P at Wapiti's weights − P*, rel. |",
        "|---|---|---|---|---|",
    ]
    for name, e in r["problems"].items():
        if "skipped" in e:
            lines.append(f"| {label_of(name)} | {e['skipped']} | | | |")
            continue
        c = e["check"]
        rel = c.get("relative_difference")
        feat = f"{c['features']:,} ({c['dim']:,})" + ("" if c["features"] == c["dim"] else " ✗")
        secs = f"{c['seconds']:.1f} s" if c.get("seconds") is not None else "—"
        state = " (timed out)" if c.get("timed_out") else ""
        lines.append(
            f"| {label_of(name)} | {feat} | {c['printed_objective']} ({c['iterations']} it., "
            f"{secs}){state} | {c['n_p_star']:.2f} | "
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
    cs = "CRFsuite (P3) | " if p3 else ""
    lines += [
        "",
        "Time to P*(1 + 1e-4):",
        "",
        "| | threads | "
        + " | ".join(f"Wapiti `{a}`" for a in algos)
        + f" | {cs}best crfopt | ratio |",
        "|---|---|" + "---|" * len(algos) + ("---|" if p3 else "") + "---|---|",
    ]
    for name, e in r["problems"].items():
        for k, t in e.get("threads", {}).items():
            cells = [_wapiti_cell(t["wapiti"][a]) if a in t["wapiti"] else "—" for a in algos]
            best = t["crfopt_best"]
            ours = f"`{best}` {t['crfopt'][best]['optimizer_s']:.2f} s" if best else "not reached"
            extra = ""
            if p3:
                pe = p3.get("problems", {}).get(name)
                extra = f"{pe['crfsuite']['train_s']:.1f} s | " if pe else "— | "
            ratio = f"**{t['ratio']:.3f}**" if t["ratio"] is not None else "—"
            lines.append(
                f"| {label_of(name)} | {k} | " + " | ".join(cells) + f" | {extra}{ours} | {ratio} |"
            )
    return [*lines, ""]
