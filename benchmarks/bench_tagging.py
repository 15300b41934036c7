"""crfopt's tagger against CRFsuite's: tagging speed and the memory of a trained model.

    python benchmarks/bench_tagging.py [--problems conll2000 pos-ewt] [--rounds 5]

(benchmarks/performance.py's ``tagging`` section calls :func:`measure` and puts both
tables in reports/performance.md.)

Models. crfopt and CRFsuite (python-crfsuite) each train their own model on the same
attributes, those of crfopt's template for the problem (CRFsuite gets crfopt's bias block
as three attributes per token, as in the other sections), with the same method and
budget: L-BFGS for ``ITERATIONS`` iterations at c2 = nλ/2 (ℓ2), and OWL-QN as long at
c1 = ``C1`` as well (ℓ1 + ℓ2, crfopt's σ = c1/n). The weights differ a little; the work
of tagging does not depend on them (every attribute × label feature exists in both
models), and the file sizes depend on them only through ℓ1's zeros. CRFsuite's models are
kept in the user cache (``<cache>/crfsuite/``) and reused unless ``--retrain-crfsuite``;
CRFsuite's attribute names are crfopt's with the first ``=`` turned into ``:`` (what a
feature dict ``{"w[0]": "the"}`` names), so one model serves both comparisons.

Speed, on the CoNLL-2000 test set (2012 sentences, 47,377 tokens), tokens per second,
the best of ``--rounds`` rounds that alternate the taggers, crfopt on 1 and on 2 numba
threads (CRFsuite has one):

* ``crfopt tag`` (:func:`crfopt.apps.tagging.tag_corpus`'s steps: TemplateEncoder, then
  Model.viterbi) against ``Tagger.tag`` on the template's attribute strings.
  Featurization: crfopt's encoding of the corpus into columns; CRFsuite's, forming the
  attribute strings with crfopt's template code plus ``Tagger.set`` (which converts the
  items, looks the attributes up *and computes the state scores*, in C). Decoding:
  crfopt's scores and Viterbi; CRFsuite's ``Tagger.tag()`` after ``set`` (Viterbi).
* ``CRF.predict`` against ``Tagger.tag`` on the same feature dicts (what sklearn-crfsuite
  does): featurization is crfopt's ``encode_items`` / CRFsuite's ``set``.
* ``CRF.predict_marginals`` against sklearn-crfsuite's ``predict_marginals_single``
  (``set`` then ``Tagger.marginal(label, t)`` for every label and token, into dicts).

Reading the file and writing the output are left out of these (the same work for both);
the one-time costs (opening the model, building the lookup tables) are given apart.

Memory, on CoNLL-2000 and POS-EWT, ℓ2 and ℓ1 + ℓ2 models: each model file's size (crfopt's
as saved, i.e. pruned, and unpruned), and the peak resident memory (VmHWM) of a fresh
process that tags the test set: ``crfopt tag`` itself (reading the CoNLL file,
featurizing, writing the tags to /dev/null), and a Python process that opens the CRFsuite
model and tags the test set's attribute strings read from a file, as the ``crfsuite tag``
command does; with each process's resident memory before it opens the model (the
interpreter and its libraries) and its wall time.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))
os.environ.setdefault("CRFOPT_DATA", str(HERE.parent.parent / "shared" / "datasets"))

import crfopt  # noqa: E402

PROBLEMS = ["conll2000", "pos-ewt"]
#: the speed table's problem (the issue's)
SPEED_PROBLEM = "conll2000"
#: L-BFGS / OWL-QN iterations of both tools' models
ITERATIONS = 30
#: CRFsuite's ℓ1 coefficient of the ℓ1 + ℓ2 models (crfopt: σ = C1 / n)
C1 = 1.0
#: CRFsuite's names for crfopt's bias block
BIAS_NAMES = ("__bias__", "__first__", "__last__")


# ----------------------------------------------------------------------------- models


def crfsuite_name(name: str) -> str:
    """A feature dict's name for crfopt's attribute ``name``: ``w[0]=the`` is what
    ``{"w[0]": "the"}`` gives CRFsuite, ``w[0]:the``; boolean attributes keep theirs."""
    head, sep, rest = name.partition("=")
    return f"{head}:{rest}" if sep else name


def crfsuite_names(attributes: list[str]) -> list[str]:
    names = [crfsuite_name(a) for a in attributes]
    if len(set(names)) != len(names) or set(names) & set(BIAS_NAMES):
        raise ValueError("renaming crfopt's attributes for CRFsuite merged two of them")
    return names


def crfopt_model(problem, kind: str):
    """crfopt's ℓ2 (``kind="l2"``) or ℓ1 + ℓ2 model: L-BFGS / OWL-QN, ITERATIONS."""
    from crfopt.apps.train import train

    if kind == "l1":
        problem = problem.with_regularization(l1=C1 / problem.n)
    optimizer = "owlqn" if kind == "l1" else "lbfgs"
    t0 = time.perf_counter()
    trained = train(
        problem, optimizer, passes=None, iterations=ITERATIONS, checkpoints=[0.0], metrics=[]
    )
    return trained.model, time.perf_counter() - t0


