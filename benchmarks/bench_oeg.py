"""Seconds per epoch of OEG and the SG baselines against one full oracle pass, same run.

Single-threaded, after one untimed epoch (OEG's first epoch is its trial-heavy one).
"""

from __future__ import annotations

import pytest

import crfopt
from crfopt.compare import parse_optimizer
from crfopt.runner import warm_up

from conftest import bench_problem, threads, time_epoch, time_full_pass

VARIANTS = ["oeg", "sg", "asg", "adagrad"]


@pytest.mark.parametrize("name", ["ocr", "conll2000"])
def test_oeg_epoch(name, recorder):
    problem, label = bench_problem(name)
    reg = crfopt.get_registry()
    group = f"OEG / SG epoch vs full oracle pass, {label} (n={problem.n}, d={problem.dim})"
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
