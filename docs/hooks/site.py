"""MkDocs hooks of the site: local MathJax, and the docstrings' Sphinx roles as code.

MathJax: the site must render docs/algorithms.md's maths with no network (a CDN script would not
load offline or in CI). The `docs` extra installs django-static-mathjax, a plain copy of
MathJax 3 (Django is not needed to read its files); this hook copies the one component
the site loads (`tex-chtml.js`) and the fonts it fetches relative to itself into
`assets/mathjax/`, where mkdocs.yml's `extra_javascript` points.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError

TARGET = Path("assets") / "mathjax"

# The docstrings are numpy style with Sphinx roles (:func:`crfopt.compare`), which
# mkdocstrings leaves as literal text before the code span. Rendered as the code span
# alone, with Sphinx's `~` (show the last component only) applied.
ROLE = re.compile(r":(?:func|class|meth|attr|mod|data|exc|obj):<code>(~?)([^<]*)</code>")


def mathjax_root() -> Path:
    spec = importlib.util.find_spec("mathjax")
    if spec is None or not spec.submodule_search_locations:
        raise PluginError(
            "MathJax is not installed: the docs build needs the `docs` extra "
            '(pip install -e ".[docs]"), which brings django-static-mathjax'
        )
    root = Path(next(iter(spec.submodule_search_locations))) / "static" / "mathjax" / "es5"
    if not (root / "tex-chtml.js").is_file():
        raise PluginError(f"{root}: no tex-chtml.js; is django-static-mathjax >= 3.2 installed?")
    return root


def on_post_build(config: Any, **kwargs: Any) -> None:
    root = mathjax_root()
    target = Path(config["site_dir"]) / TARGET
    target.mkdir(parents=True, exist_ok=True)
    shutil.copy2(root / "tex-chtml.js", target / "tex-chtml.js")
    fonts = Path("output") / "chtml" / "fonts" / "woff-v2"
    shutil.copytree(root / fonts, target / fonts, dirs_exist_ok=True)


def _role(m: re.Match[str]) -> str:
    name = m.group(2).rsplit(".", 1)[-1] if m.group(1) else m.group(2)
    return f"<code>{name}</code>"


def on_page_content(html: str, **kwargs: Any) -> str:
    return ROLE.sub(_role, html)
