"""Seconds per SDCA epoch (n iterations) against one full oracle pass, same run.

The target of the SDCA issue is an epoch ≤ 1.5 full passes. Measured single-threaded
(numba and BLAS at 1 thread), after one untimed epoch (JIT warm-up, first visits).
"""

from __future__ import annotations

import pytest

import crfopt
from crfopt.compare import parse_optimizer
from crfopt.runner import warm_up

from conftest import bench_problem, threads, time_epoch, time_full_pass

VARIANTS = ["sdca", "sdca-gap", "sdca-gap[start=chord]"]


@pytest.mark.parametrize("name", ["ocr", "conll2000"])
def test_sdca_epoch(name, recorder):
    problem, label = bench_problem(name)
    reg = crfopt.get_registry()
    group = f"SDCA epoch vs full oracle pass, {label} (n={problem.n}, N={problem.n_tokens})"
    with threads(1):
        recorder(group, "full oracle pass (value+gradient)", time_full_pass(problem))
        for text in VARIANTS:
            variant, overrides = parse_optimizer(text)
            spec = reg.optimizer(variant)
            q = problem.with_lam(problem.lam)
            warm_up(spec, spec.resolve(overrides), q)
            with q.initialization():
                opt = spec.create(q, 0, overrides)
            recorder(group, f"{text} epoch", time_epoch(opt, q.n))
