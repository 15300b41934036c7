"""Fail when requirements/ci.txt no longer covers what pyproject.toml asks for.

CI installs with `pip install -c requirements/ci.txt -e ".[test]"`. A constraints file
only caps what is installed: a dependency added to pyproject.toml but missing from the
lock would be installed at whatever version is newest that day, and a floor raised above
the locked pin would make the install fail. Either way the lock is stale; this says so
before anything is installed, offline, for the Python that runs it.

Usage (from the repository root): python requirements/check_lock.py
Fix: refresh the lock with the command in its header (README, "Development").
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

if sys.version_info >= (3, 11):
    import tomllib
else:  # pyproject.toml requires tomli on 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
LOCK = ROOT / "requirements" / "ci.txt"
# the extras the lock is compiled with (its header)
EXTRAS = ("test", "bench", "docs", "slurm", "browser")


def locked_pins(path: Path) -> dict[str, Version]:
    """Name -> pinned version of every line of the lock whose marker holds here."""
    pins: dict[str, Version] = {}
    for raw in path.read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        spec, _, marker = line.partition(";")
        m = re.fullmatch(r"([A-Za-z0-9._-]+)(?:\[[^\]]*\])?==([^\s]+)", spec.strip())
        if m is None:
            raise SystemExit(f"{path}: cannot read {raw!r} (expected 'name==version')")
        if marker.strip() and not Marker(marker.strip()).evaluate():
            continue
        pins[canonicalize_name(m.group(1))] = Version(m.group(2))
    return pins


def required(pyproject: Path) -> list[Requirement]:
    """The project's dependencies plus those of the locked extras (self-references out)."""
    project = tomllib.loads(pyproject.read_text())["project"]
    reqs = [Requirement(r) for r in project["dependencies"]]
    for extra in EXTRAS:
        reqs += [Requirement(r) for r in project["optional-dependencies"][extra]]
    name = canonicalize_name(project["name"])
    return [r for r in reqs if canonicalize_name(r.name) != name]


def problems(reqs: list[Requirement], pins: dict[str, Version]) -> list[str]:
    out = []
    for req in reqs:
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        pin = pins.get(canonicalize_name(req.name))
        if pin is None:
            out.append(f"{req}: not in the lock")
        elif not req.specifier.contains(pin, prereleases=True):
            out.append(f"{req}: the lock pins {req.name}=={pin}")
    return out


def main() -> int:
    found = problems(required(ROOT / "pyproject.toml"), locked_pins(LOCK))
    if found:
        print(f"{LOCK.relative_to(ROOT)} is stale for pyproject.toml:", file=sys.stderr)
        for line in found:
            print(f"  {line}", file=sys.stderr)
        print("refresh it with the command in its header (README, Development)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
