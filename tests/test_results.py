"""Result files: schema, atomic writes, metadata, reading back."""

from __future__ import annotations

import os

import pandas as pd
import pytest

from crfopt.bench.results import (
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
    assert meta["note"] == "x" and meta["provenance"]["schema_version"] == 2
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


def _write_version1(path, meta):
    """A file as schema version 1 wrote it: no init_* columns, version 1 in provenance."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from crfopt.bench.results import INIT_COLUMNS, canonical_json

    frame = to_frame(_rows("old")).drop(columns=list(INIT_COLUMNS))
    table = pa.Table.from_pandas(frame, preserve_index=False)
    full = {"provenance": {"schema_version": 1}, "run_id": "old", **meta}
    table = table.replace_schema_metadata({b"crfopt": canonical_json(full)})
    pq.write_table(table, path)


def test_init_columns_roundtrip(tmp_path):
    rows = [
        {**r, "init_oracle_calls": 40, "init_forward_calls": 2, "init_passes": 2.1} for r in _rows()
    ]
    write_run(tmp_path / "run-abc.parquet", to_frame(rows), {"run_id": "abc"})
    back = read_results(tmp_path)
    assert back["init_oracle_calls"].tolist() == [40, 40]
    assert back["init_passes"].tolist() == [2.1, 2.1]
    assert back["init_time_s"].isna().all()  # not given: null, not 0


def test_version1_files_are_read_and_init_work_recovered_from_metadata(tmp_path):
    _write_version1(
        tmp_path / "run-old.parquet",
        {
            "n": 20,
            "init_seconds": 0.25,
            "final_counters": {"init_oracle_calls": 20, "init_forward_calls": 10},
        },
    )
    back = read_results(tmp_path)
    assert list(back.columns) == list(COLUMNS)
    assert back["init_oracle_calls"].tolist() == [20, 20]
    assert back["init_forward_calls"].tolist() == [10, 10]
    assert back["init_passes"].tolist() == [1.5, 1.5]
    assert back["init_time_s"].tolist() == [0.25, 0.25]


def test_version1_files_without_the_metadata_have_null_init_work(tmp_path):
    _write_version1(tmp_path / "run-old.parquet", {})
    back = read_results(tmp_path)
    assert back["init_passes"].isna().all() and back["init_oracle_calls"].isna().all()
    assert back["primal"].tolist() == [1.0, 0.5]


def test_schema_accepts_skipped_and_refuses_unknown_statuses(tmp_path):
    """A declined run is stored as 'skipped' with its reason; a made-up status is refused
    before anything is written."""
    from crfopt.bench.results import STATUSES

    assert "skipped" in STATUSES
    rows = _rows("sk")[:1]
    rows[0]["status"] = "skipped"
    write_run(tmp_path / "run-sk.parquet", to_frame(rows), {"run_id": "sk", "skip_reason": "why"})
    back = read_results(tmp_path)
    assert list(back["status"]) == ["skipped"]
    assert back.attrs["runs"]["sk"]["skip_reason"] == "why"
    rows[0]["status"] = "exploded"
    with pytest.raises(ValueError, match="unknown run status 'exploded'"):
        write_run(tmp_path / "run-x.parquet", to_frame(rows), {"run_id": "x"})
    assert not (tmp_path / "run-x.parquet").exists()


@pytest.mark.parametrize(("value", "jit"), [("off", True), ("no", True), ("", True), ("on", False)])
def test_jit_switch_is_read_once_and_everywhere_alike(tmp_path, value, jit):
    """CRFOPT_DISABLE_JIT=off used to compile the kernels while run keys said jit: false.
    The kernels, the provenance of results and the run key must say the same thing."""
    import json
    import subprocess
    import sys

    code = (
        "import json, crfopt.kernels as k\n"
        "from crfopt.kernels.jit import JIT_ENABLED\n"
        "from crfopt.bench.results import provenance\n"
        "from crfopt.bench.plan import expand_grid\n"
        "[t] = expand_grid(['synthetic'], ['lbfgs'])\n"
        "print(json.dumps([JIT_ENABLED, k.oracle.__module__, provenance()['jit'],"
        " t.config['jit']]))\n"
    )
    env = {**os.environ, "CRFOPT_DISABLE_JIT": value}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    enabled, kernel_module, prov, key = json.loads(out.stdout.strip().splitlines()[-1])
    assert enabled is jit and prov is jit and key is jit
    # the kernels actually served follow the same switch
    # the compiled twin is a package (its oracles live in crfopt.kernels._numba.oracles)
    assert ("._numba" if jit else "._numpy") in kernel_module, kernel_module


def test_jit_switch_refuses_what_it_does_not_understand():
    import subprocess
    import sys

    env = {**os.environ, "CRFOPT_DISABLE_JIT": "maybe"}
    out = subprocess.run(
        [sys.executable, "-c", "import crfopt.kernels"], env=env, capture_output=True, text=True
    )
    assert out.returncode != 0
    assert "CRFOPT_DISABLE_JIT='maybe' is not understood" in out.stderr
    from crfopt.kernels.jit import jit_disabled

    assert [jit_disabled(v) for v in (None, "0", "FALSE", " Yes ", "1")] == [
        False,
        False,
        False,
        True,
        True,
    ]
