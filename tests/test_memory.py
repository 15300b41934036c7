"""Memory is estimated before a run: a state that cannot fit is declined, not allocated.

A 995-label corpus needs tens of GiB for SDCA's dual; it used to fail (or swap) only
after allocating. SDCA and OEG now compute their state's size from the problem's shapes
in ``decline`` and decline with the estimate when it exceeds the limit: the user's
``max_memory``, by default the memory the machine has available.
"""

from __future__ import annotations

import gc
import os
import re
import tracemalloc

import numpy as np
import pytest

import crfopt
from crfopt.kernels.jit import JIT_ENABLED
from crfopt.optim import contract
from crfopt.optim.contract import GIB, RunLimits, available_memory
from crfopt.optim.registry import get_registry

REG = get_registry()


@pytest.fixture(scope="module")
def many_labels():
    """K = 60 labels: the K² dual tables dominate, as on a large tag set."""
    return crfopt.make_synthetic(n=30, labels=60, attributes=40, length=8, seed=1)


@pytest.mark.parametrize(
    ("name", "params"), [("sdca", {}), ("sdca-gap", {"dtype": "float32"}), ("oeg", {})]
)
def test_the_estimate_matches_what_setup_allocates(many_labels, name, params):
    """Independent truth: the bytes NumPy allocates while the optimizer is built
    (tracemalloc sees every array), compiled code warmed up first."""
    spec = REG.optimizer(name)
    est = spec.cls.state_memory(many_labels, spec.resolve(params))
    spec.create(many_labels, 0, params)  # compile and warm up outside the measurement
    gc.collect()
    tracemalloc.start()
    try:
        opt = spec.create(many_labels, 0, params)
        current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    del opt
    if JIT_ENABLED:
        assert current <= peak <= est <= 1.25 * peak, (est, current, peak)
    else:
        # the NumPy twins build the initial marginals through whole-array temporaries,
        # so the peak exceeds the state; what stays allocated is the state
        assert current <= est <= 1.25 * peak, (est, current, peak)


def _gib(text: str, what: str) -> float:
    m = re.search(rf"{what} ~?([0-9.]+) (GiB|MiB|KiB)", text)
    assert m, text
    return float(m.group(1)) * {"GiB": GIB, "MiB": 2**20, "KiB": 2**10}[m.group(2)]


@pytest.mark.parametrize("name", ["sdca-gap", "oeg"])
def test_a_995_label_problem_is_declined_with_the_estimate(name):
    """The issue's case: 995 labels. The dual alone, counted here from the sequence
    lengths, is 8·(N·K + (N-n)·K²) bytes; the run is skipped with a reason giving at
    least that much state and the limit, before anything is allocated or compiled."""
    p = crfopt.make_synthetic(n=20, labels=995, attributes=20, length=10, seed=0)
    lengths = np.diff(p.data.offsets)
    N, n, K = int(lengths.sum()), len(lengths), 995
    dual = 8 * (N * K + (N - n) * K * K)
    assert dual > GIB  # the problem is really too big for the limit below
    res = crfopt.run(p, name, passes=1, max_memory="1G")
    assert res.status == "skipped"
    reason = res.meta["skip_reason"]
    assert reason.startswith("needs ~") and "of state" in reason
    need = int(re.search(r"\(([0-9,]+) bytes\)", reason).group(1).replace(",", ""))
    assert need >= dual
    assert abs(_gib(reason, "needs") - need) <= 0.01 * need
    assert _gib(reason, "limit") == GIB
    assert res.trace["oracle_calls"].iloc[0] == 0


def test_the_limit_decides_at_the_estimate(many_labels):
    spec = REG.optimizer("sdca-gap")
    params = spec.resolve({})
    need = spec.cls.state_memory(many_labels, params)
    assert spec.cls.decline(many_labels, params, RunLimits(need)) is None
    reason = spec.cls.decline(many_labels, params, RunLimits(need - 1))
    assert reason is not None and f"({need:,} bytes)" in reason and "float32" in reason
    # float32 storage halves the dual: the float32 state fits where float64 does not
    p32 = spec.resolve({"dtype": "float32"})
    need32 = spec.cls.state_memory(many_labels, p32)
    assert need32 < need - many_labels.dual_memory(4) + 1
    assert spec.cls.decline(many_labels, p32, RunLimits(need32)) is None


def test_without_max_memory_the_available_memory_is_the_limit(many_labels, monkeypatch):
    sdca, oeg = REG.optimizer("sdca"), REG.optimizer("oeg")
    monkeypatch.setattr(contract, "available_memory", lambda: 2**20)
    for spec in (sdca, oeg):
        reason = spec.cls.decline(many_labels, spec.resolve({}), RunLimits())
        assert reason is not None and "limit 1 MiB" in reason
        assert "available on this machine" in reason
    res = crfopt.run(many_labels, "sdca", passes=1)
    assert res.status == "skipped" and "available on this machine" in res.meta["skip_reason"]
    # an explicit limit wins over the machine's
    assert crfopt.run(many_labels, "sdca", passes=0.5, max_memory="1G").status == "budget"
    # the OS does not say: nothing is declined for memory
    monkeypatch.setattr(contract, "available_memory", lambda: None)
    assert sdca.cls.decline(many_labels, sdca.resolve({}), RunLimits()) is None


def test_available_memory_reads_the_os():
    total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    avail = available_memory()
    assert avail is not None and 0 < avail <= total
    with open("/proc/meminfo") as f:
        kb = next(int(line.split()[1]) for line in f if line.startswith("MemAvailable:"))
    assert abs(avail - kb * 1024) <= 0.1 * total  # the same figure, read a moment apart


def test_available_memory_falls_back_to_sysconf_then_to_none(monkeypatch):
    def no_file(*args, **kwargs):
        raise OSError("no /proc here")

    monkeypatch.setattr(contract, "open", no_file, raising=False)
    free = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    avail = available_memory()
    assert avail is not None and abs(avail - free) <= 0.1 * free + 2**26

    def no_sysconf(name):
        raise ValueError(f"unknown sysconf name {name}")

    monkeypatch.setattr(contract.os, "sysconf", no_sysconf)
    assert available_memory() is None
