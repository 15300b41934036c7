"""No import circles in the package, the plugins, the benchmarks or the reports.

A circle makes the import order decide which module sees a half-initialized other, and
hides which of two modules is the lower one. Every import counts, function-level ones
included (a lazy import is still a dependency); only ``if TYPE_CHECKING:`` blocks do not
(they never run). The graph is read from the source (AST), so the test needs no import.

Names resolve as Python resolves them: ``crfopt.*`` through the repository's packages
(``crfopt_plugins`` is ``plugins/``, ``crfopt_datasets`` is ``datasets/``), a lazy
public name of ``crfopt`` (``from crfopt import dual``) through ``crfopt._PUBLIC`` to the
module it loads, and a bare name in a script folder (``benchmarks/``, ``reports/``,
whose scripts put their own folder first on ``sys.path``) to the script beside it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import crfopt

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = {"crfopt": ROOT / "crfopt", "crfopt_plugins": ROOT / "plugins"}
PACKAGES["crfopt_datasets"] = ROOT / "datasets"
SCRIPT_FOLDERS = ("benchmarks", "reports")


def _module_files() -> dict[str, Path]:
    """Module name → file, for the packages and the script folders."""
    files: dict[str, Path] = {}
    for package, folder in PACKAGES.items():
        for path in folder.rglob("*.py"):
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            files[".".join([package, *parts])] = path
    for folder in SCRIPT_FOLDERS:
        for path in (ROOT / folder).glob("*.py"):
            files[f"{folder}:{path.stem}"] = path
    return files


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST) -> list[tuple[str | None, str, int]]:
    """(module, imported name or "", level) of every import outside TYPE_CHECKING blocks."""
    found: list[tuple[str | None, str, int]] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.extend((alias.name, "", 0) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            found.extend((node.module, alias.name, node.level) for alias in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def _resolve(name: str, module: str | None, imported: str, level: int, files: dict) -> set:
    """The project modules an import statement in module ``name`` loads."""
    if ":" in name:  # a script: bare names are its folder's scripts
        folder = name.split(":")[0]
        if level == 0 and module is not None and f"{folder}:{module}" in files:
            return {f"{folder}:{module}"}
    if level:  # relative import inside a package
        base = name.split(".")
        if files[name].name != "__init__.py":
            base = base[:-1]
        base = base[: len(base) - (level - 1)]
        module = ".".join(base + ([module] if module else []))
    if module is None:
        return set()
    if module == "crfopt" and imported in crfopt._PUBLIC:
        return {crfopt._PUBLIC[imported][0]}
    candidate = f"{module}.{imported}" if imported else module
    for target in (candidate, module):
        if target in files:
            return {target}
    return set()


def _graph() -> dict[str, set[str]]:
    files = _module_files()
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        targets: set[str] = set()
        for module, imported, level in _imports(tree):
            targets |= _resolve(name, module, imported, level, files)
        targets.discard(name)
        graph[name] = targets
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return found


def test_no_import_circles():
    cycles = _cycles(_graph())
    assert not cycles, "import circles (each a set of modules importing each other):\n" + (
        "\n".join(" <-> ".join(c) for c in cycles)
    )


def test_the_graph_sees_function_level_imports_and_skips_type_checking():
    """The reader itself: a lazy import is an edge, a TYPE_CHECKING import is not, and a
    circle of two modules is found."""
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from crfopt.core import problem\n"
        "def f():\n    from crfopt.core import duality\n"
    )
    found = _imports(ast.parse(source))
    assert ("crfopt.core", "duality", 0) in found
    assert ("crfopt.core", "problem", 0) not in found
    assert _cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]


@pytest.mark.parametrize(
    ("name", "statement", "want"),
    [
        ("crfopt_plugins.sdca", ("crfopt", "dual", 0), {"crfopt.optim.dual"}),
        ("crfopt_plugins.sdca", ("crfopt.kernels", "vmath", 0), {"crfopt.kernels.vmath"}),
        ("crfopt.core.problem", ("crfopt.core.layout", "WeightLayout", 0), {"crfopt.core.layout"}),
        ("benchmarks:performance", ("conftest", "threads", 0), {"benchmarks:conftest"}),
    ],
)
def test_names_resolve_to_the_modules_they_load(name, statement, want):
    assert _resolve(name, *statement, _module_files()) == want
