"""crfopt against Wapiti itself, on Wapiti's own base-NP chunking example (dat/nptrain.txt,
nptest.txt and its pattern file), with Wapiti built by benchmarks/wapiti.py (skipped with
the reason printed when it cannot be fetched or built).

Phase 1 of issue 49: ``nppattern.txt`` has bigram-observation patterns (``*:`` with
macros), which crfopt's model cannot hold yet, so the checks use the same file with every
``*:`` pattern made unigram-only (``u:``), keeping the bare ``*`` (a constant unigram and
the transition block). That still covers every macro of the file: ``%x``, ``%X``, ``%m``,
``%t``, the ``/``-joined macros and the ``_x±k`` edge markers.

Wapiti's objective is Σ NLL + ρ₂‖w‖²/2 (ρ₁ = 0), crfopt's (1/n)Σ NLL + λ‖w‖²/2: the same
problem for λ = ρ₂/n. crfopt's default λ = 1/n is ρ₂ = 1.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import crfopt
from crfopt.apps.cli import main
from crfopt.apps.tagging import chunk_scores
from crfopt.bench.evaluator import Evaluator
from crfopt.bench.optimum import reference_optimum
from crfopt.data.readers import DataFormatError

pytestmark = [pytest.mark.slow, pytest.mark.wapiti]

ROOT = Path(__file__).resolve().parents[1]
RHO2 = 1.0


def _helper():
    """benchmarks/wapiti.py as a module (benchmarks/ is not a package)."""
    spec = importlib.util.spec_from_file_location("crfopt_wapiti", ROOT / "benchmarks/wapiti.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve their module by name
    spec.loader.exec_module(module)
    return module


wapiti = _helper()


@pytest.fixture(scope="module")
def np_files(tmp_path_factory):
    """Wapiti's nptrain/nptest and the unigram-only variant of its nppattern.txt."""
    wapiti.binary_or_skip()
    folder = tmp_path_factory.mktemp("np")
    full = wapiti.wapiti_data("nppattern.txt")
    lines = full.read_text().splitlines()
    unigram = folder / "nppattern-unigram.txt"
    unigram.write_text("\n".join("u:" + ln[2:] if ln.startswith("*:") else ln for ln in lines))
    return {
        "train": wapiti.wapiti_data("nptrain.txt"),
        "test": wapiti.wapiti_data("nptest.txt"),
        "full": full,
        "patterns": unigram,
        "dir": folder,
    }


@pytest.fixture(scope="module")
def wapiti_model(np_files):
    """Wapiti's L-BFGS to convergence (ρ₁ = 0, ρ₂ = 1) and the run's log."""
    model = np_files["dir"] / "np.wapiti"
    run = wapiti.train(np_files["train"], model, pattern=np_files["patterns"], rho2=RHO2)
    assert run.returncode == 0 and run.features, run.log[-2000:]
    return model, run


def _crfopt_weights(problem, rows):
    """Wapiti's dumped weights in crfopt's layout: its bigram block is the '*'
    observation's."""
    w = problem.zeros()
    blocks = problem.unpack(w)
    column = {a: j for j, a in enumerate(problem.attribute_names)}
    label = {name: k for k, name in enumerate(problem.label_names)}
    for obs, prev, lab, value in rows:
        if prev is None:
            blocks.emission[label[lab], column[obs]] = value
        else:
            assert obs == "*"
            blocks.transition[label[prev], label[lab]] = value
    return w


