"""crfopt.CRF against sklearn-crfsuite on its NER tutorial: feature dicts → problem, and fit.

    python benchmarks/bench_sklearn.py [--c2 0.5] [--rounds 2] [--threads 1] [--json out.json]
    python benchmarks/bench_sklearn.py --c1 0.1 --c2 0.1 --target-rel 1e-7 --n-train 1000

With ``--c1 > 0`` both train the elastic net (CRFsuite switches to OWL-QN; crfopt's
objective gains σ‖w‖₁, σ = c1/n, on the same attributes) and both models' non-zero weights
are counted; crfopt's gap then certifies how far CRFsuite's own final objective is above
the optimum.

Needs the ``bench`` extra (python-crfsuite, sklearn-crfsuite) and CoNLL-2002 Dutch under
``$CRFOPT_DATA`` (docs/datasets.md, ``ner-nl``); it installs and downloads nothing.
The features are the tutorial's ``word2features`` (docs/tutorial.md): bias, lower-cased
word, 3- and 2-letter suffixes, shape flags, POS tag and its 2-letter prefix, the same for
the ±1 neighbours, BOS/EOS.

Two measurements, each repeated ``--rounds`` times (the minimum is the figure; the
machine may be loaded, so ``uptime`` is printed with them):

* **conversion**: everything ``CRF.fit`` does before the optimizer starts
  (``CRF._training_problem``: feature dicts → attribute columns → ``CRFProblem``), on
  train + testb (21,001 sentences, 271,519 tokens: at least the 264k tokens of issue 20).
* **fit**, sklearn-crfsuite and crfopt alternating on the train split: sklearn-crfsuite's
  ``CRF(algorithm="lbfgs", c1=0, c2=C2, all_possible_states=True,
  all_possible_transitions=True)`` runs to its own default stopping rule; its weights'
  objective F_cs = Σℓᵢ(w) + c2‖w‖² is evaluated by crfopt on the same feature map. crfopt's
  ``CRF(c2=C2, bias=False)`` (the tutorial's features already hold the bias and BOS/EOS
  flags; crfopt's bias block would add three more features per label and change the
  objective) then trains until its duality gap *certifies* n·P(w) ≤ F_cs·(1 + 1e-4), i.e.
  ``target_gap = 1e-4·F_cs / (N log K)`` (target_gap is relative to P(0) = (N/n) log K).
  The gap bounds P(w) − P*, and P* ≤ F_cs/n, so the stop is guaranteed, not estimated.
  Both fit times are wall seconds of the whole ``fit`` call (their own conversion
  included); CPU seconds are printed too. Flat F1 on testb is the tutorial's (weighted
  over the entity labels, 'O' left out).

crfopt runs on ``--threads`` numba/BLAS threads (default 1: CRFsuite is single-threaded).
Numba's compilation is excluded by an untimed warm-up fit on 200 sentences.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

CONVERSION_SPLITS = ("train", "test")
TARGET_REL = 1e-4


def word2features(sent: list[tuple[str, ...]], i: int) -> dict[str, Any]:
    """sklearn-crfsuite tutorial's features of token ``i`` (tokens are (word, pos, ...))."""
    word, postag = sent[i][0], sent[i][1]
    features: dict[str, Any] = {
        "bias": 1.0,
        "word.lower()": word.lower(),
        "word[-3:]": word[-3:],
        "word[-2:]": word[-2:],
        "word.isupper()": word.isupper(),
        "word.istitle()": word.istitle(),
        "word.isdigit()": word.isdigit(),
        "postag": postag,
        "postag[:2]": postag[:2],
    }
    if i > 0:
        word1, postag1 = sent[i - 1][0], sent[i - 1][1]
        features.update(
            {
                "-1:word.lower()": word1.lower(),
                "-1:word.istitle()": word1.istitle(),
                "-1:word.isupper()": word1.isupper(),
                "-1:postag": postag1,
                "-1:postag[:2]": postag1[:2],
            }
        )
    else:
        features["BOS"] = True
    if i < len(sent) - 1:
        word1, postag1 = sent[i + 1][0], sent[i + 1][1]
        features.update(
            {
                "+1:word.lower()": word1.lower(),
                "+1:word.istitle()": word1.istitle(),
                "+1:word.isupper()": word1.isupper(),
                "+1:postag": postag1,
                "+1:postag[:2]": postag1[:2],
            }
        )
    else:
        features["EOS"] = True
    return features


def load_split(split: str) -> tuple[list[list[dict[str, Any]]], list[list[str]]]:
    """Feature dicts and NE labels of one ``ner-nl`` split, read through the dataset API."""
    from crfopt.data.readers import read_conll
    from crfopt.data.sources import locate
    from crfopt_datasets.conll2002 import COLUMNS, FILES

    corpus = read_conll(locate(FILES[split], download=False), columns=COLUMNS, label="ne")
    X = [[word2features(s, i) for i in range(len(s))] for s in corpus.sentences]
    return X, corpus.labels()


