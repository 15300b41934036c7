"""``--optimizer auto``: the fitted rule (crfopt/apps/auto.py), its table's writer
(benchmarks/perf_auto.py) and the two places that default to it, ``crfopt train`` and
``crfopt.CRF``. Its speed is the benchmark's (``performance.py --only auto``), not
asserted here."""

from __future__ import annotations

import importlib.util
import itertools
import math
import re
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import crfopt
from crfopt.apps import auto
from crfopt.apps.cli import main
from crfopt.apps.model import Model
from crfopt.optim.registry import get_registry

ROOT = Path(__file__).resolve().parents[1]


def _row(name, labels, l1=False, threads=2, n=100, tokens=1000, dim=1000, **seconds):
    return auto.Measurement(name, auto.Features(n, tokens, labels, dim, l1, threads), seconds)


def _all_trees(rows, names, depth):
    """Every tree of ``depth`` levels over the rows' midpoints, enumerated naively."""
    yield from (auto.Node(optimizer=name) for name in names)
    if depth == 0:
        return
    subtrees = list(_all_trees(rows, names, depth - 1))
    for feature in auto.SPLIT_FEATURES:
        values = sorted({float(getattr(r.features, feature)) for r in rows})
        for lo, hi in itertools.pairwise(values):
            for below, above in itertools.product(subtrees, subtrees):
                yield auto.Node(None, feature, math.sqrt(lo * hi), below, above)


def _worst(tree, rows):
    return max(r.ratio(tree.pick(r.features)[0]) for r in rows)


def test_fit_finds_the_least_worst_ratio_of_every_tree():
    rows = [
        _row("a", 5, n=100, A=1.0, B=3.0, C=2.0),
        _row("b", 9, n=5000, A=2.0, B=1.0, C=1.5),
        _row("c", 25, n=200, A=9.0, B=3.0, C=2.5),
        _row("d", 49, n=9000, A=30.0, B=10.0, C=9.0),
    ]
    brute = {
        d: min(_worst(t, rows) for t in _all_trees(rows, "ABC", d))
        for d in range(auto.MAX_DEPTH + 1)
    }
    assert brute[2] == 1.0 < brute[1] < brute[0]  # the table needs two tests
    for d, least in brute.items():
        (worst, _, _), tree = auto._best(rows, "ABC", d)
        assert worst == pytest.approx(least) == pytest.approx(_worst(tree, rows))
    fitted = auto.fit_tree(rows, "A")
    assert fitted.worst == 1.0 and fitted.fitted_on == 4
    assert [fitted.tree.pick(r.features)[0] for r in rows] == ["A", "B", "C", "C"]


def test_fit_keeps_the_shallower_tree_within_the_slack_and_on_ties():
    rows = [
        _row("a", 5, A=1.0, B=1.05, C=None),
        _row("b", 9, A=1.08, B=1.0, C=0.99),
        _row("c", 25, A=1.0, B=1.25, C=None),
    ]
    fitted = auto.fit_tree(rows, "A")
    # A everywhere is 1.09x at worst; a split would gain less than the slack
    assert fitted.tree == auto.Node(optimizer="A") and fitted.worst == pytest.approx(1.08 / 0.99)
    tie = [_row("a", 5, A=1.0, B=2.0), _row("b", 9, A=1.0, B=2.0)]
    assert auto.fit_tree(tie, "B").tree == auto.Node(optimizer="A")
    assert auto.fit_tree([], "B").tree == auto.Node(optimizer="B")


def test_one_thread_runs_the_serial_twin_of_a_parallel_pick():
    rows = [_row("a", 5, **{"sdca-passcode-wild": 1.0, "sag-nus-star": 2.0})]
    rule = auto.Rule(l2=auto.fit_tree(rows, "sag-nus-star"), l1=auto.Fitted(auto.Node("owlqn")))
    two = rule.choose(rows[0].features)
    one = rule.choose(auto.Features(100, 1000, 5, 1000, False, 1))
    assert two.optimizer == "sdca-passcode-wild"
    assert one.optimizer == "sdca-gap" and "on one thread" in one.reason
    # the SDCA variants' own stopping test is off: only the certified gap stops them
    assert two.params == {"tolerance": 0.0} == one.params


def test_shipped_rule_matches_its_table():
    """The shipped rule's stated worst ratio is the worst over its table, and no single
    optimizer does better on that table."""
    assert auto.MEASURED, "the shipped table is empty: refit (crfopt/apps/auto.py)"
    for l1, fitted in ((False, auto.RULE.l2), (True, auto.RULE.l1)):
        rows = [m for m in auto.MEASURED if m.features.l1 == l1]
        if not rows:
            continue
        assert _worst(fitted.tree, rows) == pytest.approx(fitted.worst)
        names = {o for m in rows for o in m.seconds}
        assert fitted.worst <= min(max(m.ratio(o) for m in rows) for o in names) + 1e-12


