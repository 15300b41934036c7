"""Seconds per epoch of the SAG family against one full oracle pass, same run; and the
peak memory of an epoch on CoNLL-2000 (issue 7: epoch ≤ 2 full passes).

Single-threaded, after one untimed epoch. Peak memory is the maximum resident set of a
fresh process, before the optimizer is built and after one epoch.
"""

from __future__ import annotations

import pytest

from conftest import bench_problem, peak_memory, record, record_epochs_vs_full_pass

VARIANTS = ["sag", "sag-nus", "sag-nus-star", "saga-nus"]


@pytest.mark.parametrize("name", ["ocr", "conll2000"])
def test_sag_epoch(name, recorder):
    record_epochs_vs_full_pass(recorder, "SAG-family", name, VARIANTS)


def test_sag_peak_memory_conll2000():
    _, label = bench_problem("conll2000")
    if "synthetic" in label:
        pytest.skip("needs the real CoNLL-2000 data (CRFOPT_DATA)")
    group = "memory on conll2000: resident before the optimizer, peak after one epoch, state"
    for text in ("sag-nus-star", "sdca-gap"):
        current, peak, state = peak_memory("conll2000", text)
        record(group, f"{text}: resident before", current, unit="bytes")
        record(group, f"{text}: peak after one epoch", peak, unit="bytes")
        record(group, f"{text}: optimizer arrays", state, unit="bytes")
