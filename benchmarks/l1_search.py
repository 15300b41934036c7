"""ℓ1 fits and a model search, crfopt.CRF against sklearn-crfsuite (issue 51).

    python benchmarks/l1_search.py [--rounds 2] [--json out.json]
    python benchmarks/performance.py --only L1      # the same, into reports/performance.md
    python benchmarks/l1_search.py --profile [--as-written]   # where one crfopt fit goes

The sklearn-crfsuite tutorial's features (``bench_sklearn.word2features``) on CoNLL-2002
Dutch NER (``$CRFOPT_DATA``, docs/datasets.md ``ner-nl``) and its estimator,
``CRF(algorithm="lbfgs", c1=…, c2=…, max_iterations=100, all_possible_transitions=True)``
for both libraries, with two arguments added so that both minimize the same objective:
CRFsuite gets ``all_possible_states=True`` (crfopt's feature map always has every
(attribute, label) pair) and crfopt ``bias=False`` (the features already hold ``bias``,
``BOS`` and ``EOS``). Both are measured in the same run, rounds alternating between the
libraries, with default threading (numba's and BLAS's thread counts as installed; the
search with the tutorial's ``n_jobs=-1``):

* ``fit-700``: c1 = c2 = 0.1 on the first 700 training sentences;
* ``fit-700-as-written``: the same with the tutorial's arguments exactly (CRFsuite without
  ``all_possible_states``, crfopt with its bias block): each library's own model, so the
  objectives differ by the features each has;
* ``fit-all``: c1 = c2 = 0.1 on all 15,806 training sentences;
* ``search``: ``RandomizedSearchCV`` of 10 candidates × 3 folds (``random_state=0``, so
  the same candidates for both; refit on the best) on the first 1,000 sentences over the
  tutorial's c1 ~ Exp(0.5), c2 ~ Exp(0.05), scored by the tutorial's flat F1 without
  ``O``.

``--profile`` runs cProfile over one crfopt ``fit-700`` (``--as-written``: the tutorial's
arguments exactly) after the warm-up and prints the functions that took the most time,
with the load average: the profile of reports/performance_notes.md, taken on both
sides of issue 51's changes.

Seconds are wall seconds of the whole ``fit`` call (each library's conversion of the
feature dicts included); crfopt's compiled kernels are loaded by an untimed warm-up fit,
and the search's worker processes started by an untimed warm-up search. Objectives are
on CRFsuite's scale, F(w) = Σℓᵢ(w) + c1‖w‖₁ + c2‖w‖² = n·P(w), both models evaluated by
crfopt on the same problem (CRFsuite's weights read back from ``state_features_`` and
``transition_features_``; a feature CRFsuite does not have weighs 0, which is its own
model exactly). For the search: the refits at crfopt's chosen (c1, c2), CRFsuite's own
refit when it chose the same, else a CRFsuite fit at those values outside the timing.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))
os.environ.setdefault("CRFOPT_DATA", str(HERE.parents[1] / "shared" / "datasets"))

from bench_sklearn import flat_f1, load_split  # noqa: E402

C1, C2 = 0.1, 0.1
SMALL, SEARCH = 700, 1000
#: the tutorial's estimator arguments (sklearn-crfsuite's docs, "Training")
TUTORIAL = {"algorithm": "lbfgs", "max_iterations": 100, "all_possible_transitions": True}
#: what makes both libraries' objective the same (module docstring)
SAME_OBJECTIVE = ({"all_possible_states": True}, {"bias": False})
SEARCH_SPACE = {"c1": ("expon", 0.5), "c2": ("expon", 0.05)}
CANDIDATES, FOLDS = 10, 3


def _load() -> tuple[float, float, float]:
    return os.getloadavg()


def objective(crf: Any, problem: Any) -> float:
    """F(w) = n·P(w) of crfopt's ``CRF`` or sklearn-crfsuite's on ``problem``."""
    if hasattr(crf, "model_") and crf.model_ is not None:
        w = crf.model_.weights_for(problem)
    else:  # sklearn-crfsuite: its non-zero weights by (attribute, label) name
        labels = {name: k for k, name in enumerate(problem.label_names)}
        attrs = {name: a for a, name in enumerate(problem.attribute_names)}
        K = len(labels)
        emission, transition = np.zeros((K, len(attrs))), np.zeros((K, K))
        for (attr, label), weight in crf.state_features_.items():
            emission[labels[label], attrs[attr]] = weight
        for (a, b), weight in crf.transition_features_.items():
            transition[labels[a], labels[b]] = weight
        w = problem.pack(emission, np.zeros((K, 3)) if problem.bias else None, transition)
    return float(problem.n * problem.primal(w))


def _fits(
    X: list, y: list, c1: float, c2: float, rounds: int, same_objective: bool = True
) -> dict[str, Any]:
    """One fit per library per round, alternating; seconds, iterations and objectives."""
    import sklearn_crfsuite

    import crfopt

    cs_extra, co_extra = SAME_OBJECTIVE if same_objective else ({}, {})
    problem, _ = crfopt.CRF(c1=c1, c2=c2, **TUTORIAL, **co_extra)._training_problem(X, y)
    out: dict[str, Any] = {
        "sentences": len(X),
        "tokens": problem.n_tokens,
        "crfopt_weights": problem.dim,
        "c1": c1,
        "c2": c2,
        "same_objective": same_objective,
        "rounds": [],
    }
    for r in range(rounds):
        order = ("crfsuite", "crfopt") if r % 2 == 0 else ("crfopt", "crfsuite")
        row: dict[str, Any] = {"load_1min": round(_load()[0], 2)}
        for lib in order:
            if lib == "crfsuite":
                est = sklearn_crfsuite.CRF(c1=c1, c2=c2, **TUTORIAL, **cs_extra)
            else:
                est = crfopt.CRF(c1=c1, c2=c2, **TUTORIAL, **co_extra)
            t0 = time.perf_counter()
            est.fit(X, y)
            row[f"{lib}_s"] = time.perf_counter() - t0
            row[f"{lib}_objective"] = objective(est, problem)
            if lib == "crfsuite":
                row["crfsuite_iterations"] = int(est.training_log_.last_iteration["num"])
            else:
                row["crfopt_iterations"] = int(est.training_log_["iterations"].iloc[-1])
                row["crfopt_passes"] = float(est.training_log_["effective_passes"].iloc[-1])
                row["crfopt_optimizer"] = est.model_.training["optimizer"]
        row["ratio"] = row["crfopt_s"] / row["crfsuite_s"]
        out["rounds"].append(row)
        print(
            f"    round {r + 1}: crfopt {row['crfopt_s']:.2f} s (F {row['crfopt_objective']:.4f}), "
            f"sklearn-crfsuite {row['crfsuite_s']:.2f} s (F {row['crfsuite_objective']:.4f}): "
            f"{row['ratio']:.2f}×, load {row['load_1min']}",
            flush=True,
        )
    return _summarize(out)


def _summarize(out: dict[str, Any]) -> dict[str, Any]:
    rounds = out["rounds"]
    for lib in ("crfopt", "crfsuite"):
        out[f"{lib}_s"] = min(r[f"{lib}_s"] for r in rounds)
        out[f"{lib}_objective"] = rounds[-1][f"{lib}_objective"]
    out["ratio"] = out["crfopt_s"] / out["crfsuite_s"]
    out["ratio_by_round"] = [r["ratio"] for r in rounds]
    out["objective_rel"] = out["crfopt_objective"] / out["crfsuite_objective"] - 1.0
    return out


def _search(X: list, y: list, rounds: int) -> dict[str, Any]:
    """RandomizedSearchCV over (c1, c2) with each library, rounds alternating."""
    import scipy.stats
    import sklearn_crfsuite
    from sklearn.metrics import make_scorer
    from sklearn.model_selection import RandomizedSearchCV

    import crfopt

    labels = sorted({lab for seq in y for lab in seq} - {"O"})
    scorer = make_scorer(flat_f1, labels=labels)
    space = {k: getattr(scipy.stats, d)(scale=s) for k, (d, s) in SEARCH_SPACE.items()}
    cs_extra, co_extra = SAME_OBJECTIVE

    def search(lib: str, n_iter: int = CANDIDATES, data: tuple = (X, y)) -> Any:
        est = (
            sklearn_crfsuite.CRF(**TUTORIAL, **cs_extra)
            if lib == "crfsuite"
            else crfopt.CRF(**TUTORIAL, **co_extra)
        )
        rs = RandomizedSearchCV(
            est, space, n_iter=n_iter, cv=FOLDS, scoring=scorer, n_jobs=-1, random_state=0
        )
        return rs.fit(*data)

    for lib in ("crfopt", "crfsuite"):  # start the workers and load crfopt's kernels there
        search(lib, n_iter=2, data=(X[:60], y[:60]))
    out: dict[str, Any] = {
        "sentences": len(X),
        "candidates": CANDIDATES,
        "folds": FOLDS,
        "n_jobs": -1,
        "rounds": [],
    }
    found: dict[str, Any] = {}
    for r in range(rounds):
        order = ("crfsuite", "crfopt") if r % 2 == 0 else ("crfopt", "crfsuite")
        row: dict[str, Any] = {"load_1min": round(_load()[0], 2)}
        for lib in order:
            t0 = time.perf_counter()
            found[lib] = search(lib)
            row[f"{lib}_s"] = time.perf_counter() - t0
            row[f"{lib}_best"] = {k: float(v) for k, v in found[lib].best_params_.items()}
            row[f"{lib}_cv_f1"] = float(found[lib].best_score_)
        row["ratio"] = row["crfopt_s"] / row["crfsuite_s"]
        out["rounds"].append(row)
        print(
            f"    round {r + 1}: crfopt {row['crfopt_s']:.1f} s (best {row['crfopt_best']}, "
            f"CV F1 {row['crfopt_cv_f1']:.4f}), sklearn-crfsuite {row['crfsuite_s']:.1f} s "
            f"(best {row['crfsuite_best']}, CV F1 {row['crfsuite_cv_f1']:.4f}): "
            f"{row['ratio']:.2f}×, load {row['load_1min']}",
            flush=True,
        )
    # the objectives of the refits at crfopt's choice
    best = found["crfopt"].best_params_
    problem, _ = crfopt.CRF(**best, **TUTORIAL, **co_extra)._training_problem(X, y)
    cs = found["crfsuite"].best_estimator_
    same = found["crfsuite"].best_params_ == best
    if not same:
        cs = sklearn_crfsuite.CRF(**best, **TUTORIAL, **cs_extra).fit(X, y)
    for row in out["rounds"]:
        row["crfopt_objective"] = objective(found["crfopt"].best_estimator_, problem)
        row["crfsuite_objective"] = objective(cs, problem)
    out["refit_params"] = {k: float(v) for k, v in best.items()}
    out["crfsuite_chose_the_same"] = same
    return _summarize(out)


def measure(rounds: int = 2) -> dict[str, Any]:
    """Every measurement of the module docstring, with the load average around each."""
    import crfopt

    X_all, y_all = load_split("train")
    crfopt.CRF(c1=C1, c2=C2, **TUTORIAL, bias=False).fit(X_all[:60], y_all[:60])  # warm-up
    out: dict[str, Any] = {}
    plan = [
        ("fit-700", lambda: _fits(X_all[:SMALL], y_all[:SMALL], C1, C2, rounds)),
        (
            "fit-700-as-written",
            lambda: _fits(X_all[:SMALL], y_all[:SMALL], C1, C2, rounds, same_objective=False),
        ),
        ("fit-all", lambda: _fits(X_all, y_all, C1, C2, rounds)),
        ("search", lambda: _search(X_all[:SEARCH], y_all[:SEARCH], rounds)),
    ]
    for key, fn in plan:
        print(f"  {key}", flush=True)
        before = _load()[0]
        out[key] = fn()
        out[key]["load_1min"] = [round(before, 2), round(_load()[0], 2)]
    return out


ROWS = {
    "fit-700": "one fit, c1 = c2 = 0.1, 700 sentences",
    "fit-700-as-written": "the same, the tutorial's arguments as written (not one objective)",
    "fit-all": "one fit, c1 = c2 = 0.1, all 15,806 sentences",
    "search": f"RandomizedSearchCV, {CANDIDATES} candidates × {FOLDS} folds, 1,000 sentences",
}


def table(r: dict[str, Any]) -> list[str]:
    """The "ℓ1 and search" table of reports/performance.md."""
    lines = [
        "## ℓ1 and search",
        "",
        "crfopt.CRF against sklearn-crfsuite on the sklearn-crfsuite tutorial's features "
        "and estimator (CoNLL-2002 Dutch NER), default threading, measured in the same run "
        "with rounds alternating (`benchmarks/l1_search.py`, whose docstring gives the "
        "set-up). Seconds: the least wall time of the whole `fit` over the rounds; ratio: "
        "crfopt / sklearn-crfsuite, of those (every round's in brackets). F: the "
        "objective Σℓᵢ + c1‖w‖₁ + c2‖w‖² of each library's model on the same problem.",
        "",
        "| | crfopt s | sklearn-crfsuite s | ratio (rounds) | crfopt F | sklearn-crfsuite F "
        "| F rel. | load | |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for key, what in ROWS.items():
        e = r.get(key)
        if e is None:
            continue
        rounds = ", ".join(f"{x:.2f}" for x in e["ratio_by_round"])
        if e.get("same_objective", True):
            met = e["ratio"] <= 1.0 and e["objective_rel"] <= 1e-6
            verdict = "met" if met else "**missed**"
        else:  # two different models: no target, what a user of the tutorial sees
            verdict = "two models"
        load = e["load_1min"]
        lines.append(
            f"| {what} | {e['crfopt_s']:.2f} | {e['crfsuite_s']:.2f} | **{e['ratio']:.2f}** "
            f"({rounds}) | {e['crfopt_objective']:.4f} | {e['crfsuite_objective']:.4f} | "
            f"{e['objective_rel']:+.1e} | {load[0]:.1f} → {load[1]:.1f} | "
            f"{verdict} |"
        )
    s = r.get("search")
    if s:
        lines += [
            "",
            f"Search: crfopt's refit at c1 = {s['refit_params']['c1']:.4f}, c2 = "
            f"{s['refit_params']['c2']:.4f}; sklearn-crfsuite "
            + (
                "chose the same."
                if s["crfsuite_chose_the_same"]
                else f"chose {s['rounds'][-1]['crfsuite_best']} (F is its fit at crfopt's choice)."
            )
            + f" Cross-validated flat F1: crfopt {s['rounds'][-1]['crfopt_cv_f1']:.4f}, "
            f"sklearn-crfsuite {s['rounds'][-1]['crfsuite_cv_f1']:.4f}.",
        ]
    return [*lines, ""]


def profile(as_written: bool = False, top: int = 25) -> None:
    """cProfile of one crfopt fit on 700 sentences (after an untimed warm-up)."""
    import cProfile
    import pstats

    import crfopt

    X, y = load_split("train")
    extra = {} if as_written else SAME_OBJECTIVE[1]
    crfopt.CRF(c1=C1, c2=C2, **TUTORIAL, **extra).fit(X[:60], y[:60])
    print(f"load average before {_load()}", flush=True)
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    crf = crfopt.CRF(c1=C1, c2=C2, **TUTORIAL, **extra).fit(X[:SMALL], y[:SMALL])
    prof.disable()
    log = crf.training_log_
    print(
        f"fit {time.perf_counter() - t0:.2f} s: {int(log['iterations'].iloc[-1])} iterations, "
        f"{float(log['effective_passes'].iloc[-1]):.0f} passes, {len(log)} checkpoints; "
        f"load average after {_load()}"
    )
    stats = pstats.Stats(prof)
    stats.sort_stats("cumulative").print_stats(top)
    stats.sort_stats("tottime").print_stats(top)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=2, help="rounds per measurement (2)")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    ap.add_argument("--profile", action="store_true", help="profile one crfopt fit instead")
    ap.add_argument("--as-written", action="store_true", help="--profile the tutorial's own")
    args = ap.parse_args(argv)
    if args.profile:
        profile(args.as_written)
        return 0
    print(f"load average {_load()}", flush=True)
    out = measure(args.rounds)
    print("\n".join(table(out)))
    print(f"load average {_load()}")
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
