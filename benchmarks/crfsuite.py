"""CRFsuite (python-crfsuite) on crfopt's own attributes and λ: items, training, its
weights in crfopt's layout, and the cached reference run (P1, P3, tagging, ℓ1 scripts).

c2 = nλ/2 makes CRFsuite's objective Σ NLL + c2‖w‖² equal n·P (crfopt's mean NLL +
λ/2‖w‖²); the bias block goes in as three attributes.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
import time
from typing import Any

import numpy as np
from harness import dist_version, machine, now_utc
from targets import RELATIVE_TARGET

import crfopt


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

    version = dist_version("python-crfsuite")
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
        "measured_at": now_utc(),
        "machine": machine(),
        "versions": {
            "python-crfsuite": version,
            "crfopt": crfopt.__version__,
            "numpy": np.__version__,
        },
    }
    path.write_text(json.dumps(out, indent=2), encoding="utf-8")
    return {**out, "cached": False, "cache_file": str(path)}
