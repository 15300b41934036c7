"""One full oracle pass (value + gradient over all n sequences) at paper sizes.

* OCR size: n = 6000, T ≈ 8, K = 26, 128 dense attributes (OCR itself: n = 6251,
  N = 47535; CRFsuite needs 0.173 s for one value+gradient pass on it here).
* CoNLL-2000 size: n = 9000, T ≈ 24, K = 22, ~20 active of 75,000 sparse attributes.

Reported: seconds per pass for the compiled path on 1 thread and on all threads, and for
the pure-NumPy path, with the ratios to the NumPy path measured in the same run.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

import crfopt
from crfopt.bench.evaluator import Evaluator
from crfopt.kernels import _numpy as _kernels_numpy

from conftest import threads

SIZES = {
    "ocr-size": dict(n=6000, labels=26, attributes=128, length=8, dense=True, density=0.3),
    "conll-size": dict(n=9000, labels=22, attributes=75000, length=24, density=20 / 75000),
}

_cache: dict[str, crfopt.CRFProblem] = {}


def problem(size: str) -> crfopt.CRFProblem:
    if size not in _cache:
        _cache[size] = crfopt.make_synthetic(seed=0, **SIZES[size])
    return _cache[size]


def _numpy_pass(p: crfopt.CRFProblem, w: np.ndarray) -> float:
    g = np.empty(p.dim)
    return _kernels_numpy.batch_value_grad(p.data, p._get_transpose(), w, True, g)


def _best_of(fn, rounds: int) -> float:
    best = np.inf
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


@pytest.mark.parametrize("size", list(SIZES))
def test_full_oracle_pass(size, benchmark, recorder):
    p = problem(size)
    w = np.random.default_rng(0).normal(scale=0.01, size=p.dim)
    group = f"full value+gradient pass, {size} (n={p.n}, N={p.n_tokens}, d={p.dim})"
    # The NumPy path first: it is the baseline of the ratios.
    with threads(1):
        recorder(group, "numpy path, 1 thread", _best_of(lambda: _numpy_pass(p, w), 2))
        ev = Evaluator(p)
        ev.value_and_gradient(w)  # compile outside the timed region
        recorder(group, "jit, 1 thread", _best_of(lambda: ev.value_and_gradient(w), 7))
    recorder(group, "jit, all threads", _best_of(lambda: ev.value_and_gradient(w), 7))
    with threads(1):
        benchmark.pedantic(ev.value_and_gradient, args=(w,), rounds=5, iterations=1)
