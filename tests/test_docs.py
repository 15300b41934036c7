"""The examples in docs/ run as written."""

from __future__ import annotations

import numpy as np
from click.testing import CliRunner
from docs_examples import code_blocks, sgd_plugin_source, write_sgd_plugin

import crfopt
from crfopt.apps.cli import main


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
