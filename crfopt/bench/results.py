"""Results: one tidy row per checkpoint, one Parquet file per run (DESIGN.md "Results").

Every optimizer's trace has the same columns, with nulls where a quantity does not exist
for a method. A run's file is named by the hash of its full configuration and written
atomically (temporary file + rename), so an interrupted comparison never leaves a partial
file that a later read could mistake for a finished run. Provenance (versions, host, git
revision, schema version, the run's configuration, its final counters, its error) lives
in the Parquet file's key-value metadata rather than in columns.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import socket
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from crfopt.data.fileio import atomic_write
from crfopt.kernels.jit import JIT_ENABLED

SCHEMA_VERSION = 2

#: Column name → pandas dtype, in the DESIGN.md order. Nullable dtypes, so a missing
#: quantity is a real null in Parquet and in the DataFrame, never a sentinel.
COLUMNS: dict[str, str] = {
    "problem": "string",
    "optimizer": "string",
    "params": "string",
    "seed": "Int64",
    "run_id": "string",
    "checkpoint": "Int64",
    "iterations": "Int64",
    "oracle_calls": "Int64",
    "forward_calls": "Int64",
    "updates": "Int64",
    "effective_passes": "Float64",
    "time_s": "Float64",
    "init_oracle_calls": "Int64",
    "init_forward_calls": "Int64",
    "init_passes": "Float64",
    "init_time_s": "Float64",
    "primal": "Float64",
    "suboptimality": "Float64",
    "dual": "Float64",
    "duality_gap": "Float64",
    "gap_estimate": "Float64",
    "train_error": "Float64",
    "test_error": "Float64",
    "status": "string",
}

#: Values of the ``status`` column. ``skipped``: the optimizer declined the problem before
#: it was built (``Optimizer.decline``, e.g. the dual would not fit a ``max_memory``
#: limit); the run's one row has zero counters and no objective values, and the reason
#: is in its metadata (``skip_reason``). It is not a failure.
STATUSES = ("running", "converged", "budget", "diverged", "failed", "skipped")

#: What the axis columns mean (README "Comparing optimizers"). ``oracle_calls``,
#: ``forward_calls``, ``effective_passes`` and ``time_s`` count the optimizer's
#: *iterations* only. The work its ``setup()`` does (a dual initialization, a warm start)
#: is in the ``init_*`` columns, the same on every row of a run: ``init_oracle_calls`` and
#: ``init_forward_calls`` (kernel calls made while the optimizer was built),
#: ``init_passes`` = (init_oracle_calls + init_forward_calls) / n, and ``init_time_s``
#: (wall-clock seconds of the construction). Null means unknown (a run killed before it
#: reported, or a file written before schema version 2 without that metadata), never 0.
INIT_COLUMNS = ("init_oracle_calls", "init_forward_calls", "init_passes", "init_time_s")

# Column renames of older schema versions, applied on read (benchopt's way of upgrading).
_RENAMES: dict[int, dict[str, str]] = {}

_META_KEY = b"crfopt"


def empty_frame() -> pd.DataFrame:
    """A zero-row DataFrame with the result schema."""
    return pd.DataFrame({c: pd.Series(dtype=t) for c, t in COLUMNS.items()})


def to_frame(rows: list[Mapping[str, Any]]) -> pd.DataFrame:
    """Rows (dicts; missing keys are null) → a DataFrame with exactly the schema columns."""
    df = pd.DataFrame([{c: row.get(c) for c in COLUMNS} for row in rows], columns=list(COLUMNS))
    for col, dtype in COLUMNS.items():
        if dtype == "Float64":
            df[col] = pd.array(
                [
                    None if v is None or (isinstance(v, float) and np.isnan(v)) else float(v)
                    for v in df[col]
                ],
                dtype="Float64",
            )
        else:
            df[col] = df[col].astype(dtype)
    return df


def canonical_json(obj: Any) -> str:
    """Deterministic JSON (sorted keys, no spaces); floats in repr form."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=_json_default)


def _json_default(obj: Any) -> Any:
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return float(obj)
    if isinstance(obj, np.bool_):
        return bool(obj)
    if isinstance(obj, (set, frozenset, tuple)):
        return list(obj)
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"cannot serialize {type(obj).__name__} in a run configuration")


def run_key(config: Mapping[str, Any]) -> str:
    """The run id: a hash of the canonical configuration (never of pickled objects).

    The configuration holds only names and values — problem name and parameters,
    optimizer name and its fully resolved parameters, seed, budget, checkpoint schedule,
    crfopt version — so the order of options on a command line cannot change it.
    """
    return hashlib.sha256(canonical_json(dict(config)).encode()).hexdigest()[:20]


def run_path(out_dir: str | os.PathLike[str], run_id: str) -> Path:
    return Path(out_dir) / f"run-{run_id}.parquet"


