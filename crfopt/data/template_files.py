"""Templates by name or by file, and back from a saved spec: crfopt's own (the built-ins,
TOML and YAML files), CRF++ templates and Wapiti pattern files.

Above both :mod:`crfopt.data.features` (crfopt's templates and featurization) and
:mod:`crfopt.data.patterns` (the pattern files, whose templates are a kind of
:class:`~crfopt.data.features.Template`): the one place that knows both kinds.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

from crfopt.data.features import Template
from crfopt.data.patterns import (
    PATTERN_FORMATS,
    TEMPLATE_FORMATS,
    PatternTemplate,
    detect_format,
    parse_patterns,
)

BUILTIN_TEMPLATES = ("chunking", "ner", "pos")


def template_from_spec(spec: Mapping[str, Any], source: str = "") -> Template:
    """The template of a canonical spec (``Template.spec()``, what models and caches save):
    a :class:`~crfopt.data.patterns.PatternTemplate` when it names a pattern ``format``,
    else crfopt's own."""
    if isinstance(spec, Mapping) and "format" in spec:
        return PatternTemplate.from_spec(spec, source)
    return Template.from_spec(spec, source)


def load_template(
    name_or_path: str | os.PathLike[str] | Template | Mapping[str, Any],
    template_format: str | None = None,
) -> Template:
    """A built-in template by name, a template file, or an already parsed one.

    A file is crfopt's TOML/YAML (``template_format="crfsuite"``), a CRF++ template
    (``"crfpp"``) or a Wapiti pattern file (``"wapiti"``); ``None`` tells them apart by
    suffix (``.toml``, ``.yaml``, ``.yml``) and content
    (:func:`crfopt.data.patterns.detect_format`).
    """
    if template_format is not None and template_format not in TEMPLATE_FORMATS:
        raise ValueError(
            f"unknown template format {template_format!r}; valid: {', '.join(TEMPLATE_FORMATS)}"
        )
    if isinstance(name_or_path, Template):
        return name_or_path
    if isinstance(name_or_path, Mapping):
        return template_from_spec(name_or_path)
    text_name = os.fspath(name_or_path)
    if text_name in BUILTIN_TEMPLATES:
        if template_format not in (None, "crfsuite"):
            raise ValueError(
                f"{text_name!r} is a built-in crfopt template, not a {template_format} file"
            )
        data = (
            resources.files("crfopt.data")
            .joinpath("templates", f"{text_name}.toml")
            .read_text(encoding="utf-8")
        )
        return Template.from_spec(_toml_loads(data, text_name), source=f"builtin:{text_name}")
    path = Path(text_name)
    if not path.exists():
        raise ValueError(
            f"unknown template {text_name!r}: not a built-in ({', '.join(BUILTIN_TEMPLATES)}) "
            "and no such file"
        )
    raw = path.read_text(encoding="utf-8")
    fmt = template_format
    if fmt is None:
        fmt = "crfsuite" if path.suffix in (".toml", ".yaml", ".yml") else detect_format(raw)
    if fmt in PATTERN_FORMATS:
        return parse_patterns(raw, fmt, source=str(path))
    if path.suffix in (".yaml", ".yml"):
        import yaml

        try:
            spec = yaml.safe_load(raw)
        except yaml.YAMLError as exc:
            raise ValueError(f"{path}: not valid YAML ({exc})") from None
    else:
        spec = _toml_loads(raw, str(path))
    return Template.from_spec(spec, source=str(path))


def _toml_loads(text: str, source: str) -> dict[str, Any]:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{source}: not valid TOML ({exc})") from None