def crfsuite_model(problem, kind: str, retrain: bool) -> tuple[Path, dict[str, Any]]:
    """CRFsuite's model of the same kind (file in the user cache) and its training facts."""
    from crfsuite import crfsuite_train
    from harness import dist_version, now_utc

    from crfopt.data.paths import cache_dir

    c1 = C1 if kind == "l1" else 0.0
    c2 = problem.n * problem.lam / 2
    version = dist_version("python-crfsuite")
    stem = f"tagging-{problem.name}-{problem.fingerprint[:24]}-{kind}"
    path = cache_dir("crfsuite") / f"{stem}.crfsuite"
    info_path = path.with_suffix(".json")
    want = {"c1": c1, "c2": c2, "iterations": ITERATIONS, "python-crfsuite": version}
    if path.exists() and info_path.exists() and not retrain:
        info = json.loads(info_path.read_text(encoding="utf-8"))
        if all(info.get(k) == v for k, v in want.items()):
            return path, {**info, "cached": True}
    print(f"training CRFsuite ({kind}) on {problem.name}, kept in {path}", flush=True)
    names = crfsuite_names(list(problem.attribute_names))
    with tempfile.TemporaryDirectory() as tmp:
        log, seconds, cpu = crfsuite_train(
            problem,
            f"{tmp}/m",
            bias=True,
            tight=False,
            max_iterations=ITERATIONS,
            c1=c1,
            names=names,
        )
        shutil.copyfile(f"{tmp}/m", path)
    info = {
        **want,
        "train_s": seconds,
        "train_cpu_s": cpu,
        "active_features": log.last_iteration.get("active_features"),
        "measured_at": now_utc(),
    }
    info_path.write_text(json.dumps(info, indent=2), encoding="utf-8")
    return path, {**info, "cached": False}


def test_file(name: str) -> Path:
    """The problem's test split (CoNLL or CoNLL-U), located as its loader locates it."""
    from crfopt.data.sources import locate

    files = crfopt.get_registry().problem(name).files
    return locate(next(f for f in files if "test" in f.name))


def crfsuite_items(strings: list[list[str]]) -> list[list[str]]:
    """A sentence's attribute strings as CRFsuite's items (its names, the bias block)."""
    items = [[crfsuite_name(a) for a in tok] + ["__bias__"] for tok in strings]
    items[0].append("__first__")
    items[-1].append("__last__")
    return items


