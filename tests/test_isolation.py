"""The suite never writes into the user's cache (tests/conftest.py::_isolated_cache)."""

from __future__ import annotations

import os
from pathlib import Path

from crfopt.data.paths import cache_dir


def test_cache_is_the_sessions_own(tmp_path_factory):
    root = Path(os.environ["CRFOPT_CACHE"]).resolve()
    expected = os.environ.get("CRFOPT_TEST_CACHE")
    if expected:
        assert root == Path(expected).resolve()
    else:
        assert root.is_relative_to(tmp_path_factory.getbasetemp().resolve())
    assert cache_dir("optima").resolve().is_relative_to(root)