def flat_f1(y_true: list[list[str]], y_pred: list[list[str]], labels: list[str]) -> float:
    """The tutorial's metric: sklearn's weighted F1 over the flattened token labels."""
    from sklearn.metrics import f1_score

    flat_true = [lab for seq in y_true for lab in seq]
    flat_pred = [lab for seq in y_pred for lab in seq]
    return float(f1_score(flat_true, flat_pred, average="weighted", labels=labels))


def timed(fn: Callable[[], Any]) -> tuple[Any, float, float]:
    """(result, wall seconds, CPU seconds of this process)."""
    w0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - w0, time.process_time() - c0


def load_average() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return "load: " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def crfsuite_weights(cs: Any, problem: Any) -> np.ndarray:
    """sklearn-crfsuite's weights as a flat vector of crfopt's ``problem`` (same names)."""
    labels = {name: k for k, name in enumerate(problem.label_names)}
    attrs = {name: a for a, name in enumerate(problem.attribute_names)}
    K, A = len(labels), len(attrs)
    emission, transition = np.zeros((K, A)), np.zeros((K, K))
    missing = 0
    for (attr, label), weight in cs.state_features_.items():
        a = attrs.get(attr)
        if a is None:  # cannot happen with the same features; counted to be sure
            missing += 1
            continue
        emission[labels[label], a] = weight
    for (a, b), weight in cs.transition_features_.items():
        transition[labels[a], labels[b]] = weight
    if missing:
        raise RuntimeError(f"{missing} CRFsuite state features name unknown attributes")
    return problem.pack(emission, None, transition)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--c2", type=float, default=0.5, help="CRFsuite's c2 (crfopt λ = 2·c2/n)")
    ap.add_argument("--c1", type=float, default=0.0, help="CRFsuite's c1 (crfopt σ = c1/n)")
    ap.add_argument(
        "--target-rel",
        type=float,
        default=TARGET_REL,
        help=f"crfopt stops once its gap certifies n·P ≤ F_cs·(1 + this) (default {TARGET_REL:g})",
    )
    ap.add_argument("--max-passes", type=float, default=500, help="crfopt's pass budget")
    ap.add_argument(
        "--crfsuite-tol",
        type=float,
        help="CRFsuite's epsilon and delta (default: its own, 1e-5), to run it to convergence",
    )
    ap.add_argument("--rounds", type=int, default=2, help="repetitions (minimum reported)")
    ap.add_argument("--threads", type=int, default=1, help="crfopt's numba/BLAS threads")
    ap.add_argument("--optimizer", default="sdca-gap", help="crfopt optimizer")
    ap.add_argument("--skip-fit", action="store_true", help="only the conversion")
    ap.add_argument(
        "--n-train", type=int, help="fit on the first N training sentences (a quick check)"
    )
    ap.add_argument("--json", help="write the figures to this file")
    args = ap.parse_args(argv)

    import numba
    from threadpoolctl import threadpool_limits

    from crfopt import CRF

    numba.set_num_threads(max(1, min(args.threads, numba.config.NUMBA_NUM_THREADS)))
    threadpool_limits(args.threads)
    out: dict[str, Any] = {
        "c1": args.c1,
        "c2": args.c2,
        "threads": args.threads,
        "optimizer": args.optimizer,
        "target_rel": args.target_rel,
    }
    print(load_average())

    t0 = time.perf_counter()
    splits = {s: load_split(s) for s in ("train", "test")}
    print(f"read and featurized CoNLL-2002 Dutch in {time.perf_counter() - t0:.1f} s")
    X_conv = [x for s in CONVERSION_SPLITS for x in splits[s][0]]
    y_conv = [y for s in CONVERSION_SPLITS for y in splits[s][1]]
    n_tok = sum(map(len, X_conv))
    conv = []
    for r in range(args.rounds):
        (problem, _), wall, cpu = timed(lambda: CRF(bias=False)._training_problem(X_conv, y_conv))
        conv.append((wall, cpu))
        print(
            f"conversion round {r + 1}: {wall:.2f} s wall, {cpu:.2f} s CPU "
            f"({len(X_conv)} sentences, {n_tok} tokens, {problem.n_attributes} attributes)"
        )
    out["conversion"] = {
        "sentences": len(X_conv),
        "tokens": n_tok,
        "attributes": problem.n_attributes,
        "wall_s": [w for w, _ in conv],
        "cpu_s": [c for _, c in conv],
    }
    print(
        f"conversion: min {min(w for w, _ in conv):.2f} s wall, {min(c for _, c in conv):.2f} s CPU"
    )
    del problem
    if args.skip_fit:
        return _finish(out, args)

    import sklearn_crfsuite

    X_train, y_train = (s[: args.n_train] for s in splits["train"])
    X_test, y_test = splits["test"]
    problem, classes = CRF(bias=False, c1=args.c1 or None, c2=args.c2)._training_problem(
        X_train, y_train
    )
    labels = [lab for lab in classes if lab != "O"]
    n, N, K = problem.n, problem.n_tokens, problem.n_labels

    def fit_crfsuite() -> Any:
        cs = sklearn_crfsuite.CRF(
            algorithm="lbfgs",
            c1=args.c1,
            c2=args.c2,
            all_possible_states=True,
            all_possible_transitions=True,
            **(
                {}
                if args.crfsuite_tol is None
                else {
                    "epsilon": args.crfsuite_tol,
                    "delta": args.crfsuite_tol,
                    "max_iterations": 100000,
                }
            ),
        )
        return cs.fit(X_train, y_train)

    def fit_crfopt(target_gap: float) -> Any:
        crf = CRF(
            args.optimizer,
            c1=args.c1 or None,
            c2=args.c2,
            bias=False,
            target_gap=target_gap,
            max_passes=args.max_passes,
        )
        return crf.fit(X_train, y_train)

    _, warm_s, _ = timed(
        lambda: CRF(args.optimizer, c2=args.c2, bias=False, max_passes=2).fit(
            X_train[:200], y_train[:200]
        )
    )
    print(f"crfopt warm-up (numba compile or cache load) {warm_s:.1f} s")
    rounds = []
    for r in range(args.rounds):
        print(load_average())
        cs, cs_wall, cs_cpu = timed(fit_crfsuite)
        w_cs = crfsuite_weights(cs, problem)
        f_cs = n * problem.primal(w_cs)
        cs_log = cs.training_log_.last_iteration
        target_gap = args.target_rel * f_cs / (N * math.log(K))
        crf, co_wall, co_cpu = timed(lambda tg=target_gap: fit_crfopt(tg))
        w_co = crf.model_.weights_for(problem)
        f_co = n * problem.primal(w_co)
        last = crf.training_log_.last_iteration
        gap = n * problem.duality_gap(w_co)  # certified: n·P* ≥ f_co − gap
        row = {
            "crfsuite_wall_s": cs_wall,
            "crfsuite_cpu_s": cs_cpu,
            "crfsuite_iterations": int(cs_log["num"]),
            "crfsuite_loss_logged": float(cs_log["loss"]),
            "crfsuite_objective": f_cs,
            "crfsuite_f1": flat_f1(y_test, cs.predict(X_test), labels),
            "crfopt_wall_s": co_wall,
            "crfopt_cpu_s": co_cpu,
            "crfopt_passes": float(last.get("effective_passes", math.nan)),
            "crfopt_objective": f_co,
            "crfopt_rel_to_crfsuite": f_co / f_cs - 1.0,
            "crfopt_primal_gap_rel": gap / f_co,  # P(w) − D(ν(w)): bounds P(w) − P* for any w
            # how far CRFsuite's final objective is above the optimum, at most
            "crfsuite_above_optimum_rel_at_most": (f_cs - (f_co - gap)) / (f_co - gap),
            "crfsuite_nonzero": int(np.count_nonzero(w_cs)),
            "crfopt_nonzero": int(np.count_nonzero(w_co)),
            "weights": int(w_co.size),
            "crfopt_f1": flat_f1(y_test, crf.predict(X_test), labels),
            "ratio_wall": co_wall / cs_wall,
            "ratio_cpu": co_cpu / cs_cpu,
        }
        rounds.append(row)
        print(
            f"round {r + 1}: sklearn-crfsuite {cs_wall:.1f} s wall / {cs_cpu:.1f} s CPU, "
            f"{row['crfsuite_iterations']} iterations, objective {f_cs:.6f} (its log: "
            f"{row['crfsuite_loss_logged']:.6f}), flat F1 {row['crfsuite_f1']:.4f}\n"
            f"         crfopt {args.optimizer} {co_wall:.1f} s wall / {co_cpu:.1f} s CPU, "
            f"{row['crfopt_passes']:.0f} passes, objective {f_co:.6f} "
            f"({row['crfopt_rel_to_crfsuite']:+.2e} relative), flat F1 {row['crfopt_f1']:.4f}\n"
            f"         ratio crfopt / sklearn-crfsuite: wall {row['ratio_wall']:.3f}, "
            f"CPU {row['ratio_cpu']:.3f}"
        )
        print(
            f"         primal gap {row['crfopt_primal_gap_rel']:.1e} relative; CRFsuite's "
            f"objective is at most {row['crfsuite_above_optimum_rel_at_most']:.1e} above the "
            f"optimum; non-zero weights: CRFsuite {row['crfsuite_nonzero']}, crfopt "
            f"{row['crfopt_nonzero']} of {row['weights']}"
        )
        if f_co > f_cs * (1 + args.target_rel):
            print("WARNING: crfopt stopped above the target objective", file=sys.stderr)
    out["fit"] = rounds
    print(
        "fit ratio crfopt / sklearn-crfsuite: wall "
        f"{min(r['ratio_wall'] for r in rounds):.3f}–{max(r['ratio_wall'] for r in rounds):.3f}, "
        f"CPU {min(r['ratio_cpu'] for r in rounds):.3f}–{max(r['ratio_cpu'] for r in rounds):.3f}"
    )
    print(load_average())
    return _finish(out, args)


def _finish(out: dict[str, Any], args: argparse.Namespace) -> int:
    out["uptime"] = load_average()
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(out, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