def feature_dicts(items: list[list[str]]) -> list[dict[str, Any]]:
    """The same items as sklearn-crfsuite feature dicts: ``w[0]:the`` is ``{"w[0]":
    "the"}``, a boolean attribute or a bias name ``{name: 1.0}``. The keys are interned,
    as the string literals of a feature function are; the values are strings of their
    own, as ``word.lower()`` makes them."""
    out = []
    for tok in items:
        d: dict[str, Any] = {}
        for name in tok:
            head, sep, rest = name.partition(":")
            if sep:
                d[sys.intern(head)] = rest
            else:
                d[sys.intern(name)] = 1.0
        out.append(d)
    return out


# ----------------------------------------------------------------------------- speed


def _threads(k: int) -> None:
    import numba

    numba.set_num_threads(min(k, numba.config.NUMBA_NUM_THREADS))


def speed(model, cs_path: Path, test_path: Path, rounds: int) -> dict[str, Any]:
    """The tagging table: tokens per second of each tagger, featurization and decoding."""
    import numba
    import pycrfsuite

    from crfopt.apps.estimator import CRF
    from crfopt.apps.items import encode_items
    from crfopt.apps.model import Model, split_labels
    from crfopt.apps.tagging import model_template, read_input, tag_corpus
    from crfopt.data.features import _token_attributes

    pc = time.perf_counter
    corpus, _ = read_input(model, test_path)
    sentences, columns = corpus.sentences, corpus.columns
    N = corpus.n_tokens
    template = model_template(model)
    col_index = {c: j for j, c in enumerate(columns)}
    strings = [_token_attributes(s, template, col_index) for s in sentences]
    items = [crfsuite_items(s) for s in strings]
    X = [feature_dicts(x) for x in items]
    dict_model = Model(
        model.labels,
        crfsuite_names(model.attributes),
        model.emission,
        model.bias,
        model.transition,
    )
    est = CRF()
    est.model_, est.classes_ = dict_model, list(model.labels)

    # one-time costs, then the checks that each path gives what its public call gives
    one_time: dict[str, float] = {}
    t0 = pc()
    tagger = pycrfsuite.Tagger()
    tagger.open(str(cs_path))
    one_time["crfsuite_open_s"] = pc() - t0
    with tempfile.TemporaryDirectory() as tmp:
        saved = model.save(Path(tmp) / "m.crfopt")
        t0 = pc()
        fresh = Model.load(saved)
        one_time["crfopt_load_s"] = pc() - t0
    t0 = pc()
    fresh.text_encoder()
    one_time["crfopt_encoder_tables_s"] = pc() - t0
    t0 = pc()
    dict_model.vocabulary()
    one_time["crfopt_vocabulary_s"] = pc() - t0
    del fresh
    labels = model.labels

    def crfopt_tag() -> tuple[list, float, float]:
        t0 = pc()
        lengths, indptr, indices = model.text_encoder().encode(sentences, columns)
        t1 = pc()
        ids = model.viterbi(indptr, indices, np.ones(len(indices)), lengths)
        out = split_labels(ids, lengths, labels)
        return out, t1 - t0, pc() - t1

    def crfsuite_tag(xs: list, with_strings: bool) -> tuple[list, float, float]:
        feat = dec = 0.0
        if with_strings:  # forming the attribute strings is CRFsuite's featurization too
            t0 = pc()
            for s in sentences:
                _token_attributes(s, template, col_index)
            feat += pc() - t0
        out = []
        for x in xs:
            t0 = pc()
            tagger.set(x)
            t1 = pc()
            out.append(tagger.tag())
            t2 = pc()
            feat += t1 - t0
            dec += t2 - t1
        return out, feat, dec

    def crfopt_predict() -> tuple[Any, float, float]:
        vocab = dict_model.vocabulary()
        t0 = pc()
        lengths, indptr, indices, values, _ = encode_items(X, vocab)
        t1 = pc()
        ids = dict_model.viterbi(indptr, indices, values, lengths)
        # CRF.predict's result, as sklearn-crfsuite's: an object array of label lists
        out = np.array(split_labels(ids, lengths, est.classes_), dtype=object)
        return out, t1 - t0, pc() - t1

    def crfopt_marginals() -> tuple[Any, float, float]:
        vocab = dict_model.vocabulary()
        t0 = pc()
        lengths, indptr, indices, values, _ = encode_items(X, vocab)
        t1 = pc()
        rows = dict_model.node_marginals(indptr, indices, values, lengths).tolist()
        out, pos = [], 0
        for T in lengths.tolist():
            out.append([dict(zip(labels, p)) for p in rows[pos : pos + T]])
            pos += T
        return np.array(out, dtype=object), t1 - t0, pc() - t1

    def crfsuite_marginals() -> tuple[list, float, float]:
        feat = dec = 0.0
        out = []
        for x in X:
            t0 = pc()
            tagger.set(x)
            t1 = pc()
            out.append([{y: tagger.marginal(y, t) for y in labels} for t in range(len(x))])
            feat += t1 - t0
            dec += pc() - t1
        return out, feat, dec

    # (name, what it runs, numba thread counts): CRFsuite has one thread
    runs = {
        "crfsuite tag": (lambda: crfsuite_tag(items, True), [1]),
        "crfopt tag": (crfopt_tag, [1, 2]),
        "crfsuite tag (dicts)": (lambda: crfsuite_tag(X, False), [1]),
        "CRF.predict": (crfopt_predict, [1, 2]),
        "crfsuite marginals": (crfsuite_marginals, [1]),
        "CRF.predict_marginals": (crfopt_marginals, [1, 2]),
    }
    keys = [(name, k) for name, (_, ks) in runs.items() for k in ks]

    # warm up (numba's machine code, the lookup tables) and check the outputs
    before = numba.get_num_threads()
    _threads(1)
    outputs = {name: run()[0] for name, (run, _) in runs.items()}
    expected = tag_corpus(model, corpus)
    assert outputs["crfopt tag"] == expected, "crfopt tag's steps differ from tag_corpus"
    predicted = outputs["CRF.predict"].tolist()
    assert predicted == est.predict(X).tolist() == expected, "predict differs from tag"
    assert outputs["crfsuite tag"] == outputs["crfsuite tag (dicts)"]
    want_marginals = est.predict_marginals(X).tolist()
    assert outputs["CRF.predict_marginals"].tolist() == want_marginals
    gold = [t for s in corpus.labels() for t in s] if corpus.label else None
    accuracy = {}
    if gold:
        for tool, name in (("crfopt", "crfopt tag"), ("crfsuite", "crfsuite tag")):
            pred = [t for s in outputs[name] for t in s]
            accuracy[tool] = sum(a == b for a, b in zip(pred, gold)) / len(gold)
    agree = float(
        np.mean(
            [
                a == b
                for s, c in zip(outputs["crfopt tag"], outputs["crfsuite tag"])
                for a, b in zip(s, c)
            ]
        )
    )
    marg_sum = max(
        abs(sum(d.values()) - 1.0) for s in outputs["crfsuite marginals"] for d in s
    )  # CRFsuite's marginals are probabilities too

    # one sentence per call, as sklearn-crfsuite users often tag: the whole call timed
    def one_at_a_time(tag: Any) -> float:
        t0 = pc()
        for x in X:
            tag(x)
        return pc() - t0

    single = {"crfsuite": tagger.tag, "crfopt": est.predict_single}
    per_round: dict[str, list[tuple[float, float]]] = {f"{n}|{k}": [] for n, k in keys}
    per_sentence: dict[str, list[float]] = {"crfsuite": [], "crfopt": []}
    loads = [os.getloadavg()[0]]
    for _ in range(rounds):
        for name, k in keys:
            _threads(k)
            _, feat, dec = runs[name][0]()
            per_round[f"{name}|{k}"].append((feat, dec))
        _threads(1)
        for tool, tag in single.items():
            per_sentence[tool].append(one_at_a_time(tag))
        loads.append(os.getloadavg()[0])
    numba.set_num_threads(before)

    rows: dict[str, dict[str, Any]] = {}
    for key, parts in per_round.items():
        name, k = key.split("|")
        feat = min(f for f, _ in parts)
        dec = min(d for _, d in parts)
        total = min(f + d for f, d in parts)
        rows[f"{name}, {k} thread{'s' if k != '1' else ''}"] = {
            "featurize_tok_s": N / feat,
            "decode_tok_s": N / dec,
            "total_tok_s": N / total,
            "featurize_s": feat,
            "decode_s": dec,
            "total_s": total,
        }
    # per round, crfopt's total against CRFsuite's measured just before it (robust to load
    # moving between rounds): the median and the range of those ratios
    pairs = {
        "tag": ("crfsuite tag", "crfopt tag"),
        "predict": ("crfsuite tag (dicts)", "CRF.predict"),
        "marginals": ("crfsuite marginals", "CRF.predict_marginals"),
    }
    ratios: dict[str, dict[str, Any]] = {}
    for what, (base, ours) in pairs.items():
        for k in (1, 2):
            r = [
                (b[0] + b[1]) / (o[0] + o[1])
                for b, o in zip(per_round[f"{base}|1"], per_round[f"{ours}|{k}"])
            ]
            ratios[f"{what}|{k}"] = {"median": statistics.median(r), "min": min(r), "max": max(r)}
    return {
        "problem": SPEED_PROBLEM,
        "tokens": N,
        "sentences": len(sentences),
        "rounds": rounds,
        "rows": rows,
        "ratios": ratios,
        "one_time": one_time,
        # tokens/s of CRF.predict_single / Tagger.tag called once per sentence, 1 thread
        "per_sentence": {
            **{tool: N / min(t) for tool, t in per_sentence.items()},
            "ratio": statistics.median(
                a / b for a, b in zip(per_sentence["crfsuite"], per_sentence["crfopt"])
            ),
        },
        "accuracy": accuracy,
        "crfopt_crfsuite_agreement": agree,
        "crfsuite_marginal_sum_error": marg_sum,
        "load_1min_rounds": [round(x, 2) for x in loads],
    }


