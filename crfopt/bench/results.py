"""Results: one tidy row per checkpoint, one Parquet file per run (docs/architecture.md "Results").

Every optimizer's trace has the same columns, with nulls where a quantity does not exist
for a method. A run's file is named by the hash of its full configuration and written
atomically (temporary file + rename), so an interrupted comparison never leaves a partial
file that a later read could mistake for a finished run. Provenance (versions, host, git
revision, schema version, the run's configuration, its final counters, its error) lives
in the Parquet file's key-value metadata rather than in columns.

Every file is verified when read: Parquet page checksums (CRC of every data page), a
SHA-256 of the trace's values and one of the metadata, both stored in the file. A file
that fails any check (truncated, 0 bytes, a flipped bit) raises
:class:`DamagedResultError` naming it; :func:`read_results` warns and skips it, and
planning moves it aside (:func:`quarantine`) so that the run is computed again.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import socket
import subprocess
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from crfopt.data.fileio import atomic_write
from crfopt.kernels.jit import JIT_ENABLED

SCHEMA_VERSION = 2

#: Column name → pandas dtype, in the order of docs/architecture.md "Results". Nullable
#: dtypes, so a missing quantity is a real null in Parquet and in the DataFrame, never a sentinel.
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
    # a true gap P(w) - D(dual point) >= P(w) - P*; the dual point differs by method (SDCA
    # and OEG: their own μ; primal methods: ν(w), gap ‖∇P(w)‖²/(2λ)): docs/algorithms.md §1.4
    "duality_gap": "Float64",
    "gap_estimate": "Float64",
    "train_error": "Float64",
    "test_error": "Float64",
    "status": "string",
    # Where the run was computed; the same on every row of a run, null in files written
    # before these columns (they are still read and verified, see trace_digest).
    "backend": "string",  # serial, joblib or dask: what the seconds axis was measured on
    "threads": "Int64",  # threads the kernels could use (numba's, 1 without the JIT)
    "worker": "string",  # host and process id, or the Dask worker's address
}

#: Columns added after files were first checksummed: a trace whose column is all null
#: hashes without it, so a file written before it existed still verifies, while a
#: value in it is covered by the digest like any other.
RUN_COLUMNS = ("backend", "threads", "worker")

#: Metric plugins (``crfopt_register_metrics``) add one Float64 column each, named after
#: the metric and placed after these in sorted order; a run on a problem a metric does not
#: apply to has no such column, and reading gives null there. ``test_error`` is a schema
#: column that the built-in ``test_error`` metric fills (plugins/metrics.py).


def schema_columns(frame: pd.DataFrame) -> list[str]:
    """The stored columns of a trace: :data:`COLUMNS`, then its metric columns, sorted."""
    return list(COLUMNS) + sorted(c for c in frame.columns if c not in COLUMNS)


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
#: SHA-256 of the metadata JSON (the trace's own SHA-256 is inside that JSON).
_META_DIGEST_KEY = b"crfopt.sha256"
#: Where unreadable run files are moved, inside the results folder.
DAMAGED_DIR = "damaged"


class DamagedResultError(ValueError):
    """A result file that cannot be read or fails its checksums; ``path`` names it."""

    def __init__(self, path: str | os.PathLike[str], reason: str) -> None:
        self.path = Path(path)
        self.reason = reason
        super().__init__(f"damaged result file {self.path}: {reason}")


class ResultFileWarning(UserWarning):
    """A result file was skipped or moved aside because it is damaged."""


def trace_digest(frame: pd.DataFrame) -> str:
    """SHA-256 of a trace's values in the result schema (column names, dtypes, nulls)."""
    # a trace without metric columns hashes exactly as before they existed (old files verify)
    cols = schema_columns(frame)
    frame = frame[cols].astype({**COLUMNS, **{c: "Float64" for c in cols if c not in COLUMNS}})
    cols = [c for c in cols if c not in RUN_COLUMNS or frame[c].notna().any()]
    frame = frame[cols]
    h = hashlib.sha256(canonical_json(cols).encode())
    h.update(pd.util.hash_pandas_object(frame, index=False).to_numpy().tobytes())
    for col in cols:  # per column too: a row hash alone could hide a swap of two cells
        h.update(pd.util.hash_array(frame[col].to_numpy(dtype=object)).tobytes())
    return h.hexdigest()


def empty_frame() -> pd.DataFrame:
    """A zero-row DataFrame with the result schema."""
    return pd.DataFrame({c: pd.Series(dtype=t) for c, t in COLUMNS.items()})


def to_frame(rows: list[Mapping[str, Any]], metrics: Sequence[str] = ()) -> pd.DataFrame:
    """Rows (dicts; missing keys are null) → a DataFrame with exactly the schema columns,
    plus a Float64 column per name in ``metrics`` (metric plugins' columns, sorted)."""
    extra = sorted(set(metrics) - set(COLUMNS))
    dtypes = {**COLUMNS, **dict.fromkeys(extra, "Float64")}
    df = pd.DataFrame([{c: row.get(c) for c in dtypes} for row in rows], columns=list(dtypes))
    for col, dtype in dtypes.items():
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
    table = pa.Table.from_pandas(frame[schema_columns(frame)], preserve_index=False)
    full_meta = {"provenance": provenance(), **dict(meta), "trace_sha256": trace_digest(frame)}
    raw = canonical_json(full_meta).encode()
    existing = table.schema.metadata or {}
    table = table.replace_schema_metadata(
        {**existing, _META_KEY: raw, _META_DIGEST_KEY: hashlib.sha256(raw).hexdigest()}
    )
    with atomic_write(path, suffix=".parquet") as f:  # fsync'd before the rename
        pq.write_table(table, f, write_page_checksum=True)
    return path


