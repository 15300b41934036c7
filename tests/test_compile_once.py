"""A first ``crfopt compare`` compiles each kernel it runs once (issue 19 item 5).

numba compiles one specialization per argument type, and an array's writability is part
of its type: the checkpoint evaluation decodes with a frozen view of w, the test error
and the oracle with the optimizer's own w, which compiled Viterbi's call tree twice.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from crfopt.kernels.jit import JIT_ENABLED

SCRIPT = """
import json
import numpy as np
import crfopt
from crfopt.bench.evaluator import Evaluator
from crfopt.core.problem import decode
from crfopt.kernels import _numba

problem = crfopt.make_synthetic(n=5, labels=3, attributes=6, length=4, seed=0)
w = np.random.default_rng(0).normal(size=problem.dim)
frozen = w.copy()
frozen.flags.writeable = False
Evaluator(problem).value_and_gradient(w)  # the oracle: an optimizer's writable w
labels = [decode(problem, x, "train").tolist() for x in (w, frozen, w[:])]
kernels = ("batch_viterbi", "all_unary", "emission_matrix")
counts = {name: len(getattr(_numba, name).signatures) for name in kernels}
print(json.dumps({"labels": labels, "signatures": counts}))
"""


def run(env: dict[str, str] | None = None) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=900, env=env
    )
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    a, b, c = result["labels"]
    assert a == b == c  # the same decoding whatever the writability
    return result["signatures"]


@pytest.mark.skipif(not JIT_ENABLED, reason="specializations exist only with the JIT")
def test_decode_compiles_one_viterbi_for_writable_and_frozen_weights():
    """Fails with 2 specializations of batch_viterbi when decode passes w as it comes
    (entry points are counted whether compiled or loaded from numba's cache)."""
    assert run()["batch_viterbi"] == 1


@pytest.mark.slow  # compiles the oracle's and Viterbi's kernels from nothing: a minute
@pytest.mark.skipif(not JIT_ENABLED, reason="specializations exist only with the JIT")
def test_the_oracle_and_viterbi_share_one_compile_of_the_unary_scores(tmp_path):
    """With an empty numba cache every kernel compiles, callees included: the unary
    scores compile once for the oracle and Viterbi together (twice were decode to
    freeze w instead of copying a frozen one)."""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}
    assert run(env) == {"batch_viterbi": 1, "all_unary": 1, "emission_matrix": 1}


# The comparison path after `crfopt compile`: counts the crfopt functions numba compiles
# (a load from the disk cache fires no numba:compile event).
COMPARE_SCRIPT = """
import json, sys
from numba.core import event
import crfopt

compiled = []

class Count(event.Listener):
    def on_start(self, ev):
        func = ev.data["dispatcher"].py_func
        if func.__module__.split(".")[0] in ("crfopt", "crfopt_plugins", "crfopt_datasets"):
            compiled.append(func.__module__ + "." + func.__qualname__)
    def on_end(self, ev):
        pass

event.register("numba:compile", Count())
params = {"dense": sys.argv[2] == "dense", "n": 40, "labels": 5, "attributes": 20, "n_test": 10}
frame = crfopt.compare("synthetic", sys.argv[3], passes=1, out=sys.argv[1],
                       problem_params={"synthetic": params}, optimum=False)
final = frame.groupby("run_id")["status"].last()
assert len(final) == len(sys.argv[3].split(",")) and set(final) == {"budget"}, final
print(json.dumps(sorted(set(compiled))))
"""