def test_every_pick_is_registered_and_accepts_its_regularizer():
    reg = get_registry()
    base = crfopt.make_synthetic(n=30, seed=0)

    def leaves(node):
        if node.optimizer is not None:
            return {node.optimizer}
        return leaves(node.below) | leaves(node.above)

    for l1, fitted in ((False, auto.RULE.l2), (True, auto.RULE.l1)):
        problem = base.with_regularization(l1=0.5 * base.lam) if l1 else base
        names = leaves(fitted.tree)
        names |= {auto.PARALLEL[n] for n in names if n in auto.PARALLEL}
        for name in names:
            assert reg.optimizer(name).refusal(problem) is None, (name, l1)
            params = auto.CERTIFIED_STOP.get(name, {})
            assert set(params) <= set(reg.optimizer(name).parameters()), name


def _perf_auto():
    bench = ROOT / "benchmarks"
    sys.path.insert(0, str(bench))
    try:
        path = bench / "perf_auto.py"
        spec = importlib.util.spec_from_file_location("perf_auto_under_test", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(bench))


def test_the_benchmark_writes_a_table_the_module_reads_back(tmp_path):
    perf_auto = _perf_auto()
    cases = [
        {
            "problem": "ocr",
            "l1": False,
            "features": dict(n=10, tokens=80, labels=26, dim=4082, l1=False, threads=2),
            "runs": {"sag-nus-star": {"reached_s": 2.5}, "sdca-gap": {"reached_s": None}},
        },
        {
            "problem": "ocr",
            "l1": True,
            "features": dict(n=10, tokens=80, labels=26, dim=4082, l1=True, threads=2),
            "runs": {"owlqn": {"reached_s": 7.25}, "prox-saga": {"reached_s": 3.0}},
        },
    ]
    copy = tmp_path / "auto_copy.py"
    copy.write_text((ROOT / "crfopt" / "apps" / "auto.py").read_text(encoding="utf-8"))
    perf_auto.write_table(cases, copy)
    spec = importlib.util.spec_from_file_location("auto_copy", copy)
    module = importlib.util.module_from_spec(spec)
    sys.modules["auto_copy"] = module  # dataclasses resolve their module by name
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules["auto_copy"]
    got = [(m.problem, m.features.labels, m.features.l1, dict(m.seconds)) for m in module.MEASURED]
    assert got == [
        ("ocr", 26, False, {"sag-nus-star": 2.5, "sdca-gap": None}),
        ("ocr l1", 26, True, {"owlqn": 7.25, "prox-saga": 3.0}),
    ]
    assert module.RULE.l1.tree == module.Node(optimizer="prox-saga")


def test_train_without_optimizer_prints_the_choice_and_stops_certified(tmp_path):
    path = tmp_path / "m.crfopt"
    problem = crfopt.load_problem("synthetic", n=40)
    expected = auto.choose(problem)
    result = CliRunner().invoke(
        main,
        [
            *("train", "--problem", "synthetic", "--set", "synthetic.n=40"),
            *("--model", str(path), "--quiet"),
        ],
    )
    assert result.exit_code == 0, result.output
    assert expected.line() in " ".join(result.output.split())
    model = Model.load(path)
    info = model.training
    assert info["optimizer"] == expected.optimizer and info["auto"] == expected.reason
    assert info["status"] == "converged"
    assert info["duality_gap"] <= auto.DEFAULT_TARGET_GAP * problem.primal_at_zero()


def test_train_auto_refuses_optimizer_settings_with_the_valid_names(tmp_path):
    result = CliRunner().invoke(
        main,
        [
            *("train", "--problem", "synthetic", "--set", "sdca-gap.sub_precision=0.01"),
            *("--model", str(tmp_path / "m.crfopt")),
        ],
    )
    assert result.exit_code == 2
    assert "applies to synthetic" in result.output


def test_estimator_defaults_to_auto(capsys):
    X = [[{"w": float(t % 3), f"t{t % 5}": 1.0} for t in range(6)] for _ in range(20)]
    y = [["A", "B", "A", "C", "B", "A"] for _ in range(20)]
    crf = crfopt.CRF(verbose=True).fit(X, y)
    assert crf.optimizer is None  # get_params stays as given
    reason = crf.model_.training["auto"]
    assert f"auto chose {crf.model_.training['optimizer']}: {reason}" in capsys.readouterr().out


def test_the_docs_python_example_runs(capsys):
    text = (ROOT / "docs" / "api" / "auto.md").read_text(encoding="utf-8")
    (block,) = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    exec(compile(block, "docs/api/auto.md", "exec"), {})
    optimizer, reason = capsys.readouterr().out.strip().split(" - ", 1)
    assert optimizer in get_registry().optimizers and "K = 2" in reason


def test_train_says_when_an_optimizer_stopped_itself_short_of_the_target(tmp_path):
    result = CliRunner().invoke(
        main,
        [
            *("train", "--problem", "synthetic", "--set", "synthetic.n=40"),
            *("--optimizer", "sdca-gap", "--set", "sdca-gap.tolerance=0.01"),
            *("--target-gap", "1e-12", "--model", str(tmp_path / "m.crfopt"), "--quiet"),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "stopped on its own convergence test" in " ".join(result.output.split())
