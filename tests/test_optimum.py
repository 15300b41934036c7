"""The reference optimum: stored values verified before use, a shipped table, progress.

Truths: P* of a small synthetic problem computed here with the certificate checked
independently (‖∇P(w_ref)‖²/(2λ) from the evaluator), and for OCR the value CRFsuite's
L-BFGS reached run to convergence (2.4399148493, see test_slow_ocr).
"""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pytest

import crfopt
import crfopt.bench.optimum as opt
from crfopt.bench.evaluator import Evaluator
from crfopt.optim.registry import get_registry

from conftest import one_kernel_thread


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """One kernel thread: on a loaded 2-core machine the parallel kernels' barriers cost
    0.3 s per oracle call on these tiny problems (measured), 15x a single thread."""
    with one_kernel_thread():
        yield


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CRFOPT_CACHE", str(tmp_path / "cache"))
    # raising=False: the table path is patched even where the module has none (before it)
    monkeypatch.setattr(opt, "SHIPPED_TABLE", tmp_path / "optima.json", raising=False)
    return tmp_path


@pytest.fixture(scope="module")
def problem():
    return crfopt.make_synthetic(n=60, labels=3, attributes=12, seed=3)


def _no_compute(monkeypatch):
    def refuse(*a, **k):
        raise AssertionError("P* was recomputed")

    monkeypatch.setattr(opt, "compute_optimum", refuse)


def test_computed_optimum_is_certified_and_reused(fresh_cache, problem, monkeypatch):
    ref = opt.reference_optimum(problem)
    w = opt.reference_weights(problem)
    value, grad = Evaluator(problem).value_and_gradient(w)
    assert ref.p_star == pytest.approx(value, rel=1e-12)
    assert ref.certificate == pytest.approx(grad @ grad / (2 * problem.lam), rel=1e-3, abs=1e-16)
    _no_compute(monkeypatch)
    again = opt.reference_optimum(problem)
    assert (again.p_star, again.source) == (ref.p_star, "cache")


@pytest.mark.parametrize(
    "field, value",
    [
        ("p_star", "+0.5"),  # an edit: every later sub-optimality would shift by 0.5
        ("p_star", "NaN"),  # the sub-optimality column would be null
        ("p_star", "-Infinity"),  # --target-suboptimality would be unreachable
        ("p_star", '"2.0"'),
        ("certificate", "*1e-6"),  # a certificate claiming more than was shown
        ("certificate", "-1.0"),
        ("fingerprint", '"0000"'),
        ("lam", "*2"),
    ],
)
def test_damaged_cached_optimum_is_rejected_and_recomputed(fresh_cache, problem, field, value):
    ref = opt.reference_optimum(problem)
    path = opt._cache_file(problem)
    data = json.loads(path.read_text())
    if value[0] in "+*":
        old = data[field]
        data[field] = old + float(value[1:]) if value[0] == "+" else old * float(value[1:])
        text = json.dumps(data)
    else:
        text = json.dumps({**data, field: "@@"}).replace('"@@"', value)
    path.write_text(text)
    with pytest.warns(RuntimeWarning, match=rf"{path.name} rejected: .*recomputed"):
        again = opt.reference_optimum(problem)
    assert again.p_star == pytest.approx(ref.p_star, rel=1e-12)
    assert again.source == "computed"
    assert math.isfinite(json.loads(path.read_text())["p_star"])  # repaired on disk


def test_damaged_or_missing_weights_are_rejected(fresh_cache, problem):
    opt.reference_optimum(problem)
    w_path = opt._cache_file(problem).with_suffix(".w.npy")
    w_path.write_bytes(b"\x93NUMPY garbage")
    with pytest.warns(RuntimeWarning, match="w_ref .* unreadable"):
        assert opt.cached_optimum(problem) is None
    w_path.unlink()
    with pytest.warns(RuntimeWarning, match="unreadable"):
        assert opt.cached_optimum(problem) is None


def test_impossible_dual_bound_is_dropped_not_trusted(fresh_cache, problem):
    ref = opt.reference_optimum(problem)
    opt.record_dual(problem, ref.p_star + 1.0)  # above P(w_ref): a faulty dual value
    assert opt.cached_optimum(problem).best_dual is None
    opt.record_dual(problem, ref.p_star - 1e-3)
    assert opt.cached_optimum(problem).best_dual == pytest.approx(ref.p_star - 1e-3)
    path = opt._cache_file(problem)
    path.write_text(json.dumps({**json.loads(path.read_text()), "best_dual": ref.p_star + 1}))
    with pytest.warns(RuntimeWarning, match="weak duality"):
        cached = opt.cached_optimum(problem)
    assert cached.best_dual is None and cached.lower_bound == ref.p_star - ref.certificate


def _table(path, entries):
    path.write_text(json.dumps({"format": 1, "optima": entries}))


def test_shipped_table_is_used_when_the_fingerprint_matches(fresh_cache, problem, monkeypatch):
    ref, _ = opt.compute_optimum(problem)
    _table(opt.SHIPPED_TABLE, [opt.table_entry(problem, ref, {"seed": 3})])
    _no_compute(monkeypatch)
    got = opt.reference_optimum(problem)
    assert (got.p_star, got.certificate, got.source) == (ref.p_star, ref.certificate, "shipped")


