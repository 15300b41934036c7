"""The examples in docs/ run as written."""

from __future__ import annotations

import ast
import re
import shlex
from pathlib import Path

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
    # the kernels count the oracle calls, the block its updates; iterations are counted
    # from what run_block returns, outside the compiled loop
    assert p.counters.oracle_calls == 4 and p.counters.updates == 4
    assert p.counters.iterations == 0
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
    blocks = fenced_blocks("README.md", PYTHON)
    assert len(blocks) == len(code_blocks("README.md"))  # both readers see the same blocks
    for line, block, kind, _ in blocks:
        if kind is None:  # a marked block (e.g. SLURM) is checked where its marker says
            exec(compile("\n" * line + block, "README.md", "exec"), {})
    assert "['PRON', 'VERB']" in capsys.readouterr().out


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


# ---- the shell commands of README.md and docs/*.md ----------------------------------------
#
# Every ```bash block runs, command by command, through the CLI (in-process), in one fresh
# folder per block, so a later command reads what an earlier one wrote (results/, a model).
# What makes them runnable in seconds, the same for every block (README, "Development"):
#   - a built-in problem other than `synthetic` (real data, minutes to load) becomes a tiny
#     generated chunking corpus (word, POS, B-/I- chunk label), given as a path problem with
#     its test split; a `--set NAME.param=…` of that problem is dropped with it;
#   - `--passes N` is capped at 2;
#   - an input file a command names (.txt, .conll, .conllu) and the block does not make is
#     written from the same generator (CoNLL-U for .conllu); `my_plugins` is the SGD plugin
#     of docs/plugins.md; `> FILE` stores the command's output in FILE.
# A block that must not run here (installs, downloads, the whole test suite, tox, hours of
# work) has `<!-- not-run: REASON -->` on the line before it; one run by another test has
# `<!-- tested-in: tests/FILE.py -->`.

ROOT = Path(__file__).resolve().parents[1]
SHELL_DOCS = ["README.md", *sorted(p.name for p in (ROOT / "docs").glob("*.md"))]
MARK = re.compile(r"<!--\s*(not-run|tested-in)\s*:?(.*?)-->\s*$")
MAX_PASSES = 2
WORDS = {
    "DT": ["the", "a", "this"],
    "NN": ["cat", "dog", "model", "report", "grid"],
    "VBZ": ["sees", "trains", "reads"],
    "JJ": ["small", "fast", "red"],
    "IN": ["on", "with"],
}
# a sentence is a sequence of chunks; each chunk a sequence of POS tags
CHUNKS = {"NP": [["DT", "NN"], ["DT", "JJ", "NN"], ["NN"]], "VP": [["VBZ"]], "PP": [["IN"]]}
SHAPES = [["NP", "VP", "NP"], ["NP", "VP", "NP", "PP", "NP"], ["NP", "VP"]]


SHELL = ("bash", "sh", "shell", "console")
PYTHON = ("python",)


def fenced_blocks(doc: str, langs: tuple[str, ...]) -> list[tuple[int, str, str | None, str]]:
    """(line, code, marker kind or None, marker text) of each block of DOC in LANGS."""
    path = ROOT / doc if doc == "README.md" else ROOT / "docs" / doc
    text = path.read_text(encoding="utf-8")
    out = []
    fence = rf"^```(?:{'|'.join(langs)})\n(.*?)^```"
    for m in re.finditer(fence, text, flags=re.S | re.M):
        line = text.count("\n", 0, m.start()) + 1
        before = [ln for ln in text[: m.start()].splitlines() if ln.strip()]
        mark = MARK.search(before[-1]) if before else None
        kind, note = (mark.group(1), mark.group(2).strip()) if mark else (None, "")
        out.append((line, m.group(1), kind, note))
    return out


def all_shell_blocks():
    return [(doc, *block) for doc in SHELL_DOCS for block in fenced_blocks(doc, SHELL)]


def tiny_sentences(n: int, seed: int) -> list[list[tuple[str, str, str]]]:
    rng = np.random.default_rng(seed)
    sentences = []
    for _ in range(n):
        tokens = []
        for chunk in SHAPES[rng.integers(len(SHAPES))]:
            tags = CHUNKS[chunk][rng.integers(len(CHUNKS[chunk]))]
            for k, tag in enumerate(tags):
                word = WORDS[tag][rng.integers(len(WORDS[tag]))]
                tokens.append((word, tag, f"{'B' if k == 0 else 'I'}-{chunk}"))
        sentences.append(tokens)
    return sentences


def write_tiny_corpus(path: Path, seed: int, n: int = 30) -> None:
    if path.suffix == ".conllu":  # CoNLL-U: the label is the xpos column
        rows = [
            "\n".join(f"{i}\t{w}\t{w}\tX\t{p}\t_\t0\tdep\t_\t_" for i, (w, p, _) in enumerate(s, 1))
            for s in tiny_sentences(n, seed)
        ]
    else:
        rows = ["\n".join(" ".join(t) for t in s) for s in tiny_sentences(n, seed)]
    path.write_text("\n\n".join(rows) + "\n", encoding="utf-8")


