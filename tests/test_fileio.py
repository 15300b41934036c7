"""State files: atomic, and created with the permissions the user's umask gives."""

from __future__ import annotations

import os
import stat

import numpy as np
import pytest

import crfopt
from crfopt.bench.results import empty_frame, write_run
from crfopt.data.fileio import atomic_write, current_umask


@pytest.fixture(params=[0o022, 0o077, 0o002])
def umask(request):
    old = os.umask(request.param)
    yield request.param
    os.umask(old)


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_current_umask_reads_without_changing_it(umask):
    assert current_umask() == umask
    assert current_umask() == umask


def test_atomic_write_uses_the_umask(tmp_path, umask):
    target = tmp_path / "f.bin"
    with atomic_write(target) as f:
        f.write(b"x")
    assert target.read_bytes() == b"x"
    assert _mode(target) == 0o666 & ~umask


def test_result_and_model_files_use_the_umask(tmp_path, umask):
    run_file = write_run(tmp_path / "run-x.parquet", empty_frame(), {"k": 1})
    assert _mode(run_file) == 0o666 & ~umask
    p = crfopt.make_synthetic(n=4, labels=2, attributes=3, length=2, seed=0)
    model = crfopt.Model.from_problem(p, np.zeros(p.dim))
    model_file = model.save(tmp_path / "m.npz")
    assert _mode(model_file) == 0o666 & ~umask


def test_failed_write_leaves_nothing_behind(tmp_path):
    target = tmp_path / "keep.txt"
    target.write_text("old")
    with pytest.raises(RuntimeError), atomic_write(target, mode="w") as f:
        f.write("half")
        raise RuntimeError("crash in the middle")
    assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.txt"]


def test_downloaded_data_files_use_the_umask(tmp_path, monkeypatch, umask):
    """pooch downloads into a mkstemp file (0600); the stored data file follows the umask."""
    import hashlib
    import tempfile

    import pooch

    from crfopt.data.sources import DataFile, fetch

    content = b"token\tlabel\n"

    def fake_retrieve(url, known_hash, fname, path, **kwargs):
        fd, name = tempfile.mkstemp(dir=path)  # as pooch.utils.temporary_file does
        with os.fdopen(fd, "wb") as f:
            f.write(content)
        return name

    monkeypatch.setattr(pooch, "retrieve", fake_retrieve)
    monkeypatch.setenv("CRFOPT_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("CRFOPT_OFFLINE", raising=False)  # the download is faked above
    df = DataFile("x.txt", "demo", sha256=hashlib.sha256(content).hexdigest(), url="http://x")
    target = fetch(df)
    assert target.read_bytes() == content
    assert _mode(target) == 0o666 & ~umask


def test_lock_files_and_damaged_folder_use_the_umask(tmp_path, umask):
    from crfopt.bench.results import quarantine
    from crfopt.data.fileio import file_lock

    with file_lock(tmp_path / "locks" / "a.lock"):
        pass
    assert _mode(tmp_path / "locks" / "a.lock") == 0o666 & ~umask
    run_file = write_run(tmp_path / "run-x.parquet", empty_frame(), {"k": 1})
    with pytest.warns(UserWarning, match="run-x.parquet"):
        moved = quarantine(run_file, "test")
    assert _mode(moved) == 0o666 & ~umask
    assert _mode(moved.parent) == 0o777 & ~umask