def test_shipped_entry_for_another_problem_is_not_used(fresh_cache, problem):
    """A different λ (or data, template, option) is a different fingerprint: recomputed."""
    ref, _ = opt.compute_optimum(problem)
    other = problem.with_lam(problem.lam * 10)
    entry = opt.table_entry(problem, ref, {})
    _table(opt.SHIPPED_TABLE, [{**entry, "problem": other.name}])
    got = opt.reference_optimum(other)
    assert got.source == "computed" and got.p_star != pytest.approx(ref.p_star)


@pytest.mark.parametrize("p_star", ["NaN", "-1.0", "1e6"])
def test_implausible_shipped_entry_is_rejected(fresh_cache, problem, p_star):
    ref, _ = opt.compute_optimum(problem)
    entry = opt.table_entry(problem, ref, {})
    entry["relative_certificate"] = entry["certificate"]  # consistent with |P*| = 1e6 …
    text = json.dumps({"format": 1, "optima": [{**entry, "p_star": "@@"}]})
    opt.SHIPPED_TABLE.write_text(text.replace('"@@"', p_star))
    with pytest.warns(RuntimeWarning, match="optima.json entry .* rejected"):
        got = opt.reference_optimum(problem)
    assert got.source == "computed" and got.p_star == pytest.approx(ref.p_star, rel=1e-12)


def test_progress_reports_iterations_and_certified_gap_while_computing(problem, monkeypatch):
    monkeypatch.setattr(opt, "PROGRESS_INTERVAL", 0.0)
    seen = []
    ref, _ = opt.compute_optimum(problem, progress=lambda *a: seen.append(a))
    its = [s[0] for s in seen]
    assert len(seen) >= 10 and its == sorted(set(its)) and its[-1] <= ref.iterations
    assert all(math.isfinite(v) and g >= 0 for _, v, g in seen)
    assert seen[-1][2] < 1e-3 * seen[0][2]  # the gap reported shrinks as it converges
    assert seen[-1][1] == pytest.approx(ref.p_star, rel=1e-6)


def test_shipped_table_is_well_formed():
    table = json.loads(opt.SHIPPED_TABLE.read_text())
    names = [e["problem"] for e in table["optima"]]
    # every built-in problem, so none of them spends its first comparison computing P*
    assert set(get_registry().problems) <= set(names)
    for e in table["optima"]:
        assert len(e["fingerprint"]) == 64
        assert math.isfinite(e["p_star"]) and e["p_star"] > 0
        assert 0 <= e["certificate"] <= 1e-8 * e["p_star"], e["problem"]
        assert e["relative_certificate"] == pytest.approx(e["certificate"] / e["p_star"])


_FEATURIZED_IN_MINUTES = ("conll2000", "ner-nl", "pos-conll2000", "pos-ewt", "sag4crf-pos")


@pytest.mark.data
@pytest.mark.parametrize(
    "name",
    ["ocr", "sag4crf-conll", "sag4crf-ner", "synthetic"]
    + [pytest.param(n, marks=pytest.mark.slow) for n in _FEATURIZED_IN_MINUTES],
)
def test_shipped_optimum_matches_the_builtin_problem(name, fresh_cache, monkeypatch):
    """The table's fingerprints are those of today's featurization: a built-in problem
    starts optimizing at once instead of spending minutes on P*."""
    monkeypatch.setattr(opt, "SHIPPED_TABLE", opt.Path(opt.__file__).with_name("optima.json"))
    _no_compute(monkeypatch)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ref = opt.reference_optimum(crfopt.load_problem(name))
    assert ref.source == "shipped"
    if name == "ocr":  # CRFsuite's L-BFGS run to convergence (test_slow_ocr)
        assert ref.p_star == pytest.approx(2.4399148493, rel=1e-8)


def test_weights_file_is_numeric_only(fresh_cache, problem):
    opt.reference_optimum(problem)
    w_path = opt._cache_file(problem).with_suffix(".w.npy")
    np.save(w_path, np.array([object()], dtype=object), allow_pickle=True)
    with pytest.warns(RuntimeWarning, match="unreadable"):
        assert opt.cached_optimum(problem) is None


# ------------------------------------------------------------- compiled kernels


def test_every_numba_kernel_is_cached_on_disk():
    """A cold install compiles for minutes; every kernel must be cached so it happens once."""
    from numba.core.dispatcher import Dispatcher

    from crfopt.kernels import _numba, vmath

    modules = [vmath] + [getattr(_numba, name) for name in _numba.MODULES]
    kernels = [
        (m.__name__, name, f)
        for m in modules
        for name, f in vars(m).items()
        if isinstance(f, Dispatcher)
    ]
    assert len(kernels) > 40
    uncached = [(m, n) for m, n, f in kernels if type(f._cache).__name__ == "NullCache"]
    assert uncached == []


def test_first_compile_says_so_once_and_a_warm_cache_is_silent(tmp_path):
    import os
    import subprocess
    import sys

    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba")}
    env.pop("CRFOPT_DISABLE_JIT", None)
    code = "from crfopt.kernels._numba import tables; print(tables.clip0(1.5))"

    def run() -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300
        )

    cold = run()
    assert cold.returncode == 0 and cold.stdout.strip() == "0.0", cold.stderr
    assert cold.stderr.count("compiling kernels (once)") == 1, cold.stderr
    assert str(tmp_path / "numba") in cold.stderr
    warm = run()
    assert warm.returncode == 0 and "compiling" not in warm.stderr, warm.stderr
