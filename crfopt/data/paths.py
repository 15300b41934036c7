"""Where crfopt keeps what it computes: the user cache, overridable by ``CRFOPT_CACHE``."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir(*parts: str) -> Path:
    """``$CRFOPT_CACHE/<parts>`` if set, else the platform's user cache (``…/crfopt``)."""
    root = os.environ.get("CRFOPT_CACHE")
    if root:
        base = Path(root).expanduser()
    else:
        import pooch

        base = Path(pooch.os_cache("crfopt"))
    path = base.joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path


class DataNotFoundError(FileNotFoundError):
    """A raw data file is neither under ``CRFOPT_DATA`` nor in the user cache, and cannot
    be downloaded (its licence forbids it, downloads are off, or the download failed).

    The message names the file, where it was looked for and where to put it.
    """
