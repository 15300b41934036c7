"""A first ``crfopt compare`` compiles each kernel it runs once (issue 19 item 5).

numba compiles one specialization per argument type, and an array's writability is part
of its type: the checkpoint evaluation decodes with a frozen view of w, the test error
with the optimizer's own w, which compiled Viterbi's whole call tree twice.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from crfopt.kernels.jit import JIT_ENABLED

SCRIPT = """
import json
import numpy as np
import crfopt
from crfopt.core.problem import decode
from crfopt.kernels import _numba

problem = crfopt.make_synthetic(n=5, labels=3, attributes=6, length=4, seed=0)
w = np.random.default_rng(0).normal(size=problem.dim)
frozen = w.copy()
frozen.flags.writeable = False
labels = [decode(problem, x, "train").tolist() for x in (w, frozen, w[:])]
print(json.dumps({"labels": labels, "signatures": len(_numba.batch_viterbi.signatures)}))
"""


@pytest.mark.skipif(not JIT_ENABLED, reason="specializations exist only with the JIT")
def test_decode_compiles_one_viterbi_for_writable_and_frozen_weights():
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=900
    )
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    a, b, c = result["labels"]
    assert a == b == c  # the same decoding whatever the writability
    assert result["signatures"] == 1
