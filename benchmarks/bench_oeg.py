"""Seconds per epoch of OEG and the SG baselines against one full oracle pass, same run.

Single-threaded, after one untimed epoch (OEG's first epoch is its trial-heavy one).
"""

from __future__ import annotations

import pytest

from conftest import bench_problem, record_epochs_vs_full_pass

VARIANTS = ["oeg", "sg", "asg", "adagrad"]


@pytest.mark.parametrize("name", ["ocr", "conll2000"])
def test_oeg_epoch(name, recorder):
    problem, label = bench_problem(name)
    group = f"OEG / SG epoch vs full oracle pass, {label} (n={problem.n}, d={problem.dim})"
    record_epochs_vs_full_pass(recorder, group, problem, VARIANTS)
