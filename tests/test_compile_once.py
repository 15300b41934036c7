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