@pytest.mark.parametrize("how", ["stop", "timeout"])
def test_a_run_stopped_with_its_model_kept_saves_that_iterations_weights(np_files, tmp_path, how):
    """benchmarks/perf_wapiti.py's check stops Wapiti once n·P is close enough to n·P*,
    or at its time cap: interrupted as Ctrl-C does, Wapiti must save the weights of its
    last printed iteration, so that crfopt's P at them is the objective printed there."""
    model = tmp_path / "np-stopped.wapiti"
    until = {"stop": lambda it: it.number == 10} if how == "stop" else {"timeout": 2.0}
    run = wapiti.train(
        np_files["train"], model, pattern=np_files["patterns"], rho2=RHO2, keep_model=True, **until
    )
    assert run.returncode == 0 and run.crashed is None, run.log[-2000:]
    # Wapiti may finish an iteration or two before the signal lands: those are printed
    # too, and the saved weights are the last printed iteration's
    assert run.iterations[-1].number >= (10 if how == "stop" else 1)
    problem = crfopt.load_problem(str(np_files["train"]), template=str(np_files["patterns"]))
    at_theirs = Evaluator(problem).primal(_crfopt_weights(problem, wapiti.dump(model)))
    printed = run.iterations[-1].objective
    assert abs(problem.n * at_theirs - printed) <= 0.005 + 1e-9 * printed


def test_the_full_pattern_file_is_refused_until_bigram_observations_exist(np_files):
    with pytest.raises(DataFormatError, match=r"nppattern.txt:14: .*bigram-observation"):
        crfopt.load_problem(str(np_files["train"]), template=str(np_files["full"]))


def test_same_features_and_objective_as_wapiti(np_files, wapiti_model):
    model, run = wapiti_model
    problem = crfopt.load_problem(str(np_files["train"]), template=str(np_files["patterns"]))
    assert problem.lam == pytest.approx(RHO2 / problem.n, rel=1e-15)
    # the same feature map: Wapiti's count, and the very same observation strings
    assert problem.dim == run.features
    rows = wapiti.dump(model)
    unigrams = {obs for obs, prev, _, _ in rows if prev is None}
    assert unigrams == set(problem.attribute_names)
    at_theirs = Evaluator(problem).primal(_crfopt_weights(problem, rows))
    # the same objective: Wapiti prints n·P with two decimals
    assert abs(problem.n * at_theirs - run.final_objective) <= 0.005 + 1e-9 * run.final_objective
    p_star = reference_optimum(problem).p_star
    print(
        f"nptrain, unigram nppattern: Wapiti {run.features} features, crfopt d = "
        f"{problem.dim}; Wapiti n·P = {run.final_objective} ({len(run.iterations)} "
        f"iterations), crfopt P at Wapiti's weights ×n = {problem.n * at_theirs:.6f}, "
        f"crfopt n·P* = {problem.n * p_star:.6f}, relative {(at_theirs - p_star) / p_star:.1e}"
    )
    assert abs(at_theirs - p_star) <= 1e-6 * p_star


def test_user_path_chunk_f1_matches_wapiti_label(np_files, wapiti_model, tmp_path):
    model, _ = wapiti_model
    ours = tmp_path / "np.crfopt"
    data = ["--problem", str(np_files["train"]), "--template", str(np_files["patterns"])]
    budget = ["--optimizer", "sdca-gap", "--target-gap", "1e-7", "--passes", "200"]
    res = CliRunner().invoke(main, ["train", *data, *budget, "--model", str(ours), "--quiet"])
    assert res.exit_code == 0, res.output
    res = CliRunner().invoke(main, ["evaluate", "--model", str(ours), str(np_files["test"])])
    assert res.exit_code == 0 and "all chunks" in res.output, res.output
    res = CliRunner().invoke(
        main, ["evaluate", "--model", str(ours), str(np_files["test"]), "--json"]
    )
    f1_ours = 100 * json.loads(res.output)["f1"]
    tagged = wapiti.label(model, np_files["test"], tmp_path / "np.out")
    theirs = chunk_scores([[g for g, _ in s] for s in tagged], [[p for _, p in s] for s in tagged])
    f1_theirs = 100 * theirs.precision_recall_f1[2]
    print(f"nptest chunk F1: crfopt {f1_ours:.2f}, Wapiti {f1_theirs:.2f}")
    assert abs(f1_ours - f1_theirs) <= 0.3