def _meta_of(path: Path, md: Mapping[bytes, bytes] | None) -> dict[str, Any]:
    md = md or {}
    raw = md.get(_META_KEY)
    if raw is None:
        raise DamagedResultError(path, "no crfopt metadata (every run file crfopt writes has it)")
    digest = md.get(_META_DIGEST_KEY)
    if digest is not None and hashlib.sha256(raw).hexdigest().encode() != digest:
        raise DamagedResultError(path, "metadata checksum mismatch")
    try:
        meta = json.loads(raw)
    except ValueError as exc:
        raise DamagedResultError(path, f"metadata is not JSON ({exc})") from None
    if not isinstance(meta, dict):
        raise DamagedResultError(path, "metadata is not a JSON object")
    if digest is None and "trace_sha256" in meta:  # written with checksums; one was lost
        raise DamagedResultError(path, "metadata checksum missing")
    return meta


def read_run_meta(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The key-value metadata of one result file (configuration, counters, error…).

    Reads only the file's footer, checking the metadata's checksum; raises
    :class:`DamagedResultError` when the file is not a readable result file.
    """
    path = Path(path)
    try:
        md = pq.read_schema(path).metadata
    except (OSError, pa.ArrowException) as exc:
        raise DamagedResultError(path, f"{type(exc).__name__}: {exc}") from None
    return _meta_of(path, md)


def load_run(path: str | os.PathLike[str]) -> tuple[pd.DataFrame, dict[str, Any]]:
    """One run file's trace (upgraded to the current schema) and metadata, verified.

    Checks the Parquet page checksums, the metadata checksum and the trace checksum (of
    files written with them); raises :class:`DamagedResultError` naming the file when
    any check fails or the file cannot be parsed at all.
    """
    path = Path(path)
    try:
        pf = pq.ParquetFile(path, page_checksum_verification=True)
        meta = _meta_of(path, pf.schema_arrow.metadata)
        table = pf.read()
        version = int(meta.get("provenance", {}).get("schema_version", SCHEMA_VERSION))
        frame = _upgrade(table.to_pandas(), version, meta)
    except DamagedResultError:
        raise
    except (OSError, pa.ArrowException, ValueError, TypeError, KeyError) as exc:
        raise DamagedResultError(path, f"{type(exc).__name__}: {exc}") from None
    expected = meta.get("trace_sha256")
    if expected is not None and trace_digest(frame) != expected:
        raise DamagedResultError(path, "trace checksum mismatch (values changed on disk)")
    return frame, meta


def quarantine(path: str | os.PathLike[str], reason: str = "") -> Path | None:
    """Move a damaged run file to ``<its folder>/damaged/`` with a warning naming it.

    Its run is then missing from the folder, so the next ``compare`` computes it again.
    Returns the new path (None when another process moved or replaced it first).
    """
    path = Path(path)
    target_dir = path.parent / DAMAGED_DIR
    target_dir.mkdir(exist_ok=True)
    target = target_dir / path.name
    i = 0
    while target.exists():
        i += 1
        target = target_dir / f"{path.name}.{i}"
    try:
        os.replace(path, target)
    except FileNotFoundError:
        return None
    warnings.warn(
        f"damaged result file {path} ({reason or 'unreadable'}) moved to {target}; "
        "its run will be computed again",
        ResultFileWarning,
        stacklevel=2,
    )
    return target


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
    cols = schema_columns(frame)  # metric columns are kept (files before them have none)
    return frame[cols].astype({**COLUMNS, **{c: "Float64" for c in cols if c not in COLUMNS}})


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

    A damaged file (see :func:`load_run`) is skipped with a :class:`ResultFileWarning`
    naming it; the other runs are still read.

    Older schema versions are upgraded on read. With ``expand_params`` every parameter
    of the ``params`` JSON becomes a ``param.<name>`` column. ``frame.attrs["runs"]``
    maps each run id to its metadata (configuration, final counters, error, P*).
    """
    frames = []
    runs: dict[str, Any] = {}
    for f in result_files(path):
        if run_ids is not None and f.stem.removeprefix("run-") not in run_ids:
            continue
        try:
            frame, meta = load_run(f)
        except DamagedResultError as exc:
            warnings.warn(f"{exc}; skipped", ResultFileWarning, stacklevel=2)
            continue
        rid = meta.get("run_id") or f.stem.removeprefix("run-")
        frames.append(frame)
        runs[rid] = meta
    frame = pd.concat(frames, ignore_index=True) if frames else empty_frame()
    for col in frame.columns:  # runs without a metric's column are null there
        if col not in COLUMNS:
            frame[col] = frame[col].astype("Float64")
    if expand_params and len(frame):
        params = frame["params"].map(lambda s: json.loads(s) if isinstance(s, str) else {})
        keys = sorted({k for d in params for k in d})
        for k in keys:
            frame[f"param.{k}"] = params.map(lambda d, k=k: d.get(k))
    frame.attrs["runs"] = runs
    return frame
