"""Parsing of ``param=value`` text shared by the CLI and the Python API."""

from __future__ import annotations

from typing import Any


def parse_value(text: str) -> Any:
    """A parameter value given as text: int, float (1e-3 too), true/false, none/null,
    or the text itself."""
    low = text.strip().lower()
    if low in {"none", "null", "~"}:
        return None
    if low in {"true", "false"}:
        return low == "true"
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text