# ----------------------------------------------------------------------------- memory

_STATUS = """
def status(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
"""

CRFOPT_TAGGER = (
    _STATUS
    + """
import os, sys
import numba, crfopt.apps.tagging, crfopt.apps.cli, crfopt.kernels.twin
before = status("VmRSS")
from crfopt.apps.cli import main
try:
    main(["tag", "--model", sys.argv[1], sys.argv[2], "--out", os.devnull])
except SystemExit as exc:
    assert exc.code in (0, None), exc.code
print(before, status("VmHWM"))
"""
)

CRFSUITE_TAGGER = (
    _STATUS
    + """
import sys
import pycrfsuite
before = status("VmRSS")
tagger = pycrfsuite.Tagger()
tagger.open(sys.argv[1])
items, tags = [], 0
with open(sys.argv[2], encoding="utf-8") as f:
    for line in f:
        line = line.rstrip("\\n")
        if line:
            items.append(line.split("\\t"))
        elif items:
            tags += len(tagger.tag(items))
            items = []
assert tags > 0
print(before, status("VmHWM"))
"""
)


def _process(script: str, *args: str) -> dict[str, float]:
    """A fresh tagger process: its resident bytes before the model, peak, wall seconds."""
    t0 = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-c", script, *args], capture_output=True, text=True, check=False
    )
    wall = time.perf_counter() - t0
    if out.returncode:
        raise RuntimeError(f"tagger process failed: {out.stderr[-2000:]}")
    before, peak = (int(x) for x in out.stdout.split()[-2:])
    return {"rss_before_model": before, "peak_rss": peak, "wall_s": wall}