def compiled_by_compare(
    tmp_path, env: dict[str, str], kind: str, optimizers: str = "sdca-gap,sag-nus,oeg"
) -> list[str]:
    """The crfopt functions compiled (not loaded from the cache) by a comparison."""
    results = str(tmp_path / f"results-{kind}")
    out = subprocess.run(
        [sys.executable, "-c", COMPARE_SCRIPT, results, kind, optimizers],
        capture_output=True,
        text=True,
        timeout=1800,
        env=env,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.slow  # compiles the three optimizers' kernels from nothing: minutes
@pytest.mark.skipif(not JIT_ENABLED, reason="compiling exists only with the JIT")
def test_after_crfopt_compile_a_comparison_compiles_nothing(tmp_path):
    """`crfopt compile` (issue 18: the first run within 30 s) leaves nothing for the first
    comparison to compile: the tiny problems it runs have the array types of a real
    problem of the same kind, and it goes through the runner as a comparison does. Fails
    when the warm-up misses a specialization the comparison path uses (a kind it was not
    run for, a kernel only the checkpoint evaluation or a metric calls)."""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba")}
    warm = subprocess.run(
        [
            sys.executable,
            "-m",
            "crfopt",
            "compile",
            "--optimizers",
            "sdca-gap,sag-nus,oeg",
            "--kinds",
            "dense",
        ],
        capture_output=True,
        text=True,
        timeout=1800,
        env=env,
    )
    assert warm.returncode == 0, warm.stdout[-2000:] + warm.stderr[-2000:]
    assert compiled_by_compare(tmp_path, env, "dense") == []


@pytest.mark.skipif(not JIT_ENABLED, reason="compiling exists only with the JIT")
@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--kinds", "dense,dens"], "choose from dense, sparse"),
        (["--optimizers", "sdca-gapp"], "Did you mean sdca-gap"),
    ],
)
def test_crfopt_compile_refuses_unknown_kinds_and_optimizers_before_compiling(args, named):
    from click.testing import CliRunner

    from crfopt.apps.cli import main

    res = CliRunner().invoke(main, ["compile", *args])
    assert res.exit_code == 2, res.output
    assert named in res.output
    assert "compiled" not in res.output


# A trained model's decoding after `crfopt compile`, loaded from a file as `crfopt tag`
# loads it, on a sentence and on a batch large enough for numba's threads.
TAG_SCRIPT = """
import json, sys
import numpy as np
from numba.core import event
import crfopt
from crfopt.apps.model import Model
from crfopt.kernels._numba import PARALLEL_FROM

compiled = []

class Count(event.Listener):
    def on_start(self, ev):
        func = ev.data["dispatcher"].py_func
        if func.__module__.split(".")[0] == "crfopt":
            compiled.append(func.__module__ + "." + func.__qualname__)
    def on_end(self, ev):
        pass

event.register("numba:compile", Count())
problem = crfopt.make_synthetic(n=5, labels=3, attributes=6, length=4, seed=0)
w = np.random.default_rng(0).normal(size=problem.dim)
model = Model.load(Model.from_problem(problem, w).save(sys.argv[1]))
rng = np.random.default_rng(1)
for n in (6, PARALLEL_FROM + 1):
    counts = rng.integers(0, 4, size=n)
    indptr = np.concatenate(([0], np.cumsum(counts)))
    indices = rng.integers(0, 6, size=int(indptr[-1]))
    lengths = np.full(n, 1)
    model.viterbi(indptr, indices, rng.uniform(size=len(indices)), lengths)
    model.node_marginals(indptr, indices, np.ones(len(indices)), lengths)
print(json.dumps(sorted(set(compiled))))
"""


@pytest.mark.slow  # compiles L-BFGS's and the decoding's kernels from nothing: minutes
@pytest.mark.skipif(not JIT_ENABLED, reason="compiling exists only with the JIT")
def test_after_crfopt_compile_tagging_compiles_nothing(tmp_path):
    """`crfopt compile` also compiles what `crfopt tag` and CRF.predict run
    (the csr_* kernels), with the argument types a loaded model passes."""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba")}
    warm = subprocess.run(
        [sys.executable, "-m", "crfopt", "compile", "--optimizers", "lbfgs", "--kinds", "sparse"],
        capture_output=True,
        text=True,
        timeout=1800,
        env=env,
    )
    assert warm.returncode == 0, warm.stdout[-2000:] + warm.stderr[-2000:]
    assert "tagging: ok" in warm.stdout + warm.stderr
    out = subprocess.run(
        [sys.executable, "-c", TAG_SCRIPT, str(tmp_path / "m.crfopt")],
        capture_output=True,
        text=True,
        timeout=1800,
        env=env,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []
