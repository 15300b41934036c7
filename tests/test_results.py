"""Result files: schema, atomic writes, metadata, reading back."""

from __future__ import annotations

import os

import pandas as pd
import pytest

from crfopt.results import (
    COLUMNS,
    read_results,
    read_run_meta,
    run_key,
    to_frame,
    write_run,
)


def _rows(rid="abc"):
    return [
        {
            "problem": "p",
            "optimizer": "o[x=1]",
            "params": '{"x":1}',
            "seed": 0,
            "run_id": rid,
            "checkpoint": 0,
            "iterations": 0,
            "oracle_calls": 0,
            "forward_calls": 0,
            "updates": 0,
            "effective_passes": 0.0,
            "time_s": 0.0,
            "primal": 1.0,
            "status": "running",
        },
        {
            "problem": "p",
            "optimizer": "o[x=1]",
            "params": '{"x":1}',
            "seed": 0,
            "run_id": rid,
            "checkpoint": 1,
            "iterations": 5,
            "oracle_calls": 5,
            "forward_calls": 0,
            "updates": 5,
            "effective_passes": 1.0,
            "time_s": 0.1,
            "primal": 0.5,
            "dual": 0.4,
            "status": "budget",
        },
    ]


def test_roundtrip_with_nulls(tmp_path):
    frame = to_frame(_rows())
    assert list(frame.columns) == list(COLUMNS)
    assert frame["dual"].isna().iloc[0] and frame["dual"].iloc[1] == 0.4
    write_run(tmp_path / "run-abc.parquet", frame, {"run_id": "abc", "note": "x"})
    back = read_results(tmp_path, expand_params=True)
    pd.testing.assert_frame_equal(back[list(COLUMNS)], frame)
    assert back["param.x"].tolist() == [1, 1]
    meta = read_run_meta(tmp_path / "run-abc.parquet")
    assert meta["note"] == "x" and meta["provenance"]["schema_version"] == 1
    assert "numba" in meta["provenance"] and back.attrs["runs"]["abc"]["note"] == "x"


def test_partial_files_are_ignored(tmp_path):
    write_run(tmp_path / "run-a.parquet", to_frame(_rows("a")), {"run_id": "a"})
    (tmp_path / ".tmp-xyz.parquet").write_bytes(b"PAR1 half written")
    back = read_results(tmp_path)
    assert set(back["run_id"]) == {"a"}


def test_key_is_order_independent():
    a = run_key({"optimizer": "sdca", "params": {"a": 1, "b": 2}, "seed": 0})
    b = run_key({"seed": 0, "params": {"b": 2, "a": 1}, "optimizer": "sdca"})
    assert a == b and a != run_key({"optimizer": "sdca", "params": {"a": 1, "b": 3}, "seed": 0})


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores directory permissions")
def test_read_only_folder_is_a_clear_error(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        with pytest.raises(OSError):
            write_run(ro / "run-x.parquet", to_frame(_rows("x")), {})
        assert list(ro.iterdir()) == []
    finally:
        ro.chmod(0o700)
