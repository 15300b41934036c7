"""Code blocks of the docs, extracted so tests run exactly what users read."""

from __future__ import annotations

import re
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1] / "docs"


def code_blocks(doc: str, lang: str = "python") -> list[str]:
    """Fenced blocks of docs/DOC (or of the README when DOC is "README.md")."""
    path = DOCS.parent / doc if doc == "README.md" else DOCS / doc
    text = path.read_text(encoding="utf-8")
    return re.findall(rf"```{lang}\n(.*?)```", text, flags=re.S)


def sgd_plugin_source() -> str:
    """The complete SGD plugin of docs/plugins.md."""
    return next(b for b in code_blocks("plugins.md") if "crfopt_register_optimizers" in b)


def write_sgd_plugin(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "sgd.py"
    path.write_text(sgd_plugin_source(), encoding="utf-8")
    return path


def lazy_sag_plugin_source() -> str:
    """The compiled, sparse, lazy-update SAG plugin of docs/plugins.md."""
    return next(b for b in code_blocks("plugins.md") if "def lazy_sag_block" in b)


def write_lazy_sag_plugin(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "lazy_sag.py"
    path.write_text(lazy_sag_plugin_source(), encoding="utf-8")
    return path
