"""The performance report: every figure of reports/performance.md, measured in one run.

    pip install -e ".[test,bench]"
    python benchmarks/performance.py                 # everything (see the runtime below)
    python benchmarks/performance.py --only P2 P3 --problems ocr
    python benchmarks/performance.py --render        # the report again, nothing measured

Every figure is a ratio against a baseline measured in the same run, on the same
machine, one thread each unless said otherwise. Sections (``--only``):

* epochs   one epoch of sdca-gap, oeg and sag-nus-star in full value+gradient passes of
           the same tree, before (``--ref``, default 2fe8d3c, the commit before issue 19's
           speed work) → after (the working tree), on OCR and CoNLL-2000: fresh processes
           per tree through benchmarks/before_after.py's git worktrees (CPU seconds,
           alternating rounds, or ``--callgrind`` instruction counts).
* floor    the floors of sdca-gap's and oeg's epochs on OCR and CoNLL-2000 with their
           iterates kept, in full passes of the working tree: the work they cannot skip,
           each part timed alone (benchmarks/epoch_floor.py, in three fresh processes:
           medians, and the floor's range).
* threads  the batch oracle (full value+gradient pass) on 2 threads against 1, OCR and
           CoNLL-2000: benchmarks/bench_oracle.py's measurement, called.
* P1       one value+gradient pass on OCR: crfopt vs CRFsuite (python-crfsuite) on
           identical attributes, λ matched (c2 = nλ/2); with the bias block off, both
           solvers' converged objectives side by side.
* P2       one sdca-gap epoch on OCR: crfopt vs the reference sdca4crf code itself (its
           own "iteration per second" log over a fixed number of iterations, run from a
           temporary copy), and vs a lean NumPy SDCA (benchmarks/reference_sdca.py).
* P3       time to target on OCR, CoNLL-2000, NER-nl and POS-EWT: optimizer seconds for
           the best of sdca-gap, sag-nus-star and oeg (1 thread; separately 2 threads, with
           the parallel plugins) to reach CRFsuite L-BFGS's converged objective + 1e-4
           relative, against CRFsuite's training time. CRFsuite's figures are cached in the
           user cache (``<cache>/crfsuite/``) and reused unless ``--retrain-crfsuite``.
* wapiti   Wapiti 1.5 (benchmarks/wapiti.py builds it) on exactly crfopt's feature map and
           λ, in raw observation mode (each token's attributes as ``u:`` observations, the
           bias block as three more, one constant ``b`` observation for the transitions;
           ρ₁ = 0, ρ₂ = nλ), on OCR, CoNLL-2000, NER-nl and POS-EWT, 1 and 2 threads: each
           Wapiti algorithm's time to P*(1 + 1e-4) on its own clock (crashes reported),
           and the best crfopt optimizer's time to the same point. Checked first: Wapiti's
           feature count = d and its L-BFGS converged objective = n·P* (1e-6 relative).
* P4       peak resident memory of sdca-gap on pos-ewt, float64 and float32 duals.
* P5       a 4-run grid with 1 and 2 joblib workers and a 2-worker Dask LocalCluster.
* startup  ``crfopt --help`` / ``crfopt list`` and the first ``compare`` cold and warm:
           benchmarks/bench_startup.py's measurements, called.
* L1       ℓ1 and search: ``crfopt.CRF`` against sklearn-crfsuite on the tutorial's NER
           features, one c1 = c2 = 0.1 fit on 700 sentences and on all of them and a
           10 × 3 RandomizedSearchCV, default threading, ``--rounds`` rounds alternating:
           benchmarks/l1_search.py's measurements, called.
* tagging  ``crfopt tag``, ``CRF.predict`` and ``CRF.predict_marginals`` against
           CRFsuite's tagger on the CoNLL-2000 test set (tokens per second, featurization
           and decoding apart, 1 and 2 threads), and the saved model's size and the
           tagger's peak memory beside CRFsuite's on CoNLL-2000 and POS-EWT, ℓ2 and
           ℓ1 + ℓ2 models: benchmarks/bench_tagging.py's measurement, called (its
           CRFsuite models are cached like P3's, ``--retrain-crfsuite``).

Runtime: 55 minutes in all for the run behind reports/performance.md (2026-11-28, 2-core
Xeon, quiet, ``--rounds 5 --retrain-crfsuite``): epochs 5.5 min (the 'before' tree's
kernels compiled once; ``--keep DIR`` saves that on reruns), floor 2 min (three
processes, measured on its own, 2026-11-29), threads 8 s, P1 2.3 min
(CRFsuite run to convergence without the bias block), P2 20 s, P3 42 min (CRFsuite
trained on the four problems, 12 min of it; POS-EWT the longest), P4 1 min, P5 1 min,
startup 2 min (the cold ``compare`` compiles every kernel it runs). The tagging section,
measured alone on a loaded machine (2026-12-07, ``--rounds 5``): 17 min when it trains
CRFsuite's POS-EWT models (load 5-6), 6-12 min with all four of them cached (load 3-6;
crfopt trains its four models in each run, 4-8.5 min of it). The wapiti section
is long and is not part of that run: on OCR alone, with ``--wapiti-algorithms l-bfgs
rprop+ bcd sgd-l1 --wapiti-seconds 900``, 100 min at a load of 5 (2026-12-07; its L-BFGS
needs 532 iterations to settle, and each capped algorithm takes its cap on each thread
count); CoNLL-2000's L-BFGS iterations take 2.2 s, POS-EWT's more. Run it with
``--only P3 wapiti --retrain-crfsuite`` to measure Wapiti and CRFsuite in the same run,
narrowed with ``--problems`` as needed.

``--render`` rewrites the report from the last run's raw figures
(.benchmarks/performance.json) without measuring anything: after editing
reports/performance_notes.md, the reading appended to the report.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
# the raw figures of the last run; they stay out of the repository (.benchmarks/ is ignored)
RESULTS = ROOT / ".benchmarks" / "performance.json"
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))
os.environ.setdefault("CRFOPT_DATA", str(ROOT.parent / "shared" / "datasets"))

import epoch_floor  # noqa: E402  (benchmarks/, first on sys.path above)
import wapiti as wapiti_tool  # noqa: E402  (benchmarks/wapiti.py; the section is `wapiti`)

import crfopt  # noqa: E402

#: fresh processes the ``floor`` section measures in (one process's floor moves by up to
#: 10 %, more than its distance to a target: benchmarks/epoch_floor.py)
FLOOR_PROCESSES = 3

SECTIONS = [
    "epochs",
    "floor",
    "threads",
    "P1",
    "P2",
    "P3",
    "wapiti",
    "P4",
    "P5",
    "startup",
    "L1",
    "tagging",
]
#: the problems of the sections that take a list (``--problems`` narrows them)
EPOCH_PROBLEMS = ["ocr", "conll2000"]
P3_PROBLEMS = ["ocr", "conll2000", "ner-nl", "pos-ewt"]
EPOCH_OPTIMIZERS = ["sdca-gap", "oeg", "sag-nus-star"]
#: the commit before issue 19's speed work (tests/golden/traces.json was written from it)
BEFORE = "2fe8d3c"
#: Wapiti's training algorithms (``rprop`` is ``rprop+``: weight backtracking); ``-sparse``
#: adds its sparse forward-backward (``-s``)
WAPITI_ALGORITHMS = ["l-bfgs", "l-bfgs-sparse", "rprop+", "rprop-", "bcd", "sgd-l1"]
#: issue 49's target: crfopt's time to P*(1 + 1e-4) over Wapiti's fastest algorithm's
WAPITI_TARGET = 0.05
#: parallel stochastic plugins tried in P3's 2-thread runs when registered (issue 19 item 2)
PARALLEL_OPTIMIZERS = ["sdca-minibatch"]
#: the reference sdca4crf code, relative to the repository (``--sdca4crf`` / env overrides)
SDCA4CRF_DEFAULT = ROOT.parent / "shared" / "reference" / "sdca4crf"

#: issue 19's targets: epochs in full passes of the same tree (OCR, CoNLL-2000)
EPOCH_TARGETS = {
    "sdca-gap": {"ocr": 4.0, "conll2000": 3.0},
    "oeg": {"ocr": 4.0, "conll2000": 3.0},
    "sag-nus-star": {"ocr": 2.5, "conll2000": 1.6},
}
TARGETS = {"P1": 1.0, "P2": 50.0, "P3": 0.1, "P4": 4 * 2**30, "P5": 1.7, "threads": 1.7}
#: issue 50: crfopt's tagging throughput against CRFsuite's tagger, one thread
TAGGING_TARGET = 1.0
STARTUP_TARGET_S = 0.5
RELATIVE_TARGET = 1e-4
#: CRFsuite is single-threaded: wall seconds above this multiple of its CPU seconds = load
LOADED = 1.25


# ----------------------------------------------------------------------------- CRFsuite


def crfsuite_items(problem, i: int, bias: bool, names=None) -> list[dict[str, float]]:
    """CRFsuite items of sequence i with crfopt's attributes (bias block as 3 attributes),
    named ``names`` (default: the problem's attribute names)."""
    kd = problem.data
    A = problem.n_attributes
    names = names or problem.attribute_names
    s, e = int(kd.offsets[i]), int(kd.offsets[i + 1])
    out = []
    for r in range(s, e):
        if kd.dense:
            x = kd.X[r, :A]
            feats = {f"x{j}": float(x[j]) for j in np.flatnonzero(x)}
        else:
            feats = {}
            for q in range(kd.indptr[r], kd.indptr[r + 1]):
                j = int(kd.indices[q])
                if j < A:
                    feats[names[j] if names else f"x{j}"] = float(kd.values[q])
        if bias:
            feats["__bias__"] = 1.0
            if r == s:
                feats["__first__"] = 1.0
            if r == e - 1:
                feats["__last__"] = 1.0
        out.append(feats)
    return out


def crfsuite_train(
    problem, path: str, *, bias: bool, tight: bool, max_iterations=None, c1=0.0, names=None
):
    """Train CRFsuite L-BFGS (OWL-QN when ``c1`` > 0) on the problem's own features,
    named ``names`` (default: the problem's); returns (log, wall seconds, CPU seconds) of
    the training alone (CRFsuite is single-threaded: on a quiet machine the two agree,
    and their ratio shows the load)."""
    import pycrfsuite

    labels = problem.label_names or [str(k) for k in range(problem.n_labels)]
    kd = problem.data
    tr = pycrfsuite.Trainer(verbose=False)
    for i in range(problem.n):
        s, e = int(kd.offsets[i]), int(kd.offsets[i + 1])
        tr.append(crfsuite_items(problem, i, bias, names), [labels[int(y)] for y in kd.y[s:e]])
    tr.select("lbfgs")  # resets every parameter: set them after
    params = {
        "c1": c1,
        "c2": problem.n * problem.lam / 2,
        "feature.possible_states": True,
        "feature.possible_transitions": True,
    }
    if tight:
        params.update({"max_iterations": 100000, "delta": 1e-12, "epsilon": 1e-12, "period": 20})
    if max_iterations:
        params["max_iterations"] = max_iterations
    tr.set_params(params)
    t0, c0 = time.perf_counter(), time.process_time()
    tr.train(path)
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    return tr.logparser, seconds, cpu


def crfsuite_weights(problem, path: str) -> np.ndarray:
    """crfopt's weight vector holding a CRFsuite model's weights."""
    import pycrfsuite

    tagger = pycrfsuite.Tagger()
    tagger.open(path)
    info = tagger.info()
    labels = problem.label_names or [str(k) for k in range(problem.n_labels)]
    lab = {name: k for k, name in enumerate(labels)}
    # the names crfsuite_items gave the attributes: x{j} for dense pixels
    names = (
        [f"x{j}" for j in range(problem.n_attributes)]
        if problem.data.dense or not problem.attribute_names
        else problem.attribute_names
    )
    att = {name: j for j, name in enumerate(names)}
    w = problem.zeros()
    blocks = problem.unpack(w)
    for (attr, label), value in info.state_features.items():
        if attr in att:
            blocks.emission[lab[label], att[attr]] = value
        else:
            blocks.bias[lab[label], ("__bias__", "__first__", "__last__").index(attr)] = value
    for (a, b), value in info.transitions.items():
        blocks.transition[lab[a], lab[b]] = value
    return w


def crfsuite_reference(problem, *, retrain: bool = False) -> dict[str, Any]:
    """CRFsuite L-BFGS trained to its own (default) convergence on the problem's features,
    with the bias block as three attributes: objective P = loss/n, training seconds, and
    when and where that was measured.

    Training takes minutes (CoNLL-2000 ~350 s), so the result is kept in the user cache
    under the problem's fingerprint (data, feature map, λ) and python-crfsuite's version,
    and reused unless ``retrain``; ``"cached": True`` marks a figure not measured now.
    """
    from crfopt.data.paths import cache_dir

    version = _version("python-crfsuite")
    path = cache_dir("crfsuite") / f"{problem.name}-{problem.fingerprint[:24]}.json"
    if path.exists() and not retrain:
        try:
            stored = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as err:
            print(f"{path}: unreadable ({err}); training CRFsuite again", flush=True)
        else:
            if (
                stored.get("fingerprint") == problem.fingerprint
                and stored.get("versions", {}).get("python-crfsuite") == version
                and math.isfinite(stored.get("objective", math.nan))
            ):
                return {**stored, "cached": True, "cache_file": str(path)}
            print(f"{path}: another problem or python-crfsuite version; training again")
    print(f"training CRFsuite on {problem.name} (cached in {path} for later runs)", flush=True)
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        log, seconds, cpu = crfsuite_train(problem, f"{tmp}/m", bias=True, tight=False)
    objective = log.last_iteration["loss"] / problem.n
    elapsed, reach = 0.0, math.nan
    for it in log.iterations:
        elapsed += float(it["time"])
        if it["loss"] / problem.n <= objective * (1 + RELATIVE_TARGET) and math.isnan(reach):
            reach = elapsed
    out = {
        "problem": problem.name,
        "fingerprint": problem.fingerprint,
        "n": problem.n,
        "lam": problem.lam,
        "c2": problem.n * problem.lam / 2,
        "objective": objective,
        "iterations": len(log.iterations),
        "train_s": seconds,
        "train_cpu_s": cpu,
        # the 1-minute load average when training started: wall > CPU means a loaded machine
        "load_average": load,
        "s_to_1e-4_of_its_optimum": reach,
        "measured_at": _now(),
        "machine": machine(),
        "versions": {
            "python-crfsuite": version,
            "crfopt": crfopt.__version__,
            "numpy": np.__version__,
        },
    }
    path.write_text(json.dumps(out, indent=2), encoding="utf-8")
    return {**out, "cached": False, "cache_file": str(path)}


# ----------------------------------------------------------------------------- sections


def epochs(args: argparse.Namespace) -> dict:
    """Epochs in full passes of the same tree, before (``args.ref``) → after (working tree)."""
    import before_after

    out: dict[str, Any] = {
        "ref": args.ref,
        "unit": "instructions (callgrind)" if args.callgrind else "CPU seconds, one thread",
        "problems": {},
    }
    for name in _problems(args, EPOCH_PROBLEMS):
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
    problems = _problems(args, EPOCH_PROBLEMS)
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
    for name in _problems(args, EPOCH_PROBLEMS):
        problem, label = bench_problem(name)  # a stand-in of the same size without the data
        out["problems"][name] = {"label": label, **measure(problem, rounds=15)}
    return out


def p1(args: argparse.Namespace) -> dict:
    from crfopt.bench.evaluator import Evaluator
    from crfopt.bench.optimum import reference_optimum

    from conftest import threads as limit_threads
    from conftest import time_full_pass

    problem = crfopt.load_problem("ocr")
    with limit_threads(1):
        ours = time_full_pass(problem)
    ours_all = time_full_pass(problem)
    with tempfile.TemporaryDirectory() as tmp:
        log, _, _ = crfsuite_train(problem, f"{tmp}/m", bias=True, tight=False, max_iterations=30)
    its = log.iterations
    evals = sum(int(it.get("linesearch_trials", 1)) for it in its)
    theirs = sum(float(it["time"]) for it in its) / evals
    # the same problem: bias block off on both sides, both solved to convergence
    nb = crfopt.load_problem("ocr", bias=False)
    ref = reference_optimum(nb)
    with tempfile.TemporaryDirectory() as tmp:
        log_nb, secs_nb, _ = crfsuite_train(nb, f"{tmp}/m", bias=False, tight=True)
        w_cs = crfsuite_weights(nb, f"{tmp}/m")
    p_cs = log_nb.last_iteration["loss"] / nb.n
    return {
        "crfopt_pass_1thread_s": ours,
        "crfopt_pass_all_threads_s": ours_all,
        "crfsuite_eval_s": theirs,
        "crfsuite_evaluations_timed": evals,
        "ratio": ours / theirs,
        "ratio_all_threads": ours_all / theirs,
        "nobias_crfopt_p_star": ref.p_star,
        "nobias_crfopt_certificate": ref.certificate,
        "nobias_crfsuite_objective": p_cs,
        "nobias_crfsuite_iterations": len(log_nb.iterations),
        "nobias_crfsuite_seconds": secs_nb,
        "nobias_crfopt_P_at_crfsuite_weights": Evaluator(nb).primal(w_cs),
        "nobias_relative_difference": abs(p_cs - ref.p_star) / ref.p_star,
    }


_TB_SPEED = re.compile(r"^TB (\S+) (\d+) iteration per second (\S+)\s*$")


def sdca4crf_speed(source: Path, timeout: float = 1800.0) -> dict:
    """sdca4crf's gap-sampler SDCA (ρ = 0.8, Newton line search 1e-3, its defaults) for one
    epoch on its own OCR split, single-threaded, run from a temporary copy of ``source``
    (it writes ``logs/`` beside itself). Its speed is taken from its own log lines
    ("iteration per second", every n/5 iterations): iterations between the first and the
    last such line over the time between them, which leaves out its start-up and the
    first interval (sampler construction)."""
    with tempfile.TemporaryDirectory(prefix="sdca4crf-") as tmp:
        copy = Path(tmp) / "sdca4crf"
        shutil.copytree(source, copy)
        for folder, dirs, files in os.walk(copy):  # the shared copy is read-only
            for name in [".", *dirs, *files]:
                p = Path(folder, name)
                p.chmod(p.stat().st_mode | stat.S_IWUSR)
        env = {
            **os.environ,
            "PYTHONPATH": str(copy),
            "OMP_NUM_THREADS": "1",
            "OPENBLAS_NUM_THREADS": "1",
            "MKL_NUM_THREADS": "1",
        }
        cmd = [sys.executable, "main.py", "--dataset", "ocr", "--npass", "1"]
        t0 = time.perf_counter()
        done = subprocess.run(
            cmd, cwd=copy, env=env, capture_output=True, text=True, timeout=timeout
        )
        wall = time.perf_counter() - t0
    if done.returncode != 0:
        tail = "\n".join(done.stderr.strip().splitlines()[-8:])
        raise RuntimeError(f"sdca4crf ({source}) failed with exit code {done.returncode}:\n{tail}")
    marks = [
        (float(m.group(1)), int(m.group(2)), float(m.group(3)))
        for m in map(_TB_SPEED.match, done.stderr.splitlines())
        if m
    ]
    size = re.search(r"Size of training set: sequences (\d+)", done.stdout)
    if len(marks) < 2 or not size:
        raise RuntimeError(
            f"sdca4crf ({source}) printed fewer than two 'iteration per second' lines or no "
            f"training-set size; its output ends:\n{done.stderr[-800:]}"
        )
    (t_first, s_first, _), (t_last, s_last, _) = marks[0], marks[-1]
    per_s = (s_last - s_first) / (t_last - t_first)
    n = int(size.group(1))
    return {
        "path": str(source),
        "commit": _read(source / "COMMIT"),
        "n": n,
        "iterations_timed": s_last - s_first,
        "iterations_per_s": per_s,
        "logged_iterations_per_s": [v for _, _, v in marks],
        "epoch_s": n / per_s,
        "process_wall_s": wall,
    }


def p2(args: argparse.Namespace) -> dict:
    from reference_sdca import NumpySDCA

    from crfopt.bench.runner import warm_up

    from conftest import threads as limit_threads
    from conftest import time_epoch

    source = Path(args.sdca4crf).expanduser()
    if not (source / "main.py").is_file():
        return {
            "skipped": f"sdca4crf not found at {source} (no main.py): pass --sdca4crf PATH or "
            "set CRFOPT_SDCA4CRF to a checkout of the reference code"
        }
    problem = crfopt.load_problem("ocr")
    spec = crfopt.get_registry().optimizer("sdca-gap")
    with limit_threads(1):
        warm_up(spec, spec.resolve({}), problem)
        with problem.initialization():
            opt = spec.create(problem, 0, {})
        ours = [time_epoch(opt, problem.n)]
        # crfopt's epoch before and after the reference's, so a load change hits both
        ref = sdca4crf_speed(source)
        ours.append(time_epoch(opt, problem.n))
        iterations = 1500
        numpy_sdca = NumpySDCA(problem, seed=0)
        for _ in range(300):  # out of the start-up regime of the gap sampler
            numpy_sdca.step()
        t0 = time.perf_counter()
        for _ in range(iterations):
            numpy_sdca.step()
        per_it = (time.perf_counter() - t0) / iterations
    epoch = min(ours)
    return {
        "crfopt_epoch_s": epoch,
        "crfopt_epoch_s_before_and_after": ours,
        "crfopt_n": problem.n,
        "sdca4crf": ref,
        "speedup": ref["epoch_s"] / epoch,
        "numpy_iterations_per_s": 1.0 / per_it,
        "numpy_epoch_s": per_it * problem.n,
        "numpy_ls_evals_per_iteration": numpy_sdca.ls_evals / (iterations + 300),
        "numpy_speedup": per_it * problem.n / epoch,
    }


def _time_to_target(
    problem, name: str, target: float, p_ref: float, passes: float, seconds: float
) -> dict:
    """One seeded run until P(w) ≤ ``target`` (checked every half pass), or ``passes``
    effective passes, or ``seconds`` of optimizer time."""
    from crfopt.bench.runner import Budget, run

    reg = crfopt.get_registry()
    spec = reg.optimizer(name)
    t0 = time.perf_counter()
    res = run(
        problem,
        spec,
        budget=Budget(passes=passes, seconds=seconds, target_suboptimality=target - p_ref),
        p_star=p_ref,
        checkpoints="every:0.5" if name != "lbfgs" else "every:5",
        registry=reg,
        metrics=[],  # test error and F1 are not what is timed here
    )
    wall = time.perf_counter() - t0
    last = res.trace.iloc[-1]
    return {
        "status": res.status,
        "reached": bool(last["primal"] <= target),
        # the runner's clock: the optimizer's blocks and its setup, no evaluation
        "optimizer_s": float(last["time_s"]) + float(res.meta.get("init_seconds") or 0.0),
        "wall_s_with_evaluations": wall,
        "passes": float(last["effective_passes"]),
        "primal": float(last["primal"]),
    }


def p3(args: argparse.Namespace) -> dict:
    from crfopt.bench.optimum import cached_optimum, shipped_optimum

    from conftest import threads as limit_threads

    reg = crfopt.get_registry()
    out: dict[str, Any] = {"problems": {}}
    for name in _problems(args, P3_PROBLEMS):
        problem = crfopt.load_problem(name)
        cs = crfsuite_reference(problem, retrain=args.retrain_crfsuite)
        target = cs["objective"] * (1 + RELATIVE_TARGET)
        # crfopt's certified P* when already known (never computed here: hours on POS-EWT)
        known = cached_optimum(problem) or shipped_optimum(problem)
        entry: dict[str, Any] = {
            "crfsuite": cs,
            "target": target,
            "crfopt_p_star": known.p_star if known else None,
            "threads": {},
        }
        for k in args.threads:
            names = list(args.optimizers)
            if k > 1:
                names += [p for p in PARALLEL_OPTIMIZERS if p in reg.optimizers and p not in names]
            runs = {}
            # a run slower than the fastest so far (or than CRFsuite) cannot be the answer:
            # it is stopped there, which keeps P3 from spending the whole pass budget on it
            cap = cs["train_s"]
            with limit_threads(k):
                for opt in names:
                    print(f"  {name}, {k} thread(s): {opt}", flush=True)
                    r = _time_to_target(problem, opt, target, cs["objective"], args.passes, cap)
                    runs[opt] = r
                    if r["reached"]:
                        cap = min(cap, r["optimizer_s"])
            reached = {o: r for o, r in runs.items() if r["reached"]}
            best = min(reached, key=lambda o: reached[o]["optimizer_s"]) if reached else None
            entry["threads"][str(k)] = {
                "runs": runs,
                "fastest": best,
                "ratio": reached[best]["optimizer_s"] / cs["train_s"] if best else None,
            }
        out["problems"][name] = entry
        del problem
    return out


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
            echo=_progress(f"{name}: "),
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


def _progress(prefix: str):
    """An echo for wapiti_tool.train: every 50th iteration line and every error line."""

    def echo(line: str) -> None:
        m = re.match(r"\s*\[\s*(\d+)\]", line)
        if (m and int(m.group(1)) % 50 == 0) or "error" in line.lower() or "fatal" in line:
            print(f"    {prefix}{line.strip()}", flush=True)

    return echo


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
        echo=_progress("l-bfgs: "),
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
    for name in _problems(args, P3_PROBLEMS):
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


def p4(args: argparse.Namespace) -> dict:
    from conftest import peak_memory

    out = {}
    for dtype in ("float64", "float32"):
        before, peak, state = peak_memory("pos-ewt", f"sdca-gap[dtype={dtype}]")
        out[dtype] = {"rss_before": before, "peak_rss": peak, "optimizer_bytes": state}
    return out


def p5(args: argparse.Namespace) -> dict:
    grid = dict(problems="ocr", optimizers=["sdca-gap"], seeds=[0, 1, 2, 3], passes=6)
    out = {}
    for label, backend, jobs in (
        ("joblib, 1 worker", "joblib", 1),
        ("joblib, 2 workers", "joblib", 2),
        ("dask LocalCluster, 2 workers", "dask", 2),
    ):
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            crfopt.compare(
                grid["problems"],
                grid["optimizers"],
                seeds=grid["seeds"],
                passes=grid["passes"],
                out=tmp,
                backend=backend,
                n_jobs=jobs,
                optimum=False,
            )
            out[label] = time.perf_counter() - t0
    base = out["joblib, 1 worker"]
    return {"seconds": out, "speedup": {k: base / v for k, v in out.items()}}


def l1(args: argparse.Namespace) -> dict:
    """benchmarks/l1_search.py's measurements (sklearn-crfsuite and the NER data needed)."""
    try:
        import sklearn_crfsuite  # noqa: F401
    except ImportError:
        return {"skipped": "sklearn-crfsuite is not installed (the bench extra)"}
    import l1_search

    from crfopt.data.sources import DataNotFoundError

    try:
        return l1_search.measure(args.rounds)
    except DataNotFoundError as exc:
        return {"skipped": f"CoNLL-2002 Dutch is missing ({exc.__class__.__name__})"}


def startup(args: argparse.Namespace) -> dict:
    """bench_startup.py's two measurements, called as pytest would (a fresh tmp folder)."""
    import bench_startup

    import conftest

    before = set(conftest.RESULTS)
    with tempfile.TemporaryDirectory(prefix="crfopt-startup-") as tmp:
        bench_startup.test_cli_startup(Path(tmp) / "cli")
        (Path(tmp) / "cold").mkdir()
        bench_startup.test_first_compare_cold_and_warm(Path(tmp) / "cold", "sdca-gap")
    return {"groups": {g: dict(rows) for g, rows in conftest.RESULTS.items() if g not in before}}


def tagging(args: argparse.Namespace) -> dict:
    """bench_tagging.py's measurement: the tagging table (CoNLL-2000) and the memory
    table (CoNLL-2000 and POS-EWT), every CRFsuite figure from the same run."""
    import bench_tagging

    problems = _problems(args, bench_tagging.PROBLEMS)
    if not problems:
        return {"skipped": f"--problems names none of {', '.join(bench_tagging.PROBLEMS)}"}
    return bench_tagging.measure(
        problems, rounds=args.rounds, retrain_crfsuite=args.retrain_crfsuite
    )


# ----------------------------------------------------------------------------- report


def _problems(args: argparse.Namespace, default: list[str]) -> list[str]:
    return [p for p in default if not args.problems or p in args.problems]


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8").strip()
    except OSError:
        return None


def _from_report(path: str | Path) -> dict:
    """An earlier run's figures read back from its report's Details (``--only`` where
    .benchmarks/ is empty, e.g. a fresh clone: the other sections stay in the report)."""
    text = _read(Path(path)) or ""
    _, found, details = text.partition("\n## Details\n")
    if not found:
        return {}
    blocks = re.finditer(r"^### (\S+)\n\n```json\n(.*?)\n```$", details, re.S | re.M)
    return {m.group(1): json.loads(m.group(2)) for m in blocks if m.group(1) in SECTIONS}


def _tree() -> str:
    """The measured tree: its commit, "-dirty" when it has uncommitted changes."""
    try:
        out = subprocess.run(
            ["git", "describe", "--always", "--dirty", "--abbrev=7"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        )
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return out.stdout.strip()


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def _version(dist: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return "not installed"


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            names = [ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")]
        cpu = names[0] if names else cpu
    except OSError:
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{cpu}, {os.cpu_count()} cores, {mem:.0f} GiB, Python {platform.python_version()}"


def _ok(flag: bool) -> str:
    return "met" if flag else "**missed**"


LABELS = {
    "ocr": "OCR",
    "conll2000": "CoNLL-2000",
    "ner-nl": "NER-nl",
    "pos-ewt": "POS-EWT",
}


def _label(name: str) -> str:
    return LABELS.get(name, name)


def _skipped(r: dict, lines: list[str], title: str) -> bool:
    if "skipped" in r:
        lines += [f"{title}: not measured — {r['skipped']}.", ""]
        return True
    return False


def _summary_rows(res: dict) -> list[str]:
    rows = []
    if "P1" in res and "skipped" not in res["P1"]:
        r = res["P1"]
        rows.append(
            f"| P1 | OCR value+gradient pass, 1 thread (all threads) vs CRFsuite evaluation | "
            f"{r['crfopt_pass_1thread_s'] * 1e3:.1f} ms ({r['crfopt_pass_all_threads_s'] * 1e3:.1f}"
            f" ms) | {r['crfsuite_eval_s'] * 1e3:.1f} ms | {r['ratio']:.2f} "
            f"({r['ratio_all_threads']:.2f}) | ≤ 1.0 | {_ok(r['ratio'] <= TARGETS['P1'])} |"
        )
    if "P2" in res and "skipped" not in res["P2"]:
        r = res["P2"]
        ref = r["sdca4crf"]
        rows.append(
            f"| P2 | OCR sdca-gap epoch vs sdca4crf's (its log: {ref['iterations_per_s']:.0f} it/s"
            f" over {ref['iterations_timed']} iterations) | {r['crfopt_epoch_s']:.3f} s | "
            f"{ref['epoch_s']:.1f} s | {r['speedup']:.1f}× faster | ≥ 50× | "
            f"{_ok(r['speedup'] >= TARGETS['P2'])} |"
        )
        rows.append(
            f"| P2b | the same epoch vs a lean NumPy SDCA ({r['numpy_iterations_per_s']:.0f} it/s)"
            f" | {r['crfopt_epoch_s']:.3f} s | {r['numpy_epoch_s']:.1f} s | "
            f"{r['numpy_speedup']:.1f}× faster | | |"
        )
    if "P3" in res and "skipped" not in res["P3"]:
        for name, e in res["P3"]["problems"].items():
            for k, t in e["threads"].items():
                best = t["fastest"]
                what = f"{_label(name)}, {k} thread{'s' if k != '1' else ''}: time to CRFsuite's"
                if best:
                    b = t["runs"][best]
                    rows.append(
                        f"| P3 | {what} objective (1e-4 rel.), {best} | "
                        f"{b['optimizer_s']:.1f} s | {e['crfsuite']['train_s']:.1f} s | "
                        f"{t['ratio']:.3f} | ≤ 0.1 | {_ok(t['ratio'] <= TARGETS['P3'])} |"
                    )
                else:
                    rows.append(
                        f"| P3 | {what} objective (1e-4 rel.): none reached it in the budget | "
                        f"| {e['crfsuite']['train_s']:.1f} s | | ≤ 0.1 | **missed** |"
                    )
    if "wapiti" in res and "skipped" not in res["wapiti"]:
        for name, e in res["wapiti"]["problems"].items():
            for k, t in e.get("threads", {}).items():
                what = f"{_label(name)}, {k} thread{'s' if k != '1' else ''}: time to P*(1+1e-4)"
                fast, best = t["wapiti_fastest"], t["crfopt_best"]
                if fast and best:
                    w_s = t["wapiti"][fast]["seconds_to_target"]
                    c_s = t["crfopt"][best]["optimizer_s"]
                    rows.append(
                        f"| W | {what}, {best} vs Wapiti's fastest ({fast}) | {c_s:.2f} s | "
                        f"{w_s:.1f} s | {t['ratio']:.3f} | ≤ {WAPITI_TARGET:g} | "
                        f"{_ok(t['ratio'] <= WAPITI_TARGET)} |"
                    )
                else:
                    rows.append(
                        f"| W | {what}: {'no Wapiti algorithm' if not fast else 'no crfopt run'} "
                        f"reached it | | | | ≤ {WAPITI_TARGET:g} | **missed** |"
                    )
    if "P4" in res and "skipped" not in res["P4"]:
        r = res["P4"]
        rows.append(
            f"| P4 | pos-ewt sdca-gap peak RSS, float32 (float64) duals | "
            f"{r['float32']['peak_rss'] / 2**30:.2f} GiB ({r['float64']['peak_rss'] / 2**30:.2f}"
            f" GiB) | | | ≤ 4 GiB | {_ok(r['float32']['peak_rss'] <= TARGETS['P4'])} |"
        )
    if "P5" in res and "skipped" not in res["P5"]:
        r = res["P5"]
        s = r["speedup"]
        rows.append(
            f"| P5 | 4-run grid: 2 joblib workers (2-worker Dask) vs 1 worker | "
            f"{r['seconds']['joblib, 2 workers']:.1f} s "
            f"({r['seconds']['dask LocalCluster, 2 workers']:.1f} s) | "
            f"{r['seconds']['joblib, 1 worker']:.1f} s | {s['joblib, 2 workers']:.2f}× "
            f"({s['dask LocalCluster, 2 workers']:.2f}×) | ≥ 1.7× | "
            f"{_ok(min(s['joblib, 2 workers'], s['dask LocalCluster, 2 workers']) >= 1.7)} |"
        )
    if "L1" in res and "skipped" not in res["L1"]:
        for key, what in (("fit-700", "700 sentences"), ("fit-all", "all 15,806 sentences")):
            e = res["L1"].get(key)
            if e:
                rows.append(
                    f"| L1 | one ℓ1 fit (c1 = c2 = 0.1), {what}, vs sklearn-crfsuite, same F "
                    f"({e['objective_rel']:+.0e} rel.) | {e['crfopt_s']:.2f} s | "
                    f"{e['crfsuite_s']:.2f} s | {e['ratio']:.2f} | ≤ 1.0 | "
                    f"{_ok(e['ratio'] <= 1.0 and e['objective_rel'] <= 1e-6)} |"
                )
        e = res["L1"].get("search")
        if e:
            rows.append(
                f"| L1 | RandomizedSearchCV 10 × 3 on 1,000 sentences vs sklearn-crfsuite | "
                f"{e['crfopt_s']:.1f} s | {e['crfsuite_s']:.1f} s | {e['ratio']:.2f} | ≤ 1.0 | "
                f"{_ok(e['ratio'] <= 1.0 and e['objective_rel'] <= 1e-6)} |"
            )
    if "tagging" in res and "speed" in res["tagging"]:
        sp = res["tagging"]["speed"]
        for what, ours, base, title in TAGGING_ROWS:
            one, two = (
                sp["rows"][f"{ours}, {k}"]["total_tok_s"] for k in ("1 thread", "2 threads")
            )
            theirs = sp["rows"][f"{base}, 1 thread"]["total_tok_s"]
            r1, r2 = (sp["ratios"][f"{what}|{k}"]["median"] for k in (1, 2))
            rows.append(
                f"| tagging | {_label(sp['problem'])} test, {title}, tokens/s, 1 thread (2 "
                f"threads) | {one:,.0f} ({two:,.0f}) | {theirs:,.0f} | {r1:.2f}× ({r2:.2f}×) | "
                f"≥ {TAGGING_TARGET:g}× | {_ok(r1 >= TAGGING_TARGET)} |"
            )
    return rows


#: the tagging table's comparisons: (ratio key, crfopt's row, CRFsuite's row, title)
TAGGING_ROWS = [
    ("tag", "crfopt tag", "crfsuite tag", "`crfopt tag` vs CRFsuite's `Tagger.tag`"),
    ("predict", "CRF.predict", "crfsuite tag (dicts)", "`CRF.predict` vs `Tagger.tag` (dicts)"),
    (
        "marginals",
        "CRF.predict_marginals",
        "crfsuite marginals",
        "`CRF.predict_marginals` vs `Tagger.marginal`",
    ),
]


def _epoch_section(r: dict) -> list[str]:
    lines = [
        "## Epochs in full passes, before → after",
        "",
        f"One epoch (n iterations) in value+gradient passes of the same tree: before = commit "
        f"`{r['ref']}` (before issue 19's speed work), after = the working tree measured; "
        f"{r['unit']}, each tree in fresh processes (benchmarks/before_after.py's worktrees), "
        "the least figure over rounds.",
        "",
    ]
    if _skipped(r, lines, "Epochs"):
        return lines
    names = list(r["problems"])
    lines += [
        "| | " + " | ".join(_label(p) for p in names) + " | target |",
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
        "| | " + " | ".join(_label(p) for p in names) + " |",
        "|---|" + "---|" * len(names),
    ]
    for opt in EPOCH_OPTIMIZERS:
        cells = []
        for p in names:
            x = r["problems"][p][opt]
            cells.append(f"{x['before']:.4g} → {x['after']:.4g} ({x['before'] / x['after']:.2f}×)")
        lines.append(f"| `{opt}` | " + " | ".join(cells) + " |")
    return [*lines, ""]


def _floor_section(r: dict) -> list[str]:
    lines = ["## The floor of an epoch that keeps its iterates", ""]
    if _skipped(r, lines, "The floors"):
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
        *epoch_floor.table("sdca-gap", combined["sdca-gap"], EPOCH_TARGETS["sdca-gap"], _label),
        "",
        "`oeg`, whose accept test is decided by rounding once a block has converged, so "
        "that everything it reads must round as before: per trial (as many as the measured "
        "epochs made), the oracle on the trial scores, the exp of each pairwise "
        "log-marginal, and ⟨θ', μ'⟩ summed entry by entry in order.",
        "",
        *epoch_floor.table("oeg", combined["oeg"], EPOCH_TARGETS["oeg"], _label),
        "",
    ]
    for opt in epoch_floor.OPTIMIZERS:
        goals = EPOCH_TARGETS[opt]
        floors = {name: x["floor"] for name, x in combined[opt].items()}
        above = [
            f"{_label(p)} ({min(f):.2f} > {goals[p]:g})"
            for p, f in floors.items()
            if min(f) > goals[p]
        ]
        below = [
            f"{_label(p)} ({max(f):.2f} ≤ {goals[p]:g})"
            for p, f in floors.items()
            if max(f) <= goals[p]
        ]
        straddle = [
            f"{_label(p)} ({min(f):.2f}–{max(f):.2f} against {goals[p]:g})"
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


def _threads_section(r: dict) -> list[str]:
    lines = ["## Both cores: the batch oracle on 2 threads", ""]
    if _skipped(r, lines, "The 2-thread ratios"):
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
        label = _label(name) + ("" if m.get("label", name) == name else f" ({m['label']})")
        lines.append(
            f"| {label} | {m['t1_median_s'] * 1e3:.1f} ms | {m['t2_median_s'] * 1e3:.1f} ms | "
            f"{s:.2f}× ({m['min']:.2f}–{m['max']:.2f}) | {m['load_1min']:.1f} | ≥ 1.7× | "
            f"{_ok(s >= TARGETS['threads'])} |"
        )
    return [*lines, ""]


def _p3_section(r: dict, now_machine: str) -> list[str]:
    lines = ["## Time to CRFsuite's objective", ""]
    if _skipped(r, lines, "Time to target"):
        return lines
    lines += [
        "CRFsuite L-BFGS on crfopt's own features (bias block as three attributes), c1 = 0, "
        "c2 = nλ/2, to its default convergence; crfopt's optimizers (seed 0) until "
        "P(w) ≤ CRFsuite's P × (1 + 1e-4), checked every half pass, in optimizer seconds "
        "(setup included, evaluations excluded). Ratio = crfopt's seconds / CRFsuite's.",
        "",
        "| | CRFsuite P (iterations) | CRFsuite s | crfopt P* | "
        + " | ".join(f"best, {k} thread{'s' if k != '1' else ''}" for k in _thread_keys(r))
        + " |",
        "|---|---|---|---|" + "---|" * len(_thread_keys(r)),
    ]
    where = []
    for name, e in r["problems"].items():
        cs = e["crfsuite"]
        star = f"{e['crfopt_p_star']:.8f}" if e.get("crfopt_p_star") is not None else "—"
        cells = []
        for k in _thread_keys(r):
            t = e["threads"].get(k)
            if t is None:
                cells.append("—")
            elif t["fastest"]:
                b = t["runs"][t["fastest"]]
                cells.append(
                    f"`{t['fastest']}` {b['optimizer_s']:.1f} s ({b['passes']:.1f} passes): "
                    f"**{t['ratio']:.3f}** {'✓' if t['ratio'] <= TARGETS['P3'] else '✗'}"
                )
            else:
                cells.append("not reached ✗")
        lines.append(
            f"| {_label(name)} | {cs['objective']:.8f} ({cs['iterations']}) | "
            f"{cs['train_s']:.1f} | {star} | " + " | ".join(cells) + " |"
        )
        when = "cached from an earlier run" if cs.get("cached") else "trained in this run"
        other = "" if cs.get("machine") == now_machine else f" on another machine ({cs['machine']})"
        loaded = ""
        if cs.get("train_cpu_s") and cs["train_s"] > LOADED * cs["train_cpu_s"]:
            loaded = (
                f", **under load**: {cs['train_s']:.0f} s wall for {cs['train_cpu_s']:.0f} s of CPU"
                " (rerun with `--retrain-crfsuite` on a quiet machine)"
            )
        where.append(f"{_label(name)}: measured {cs['measured_at']}{other} ({when}{loaded})")
    lines += ["", "CRFsuite's figures: " + "; ".join(where) + ".", ""]
    lines += ["Every run (optimizer seconds, passes, reached):", ""]
    for name, e in r["problems"].items():
        for k, t in e["threads"].items():
            runs = ", ".join(
                f"`{o}` {x['optimizer_s']:.1f} s / {x['passes']:.1f} passes"
                + ("" if x["reached"] else " (not reached)")
                for o, x in t["runs"].items()
            )
            lines.append(f"- {_label(name)}, {k} thread{'s' if k != '1' else ''}: {runs}")
    return [*lines, ""]


def _mib(n: float) -> str:
    return f"{n / 2**20:,.1f} MiB"


def _tagging_section(r: dict) -> list[str]:
    lines = ["## Tagging and the memory of a trained model", ""]
    if _skipped(r, lines, "Tagging"):
        return lines
    st = r["settings"]
    lines += [
        f"Each tool trains its own model on the same attributes (crfopt's template; CRFsuite "
        f"gets the bias block as three attributes): L-BFGS for {st['iterations']} iterations "
        f"at c2 = nλ/2 (ℓ2), and OWL-QN as long with c1 = {st['c1']:g} (ℓ1 + ℓ2, crfopt's "
        "σ = c1/n); benchmarks/bench_tagging.py's docstring gives the details.",
        "",
    ]
    sp = r.get("speed")
    if sp:
        lines += [
            f"Tokens per second on the {_label(sp['problem'])} test set ({sp['tokens']:,} "
            f"tokens, {sp['sentences']:,} sentences), ℓ2 models, the best of {sp['rounds']} "
            "rounds alternating the taggers. crfopt's featurization encodes the text into "
            "the model's columns; CRFsuite's forms the attribute strings (crfopt's template "
            "code, `crfopt tag` rows only) and runs `Tagger.set`, which converts the items, "
            "looks the attributes up and computes the state scores. Decoding: crfopt's "
            "scores and Viterbi (or forward–backward and the dicts of marginals); CRFsuite's "
            "`Tagger.tag()` (or its `Tagger.marginal` calls) after `set`. The ratio is "
            "crfopt's total rate over CRFsuite's, paired within each round: the median "
            "(range) over the rounds.",
            "",
            "| | featurization | decoding | total | vs CRFsuite | |",
            "|---|---|---|---|---|---|",
        ]
        for what, ours, base, title in TAGGING_ROWS:
            lines.append(f"| *{title}* | | | | | |")
            b = sp["rows"][f"{base}, 1 thread"]
            lines.append(
                f"| CRFsuite | {b['featurize_tok_s']:,.0f} | {b['decode_tok_s']:,.0f} | "
                f"{b['total_tok_s']:,.0f} | 1 | |"
            )
            for k, label in ((1, "1 thread"), (2, "2 threads")):
                o = sp["rows"][f"{ours}, {label}"]
                q = sp["ratios"][f"{what}|{k}"]
                check = f" {_ok(q['median'] >= TAGGING_TARGET)} |" if k == 1 else " |"
                lines.append(
                    f"| crfopt, {label} | {o['featurize_tok_s']:,.0f} | "
                    f"{o['decode_tok_s']:,.0f} | {o['total_tok_s']:,.0f} | "
                    f"**{q['median']:.2f}×** ({q['min']:.2f}–{q['max']:.2f}) |{check}"
                )
        ot = sp["one_time"]
        acc = sp.get("accuracy") or {}
        ps = sp.get("per_sentence")
        lines += [
            "",
            *(
                [
                    f"One sentence per call (`CRF.predict_single` against `Tagger.tag`, the "
                    f"whole call, 1 thread): crfopt {ps['crfopt']:,.0f} tokens/s, CRFsuite "
                    f"{ps['crfsuite']:,.0f}, **{ps['ratio']:.2f}×** (no target; a call's "
                    "fixed cost weighs on a sentence of 24 tokens).",
                    "",
                ]
                if ps
                else []
            ),
            f"Once per model: crfopt reads its file in {ot['crfopt_load_s']:.2f} s and builds "
            f"its lookup tables in {ot['crfopt_encoder_tables_s']:.2f} s (template) / "
            f"{ot['crfopt_vocabulary_s']:.2f} s (dicts); CRFsuite opens its file in "
            f"{ot['crfsuite_open_s']:.3f} s. "
            + (
                f"Test accuracy of the two models: crfopt {100 * acc['crfopt']:.2f} %, "
                f"CRFsuite {100 * acc['crfsuite']:.2f} % (their tags agree on "
                f"{100 * sp['crfopt_crfsuite_agreement']:.2f} % of the tokens). "
                if acc
                else ""
            )
            + "Load average (1 min) over the rounds: "
            + ", ".join(f"{x:.2f}" for x in sp["load_1min_rounds"])
            + ".",
            "",
        ]
    lines += [
        "The saved model and a tagger process on the test set: crfopt's file as saved "
        "(attributes whose weights are all zero left out; unpruned in parentheses) and "
        "CRFsuite's; the peak resident memory (VmHWM) of `crfopt tag` and of a Python "
        "process tagging the same attribute strings with CRFsuite, with each process's "
        "resident memory before it opens the model in parentheses (the interpreter and "
        "libraries: numba and NumPy for crfopt), and each process's wall time.",
        "",
        "| | crfopt file | CRFsuite file | crfopt attributes saved / all | CRFsuite features "
        "| crfopt tagger peak | CRFsuite tagger peak | crfopt process | CRFsuite process |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, m in r["memory"].items():
        for kind, title in (("l2", "ℓ2"), ("l1", "ℓ1 + ℓ2")):
            x = m[kind]
            co, cs = x["crfopt_tagger"], x["crfsuite_tagger"]
            feats = x.get("crfsuite_active_features")
            lines.append(
                f"| {_label(name)}, {title} | {_mib(x['crfopt_file'])} "
                f"({_mib(x['crfopt_file_unpruned'])}) | {_mib(x['crfsuite_file'])} | "
                f"{x['crfopt_attributes_saved']:,} / {x['crfopt_attributes']:,} | "
                + (f"{feats:,}" if feats is not None else "—")
                + f" | {_mib(co['peak_rss'])} ({_mib(co['rss_before_model'])}) | "
                f"{_mib(cs['peak_rss'])} ({_mib(cs['rss_before_model'])}) | "
                f"{co['wall_s']:.1f} s | {cs['wall_s']:.1f} s |"
            )
    return [*lines, ""]


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


def _wapiti_section(r: dict, p3: dict | None) -> list[str]:
    lines = ["## Wapiti on crfopt's feature map", ""]
    if _skipped(r, lines, "Wapiti"):
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
            lines.append(f"| {_label(name)} | {e['skipped']} | | | |")
            continue
        c = e["check"]
        rel = c.get("relative_difference")
        feat = f"{c['features']:,} ({c['dim']:,})" + ("" if c["features"] == c["dim"] else " ✗")
        secs = f"{c['seconds']:.1f} s" if c.get("seconds") is not None else "—"
        state = " (timed out)" if c.get("timed_out") else ""
        lines.append(
            f"| {_label(name)} | {feat} | {c['printed_objective']} ({c['iterations']} it., "
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
                f"| {_label(name)} | {k} | " + " | ".join(cells) + f" | {extra}{ours} | {ratio} |"
            )
    return [*lines, ""]


def _thread_keys(r: dict) -> list[str]:
    keys = {k for e in r["problems"].values() for k in e["threads"]}
    return sorted(keys, key=int)


def _startup_section(r: dict) -> list[str]:
    lines = ["## Start-up", ""]
    if _skipped(r, lines, "Start-up"):
        return lines
    lines += [
        "benchmarks/bench_startup.py's measurements: median wall time of fresh processes "
        "(interpreter start included; `python -c pass` is the baseline); target for "
        "`crfopt --help` and `crfopt list`: under 0.5 s.",
        "",
        "| | seconds | |",
        "|---|---|---|",
    ]
    for group, rows in r["groups"].items():
        lines.append(f"| *{group}* | | |")
        for label, value in rows.items():
            check = ""
            if label.startswith(("crfopt --help", "crfopt list (listing cache)")):
                check = _ok(value < STARTUP_TARGET_S)
            lines.append(f"| {label} | {value:.2f} | {check} |")
    return [*lines, ""]


def _l1_section(r: dict) -> list[str]:
    import l1_search

    lines: list[str] = []
    if _skipped(r, lines, "ℓ1 and search"):
        return ["## ℓ1 and search", "", *lines]
    return l1_search.table(r)


def write_report(res: dict, path: Path) -> None:
    """reports/performance.md from a result dict (sections missing from it are left out)."""
    lines = [
        "# Performance",
        "",
        f"Measured {res['date']} on {res['machine']} by `python benchmarks/performance.py`",
        f"(crfopt {res.get('crfopt', crfopt.__version__)}, numba {res['numba']}, "
        f"python-crfsuite {res['crfsuite']}). Each figure is a ratio against a baseline",
        "measured in the same run (each section's Details give the time it was measured).",
        "",
    ]
    measured = [key for key in SECTIONS if key in res and "skipped" not in res[key]]
    if measured:
        lines += [
            "| section | measured | tree | load (1 min) at start → end | minutes |",
            "|---|---|---|---|---|",
        ]
        for key in measured:
            sec = res[key]
            load = sec.get("load_1min")
            lines.append(
                f"| `{key}` | {sec.get('measured_at', '?')} | {sec.get('tree', 'not recorded')} | "
                + (f"{load[0]:.2f} → {load[1]:.2f}" if load else "not recorded")
                + (f" | {sec['elapsed_s'] / 60:.0f} |" if "elapsed_s" in sec else " | ? |")
            )
        lines.append("")
    rows = _summary_rows(res)
    if rows:
        lines += [
            "| | what | crfopt | baseline | ratio | target | |",
            "|---|---|---|---|---|---|---|",
            *rows,
            "",
        ]
    for key in ("P2", "P3"):
        if key in res and "skipped" in res[key]:
            lines += [f"{key}: not measured — {res[key]['skipped']}.", ""]
    if "epochs" in res:
        lines += _epoch_section(res["epochs"])
    if "floor" in res:
        lines += _floor_section(res["floor"])
    if "threads" in res:
        lines += _threads_section(res["threads"])
    if "P3" in res and "skipped" not in res["P3"]:
        lines += _p3_section(res["P3"], res["machine"])
    if "wapiti" in res:
        p3 = res.get("P3")
        same_run = (
            p3 and "skipped" not in p3 and p3.get("measured_at") == res["wapiti"].get("measured_at")
        )
        lines += _wapiti_section(res["wapiti"], p3 if same_run else None)
    if "startup" in res:
        lines += _startup_section(res["startup"])
    if "L1" in res:
        lines += _l1_section(res["L1"])
    if "tagging" in res:
        lines += _tagging_section(res["tagging"])
    notes = path.with_name("performance_notes.md")
    if notes.exists():  # the reading of these numbers: targets missed, why, what was fixed
        lines += [notes.read_text(encoding="utf-8").rstrip(), ""]
    lines += ["## Details", ""]
    for key in SECTIONS:
        if key in res:
            lines += [f"### {key}", "", "```json", json.dumps(res[key], indent=2), "```", ""]
    path.write_text("\n".join(lines).rstrip() + "\n", encoding="utf-8")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    doc = __doc__ or ""
    ap = argparse.ArgumentParser(
        description=doc.split("\n")[0],
        epilog=doc.split("\n\n", 2)[2],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument(
        "--only",
        nargs="+",
        choices=SECTIONS,
        metavar="SECTION",
        help=f"measure only these sections ({', '.join(SECTIONS)}); the others of the last "
        "run (.benchmarks/performance.json) stay in the report. Default: all",
    )
    ap.add_argument(
        "--problems",
        nargs="+",
        choices=P3_PROBLEMS,
        metavar="PROBLEM",
        help="narrow epochs (ocr, conll2000), P3 and wapiti (ocr, conll2000, ner-nl, pos-ewt) "
        "and tagging (conll2000, pos-ewt) to these",
    )
    ap.add_argument(
        "--out",
        default=str(ROOT / "reports" / "performance.md"),
        help="the report to write (default: reports/performance.md)",
    )
    ap.add_argument(
        "--ref",
        default=BEFORE,
        help=f"epochs: the 'before' commit (default {BEFORE}, before issue 19's speed work)",
    )
    ap.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="epochs: processes per tree, alternating; L1: rounds per measurement; tagging: "
        "rounds of every tagger (3)",
    )
    ap.add_argument(
        "--callgrind",
        action="store_true",
        help="epochs: count instructions under valgrind instead of CPU seconds (exact on a "
        "loaded machine; the first run compiles each tree under valgrind, ~15 min: use --keep)",
    )
    ap.add_argument(
        "--keep",
        default=None,
        metavar="DIR",
        help="epochs: keep the git worktrees and their numba caches in DIR for later runs",
    )
    ap.add_argument(
        "--sdca4crf",
        default=os.environ.get("CRFOPT_SDCA4CRF", str(SDCA4CRF_DEFAULT)),
        metavar="PATH",
        help="P2: the reference sdca4crf code (env CRFOPT_SDCA4CRF; default "
        "../shared/reference/sdca4crf beside the repository); P2 is skipped when absent",
    )
    ap.add_argument(
        "--optimizers",
        nargs="+",
        default=["sdca-gap", "sag-nus-star", "oeg"],
        metavar="NAME",
        help="P3 and wapiti: the crfopt optimizers tried (default: sdca-gap sag-nus-star oeg; "
        f"P3 on 2 threads also {', '.join(PARALLEL_OPTIMIZERS)} when registered)",
    )
    ap.add_argument(
        "--threads",
        nargs="+",
        type=int,
        default=[1, 2],
        metavar="K",
        help="P3 and wapiti: thread counts, each reported separately (default: 1 2)",
    )
    ap.add_argument(
        "--passes",
        type=float,
        default=60.0,
        help="P3 and wapiti: the budget of each crfopt run in effective passes (60)",
    )
    ap.add_argument(
        "--wapiti-algorithms",
        nargs="+",
        default=WAPITI_ALGORITHMS,
        choices=WAPITI_ALGORITHMS,
        metavar="NAME",
        help=f"wapiti: Wapiti's algorithms timed (default: {' '.join(WAPITI_ALGORITHMS)})",
    )
    ap.add_argument(
        "--wapiti-seconds",
        type=float,
        default=1800.0,
        help="wapiti: the wall-clock cap of each Wapiti algorithm's run (1800)",
    )
    ap.add_argument(
        "--wapiti-check-seconds",
        type=float,
        default=7200.0,
        help="wapiti: the cap of the L-BFGS run to convergence that checks the objective (7200)",
    )
    ap.add_argument(
        "--retrain-crfsuite",
        action="store_true",
        help="P3, tagging: train CRFsuite again instead of reusing its cached objective and "
        "seconds (P3) or models (tagging)",
    )
    ap.add_argument(
        "--render",
        action="store_true",
        help="measure nothing: rewrite the report from the last run "
        "(.benchmarks/performance.json) and the performance_notes.md beside the report",
    )
    args = ap.parse_args(argv)
    if args.render and args.only:
        ap.error("--render measures nothing; it cannot be combined with --only")
    if (
        args.rounds < 1
        or args.passes <= 0
        or min(args.threads) < 1
        or min(args.wapiti_seconds, args.wapiti_check_seconds) <= 0
    ):
        ap.error("--rounds, --passes, --threads and the --wapiti-*seconds must be positive")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.render:
        if not RESULTS.exists():
            sys.exit(f"--render: no earlier run to render: {RESULTS} is missing")
        write_report(json.loads(RESULTS.read_text()), Path(args.out))
        print(f"rendered {args.out} from {RESULTS}")
        return 0
    import numba

    if {"P1", "P3", "tagging"} & set(args.only or SECTIONS):
        import pycrfsuite  # noqa: F401  (fail before the first measurement if missing)

    RESULTS.parent.mkdir(exist_ok=True)
    res: dict = {}
    if args.only:  # keep the other measurements of an earlier run
        res = json.loads(RESULTS.read_text()) if RESULTS.exists() else _from_report(args.out)
    res.update(
        {
            "date": _now(),
            "machine": machine(),
            "crfopt": crfopt.__version__,
            "numba": numba.__version__,
            "crfsuite": _version("python-crfsuite"),
        }
    )
    tree = _tree()  # before this run writes its report, which would make the tree dirty
    for key in args.only or SECTIONS:
        print(f"== {key}", flush=True)
        t0, load0 = time.perf_counter(), os.getloadavg()[0]
        res[key] = globals()[key.lower()](args)
        res[key]["measured_at"] = res["date"]
        res[key]["elapsed_s"] = time.perf_counter() - t0
        # which code and how quiet: a section kept from an earlier --only run may differ
        res[key]["tree"] = tree
        res[key]["load_1min"] = [round(load0, 2), round(os.getloadavg()[0], 2)]
        if "skipped" in res[key]:
            print(f"{key} skipped: {res[key]['skipped']}", flush=True)
        print(json.dumps(res[key], indent=2), f"\n({res[key]['elapsed_s']:.0f} s)", flush=True)
        RESULTS.write_text(json.dumps(res, indent=2))
        write_report(res, Path(args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
