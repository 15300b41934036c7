"""Elastic-net training against CRFsuite's OWL-QN on the same objective (issue 20 item 3).

    python benchmarks/l1_crfsuite.py                   # OCR, c1 = c2 = 0.1
    python benchmarks/l1_crfsuite.py --c1 1.0 --c2 0.1 --json out.json

CRFsuite (python-crfsuite) trains with ``c1 > 0``, i.e. liblbfgs's OWL-QN, on crfopt's
exact problem: the same attributes, the bias block given as three attributes per token
(so c1 penalizes it, as σ‖w‖₁ does every crfopt weight), every state and transition
feature on (benchmarks/performance.py drives it the same way for ℓ2). CRFsuite minimizes
Σℓᵢ + c1‖w‖₁ + c2‖w‖², crfopt (1/n)Σℓᵢ + λ/2‖w‖² + σ‖w‖₁: λ = 2·c2/n, σ = c1/n, and
CRFsuite's reported loss divided by n is P(w) (checked here at CRFsuite's weights).

Reported, one thread each (CRFsuite is single-threaded):

* the certified P* (``crfopt.bench.optimum``: split-form L-BFGS-B to a relative
  elastic-net gap ≤ 1e-10);
* CRFsuite run to its tightest stopping rule: its final objective, crfopt's P at its
  weights, the relative difference to P* and to crfopt's owlqn at convergence (≤ 1e-6 is
  the issue's criterion);
* time to P ≤ P*(1 + 1e-6) for both, wall and CPU seconds (on a loaded machine only the
  CPU seconds mean anything): CRFsuite's wall time from its per-iteration log (training
  only, no feature generation) and its CPU time as that share of the whole training's
  CPU time; crfopt's wall time from the runner's optimizer clock (evaluation at
  checkpoints excluded) and its CPU time from a second run stopped at the same iteration
  with no checkpoint in between (its start and end evaluations included);
* sparsity: non-zero weights of both and of w_ref.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))
os.environ.setdefault("CRFOPT_DATA", str(HERE.parents[1] / "shared" / "datasets"))

from crfsuite import crfsuite_items, crfsuite_weights  # noqa: E402

import crfopt  # noqa: E402
from crfopt.bench.evaluator import Evaluator  # noqa: E402
from crfopt.bench.optimum import reference_optimum  # noqa: E402
from crfopt.bench.runner import Budget, run  # noqa: E402

from conftest import threads  # noqa: E402

#: The issue's agreement criterion, relative to P*.
REL = 1e-6


def crfsuite_owlqn(
    problem: Any, path: str, c1: float, c2: float, max_iterations: int = 100000
) -> tuple[Any, float, float]:
    """CRFsuite's lbfgs with c1 > 0 (OWL-QN) to its tightest stopping rule.

    Returns (log parser, wall seconds, CPU seconds) of ``train`` alone.
    """
    import pycrfsuite

    labels = problem.label_names or [str(k) for k in range(problem.n_labels)]
    kd = problem.data
    tr = pycrfsuite.Trainer(verbose=False)
    for i in range(problem.n):
        s, e = int(kd.offsets[i]), int(kd.offsets[i + 1])
        tr.append(crfsuite_items(problem, i, problem.bias), [labels[int(y)] for y in kd.y[s:e]])
    tr.select("lbfgs")  # resets every parameter: set them after
    tr.set_params(
        {
            "c1": c1,
            "c2": c2,
            "feature.possible_states": True,
            "feature.possible_transitions": True,
            # CRFsuite's defaults (num_memories 6, max_linesearch 20) are kept; only the
            # stopping rule is made as tight as it goes, to compare converged objectives
            "max_iterations": max_iterations,
            "epsilon": 1e-12,
            "delta": 1e-12,
            "period": 20,
        }
    )
    t0, c0 = time.perf_counter(), time.process_time()
    tr.train(path)
    return tr.logparser, time.perf_counter() - t0, time.process_time() - c0


def crfsuite_time_to(log: Any, n: int, target: float) -> tuple[float | None, int | None, float]:
    """Training seconds (sum of CRFsuite's per-iteration times) until loss/n ≤ target,
    that iteration, and the share of the whole log's time spent until then."""
    total = sum(float(it.get("time", 0.0)) for it in log.iterations) or 1.0
    elapsed = 0.0
    for it in log.iterations:
        elapsed += float(it.get("time", 0.0))
        if it["loss"] / n <= target:
            return elapsed, int(it["num"]), elapsed / total
    return None, None, 1.0


def crfopt_owlqn(problem: Any, p_star: float, passes: float) -> dict[str, Any]:
    """owlqn to P ≤ P*(1 + REL) (timed), then on to ``passes`` for its converged value."""
    reg = crfopt.get_registry()
    spec = reg.optimizer("owlqn")
    res = run(
        problem,
        spec,
        budget=Budget(passes=passes),
        p_star=p_star,
        checkpoints="every:2",
        registry=reg,
        metrics=[],
    )
    t = res.trace
    primal = t["primal"].astype(float).to_numpy()
    hit = np.flatnonzero(primal <= p_star * (1 + REL))
    first = int(hit[0]) if len(hit) else None
    init = float(res.meta.get("init_seconds") or 0.0)
    cpu = None
    if first is not None:  # the same iterations again, timed in CPU seconds, no checkpoints
        its = int(t["iterations"].iloc[first])
        c0 = time.process_time()
        again = run(
            problem.with_regularization(),
            spec,
            budget=Budget(passes=None, updates=its),
            checkpoints=[0.0],
            registry=reg,
            metrics=[],
        )
        cpu = time.process_time() - c0
        assert int(again.trace["iterations"].iloc[-1]) == its
    return {
        "status": res.status,
        "cpu_seconds_to_target": cpu,
        "w": res.w,
        "final_primal": float(primal[-1]),
        "final_gap": float(t["duality_gap"].astype(float).iloc[-1]),
        "passes": float(t["effective_passes"].iloc[-1]),
        "iterations": int(t["iterations"].iloc[-1]),
        "seconds_total": float(t["time_s"].iloc[-1]) + init,
        "seconds_to_target": None if first is None else float(t["time_s"].iloc[first]) + init,
        "iterations_to_target": None if first is None else int(t["iterations"].iloc[first]),
        "passes_to_target": None if first is None else float(t["effective_passes"].iloc[first]),
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--problem", default="ocr")
    ap.add_argument("--c1", type=float, default=0.1, help="CRFsuite's c1 (σ = c1/n)")
    ap.add_argument("--c2", type=float, default=0.1, help="CRFsuite's c2 (λ = 2·c2/n)")
    ap.add_argument("--passes", type=float, default=3000, help="owlqn's budget")
    ap.add_argument(
        "--crfsuite-iterations",
        type=int,
        default=100000,
        help="CRFsuite's max_iterations (its tolerances are at 1e-12, so this is what "
        "stops it on an ill-conditioned problem; default 100000)",
    )
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args(argv)

    base = crfopt.load_problem(args.problem)
    n = base.n
    problem = base.with_regularization(lam=2 * args.c2 / n, l1=args.c1 / n)
    ev = Evaluator(problem)
    out: dict[str, Any] = {
        "problem": args.problem,
        "n": n,
        "dim": problem.dim,
        "c1": args.c1,
        "c2": args.c2,
        "lam": problem.lam,
        "l1": problem.l1,
    }
    with threads(1):
        t0 = time.perf_counter()
        ref = reference_optimum(problem)
        w_ref_nnz = None
        from crfopt.bench.optimum import reference_weights

        w_ref = reference_weights(problem)
        if w_ref is not None:
            w_ref_nnz = int(np.count_nonzero(w_ref))
        out.update(
            p_star=ref.p_star,
            p_star_relative_certificate=ref.relative_certificate,
            p_star_source=ref.source,
            p_star_seconds=round(time.perf_counter() - t0, 1),
            w_ref_nonzero=w_ref_nnz,
        )
        print(f"P* = {ref.p_star:.10f} (relative certificate {ref.relative_certificate:.2g})")

        with tempfile.TemporaryDirectory() as tmp:
            log, wall, cpu = crfsuite_owlqn(
                problem, f"{tmp}/m", args.c1, args.c2, args.crfsuite_iterations
            )
            w_cs = crfsuite_weights(problem, f"{tmp}/m")
        cs_loss = log.iterations[-1]["loss"] / n
        p_cs = ev.primal(w_cs)
        cs_to, cs_its, share = crfsuite_time_to(log, n, ref.p_star * (1 + REL))
        out.update(
            crfsuite_iterations=len(log.iterations),
            crfsuite_train_wall_s=round(wall, 2),
            crfsuite_train_cpu_s=round(cpu, 2),
            crfsuite_reported_objective=cs_loss,
            crfopt_P_at_crfsuite_weights=p_cs,
            crfsuite_relative_to_p_star=(p_cs - ref.p_star) / ref.p_star,
            crfsuite_seconds_to_target=cs_to,
            crfsuite_cpu_seconds_to_target=None if cs_to is None else round(cpu * share, 2),
            crfsuite_iterations_to_target=cs_its,
            crfsuite_nonzero=int(np.count_nonzero(w_cs)),
            crfsuite_active_features_logged=log.iterations[-1].get("active_features"),
        )
        print(f"CRFsuite: {len(log.iterations)} its, P = {p_cs:.10f}, {wall:.1f} s")

        owl = crfopt_owlqn(problem, ref.p_star, args.passes)
        w_owl = owl.pop("w")
        out.update({f"owlqn_{k}": v for k, v in owl.items()})
        out["owlqn_nonzero"] = int(np.count_nonzero(w_owl))
        out["owlqn_relative_to_p_star"] = (owl["final_primal"] - ref.p_star) / ref.p_star
        out["owlqn_vs_crfsuite_relative"] = abs(owl["final_primal"] - p_cs) / ref.p_star
        out["agree_1e-6"] = bool(
            out["owlqn_vs_crfsuite_relative"] <= REL
            and abs(out["crfsuite_relative_to_p_star"]) <= REL
        )
    print(json.dumps(out, indent=2))
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n")
    return out


if __name__ == "__main__":
    main()
