"""Parsing of ``param=value`` text shared by the CLI and the Python API."""

from __future__ import annotations

import re
from typing import Any

# Only text that looks like a number becomes one: float() alone would also turn words
# such as "nan", "inf" or "infinity" into floats (a sampler named "nan" must stay text).
_INT = re.compile(r"[+-]?\d+")
_FLOAT = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def parse_value(text: str) -> Any:
    """A parameter value given as text: int, float (1e-3 too), true/false, none/null,
    or the text itself. Typed parameters convert text further (``Param.coerce``)."""
    stripped = text.strip()
    low = stripped.lower()
    if low in {"none", "null", "~"}:
        return None
    if low in {"true", "false"}:
        return low == "true"
    if _INT.fullmatch(stripped):
        return int(stripped)
    if _FLOAT.fullmatch(stripped):
        return float(stripped)
    return text
