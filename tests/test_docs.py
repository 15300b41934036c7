"""The examples in docs/ run as written."""

from __future__ import annotations

import ast

import numpy as np
import pytest
from click.testing import CliRunner
from docs_examples import (
    code_blocks,
    lazy_sag_plugin_source,
    sgd_plugin_source,
    write_lazy_sag_plugin,
    write_sgd_plugin,
)

import crfopt
from crfopt.apps.cli import main
from crfopt.bench.evaluator import Evaluator

from conftest import scipy_optimum


def test_sgd_example_is_under_40_lines():
    lines = [ln for ln in sgd_plugin_source().splitlines() if ln.strip()]
    assert len(lines) < 40


def test_sgd_example_is_listed_and_runs(tmp_path):
    write_sgd_plugin(tmp_path / "plugins")
    runner = CliRunner()
    res = runner.invoke(main, ["list", "optimizers", "--plugin-dir", str(tmp_path / "plugins")])
    assert res.exit_code == 0, res.output
    assert "my-sgd" in res.output and "plugin-dir" in res.output
    res = runner.invoke(
        main,
        [
            "compare",
            "--problem",
            "synthetic",
            "--optimizers",
            "my-sgd,lbfgs",
            "--plugin-dir",
            str(tmp_path / "plugins"),
            "--set",
            "my-sgd.step_size=0.05",
            "--passes",
            "3",
            "--out",
            str(tmp_path / "out"),
            "--quiet",
        ],
    )
    assert res.exit_code == 0, res.output
    table = crfopt.read_results(tmp_path / "out")
    assert set(table["optimizer"]) == {"my-sgd[step_size=0.05]", "lbfgs"}
    sgd = table[table["optimizer"].str.startswith("my-sgd")]
    assert sgd["primal"].iloc[-1] < sgd["primal"].iloc[0]
    assert (sgd["oracle_calls"] == sgd["iterations"]).all()


def test_compiled_loop_example_counts_and_matches_python(tmp_path, monkeypatch):
    src = next(b for b in code_blocks("plugins.md") if "def sgd_block" in b)
    (tmp_path / "docs_sgd_block.py").write_text(src, encoding="utf-8")  # numba caches by file
    monkeypatch.syspath_prepend(str(tmp_path))
    import docs_sgd_block

    sgd_block = docs_sgd_block.sgd_block
    p = crfopt.make_synthetic(n=20, seed=1)
    w = p.zeros()
    idx = np.array([3, 5, 3, 0], dtype=np.int64)
    sgd_block(p.data, p.counters.array, w, idx, 0.1, p.lam)
    assert p.counters.oracle_calls == 4 and p.counters.iterations == 4
    # the same four steps with the Python API
    q = crfopt.make_synthetic(n=20, seed=1)
    v = q.zeros()
    for i in idx:
        g = q.oracle(int(i), v, gradient=True).gradient.to_dense(q)
        v *= 1.0 - 0.1 * q.lam
        v -= 0.1 * g
    np.testing.assert_allclose(w, v, atol=1e-12)


def test_readme_python_examples_run(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # the examples write results/ into the working directory
    for block in code_blocks("README.md"):
        exec(compile(block, "README.md", "exec"), {})
    assert "[['PRON', 'VERB']]" in capsys.readouterr().out


# ---- the compiled, sparse, lazy-update SAG example (docs/plugins.md) ----------------------


@pytest.fixture(scope="module")
def lazy_sag_dir(tmp_path_factory):
    """One folder for the module: numba's disk cache then compiles the example once."""
    directory = tmp_path_factory.mktemp("docs_lazy_sag")
    write_lazy_sag_plugin(directory)
    return directory


@pytest.fixture(scope="module")
def lazy_sag_spec(lazy_sag_dir):
    return crfopt.get_registry([lazy_sag_dir]).optimizer("my-lazy-sag")


@pytest.fixture(scope="module")
def sparse_small():
    return crfopt.make_synthetic(
        n=40, labels=4, attributes=30, length=5, density=0.1, seed=31, lam=0.02
    )


def test_lazy_sag_example_is_small_and_uses_public_names_only():
    src = lazy_sag_plugin_source()
    lines = [ln for ln in src.splitlines() if ln.strip()]
    assert 60 <= len(lines) <= 120, len(lines)
    tree = ast.parse(src)
    aliases = {"crfopt"}  # names bound to crfopt or one of its public modules
    bad = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            bad += [a.name for a in node.names if a.name.startswith("crfopt.")]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("crfopt"):
            if node.module != "crfopt":
                bad.append(node.module)  # only `from crfopt import <public name>`
            for a in node.names:
                if a.name.startswith("_") or not hasattr(crfopt, a.name):
                    bad.append(f"crfopt.{a.name}")
                aliases.add(a.asname or a.name)
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in aliases
            and node.attr.startswith("_")
        ):
            bad.append(f"{node.value.id}.{node.attr}")
    assert not bad, bad