def _git_revision() -> str | None:
    here = Path(__file__).resolve().parent
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=here,
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def provenance() -> dict[str, Any]:
    """Versions, host and revision recorded in every result file."""
    import numba
    import scipy

    from crfopt._version import __version__

    return {
        "crfopt": __version__,
        "schema_version": SCHEMA_VERSION,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "numba": numba.__version__,
        "pandas": pd.__version__,
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "git_revision": _git_revision(),
        "jit": JIT_ENABLED,
    }


def write_run(path: str | os.PathLike[str], frame: pd.DataFrame, meta: Mapping[str, Any]) -> Path:
    """Write one run's trace atomically: a temporary file in the same folder, then rename.

    Raises ``OSError`` with the path in its message when the folder is not writable or
    the disk is full; nothing is left behind in that case.
    """
    path = Path(path)
    unknown = sorted(set(frame["status"].dropna()) - set(STATUSES))
    if unknown:
        raise ValueError(
            f"unknown run status {', '.join(map(repr, unknown))}; the results schema allows "
            f"{', '.join(STATUSES)}"
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    table = pa.Table.from_pandas(frame[list(COLUMNS)], preserve_index=False)
    full_meta = {"provenance": provenance(), **dict(meta)}
    existing = table.schema.metadata or {}
    table = table.replace_schema_metadata({**existing, _META_KEY: canonical_json(full_meta)})
    with atomic_write(path, suffix=".parquet") as f:
        pq.write_table(table, f)
    return path


def read_run_meta(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The key-value metadata of one result file (configuration, counters, error…)."""
    md = pq.read_schema(path).metadata or {}
    raw = md.get(_META_KEY)
    return json.loads(raw) if raw else {}


def _init_from_meta(meta: Mapping[str, Any]) -> dict[str, Any]:
    """The init_* values of a version-1 file, from the metadata it already stored.

    Version 1 kept the initialization counters in ``final_counters`` and its time in
    ``init_seconds`` but not in columns; a value it did not store stays null.
    """
    counters = meta.get("final_counters") or {}
    n = meta.get("n")
    out: dict[str, Any] = {
        "init_oracle_calls": counters.get("init_oracle_calls"),
        "init_forward_calls": counters.get("init_forward_calls"),
        "init_time_s": meta.get("init_seconds"),
        "init_passes": None,
    }
    o, f = out["init_oracle_calls"], out["init_forward_calls"]
    if o is not None and f is not None and n:
        out["init_passes"] = (o + f) / n
    return out


def _upgrade(frame: pd.DataFrame, version: int, meta: Mapping[str, Any]) -> pd.DataFrame:
    for v in range(version, SCHEMA_VERSION):
        frame = frame.rename(columns=_RENAMES.get(v, {}))
    backfill = _init_from_meta(meta) if version < 2 else {}
    for col, dtype in COLUMNS.items():
        if col not in frame:
            frame[col] = pd.Series([backfill.get(col)] * len(frame), dtype=dtype)
    return frame[list(COLUMNS)].astype(COLUMNS)


def result_files(path: str | os.PathLike[str]) -> list[Path]:
    """Finished run files under ``path`` (temporary files of interrupted writes skipped)."""
    p = Path(path)
    if p.is_file():
        return [p]
    return sorted(f for f in p.glob("*.parquet") if not f.name.startswith(".tmp-"))


def read_results(
    path: str | os.PathLike[str],
    *,
    expand_params: bool = False,
    run_ids: set[str] | None = None,
) -> pd.DataFrame:
    """All traces under ``path`` (a folder of run files, or one file) as one DataFrame.

    Older schema versions are upgraded on read. With ``expand_params`` every parameter
    of the ``params`` JSON becomes a ``param.<name>`` column. ``frame.attrs["runs"]``
    maps each run id to its metadata (configuration, final counters, error, P*).
    """
    frames = []
    runs: dict[str, Any] = {}
    for f in result_files(path):
        meta = read_run_meta(f)
        rid = meta.get("run_id") or f.stem.removeprefix("run-")
        if run_ids is not None and rid not in run_ids:
            continue
        version = int(meta.get("provenance", {}).get("schema_version", SCHEMA_VERSION))
        frames.append(_upgrade(pd.read_parquet(f), version, meta))
        runs[rid] = meta
    frame = pd.concat(frames, ignore_index=True) if frames else empty_frame()
    if expand_params and len(frame):
        params = frame["params"].map(lambda s: json.loads(s) if isinstance(s, str) else {})
        keys = sorted({k for d in params for k in d})
        for k in keys:
            frame[f"param.{k}"] = params.map(lambda d, k=k: d.get(k))
    frame.attrs["runs"] = runs
    return frame