def memory(name: str, models: dict, test_path: Path, workdir: Path) -> dict[str, Any]:
    """The memory table's rows of one problem: files and tagger processes, ℓ2 and ℓ1."""
    from crfopt.apps.tagging import model_template, read_input
    from crfopt.data.features import _token_attributes

    some = models["l2"]["crfopt"]
    corpus, _ = read_input(some, test_path)
    template = model_template(some)
    col_index = {c: j for j, c in enumerate(corpus.columns)}
    attrs = workdir / f"{name}.test.attributes"
    with open(attrs, "w", encoding="utf-8") as f:
        for sent in corpus.sentences:
            for tok in crfsuite_items(_token_attributes(sent, template, col_index)):
                f.write("\t".join(tok) + "\n")
            f.write("\n")
    out: dict[str, Any] = {"test_tokens": corpus.n_tokens}
    for kind, m in models.items():
        model, cs_path, cs_info = m["crfopt"], m["crfsuite"], m["crfsuite_info"]
        pruned = model.save(workdir / f"{name}-{kind}.crfopt")
        whole = model.save(workdir / f"{name}-{kind}-whole.crfopt", prune=False)
        out[kind] = {
            "crfopt_file": pruned.stat().st_size,
            "crfopt_file_unpruned": whole.stat().st_size,
            "crfopt_attributes": len(model.attributes),
            "crfopt_attributes_saved": len(model.pruned().attributes),
            "crfopt_nonzero_weights": int(
                np.count_nonzero(model.emission)
                + np.count_nonzero(model.transition)
                + (0 if model.bias is None else np.count_nonzero(model.bias))
            ),
            "crfsuite_file": cs_path.stat().st_size,
            "crfsuite_active_features": cs_info.get("active_features"),
            "crfopt_tagger": _process(CRFOPT_TAGGER, str(pruned), str(test_path)),
            "crfsuite_tagger": _process(CRFSUITE_TAGGER, str(cs_path), str(attrs)),
        }
    return out