def test_lazy_sag_example_passes_the_conformance_suite(lazy_sag_dir):
    rows = crfopt.testing.check_optimizer(
        "my-lazy-sag", plugin_dirs=[str(lazy_sag_dir)], verbose=False
    )
    failed = [(r["check"], r["message"]) for r in rows if r["outcome"] != "passed"]
    assert not failed, failed
    assert len(rows) >= 10


def _textbook_sag(problem, indices, L0=1.0):
    """SAG (docs/algorithms.md §3.4) with dense stored gradients through the public Python API:
    the independent truth for the lazy, marginal-memory example."""
    n, lam = problem.n, problem.lam
    w, d = problem.zeros(), problem.zeros()
    stored = np.zeros((n, problem.dim))
    seen = np.zeros(n, dtype=bool)
    L = L0
    for i in indices:
        i = int(i)
        res = problem.oracle(i, w, gradient=True)
        g = res.gradient.to_dense(problem)
        d += g - stored[i]
        stored[i] = g
        seen[i] = True
        gn2 = g @ g
        if gn2 > 1e-8:
            while problem.forward(i, w - g / L).nll > res.nll - gn2 / (2 * L):
                L *= 2
        alpha = 1 / (L + lam)
        w = (1 - alpha * lam) * w - (alpha / seen.sum()) * d
        L *= 2 ** (-1 / n)
    return w


def test_lazy_sag_example_equals_textbook_sag(lazy_sag_spec, sparse_small):
    p = sparse_small.with_lam(sparse_small.lam)
    with p.initialization():
        opt = lazy_sag_spec.create(p, 7, {})
    k = 5 * p.n
    assert opt.run_block(k) == k
    # the example draws i uniformly from its own rng: the same stream gives the same i
    indices = np.random.Generator(np.random.PCG64(7)).integers(p.n, size=k)
    q = sparse_small.with_lam(sparse_small.lam)
    np.testing.assert_allclose(opt.w, _textbook_sag(q, indices), rtol=1e-9, atol=1e-12)
    assert p.counters.oracle_calls == k == q.counters.oracle_calls
    assert p.counters.forward_calls == q.counters.forward_calls > 0  # line-search trials


def test_lazy_sag_example_reaches_the_scipy_optimum(lazy_sag_spec, sparse_small):
    w_star = scipy_optimum(sparse_small)
    p_star = Evaluator(sparse_small).primal(w_star)
    p = sparse_small.with_lam(sparse_small.lam)
    res = crfopt.run(
        p,
        lazy_sag_spec,
        seed=2,
        p_star=p_star,
        budget=crfopt.Budget(passes=600, target_suboptimality=1e-8 * p_star),
        checkpoints="every:10",
    )
    assert res.status == "converged", (res.status, res.trace["suboptimality"].iloc[-1])
    assert res.trace["suboptimality"].iloc[-1] <= 1e-8 * p_star
    # strongly convex: P(w) − P* ≥ λ/2 ‖w − w*‖²
    assert np.linalg.norm(res.w - w_star) <= np.sqrt(2 * 1e-8 * p_star / p.lam) * 1.01
