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
