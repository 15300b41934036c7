"""The cache behind ``crfopt list`` (crfopt/apps/cli/listing.py) is never stale.

Each call runs in a fresh interpreter, as a user's would: in one process the plugin
modules stay imported and a stale listing could not be told from a stale module. The
truth is what the plugin files say at the time of the call.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

PLUGIN = """
import crfopt


@crfopt.hookimpl
def crfopt_register_problems():
    return [crfopt.ProblemSpec(name={name!r}, load=lambda: None, summary={summary!r})]
"""


def write_plugin(folder: Path, stem: str, name: str, summary: str) -> None:
    (folder / f"{stem}.py").write_text(
        textwrap.dedent(PLUGIN.format(name=name, summary=summary)), encoding="utf-8"
    )


def crfopt_list(plugin_dir: Path, cache: Path, **env: str) -> str:
    out = subprocess.run(
        [sys.executable, "-m", "crfopt", "list", "problems", "--plugin-dir", str(plugin_dir)],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "CRFOPT_CACHE": str(cache), "COLUMNS": "300", **env},
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout + out.stderr


def cache_files(cache: Path) -> list[Path]:
    return sorted((cache / "cli").glob("list-*.json")) if (cache / "cli").is_dir() else []


@pytest.fixture
def setup(tmp_path):
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    cache = tmp_path / "cache"
    cache.mkdir()
    return plugins, cache


def test_a_changed_or_added_plugin_file_is_listed_at_once(setup):
    plugins, cache = setup
    write_plugin(plugins, "probe", "w6-probe", "first summary")
    first = crfopt_list(plugins, cache)
    assert "first summary" in first
    assert len(cache_files(cache)) == 1
    # served from the cache: the same text, byte for byte, as the uncached listing
    assert crfopt_list(plugins, cache) == first
    assert crfopt_list(plugins, cache, CRFOPT_NO_LIST_CACHE="1") == first

    write_plugin(plugins, "probe", "w6-probe", "the second, longer summary")
    assert "the second, longer summary" in crfopt_list(plugins, cache)

    write_plugin(plugins, "another", "w6-other", "a new file")
    out = crfopt_list(plugins, cache)
    assert "a new file" in out and "the second, longer summary" in out

    (plugins / "another.py").unlink()
    assert "a new file" not in crfopt_list(plugins, cache)


def test_a_failing_plugin_is_reported_on_every_call(setup):
    plugins, cache = setup
    (plugins / "broken.py").write_text("raise RuntimeError('w6 broken plugin')\n")
    for _ in range(2):
        out = crfopt_list(plugins, cache)
        assert "w6 broken plugin" in out and "plugins that failed to load" in out
    assert cache_files(cache) == []  # only a clean load is cached


def test_disabling_a_plugin_is_not_served_a_listing_that_has_it(setup):
    plugins, cache = setup
    write_plugin(plugins, "probe", "w6-probe", "present")
    assert "present" in crfopt_list(plugins, cache)
    assert "present" not in crfopt_list(plugins, cache, CRFOPT_DISABLE_PLUGINS="probe")
