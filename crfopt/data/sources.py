"""Raw data files: where they are, how to download them and check them.

A problem definition lists its raw files as :class:`DataFile` entries. :func:`locate`
looks for a file in ``$CRFOPT_DATA/<folder>/<name>``, then in the user cache, and
otherwise downloads it into the user cache (the one order used by the library and every
command). A file has a ``url`` only when its licence lets crfopt download it; the
download (pooch) announces its size, shows progress on a terminal and verifies the
sha256 — of the file as stored, or of its decompressed content (``raw_sha256``) when
upstream compresses differently — and a mismatch is an error that leaves no file behind.
``CRFOPT_OFFLINE=1`` forbids downloads (tests, CI, air-gapped machines). A file that is
missing and cannot be downloaded raises :class:`~crfopt.data.paths.DataNotFoundError`
saying where to put it; docs/datasets.md lists the sources.

What is built from these files is cached by :mod:`crfopt.data.cache`, keyed by their
checksums (:func:`sha256_of`, :func:`verify`).
"""

from __future__ import annotations

import gzip
import hashlib
import inspect
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crfopt.data.fileio import current_umask
from crfopt.data.paths import DataNotFoundError, cache_dir

#: Set to 1/true/yes/on to forbid every download (files must then be present).
OFFLINE_ENV = "CRFOPT_OFFLINE"
#: Where the project documents each file's source and licence (named in error messages).
DATASETS_DOC = "docs/datasets.md"


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
        Checksum of the file as stored.
    url : str, optional
        Where crfopt downloads it from; set only when the licence allows an automatic
        download. Without it the file must be put in place by hand.
    raw_sha256 : str, optional
        Checksum of the decompressed content, used when the upstream file is compressed
        differently (or not at all).
    licence : str
        Shown by ``crfopt info`` and ``crfopt fetch``.
    size : int, optional
        Download size in bytes, announced before the download starts.
    source : str
        Where to obtain the file by hand (named when it is missing and has no ``url``).
    """

    name: str
    folder: str
    sha256: str
    url: str | None = None
    raw_sha256: str | None = None
    licence: str = ""
    size: int | None = None
    source: str = ""


def data_roots() -> list[Path]:
    """Where raw files are looked for, in order: ``$CRFOPT_DATA``, then the user cache."""
    roots = []
    env = os.environ.get("CRFOPT_DATA")
    if env:
        roots.append(Path(env).expanduser())
    roots.append(cache_dir("data"))
    return roots


def offline() -> bool:
    """Whether ``CRFOPT_OFFLINE`` forbids downloads."""
    value = os.environ.get(OFFLINE_ENV, "").strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off", ""):
        return False
    raise ValueError(f"{OFFLINE_ENV}={value!r} is not understood: use 1 (no downloads) or 0")


def missing_file_error(df: DataFile, reason: str | None = None) -> DataNotFoundError:
    """The error for a file that is not present: where it was looked for, why it is not
    downloaded, and exactly where to put it."""
    roots = data_roots()
    looked = ", ".join(str(r / df.folder) for r in roots)
    if reason is None:
        if df.url is None:
            reason = (
                "crfopt does not download it"
                + (f" (licence: {df.licence})" if df.licence else "")
                + (f"; obtain it from {df.source}" if df.source else "")
            )
        elif offline():
            reason = (
                f"downloads are off ({OFFLINE_ENV} is set); unset it or run "
                f"`crfopt fetch` where the network is reachable (source: {df.url})"
            )
        else:
            reason = f"it can be downloaded from {df.url}"
    return DataNotFoundError(
        f"{df.folder}/{df.name} not found (looked in {looked}): {reason}. Put the file at "
        f"{roots[-1] / df.folder / df.name}"
        + (f" or at {roots[0] / df.folder / df.name}" if len(roots) > 1 else "")
        + f" (or point CRFOPT_DATA at a folder holding {df.folder}/{df.name}); see "
        f"{DATASETS_DOC}"
    )


def locate(df: DataFile, *, download: bool = True) -> Path:
    """Path of a raw file: ``$CRFOPT_DATA``, then the user cache, then a download.

    The download happens only if ``df`` has a URL, ``download`` is true and
    ``CRFOPT_OFFLINE`` is not set; otherwise, and when the download fails, a
    :class:`DataNotFoundError` says where to put the file. A download with the wrong
    checksum raises :class:`ChecksumError` (nothing is kept).
    """
    for root in data_roots():
        path = root / df.folder / df.name
        if path.is_file():
            return path
    if df.url is None or not download or offline():
        raise missing_file_error(df)
    try:
        return fetch(df, progress=sys.stderr.isatty())
    except ChecksumError:
        raise
    except Exception as exc:  # network, HTTP status, disk: all say "put it there by hand"
        raise missing_file_error(
            df, f"the download from {df.url} failed ({type(exc).__name__}: {exc})"
        ) from exc


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


class _ByteProgress:
    """The tqdm-like object pooch drives (``total``, ``update``, ``reset``, ``close``):
    one self-overwriting stderr line, so a download needs no tqdm."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.total: int | None = None
        self.n = 0

    def update(self, n: int) -> None:
        self.n += n
        # pooch counts whole chunks, so the last update may overshoot the total.
        done = min(self.n, self.total) if self.total else self.n
        total = f" / {_size(self.total)}" if self.total else ""
        print(f"\r  {self.label}: {_size(done)}{total}", end="", file=sys.stderr, flush=True)

    def reset(self) -> None:
        self.n = 0

    def close(self) -> None:
        print(file=sys.stderr, flush=True)


def _size(n: int | None) -> str:
    if n is None:
        return "size unknown"
    return f"{n / 1e6:.1f} MB" if n >= 100_000 else f"{n / 1e3:.1f} kB"


def fetch(df: DataFile, *, progress: bool = False, force: bool = False) -> Path:
    """Download ``df`` from its URL into the user cache and verify it.

    Announces the file, its size and its source on stderr; ``progress`` adds a
    progress line. Accepted when the downloaded bytes have ``sha256``, or their
    (decompressed) content has ``raw_sha256``; a compressed target name gets a gzip of
    verified plain content. On mismatch the download is deleted and
    :class:`ChecksumError` raised. Refused (:class:`DataNotFoundError`) when ``df`` has no
    URL or ``CRFOPT_OFFLINE`` is set.
    """
    import pooch

    pooch.get_logger().setLevel("WARNING")  # we verify checksums ourselves, below
    if df.url is None or offline():
        raise missing_file_error(df)
    target_dir = cache_dir("data", df.folder)
    target = target_dir / df.name
    if target.exists() and not force:
        return target
    print(
        f"downloading {df.folder}/{df.name} ({_size(df.size)}) from {df.url}",
        file=sys.stderr,
        flush=True,
    )
    bar = _ByteProgress(f"{df.folder}/{df.name}") if progress else False
    with tempfile.TemporaryDirectory(dir=target_dir, prefix=".fetch-") as tmp:
        downloaded = Path(
            pooch.retrieve(
                df.url,
                known_hash=None,
                fname="download",
                path=tmp,
                downloader=pooch.HTTPDownloader(progressbar=bar),
            )
        )
        os.chmod(downloaded, 0o666 & ~current_umask())  # pooch's temporary file is 0600
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
        f"({DATASETS_DOC}); the file is not the one this problem was defined on"
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