def commands_of(code: str) -> list[list[str]]:
    """The block's commands as argument lists (continuations joined, comments dropped)."""
    joined = re.sub(r"\\\n\s*", " ", code)
    return [args for ln in joined.splitlines() if (args := shlex.split(ln, comments=True))]


def runnable(args: list[str], folder: Path, builtin: set[str]) -> tuple[list[str], Path | None]:
    """ARGS as they run here (the substitutions above) and the file `>` sends output to."""
    out_file = None
    if ">" in args:
        k = args.index(">")
        out_file, args = folder / args[k + 1], args[:k]
    real = {args[k + 1] for k, a in enumerate(args[:-1]) if a == "--problem"} & builtin
    result, k = [], 0
    while k < len(args):
        a = args[k]
        nxt = args[k + 1] if k + 1 < len(args) else None
        if a == "--problem" and nxt in real:
            write_tiny_corpus(folder / "tiny-train.conll", seed=0)
            write_tiny_corpus(folder / "tiny-test.conll", seed=1, n=10)
            result += ["--problem", "tiny-train.conll", "--columns", "word,pos,label"]
            result += ["--template", "chunking", "--test", "tiny-test.conll"]
            k += 2
            continue
        if a == "--set" and nxt is not None and nxt.split(".", 1)[0] in real:
            k += 2
            continue
        if a == "--passes" and nxt is not None:
            result += [a, str(min(float(nxt), MAX_PASSES))]
            k += 2
            continue
        if a == "--plugin-dir" and nxt == "my_plugins" and not (folder / nxt).exists():
            write_sgd_plugin(folder / nxt)
        if re.search(r"\.(txt|conll|conllu)$", a) and not (folder / a).exists():
            write_tiny_corpus(folder / a, seed=2 + k)
        result.append(a)
        k += 1
    return result, out_file


def test_every_shell_block_runs_or_says_why_not():
    blocks = all_shell_blocks()
    assert len(blocks) >= 10  # the extraction reads the docs, not nothing
    blocks += [(d, *b) for d in SHELL_DOCS for b in fenced_blocks(d, PYTHON)]
    bad = []
    for doc, line, _code, kind, note in blocks:
        if kind == "not-run" and len(note) < 8:
            bad.append(f"{doc}:{line}: <!-- not-run: … --> without a reason")
        if kind == "tested-in" and not (ROOT / note).is_file():
            bad.append(f"{doc}:{line}: tested-in {note!r}, which does not exist")
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize(
    "doc,line,code",
    [pytest.param(d, n, c, id=f"{d}:{n}") for d, n, c, kind, _ in all_shell_blocks() if not kind],
)
def test_shell_block_runs(doc, line, code, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CRFOPT_CACHE", str(tmp_path / "cache"))  # P* cache of the tiny corpus
    builtin = set(crfopt.get_registry().problems) - {"synthetic"}
    runner = CliRunner()
    for args in commands_of(code):
        assert args[0] == "crfopt", (
            f"{doc}:{line}: `{shlex.join(args)}` is not a crfopt command; "
            "mark the block <!-- not-run: REASON --> if it cannot run in the tests"
        )
        argv, out_file = runnable(args[1:], tmp_path, builtin)
        res = runner.invoke(main, argv)
        assert res.exit_code == 0, f"{doc}:{line}: crfopt {shlex.join(argv)}\n{res.output}"
        if out_file is not None:
            out_file.write_text(res.stdout, encoding="utf-8")


def test_metric_example_runs_as_documented(tmp_path, monkeypatch, capsys):
    """docs/plugins.md "Adding a metric": the plugin file and the run that uses it."""
    plugin = next(b for b in code_blocks("plugins.md") if "crfopt_register_metrics" in b)
    usage = next(b for b in code_blocks("plugins.md") if '"sparsity", "test_error"' in b)
    (tmp_path / "my_plugins").mkdir()
    (tmp_path / "my_plugins" / "sparsity.py").write_text(plugin, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    scope: dict = {}
    exec(compile(usage, "plugins.md", "exec"), scope)
    trace, w = scope["result"].trace, scope["result"].w
    assert "sparsity" in capsys.readouterr().out
    # expensive, every 4th checkpoint and the last (2 passes at every:0.25: 0..8)
    assert list(trace.loc[trace["sparsity"].notna(), "checkpoint"]) == [0, 4, 8]
    assert trace["sparsity"].iloc[0] == 1.0  # sg starts from w = 0
    assert trace["sparsity"].iloc[-1] == float(np.mean(w == 0.0))