# ----------------------------------------------------------------------------- all


def measure(
    problems: list[str] | None = None, rounds: int = 5, retrain_crfsuite: bool = False
) -> dict[str, Any]:
    """Both tables: speed on SPEED_PROBLEM (when among ``problems``), memory on each."""
    problems = problems or PROBLEMS
    out: dict[str, Any] = {
        "settings": {"iterations": ITERATIONS, "c1": C1, "rounds": rounds},
        "training": {},
        "memory": {},
    }
    with tempfile.TemporaryDirectory(prefix="crfopt-tagging-") as tmp:
        for name in problems:
            problem = crfopt.load_problem(name)
            models: dict[str, dict[str, Any]] = {}
            for kind in ("l2", "l1"):
                print(f"tagging: training crfopt's {kind} model on {name}", flush=True)
                model, seconds = crfopt_model(problem, kind)
                cs_path, cs_info = crfsuite_model(problem, kind, retrain_crfsuite)
                models[kind] = {"crfopt": model, "crfsuite": cs_path, "crfsuite_info": cs_info}
                out["training"][f"{name}|{kind}"] = {
                    "crfopt_s": seconds,
                    "crfsuite": cs_info,
                    "c2": problem.n * problem.lam / 2,
                }
            del problem
            test_path = test_file(name)
            if name == SPEED_PROBLEM:
                print(f"tagging: speed on {name}, {rounds} rounds", flush=True)
                out["speed"] = speed(
                    models["l2"]["crfopt"], models["l2"]["crfsuite"], test_path, rounds
                )
            print(f"tagging: model files and tagger processes on {name}", flush=True)
            out["memory"][name] = memory(name, models, test_path, Path(tmp))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--problems", nargs="+", choices=PROBLEMS, default=PROBLEMS)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--retrain-crfsuite", action="store_true")
    args = ap.parse_args(argv)
    print(json.dumps(measure(args.problems, args.rounds, args.retrain_crfsuite), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
