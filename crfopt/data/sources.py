"""Raw data files: where they are, how to download them and check them.

A problem definition lists its raw files as :class:`DataFile` entries. A file is looked
for in ``$CRFOPT_DATA/<folder>/<name>`` (tests and CI point ``CRFOPT_DATA`` at
``../shared/datasets``), then in the user cache; ``crfopt fetch NAME`` downloads it from
its canonical URL with pooch and verifies its sha256 — of the file as stored, or of its
decompressed content (``raw_sha256``) when upstream compresses differently — and a
mismatch is an error that leaves no file behind.

What is built from these files is cached by :mod:`crfopt.data.cache`, keyed by their
checksums (:func:`sha256_of`, :func:`verify`).
"""

from __future__ import annotations

import gzip
import hashlib
import inspect
import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crfopt.data.paths import cache_dir


class ChecksumError(OSError):
    """A downloaded file does not have the expected checksum (it has been removed)."""


@dataclass(frozen=True)
class DataFile:
    """One raw file of a problem.

    Parameters
    ----------
    name : str
        File name as stored (``train.txt.gz``).
    folder : str
        Sub-folder under ``CRFOPT_DATA`` / the cache (``conll2000``).
    sha256 : str
        Checksum of the file as stored (PROVENANCE.md).
    url : str, optional
        Canonical upstream URL for ``crfopt fetch``.
    raw_sha256 : str, optional
        Checksum of the decompressed content, used when the upstream file is compressed
        differently (or not at all).
    licence : str
        Shown by ``crfopt info`` and ``crfopt fetch``.
    """

    name: str
    folder: str
    sha256: str
    url: str | None = None
    raw_sha256: str | None = None
    licence: str = ""


def data_roots() -> list[Path]:
    roots = []
    env = os.environ.get("CRFOPT_DATA")
    if env:
        roots.append(Path(env).expanduser())
    roots.append(cache_dir("data"))
    return roots


def locate(df: DataFile) -> Path:
    """Path of a raw file, or FileNotFoundError saying how to get it."""
    for root in data_roots():
        path = root / df.folder / df.name
        if path.is_file():
            return path
    where = ", ".join(str(r / df.folder) for r in data_roots())
    raise FileNotFoundError(
        f"{df.folder}/{df.name} not found (looked in {where}); set CRFOPT_DATA to a folder "
        f"that holds it{', or run `crfopt fetch`' if df.url else ''}"
    )


def sha256_of(path: str | os.PathLike[str], *, decompress: bool = False) -> str:
    h = hashlib.sha256()
    opener = gzip.open if decompress else open
    with opener(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _is_gzip(path: Path) -> bool:
    with open(path, "rb") as f:
        return f.read(2) == b"\x1f\x8b"


def fetch(df: DataFile, *, progress: bool = False, force: bool = False) -> Path:
    """Download ``df`` from its URL into the user cache and verify it.

    Accepted when the downloaded bytes have ``sha256``, or their (decompressed)
    content has ``raw_sha256``; a compressed target name gets a gzip of verified plain
    content. On mismatch the download is deleted and :class:`ChecksumError` raised.
    """
    import pooch

    pooch.get_logger().setLevel("WARNING")  # we verify checksums ourselves, below
    if df.url is None:
        raise ValueError(f"{df.folder}/{df.name} has no download URL (see PROVENANCE.md)")
    target_dir = cache_dir("data", df.folder)
    target = target_dir / df.name
    if target.exists() and not force:
        return target
    with tempfile.TemporaryDirectory(dir=target_dir, prefix=".fetch-") as tmp:
        downloaded = Path(
            pooch.retrieve(
                df.url, known_hash=None, fname="download", path=tmp, progressbar=progress
            )
        )
        digest = sha256_of(downloaded)
        if digest == df.sha256:
            os.replace(downloaded, target)
            return target
        gz = _is_gzip(downloaded)
        if df.raw_sha256 is not None:
            content = sha256_of(downloaded, decompress=gz)
            if content == df.raw_sha256:
                if df.name.endswith(".gz") and not gz:
                    packed = Path(tmp) / "packed.gz"
                    with open(downloaded, "rb") as src, gzip.open(packed, "wb") as dst:
                        shutil.copyfileobj(src, dst)
                    os.replace(packed, target)
                elif gz and not df.name.endswith(".gz"):
                    plain = Path(tmp) / "plain"
                    with gzip.open(downloaded, "rb") as src, open(plain, "wb") as dst:
                        shutil.copyfileobj(src, dst)
                    os.replace(plain, target)
                else:
                    os.replace(downloaded, target)
                return target
        raise ChecksumError(
            f"checksum mismatch for {df.url}: got sha256 {digest}, expected {df.sha256}"
            + (f" (or content sha256 {df.raw_sha256})" if df.raw_sha256 else "")
            + "; the download was deleted"
        )


def verify(df: DataFile, path: Path) -> str:
    """The sha256 of a located file, checked against the expected values."""
    digest = sha256_of(path)
    if digest == df.sha256:
        return digest
    if df.raw_sha256 is not None and sha256_of(path, decompress=_is_gzip(path)) == df.raw_sha256:
        return digest
    raise ChecksumError(
        f"{path}: sha256 {digest} does not match the expected {df.sha256} "
        f"(PROVENANCE.md); the file is not the one this problem was defined on"
    )


def loader_defaults(load: Callable[..., Any]) -> dict[str, Any]:
    """A dataset loader's keyword parameters and their defaults, for its ``ProblemSpec``.

    Read from the signature so that the defaults ``crfopt info`` shows (and the keys it
    accepts) are the loader's own and cannot drift from them.
    """
    params = inspect.signature(load).parameters.values()
    missing = [p.name for p in params if p.default is inspect.Parameter.empty]
    if missing:
        raise TypeError(f"{load.__qualname__}: parameter(s) without a default: {missing}")
    return {p.name: p.default for p in params}


def files_metadata(files: Sequence[DataFile], paths: Sequence[Path]) -> dict[str, Any]:
    """Provenance entries for ``crfopt info``: where each file came from."""
    return {
        "files": [
            {
                "file": f"{df.folder}/{df.name}",
                "path": str(p),
                "sha256": df.sha256,
                "url": df.url,
                "licence": df.licence,
            }
            for df, p in zip(files, paths)
        ]
    }
