"""The reproduction's packs: every run of a grid in one committed Parquet file, and back.

reports/reproduce.py packs a grid after running it and unpacks the pack into its working
folder before a rerun (its docstring, "Stored runs").
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd

import crfopt

_META_COLUMN = "_run_meta"


def pack_runs(runs_dir: Path, path: Path) -> int:
    """Write every run stored in ``runs_dir`` into the pack at ``path``; returns the
    pack's size in bytes.

    One table (zstd, level 19: written once, read often) holding every run's rows and, in
    the column ``_run_meta`` of each run's first row, its metadata as JSON. No pandas or
    Arrow schema block in the footer (dtypes are restored from crfopt's result schema on
    read): that footer would cost more than the rows. Damaged run files are left out
    (``crfopt.read_results`` warns about them).
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    frame = crfopt.read_results(runs_dir)
    runs = frame.attrs.get("runs", {})
    frame = frame.sort_values(["optimizer", "seed", "run_id", "checkpoint"], kind="stable")
    frame = frame.reset_index(drop=True)
    first = ~frame["run_id"].duplicated()
    meta = pd.Series(pd.NA, index=frame.index, dtype="string")
    meta[first] = [
        json.dumps(runs[r], sort_keys=True, separators=(",", ":")) for r in frame["run_id"][first]
    ]
    frame[_META_COLUMN] = meta
    table = pa.Table.from_pandas(frame, preserve_index=False)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".tmp-{path.name}")
    pq.write_table(table, tmp, compression="zstd", compression_level=19, store_schema=False)
    os.replace(tmp, path)
    return path.stat().st_size


def read_pack(path: Path) -> pd.DataFrame:
    """A pack as ``crfopt.read_results`` returns a folder: the traces in crfopt's result
    schema, ``attrs["runs"]`` the metadata; each run's trace checksum is verified."""
    import pyarrow.parquet as pq

    from crfopt.bench.results import COLUMNS, trace_digest

    frame = pq.read_table(path).to_pandas()
    if _META_COLUMN not in frame:
        raise ValueError(f"{path}: not a pack of reports/reproduce.py (no {_META_COLUMN} column)")
    metas = frame[_META_COLUMN].dropna()
    runs = {frame.at[i, "run_id"]: json.loads(m) for i, m in metas.items()}
    frame = frame.drop(columns=[_META_COLUMN])
    frame = frame.astype({c: COLUMNS.get(c, "Float64") for c in frame.columns})
    for rid, run in frame.groupby("run_id", sort=False):
        expected = runs.get(rid, {}).get("trace_sha256")
        if expected is None or trace_digest(_own_columns(run)) != expected:
            raise ValueError(
                f"{path}: run {rid}'s trace does not match its checksum (the pack was changed "
                "or damaged; rebuild it with `python reports/reproduce.py --only ...`)"
            )
    frame.attrs["runs"] = runs
    return frame


def _own_columns(run: pd.DataFrame) -> pd.DataFrame:
    """A run's rows without the metric columns only other runs of the pack have."""
    from crfopt.bench.results import COLUMNS

    drop = [c for c in run.columns if c not in COLUMNS and run[c].isna().all()]
    return run.drop(columns=drop).reset_index(drop=True)


def unpack_runs(path: Path, out: Path) -> int:
    """Write the runs of the pack at ``path`` missing from the folder ``out`` back as run
    files, so that ``crfopt.compare`` sees them and computes only the others. Returns how
    many."""
    from crfopt.bench.results import result_files, run_path, write_run

    if not path.exists():
        return 0
    have = {f.stem.removeprefix("run-") for f in result_files(out)} if out.exists() else set()
    frame = read_pack(path)
    runs = frame.attrs["runs"]
    count = 0
    for rid, run in frame.groupby("run_id", sort=False):
        if rid in have:
            continue
        meta = {k: v for k, v in runs[rid].items() if k != "trace_sha256"}
        write_run(run_path(out, rid), _own_columns(run), meta)
        count += 1
    return count
