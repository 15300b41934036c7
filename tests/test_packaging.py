"""pyproject's package list and package data against the source tree.

setuptools is given an explicit ``packages`` list (plugins/ and datasets/ ship under other
import names), so a new subpackage, a data file or the typing marker is left out of the
wheel silently unless the list names it. An editable install hides that: it reads the
source tree. These checks read pyproject and the tree, without building a wheel.
"""

from __future__ import annotations

import fnmatch
import sys
from collections.abc import Callable
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - the 3.10 environments of the tox matrix
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
CONFIG = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
SETUPTOOLS = CONFIG["tool"]["setuptools"]


def _package_dir(package: str) -> Path:
    """The folder setuptools takes ``package`` from, through ``package-dir``."""
    top, _, rest = package.partition(".")
    base = ROOT / SETUPTOOLS["package-dir"].get(top, top)
    return base.joinpath(*rest.split(".")) if rest else base


def _package_folders(holds: Callable[[Path], bool]) -> set[str]:
    """The dotted name of every folder under the ``package-dir`` roots that holds a file
    for which ``holds(path)`` is true."""
    found = set()
    for top in SETUPTOOLS["package-dir"]:
        root = _package_dir(top)
        for path in root.rglob("*"):
            parts = path.relative_to(root).parts
            if "__pycache__" in parts or any(part.startswith(".") for part in parts):
                continue
            if path.is_file() and holds(path):
                found.add(".".join([top, *path.parent.relative_to(root).parts]))
    return found


def test_every_package_ships():
    """Every folder with an ``__init__.py`` is in pyproject's package list: a subpackage
    left out installs nowhere but an editable checkout (crfopt.apps.cli once was, and every
    tox env failed with 'No module named crfopt.apps.cli')."""
    found = _package_folders(lambda path: path.name == "__init__.py")
    assert sorted(found - set(SETUPTOOLS["packages"])) == []


def test_every_importable_folder_is_a_listed_package():
    """A folder without ``__init__.py`` that holds modules or data is still importable (a
    namespace package): setuptools warns at every install and leaves its modules out."""
    listed = set(SETUPTOOLS["packages"])
    for package in listed:
        assert _package_dir(package).is_dir(), f"{package} is listed but has no folder"
    missing = _package_folders(lambda path: path.suffix in {".py", ".toml", ".json"}) - listed
    assert not missing, (
        "importable folders missing from packages (setuptools warns; their modules would "
        f"be left out): {sorted(missing)}"
    )


def test_package_data_globs_match_files():
    for package, patterns in SETUPTOOLS["package-data"].items():
        folder = _package_dir(package)
        names = [p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()]
        for pattern in patterns:
            assert fnmatch.filter(names, pattern), f"{package}: {pattern!r} matches no file"


def test_typing_marker_and_licence_ship():
    assert "py.typed" in SETUPTOOLS["package-data"]["crfopt"]
    assert (ROOT / "crfopt" / "py.typed").is_file()
    for name in CONFIG["project"]["license-files"]:
        assert (ROOT / name).is_file(), f"license-files names {name}, which is missing"
