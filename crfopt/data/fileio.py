"""One way to write a state file: complete or not at all, durable, with the user's umask.

Results, models, the featurization cache and the P* cache all go through
:func:`atomic_write`, so a crash or a full disk never leaves a half-written file under
the final name, a finished file survives a power cut (the data and the rename are
fsync'd), and files get the permissions the user's umask gives a new file (``mkstemp``
alone would make them 0600, unreadable by the user's group even where the umask allows).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

_UMASK_LOCK = threading.Lock()


def current_umask() -> int:
    """The process umask (read by setting and restoring it; serialized across threads)."""
    with _UMASK_LOCK:
        mask = os.umask(0o022)
        os.umask(mask)
    return mask


def _fsync_dir(directory: Path) -> None:
    # Makes the rename itself durable; not every platform/filesystem allows it.
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


@contextlib.contextmanager
def atomic_write(
    path: str | os.PathLike[str], *, mode: str = "wb", suffix: str = ""
) -> Iterator[IO]:
    """Open a temporary file beside ``path``; on success it replaces ``path`` atomically.

    The temporary file is named ``.tmp-*`` in the same folder (so the rename never
    crosses filesystems). On any error, including KeyboardInterrupt, it is removed and
    ``path`` is left as it was.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> target = pathlib.Path(tempfile.mkdtemp()) / "x.txt"
    >>> with atomic_write(target, mode="w") as f:
    ...     _ = f.write("done")
    >>> target.read_text()
    'done'
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=suffix, dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~current_umask())
        with os.fdopen(fd, mode) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)


#: A ``.tmp-*`` file untouched for this long belongs to a writer that died (a live
#: writer's file is modified as it is written); younger ones may be another process's.
STALE_TMP_SECONDS = 15 * 60


def clean_stale_tmp(
    directory: str | os.PathLike[str], *, max_age: float = STALE_TMP_SECONDS
) -> int:
    """Remove ``.tmp-*`` files older than ``max_age`` seconds in ``directory``; how many.

    :func:`atomic_write` removes its temporary file on any error, but a killed process
    (SIGKILL, power cut) cannot; such leftovers are cleaned here. Files a concurrent
    writer is still filling are younger than ``max_age`` and stay.
    """
    directory = Path(directory)
    if not directory.is_dir():
        return 0
    now = time.time()
    removed = 0
    for f in directory.glob(".tmp-*"):
        with contextlib.suppress(OSError):  # gone meanwhile, or not ours to remove
            if f.is_file() and now - f.stat().st_mtime > max_age:
                f.unlink()
                removed += 1
    return removed


@contextlib.contextmanager
def file_lock(path: str | os.PathLike[str], *, timeout: float = -1) -> Iterator[bool]:
    """Hold an inter-process lock on ``path`` (a lock file, created if needed).

    Yields True once the lock is held; with ``timeout`` >= 0 it yields False when the
    lock could not be taken within that many seconds (0: do not wait). The lock is an
    OS file lock (``filelock``), so it is released when the holder exits or is killed:
    a crashed process never leaves a run locked. Used for result runs
    (:func:`crfopt.bench.plan.claim_run`); usable for any state file that two processes
    might compute at once.
    """
    from filelock import FileLock, Timeout

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(path), mode=0o666 & ~current_umask())
    try:
        lock.acquire(timeout=timeout)
    except Timeout:
        yield False
        return
    try:
        yield True
    finally:
        lock.release()
