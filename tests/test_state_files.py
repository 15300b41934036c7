"""State files verified on read and recovered; each run computed once (issue 17).

Results: a damaged run file (truncated, 0 bytes, a flipped bit) is named in a warning,
skipped by ``read_results`` and moved aside and recomputed by the next ``compare``.
Featurization cache: a damaged or tampered entry is deleted and rebuilt; a full cache
disk is a warning. Two ``compare`` processes on one folder compute every run once. The
run id of a built-in problem follows the content of its data files.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

import crfopt
from crfopt.bench.plan import claim_run, expand_grid, pending, run_lock_path
from crfopt.bench.results import (
    DamagedResultError,
    ResultFileWarning,
    load_run,
    read_results,
    run_path,
    to_frame,
    write_run,
)
from crfopt.data import cache as cache_mod
from crfopt.data.fileio import clean_stale_tmp, file_lock

REPO = Path(__file__).resolve().parents[1]


def _rows(rid="abc"):
    base = {"problem": "p", "optimizer": "o", "params": "{}", "seed": 0, "run_id": rid}
    return [
        {**base, "checkpoint": 0, "iterations": 0, "primal": 1.0, "status": "running"},
        {**base, "checkpoint": 1, "iterations": 5, "primal": 0.5, "dual": 0.25, "status": "budget"},
    ]


def _damage(path: Path, how: str) -> None:
    data = path.read_bytes()
    if how == "empty":
        path.write_bytes(b"")
    elif how == "truncated":
        path.write_bytes(data[: len(data) // 2])
    elif how == "no-footer":
        path.write_bytes(data[:-9])
    else:
        raise ValueError(how)


# ------------------------------------------------------------------ result files


@pytest.mark.parametrize("how", ["empty", "truncated", "no-footer"])
def test_read_results_warns_naming_a_damaged_file_and_reads_the_others(tmp_path, how):
    write_run(tmp_path / "run-good.parquet", to_frame(_rows("good")), {"run_id": "good"})
    bad = write_run(tmp_path / "run-bad.parquet", to_frame(_rows("bad")), {"run_id": "bad"})
    _damage(bad, how)
    with pytest.warns(ResultFileWarning, match=r"run-bad\.parquet"):
        table = read_results(tmp_path)
    assert set(table["run_id"]) == {"good"}
    with pytest.raises(DamagedResultError, match=r"run-bad\.parquet"):
        load_run(bad)


def test_single_bit_flips_never_change_values_silently(tmp_path):
    """Every flipped bit either reads back identical or is refused naming the file (before
    the checksums, 45 of 200 flips changed values without any error)."""
    path = write_run(tmp_path / "run-abc.parquet", to_frame(_rows()), {"run_id": "abc", "x": 1})
    good = path.read_bytes()
    ref, ref_meta = load_run(path)
    rng = np.random.default_rng(0)
    refused = 0
    for pos in rng.choice(len(good), size=300, replace=False):
        flipped = bytearray(good)
        flipped[pos] ^= 1 << int(rng.integers(8))
        path.write_bytes(bytes(flipped))
        try:
            frame, meta = load_run(path)
        except DamagedResultError:
            refused += 1
            continue
        assert frame.equals(ref) and meta == ref_meta, f"bit flip at byte {pos} changed the run"
    assert refused > 100  # most of the file is checked data, not padding


def _compare(out, optimizers="lbfgs,scripted", **kw):
    from doubles.scripted import plugin_dir

    return crfopt.compare(
        "synthetic",
        optimizers,
        passes=2,
        out=out,
        optimum=False,
        plugin_dirs=[str(plugin_dir(out.parent))],
        **kw,
    )


@pytest.mark.parametrize("how", ["empty", "truncated"])
def test_compare_moves_a_damaged_run_aside_and_recomputes_it(tmp_path, how):
    out = tmp_path / "out"
    first = _compare(out)
    lbfgs_id = first.loc[first["optimizer"] == "lbfgs", "run_id"].iloc[0]
    path = run_path(out, lbfgs_id)
    _damage(path, how)
    with pytest.warns(ResultFileWarning, match=f"run-{lbfgs_id}.parquet") as record:
        again = _compare(out)
    assert any("computed again" in str(w.message) for w in record)
    assert (out / "damaged" / path.name).exists()  # kept for inspection, out of the way
    frame, _ = load_run(path)  # recomputed: intact again, with the same numbers
    assert frame["primal"].tolist() == first.loc[first["run_id"] == lbfgs_id, "primal"].tolist()
    assert set(again["run_id"]) == set(first["run_id"])


def test_retry_failed_and_pending_survive_a_damaged_file(tmp_path):
    out = tmp_path / "out"
    tasks = expand_grid(["synthetic"], ["lbfgs", "sdca"], out=out)
    write_run(run_path(out, tasks[0].run_id), to_frame(_rows(tasks[0].run_id)), {})
    bad = write_run(run_path(out, tasks[1].run_id), to_frame(_rows(tasks[1].run_id)), {})
    _damage(bad, "truncated")
    with pytest.warns(ResultFileWarning, match=bad.name):
        todo = pending(tasks, out, retry_failed=True)
    assert [t.run_id for t in todo] == [tasks[1].run_id]
    assert todo[0].stored == "absent"


def test_results_are_written_with_page_checksums(tmp_path):
    import pyarrow.parquet as pq

    path = write_run(tmp_path / "run-a.parquet", to_frame(_rows("a")), {"run_id": "a"})
    meta = load_run(path)[1]
    assert "trace_sha256" in meta
    # a flip inside a data page is caught by the page CRC even with the other checks off
    raw = bytearray(path.read_bytes())
    pages = pq.ParquetFile(path).metadata.row_group(0).column(0)
    raw[pages.data_page_offset + pages.total_compressed_size - 2] ^= 0x10
    path.write_bytes(bytes(raw))
    with pytest.raises(OSError, match="CRC"):
        pq.read_table(path, page_checksum_verification=True)


# ------------------------------------------------------------------ concurrency

_COUNTING_PLUGIN = textwrap.dedent(
    '''
    import os, time
    import crfopt


    class Counting(crfopt.Optimizer):
        """SGD that leaves one line per run it steps in $H2_MARKER (pid, seed)."""

        parameters = {"sleep": crfopt.Param(0.02, float, "seconds per step", low=0.0)}

        def setup(self):
            self._w = self.problem.zeros()
            self._marked = False

        @property
        def w(self):
            return self._w

        def step(self):
            if not self._marked:  # first step; the runner's warm-up uses a 6-sequence problem
                with open(os.environ["H2_MARKER"], "a") as f:
                    f.write(f"{os.getpid()} {self.seed} {self.problem.n}\\n")
                self._marked = True
            i = int(self.rng.integers(self.problem.n))
            g = self.problem.oracle(i, self._w, gradient=True).gradient.to_dense(self.problem)
            self._w -= 0.05 * (g + self.problem.lam * self._w)
            time.sleep(self.params["sleep"])
            self.count(updates=1)


    @crfopt.hookimpl
    def crfopt_register_optimizers():
        return [crfopt.OptimizerSpec("counting", Counting, summary="counts its runs")]
    '''
)


def test_two_identical_compares_compute_every_run_once(tmp_path):
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / "counting.py").write_text(_COUNTING_PLUGIN)
    marker = tmp_path / "runs.txt"
    marker.touch()
    out = tmp_path / "out"
    seeds = "0,1,2,3,4,5"
    cmd = [
        sys.executable,
        "-m",
        "crfopt",
        "compare",
        "--problem",
        "synthetic",
        "--set",
        "synthetic.n=40",
        "--optimizers",
        "counting",
        "--seeds",
        seeds,
        "--passes",
        "0.5",
        "--no-optimum",
        "--out",
        str(out),
        "--plugin-dir",
        str(plugins),
    ]
    env = {**os.environ, "H2_MARKER": str(marker)}
    procs = [
        subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    for p in procs:
        _, err = p.communicate(timeout=600)
        assert p.returncode == 0, err
    runs = [line.split() for line in marker.read_text().splitlines()]
    seeds_done = [int(seed) for _, seed, n in runs if int(n) == 40]
    assert sorted(seeds_done) == [0, 1, 2, 3, 4, 5], marker.read_text()  # each exactly once
    assert len(read_results(out)["run_id"].unique()) == 6


def test_claim_run_waits_for_the_holder_then_reports_its_run(tmp_path):
    """A task planned before another process wrote its file is not computed again."""
    out = tmp_path / "out"
    [task] = pending(expand_grid(["synthetic"], ["lbfgs"], out=out), out)
    assert task.stored == "absent"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\n"
            "from crfopt.data.fileio import file_lock\n"
            "with file_lock(sys.argv[1]):\n"
            "    print('held', flush=True); time.sleep(1.0)\n"
            "    from crfopt.bench.results import write_run, to_frame\n"
            f"    write_run(sys.argv[2], to_frame({_rows(task.run_id)!r}), {{}})\n",
            str(run_lock_path(out, task.run_id)),
            str(run_path(out, task.run_id)),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout.readline().strip() == "held"
    t0 = time.monotonic()
    with claim_run(task) as done:
        waited = time.monotonic() - t0
    holder.wait(timeout=60)
    assert waited > 0.3  # it waited for the holder
    assert done is not None and done["status"] == "budget"
    # a task not planned by pending() (stored None) is always computed
    with claim_run(task.with_(stored=None)) as done:
        assert done is None


def test_file_lock_is_exclusive_and_released(tmp_path):
    lock = tmp_path / "locks" / "x.lock"
    with file_lock(lock) as held:
        assert held
        code = (
            "import sys\nfrom crfopt.data.fileio import file_lock\n"
            "with file_lock(sys.argv[1], timeout=0) as h: print(h)"
        )
        busy = subprocess.run([sys.executable, "-c", code, str(lock)], capture_output=True)
        assert busy.stdout.strip() == b"False"
    free = subprocess.run([sys.executable, "-c", code, str(lock)], capture_output=True)
    assert free.stdout.strip() == b"True"


def test_stale_tmp_files_are_cleaned_young_ones_kept(tmp_path):
    old, young, other = tmp_path / ".tmp-old.npz", tmp_path / ".tmp-young.npz", tmp_path / "x"
    for f in (old, young, other):
        f.write_bytes(b"")
    past = time.time() - 3600
    os.utime(old, (past, past))
    os.utime(other, (past, past))
    assert clean_stale_tmp(tmp_path) == 1
    assert not old.exists() and young.exists() and other.exists()


# ------------------------------------------------------------------ featurization cache


@pytest.fixture
def empty_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CRFOPT_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache" / "problems"


def _build_counter():
    calls = []

    def build():
        calls.append(1)
        return crfopt.make_synthetic(n=12, labels=3, attributes=5, length=4, seed=3)

    return build, calls


def _sparse_build():
    seqs = crfopt.Sequences(
        lengths=np.array([2, 3]),
        labels=np.array([0, 1, 1, 0, 2]),
        indptr=np.array([0, 2, 3, 5, 6, 8]),
        indices=np.array([0, 1, 1, 2, 3, 0, 1, 3]),
    )
    return crfopt.CRFProblem(seqs, n_labels=3, n_attributes=4, lam=0.1)


def _entry(cache_dir: Path) -> Path:
    [entry] = cache_dir.glob("*.npz")
    return entry


def _rewrite_entry(entry: Path, change) -> None:
    """Tamper with an entry the way an editor would: change arrays, recompute checksums."""
    with np.load(entry) as z:
        arrays = {k: z[k].copy() for k in z.files}
    meta = json.loads(bytes(arrays.pop("meta")).decode())
    change(arrays, meta)
    meta["arrays_sha256"] = cache_mod.arrays_digest(arrays)
    with open(entry, "wb") as f:
        np.savez(f, meta=cache_mod._text(meta), **arrays)


@pytest.mark.parametrize("how", ["empty", "truncated", "bitflip", "tampered-labels"])
def test_damaged_cache_entry_is_deleted_and_rebuilt_with_a_warning(empty_cache, how):
    build, calls = _build_counter()
    first = cache_mod.cached_problem("t", {"k": 1}, build)
    entry = _entry(empty_cache)
    if how == "bitflip":
        raw = bytearray(entry.read_bytes())
        raw[len(raw) // 3] ^= 0x04
        entry.write_bytes(bytes(raw))
    elif how == "tampered-labels":

        def change(arrays, meta):
            arrays["train.y"][0] = meta["n_labels"] + 5  # an id the kernels would read past

        _rewrite_entry(entry, change)
    else:
        _damage(entry, how)
    with pytest.warns(cache_mod.CacheWarning, match=f"{entry.name}.*deleted and rebuilt"):
        again = cache_mod.cached_problem("t", {"k": 1}, build)
    assert len(calls) == 2
    np.testing.assert_array_equal(again.labels, first.labels)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the rebuilt entry is good again
        cache_mod.cached_problem("t", {"k": 1}, build)
    assert len(calls) == 2


def test_cache_checks_sparse_ids_against_the_sizes(empty_cache):
    p = _sparse_build()
    arrays, meta = p.to_arrays()
    meta["arrays_sha256"] = cache_mod.arrays_digest(arrays)
    cache_mod.check_entry(arrays, meta)  # the genuine entry passes
    for name, pos, value, match in [
        ("train.indices", 0, 9, "attribute ids"),
        ("train.local", 0, 7, "local ids"),
        ("train.offsets", 1, 9, "offsets"),
    ]:
        bad = {k: v.copy() for k, v in arrays.items()}
        bad[name][pos] = value
        bad_meta = {**meta, "arrays_sha256": cache_mod.arrays_digest(bad)}
        with pytest.raises(cache_mod.DamagedEntryError, match=match):
            cache_mod.check_entry(bad, bad_meta)
    with pytest.raises(cache_mod.DamagedEntryError, match="checksum"):
        cache_mod.check_entry(arrays, {**meta, "arrays_sha256": "0" * 64})


def test_unseen_test_labels_are_not_damage(empty_cache):
    """A test split may hold labels training never had (id -1, always an error); the
    cache must keep such an entry, not delete and rebuild it on every load. A training
    label of -1, or a test id below -1, is damage."""

    def build():
        test = crfopt.Sequences(
            lengths=np.array([2]),
            labels=np.array([-1, 1]),
            indptr=np.array([0, 1, 2]),
            indices=np.array([0, 3]),
        )
        train = crfopt.Sequences(
            lengths=np.array([2, 3]),
            labels=np.array([0, 1, 1, 0, 2]),
            indptr=np.array([0, 2, 3, 5, 6, 8]),
            indices=np.array([0, 1, 1, 2, 3, 0, 1, 3]),
        )
        return crfopt.CRFProblem(train, n_labels=3, n_attributes=4, lam=0.1, test=test)

    calls = []

    def counted():
        calls.append(1)
        return build()

    cache_mod.cached_problem("u", {"k": 1}, counted)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = cache_mod.cached_problem("u", {"k": 1}, counted)
    assert len(calls) == 1
    arrays, meta = again.to_arrays()
    assert arrays["test.y"].min() == -1
    for name, value in [("train.y", -1), ("test.y", -2)]:
        bad = {k: v.copy() for k, v in arrays.items()}
        bad[name][0] = value
        bad_meta = {**meta, "arrays_sha256": cache_mod.arrays_digest(bad)}
        with pytest.raises(cache_mod.DamagedEntryError, match="label ids"):
            cache_mod.check_entry(bad, bad_meta)


def test_full_cache_disk_is_a_warning_not_an_error(empty_cache, monkeypatch):
    def no_space(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(cache_mod, "atomic_write", no_space)
    build, _ = _build_counter()
    with pytest.warns(cache_mod.CacheWarning, match="No space left"):
        problem = cache_mod.cached_problem("t", {"k": 2}, build, lam=0.5)
    assert problem.lam == 0.5 and problem.n == 12
    assert not list(empty_cache.glob("*.npz"))


def test_cache_entry_uses_the_umask(empty_cache):
    old = os.umask(0o027)
    try:
        build, _ = _build_counter()
        cache_mod.cached_problem("t", {"k": 3}, build)
    finally:
        os.umask(old)
    assert os.stat(_entry(empty_cache)).st_mode & 0o777 == 0o640


def test_stale_cache_tmp_files_are_removed_on_load(empty_cache):
    empty_cache.mkdir(parents=True)
    stale, fresh = empty_cache / ".tmp-dead.npz", empty_cache / ".tmp-live.npz"
    stale.write_bytes(b"")
    fresh.write_bytes(b"")
    os.utime(stale, (time.time() - 7200,) * 2)
    build, _ = _build_counter()
    cache_mod.cached_problem("t", {"k": 4}, build)
    assert not stale.exists() and fresh.exists()


# ------------------------------------------------------------------ run identity


def test_run_id_of_a_builtin_problem_follows_its_data_files(tmp_path, monkeypatch):
    """letter.data dropped beside ocr.mat changes what `ocr` loads: old runs must not count."""
    data = tmp_path / "data"
    (data / "ocr").mkdir(parents=True)
    src = Path(os.environ["CRFOPT_DATA"]) / "ocr" / "ocr.mat"
    if not src.is_file():
        pytest.skip("ocr.mat not available")
    (data / "ocr" / "ocr.mat").symlink_to(src)
    monkeypatch.setenv("CRFOPT_DATA", str(data))
    monkeypatch.setenv("CRFOPT_CACHE", str(tmp_path / "cache"))

    def rid():
        [t] = expand_grid(["ocr"], ["lbfgs"], out=tmp_path / "out")
        return t.run_id

    base = rid()
    assert rid() == base  # deterministic
    letter = data / "ocr" / "letter.data"
    letter.write_text("1\ta\t0\t1\t0\t0\t" + "\t".join(["0"] * 128) + "\n")
    with_letter = rid()
    assert with_letter != base
    letter.write_text("2\tb\t0\t1\t0\t0\t" + "\t".join(["1"] * 128) + "\n")
    assert rid() not in (base, with_letter)
    letter.unlink()
    assert rid() == base
    # a problem without data files (synthetic) keeps an id without a data entry
    [t] = expand_grid(["synthetic"], ["lbfgs"], out=tmp_path / "out")
    assert "data" not in t.config["problem"]
