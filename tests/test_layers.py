"""The dependency rule of docs/architecture.md, enforced on every import in the code.

Layers are subpackages of ``crfopt``; an import may only point down the table below or
stay in its own layer. Function-level imports count as much as module-level ones (a
lazy import is still a dependency). Plugins and dataset modules use the public API only.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "crfopt"

#: layer → the layers it may import (besides itself). kernels ← core ← optim ← bench ← apps,
#: with data beside core (it produces problems; only bench and apps use it).
ALLOWED: dict[str, frozenset[str]] = {
    "kernels": frozenset(),
    "core": frozenset({"kernels"}),
    "data": frozenset({"core", "kernels"}),
    "optim": frozenset({"core", "kernels"}),
    "bench": frozenset({"optim", "core", "data", "kernels"}),
    "apps": frozenset({"bench", "optim", "core", "data", "kernels"}),
}
#: top-level modules of the package and the layer they belong to.
TOP_LEVEL = {"__main__": "apps", "testing": "bench"}
#: modules any layer may import: the version string.
NEUTRAL = {"crfopt._version"}


def imported_modules(source: str, module: str, is_package: bool) -> list[tuple[int, str]]:
    """(line, absolute module) of every import in ``source``, at any depth.

    ``from X import name`` yields ``X.name`` when that is a module of the package (a
    submodule import), else ``X``; imports under ``if TYPE_CHECKING:`` are skipped (no
    run-time edge).
    """
    tree = ast.parse(source)
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for sub in node.body:
                skip.update(id(n) for n in ast.walk(sub))
    package = module if is_package else module.rpartition(".")[0]
    out = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            out.extend((node.lineno, a.name) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1])
                target = f"{base}.{node.module}" if node.module else base
            else:
                target = node.module or ""
            for a in node.names:
                sub = f"{target}.{a.name}"
                out.append((node.lineno, sub if _is_module(sub) else target))
    return out


def _is_module(dotted: str) -> bool:
    """Whether ``a.b.c`` names a module or package of this repository's crfopt."""
    parts = dotted.split(".")
    if parts[0] != "crfopt":
        return False
    base = REPO.joinpath(*parts)
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def layer_of(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "crfopt" or len(parts) == 1:
        return None
    return TOP_LEVEL.get(parts[1], parts[1] if parts[1] in ALLOWED else None)


def violations_in(source: str, module: str, is_package: bool = False) -> list[str]:
    """Wrong-way imports of one module of the package, as readable lines."""
    own = layer_of(module)
    bad = []
    for line, target in imported_modules(source, module, is_package):
        if not target.startswith("crfopt") or target in NEUTRAL:
            continue
        if target.split(".")[0] != "crfopt":
            continue
        if target == "crfopt" or (target.count(".") == 1 and layer_of(target) is None):
            if target.partition(".")[2] not in ("_version",):
                bad.append(f"{module}:{line}: imports the facade {target!r}; import the module")
            continue
        dest = layer_of(target)
        if dest is None or dest == own:
            continue
        if own is None or dest not in ALLOWED[own]:
            bad.append(f"{module}:{line}: {own} must not import {dest} ({target})")
    return bad


def package_modules() -> list[tuple[Path, str, bool]]:
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(REPO).with_suffix("")
        parts = list(rel.parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts = parts[:-1]
        out.append((path, ".".join(parts), is_package))
    return out


def test_every_module_belongs_to_a_layer():
    stray = [
        m
        for _, m, _ in package_modules()
        if m not in ("crfopt", "crfopt._version") and layer_of(m) is None
    ]
    assert not stray, f"modules outside the layers of docs/architecture.md: {stray}"


def test_imports_point_down_the_layers():
    bad = []
    for path, module, is_package in package_modules():
        if module == "crfopt":
            continue  # the lazy facade: imports only _version at run time (checked below)
        bad.extend(violations_in(path.read_text(encoding="utf-8"), module, is_package))
    assert not bad, "\n".join(bad)


def test_the_facade_imports_nothing_at_run_time():
    targets = imported_modules((PACKAGE / "__init__.py").read_text(), "crfopt", True)
    runtime = {t for _, t in targets if t.startswith("crfopt")}
    assert runtime <= {"crfopt._version", "crfopt._version.__version__"}, runtime


@pytest.mark.parametrize(
    ("module", "source", "expected"),
    [
        ("crfopt.core.problem", "from crfopt.bench import runner\n", "core must not import bench"),
        (
            "crfopt.optim.registry",
            "def f():\n    from crfopt.data.corpus import load_corpus\n",
            "optim must not import data",
        ),
        ("crfopt.kernels.jit", "from ..core import problem\n", "kernels must not import core"),
        ("crfopt.data.readers", "import crfopt\n", "imports the facade"),
        ("crfopt.core.dual", "from crfopt import apps\n", "core must not import apps"),
    ],
)
def test_a_wrong_way_import_is_caught(module, source, expected):
    found = violations_in(source, module)
    assert found and expected in found[0], found


def test_a_right_way_import_passes():
    src = "from crfopt.core.problem import CRFProblem\nfrom ..kernels import jit\n"
    assert violations_in(src, "crfopt.optim.contract") == []


def _public_only(path: Path) -> list[str]:
    bad = []
    for line, target in imported_modules(path.read_text(encoding="utf-8"), "plugin", False):
        parts = target.split(".")
        if parts[0] in ("crfopt_plugins", "crfopt_datasets", "plugins", "datasets"):
            bad.append(f"{path.name}:{line}: imports another plugin module {target}")
        elif parts[0] == "crfopt" and any(p.startswith("_") for p in parts[1:]):
            bad.append(f"{path.name}:{line}: imports the private module {target}")
    return bad


@pytest.mark.parametrize("folder", ["plugins", "datasets"])
def test_plugins_and_datasets_use_the_public_api(folder):
    bad = [b for p in sorted((REPO / folder).glob("*.py")) for b in _public_only(p)]
    assert not bad, "\n".join(bad)


def _facade_only(path: Path) -> list[str]:
    """Imports of crfopt other than ``import crfopt`` / ``from crfopt import <public>``."""
    import ast

    import crfopt

    bad = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            bad += [
                f"{path.name}:{node.lineno}: import {a.name}"
                for a in node.names
                if a.name.startswith("crfopt.")
            ]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("crfopt"):
            if node.module != "crfopt":
                bad.append(f"{path.name}:{node.lineno}: from {node.module} import …")
            else:
                bad += [
                    f"{path.name}:{node.lineno}: crfopt.{a.name} is not a public name"
                    for a in node.names
                    if a.name not in crfopt.__all__
                ]
    return bad


def test_optimizer_plugins_import_only_public_names():
    """A built-in optimizer uses exactly what a third-party one can: the names of
    ``crfopt.__all__`` (docs/plugins.md), never a module path inside the package."""
    optimizers = [
        p
        for p in sorted((REPO / "plugins").glob("*.py"))
        if "crfopt_register_optimizers" in p.read_text()
    ]
    assert len(optimizers) >= 6
    bad = [b for p in optimizers for b in _facade_only(p)]
    assert not bad, "\n".join(bad)


def test_import_crfopt_is_lazy():
    code = (
        "import crfopt, sys; print(sorted(m for m in ('pandas', 'pyarrow', 'seaborn', "
        "'matplotlib', 'scipy.optimize', 'numba') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.strip() == "[]"


def test_a_worker_loads_a_run_without_scipy_optimize():
    """What a grid's worker does before its first iteration (the registry, which imports
    every built-in plugin, a problem, the run's executor) must not import scipy.optimize:
    0.45 s of every fresh process, paid by each worker of a parallel grid. Only L-BFGS
    and the reference optimum use it, when they run."""
    code = (
        "import sys, crfopt\n"
        "crfopt.get_registry()\n"
        "crfopt.load_problem('synthetic')\n"
        "import crfopt.bench.execute\n"
        "print('scipy.optimize' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().splitlines()[-1] == "False"


#: what the command line must not load to show help or a cached listing: the numeric
#: stack, the kernels and the plugins (numba alone is 0.3-0.5 s on a quiet machine)
HEAVY = (
    "numba",
    "numpy",
    "pandas",
    "pyarrow",
    "scipy",
    "crfopt.kernels",
    "crfopt.optim.registry",
    "crfopt_plugins",
    "crfopt_datasets",
)


def heavy_modules_after(args: list[str], env: dict[str, str] | None = None) -> list[str]:
    """Run ``crfopt ARGS`` in a fresh interpreter; the HEAVY modules it imported."""
    code = (
        "import json, sys\n"
        "from crfopt.apps.cli import main\n"
        "try:\n"
        f"    main({args!r})\n"
        "except SystemExit as exc:\n"
        "    assert exc.code in (0, None), exc.code\n"
        f"print('HEAVY', json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    line = [x for x in out.stdout.splitlines() if x.startswith("HEAVY ")][-1]
    return json.loads(line[len("HEAVY ") :])


def cli_commands() -> list[str]:
    from crfopt.apps.cli import main

    return sorted(main.commands)


@pytest.mark.parametrize("command", ["", *cli_commands()])
def test_cli_help_is_light(command):
    """``crfopt --help`` and every ``crfopt COMMAND --help`` build from the CLI modules
    alone (issue 19 item 5: start-up under 0.5 s): a module-level import of pandas, the
    registry or the kernels in crfopt/apps/cli makes this fail."""
    args = [command, "--help"] if command else ["--help"]
    assert heavy_modules_after(args) == []


def test_cached_list_is_light(tmp_path):
    """The second ``crfopt list`` prints the first one's table from the listing cache,
    importing no plugin, kernel or numeric library."""
    import os

    env = {**os.environ, "CRFOPT_CACHE": str(tmp_path)}
    env.pop("CRFOPT_NO_LIST_CACHE", None)
    first = heavy_modules_after(["list"], env)
    assert "crfopt_plugins" in first  # the cold call did load the plugins
    assert heavy_modules_after(["list"], env) == []


def test_public_names_resolve():
    code = "import crfopt; [getattr(crfopt, n) for n in crfopt.__all__]; print('ok')"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]


def test_architecture_page_states_this_rule():
    """docs/architecture.md's table is the rule the test enforces (kept true together)."""
    text = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    table: dict[str, frozenset[str]] = {}
    in_rule = False
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells == ["layer", "may import"]:
            in_rule = True
        elif in_rule and not line.startswith("|"):
            break  # the rule's table ended; other tables may list layers too
        elif in_rule and len(cells) == 2 and cells[0] in ALLOWED:
            deps = {d.strip() for d in cells[1].split(",")} - {"—", ""}
            table[cells[0]] = frozenset(deps)
    assert table == ALLOWED
