"""The one selection grammar of crfopt, shared by the CLI and the Python API.

Three forms, all read here and nowhere else:

- a value: ``0.5``, ``1e-3``, ``true``, ``none``, ``gap`` (:func:`parse_value`);
- a selection: ``NAME`` or ``NAME[param=value,...]`` (:func:`parse_selection`), the
  notation :func:`crfopt.optim.contract.display_name` writes, so a name shown in a table
  can be pasted back into ``--optimizers``; several are comma-separated, commas inside
  ``[...]`` do not split (:func:`split_list`);
- an assignment: ``NAME.param=value`` (:func:`parse_assignments`, ``--set``);
- a memory size: ``2G``, ``512M`` (:func:`parse_bytes`, ``--max-memory``).

Every malformed input raises :class:`~crfopt.optim.contract.ParameterError` saying what
was expected.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from crfopt.optim.contract import ParameterError

# Only text that looks like a number becomes one: float() alone would also turn words
# such as "nan", "inf" or "infinity" into floats (a sampler named "nan" must stay text).
_INT = re.compile(r"[+-]?\d+")
_FLOAT = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
# Names as OptimizerSpec allows them (plus '*' of variants such as sag-nus*).
_SELECTION = re.compile(r"^\s*([a-z][a-z0-9*-]*)\s*(?:\[(.*)\])?\s*$")


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


_SIZE = re.compile(r"(\d+\.?\d*|\.\d+)\s*([kmgt]?)(i?b?)", re.IGNORECASE)
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_bytes(value: int | str) -> int:
    """A memory size: an int of bytes, or text such as ``2G``, ``512MB``, ``1.5GiB``.

    Units are binary (K = 1024), as memory is counted; the result must be positive.
    """
    if isinstance(value, bool):
        raise ParameterError(f"bad memory size {value!r}: expected bytes or e.g. 2G, 512M")
    if isinstance(value, int):
        size = value
    else:
        m = _SIZE.fullmatch(str(value).strip())
        if not m or (m.group(3) and m.group(3).lower() == "i"):
            raise ParameterError(
                f"bad memory size {value!r}: expected bytes or a number with K/M/G/T, e.g. 2G"
            )
        size = int(float(m.group(1)) * _UNITS[m.group(2).lower()])
    if size <= 0:
        raise ParameterError(f"bad memory size {value!r}: must be positive")
    return size


def split_list(text: str | Sequence[str]) -> list[str]:
    """Comma-separated selections (a string or several); commas inside [...] do not split."""
    if not isinstance(text, str):
        return [t for item in text for t in split_list(item)]
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        if ch == "," and depth == 0:
            if cur.strip():
                out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


def parse_selection(text: str) -> tuple[str, dict[str, Any]]:
    """``"sdca-gap[non_uniformity=0.5,sampler=gap]"`` → (name, overrides)."""
    m = _SELECTION.match(text)
    if not m:
        raise ParameterError(
            f"bad optimizer selection {text!r}: expected NAME or NAME[param=value,...]"
        )
    name, inner = m.group(1), m.group(2)
    overrides: dict[str, Any] = {}
    if inner:
        for part in inner.split(","):
            if not part.strip():
                continue
            if "=" not in part:
                raise ParameterError(f"bad override {part!r} in {text!r}: expected param=value")
            k, v = part.split("=", 1)
            overrides[k.strip()] = parse_value(v.strip())
    return name, overrides


def parse_assignments(items: Iterable[str]) -> dict[str, dict[str, Any]]:
    """``NAME.param=value`` items (``--set``) into {NAME: {param: value}}.

    NAME is an optimizer or a problem; it may itself contain dots (a corpus path), so
    the parameter is what follows the last dot before ``=``.
    """
    out: dict[str, dict[str, Any]] = {}
    for item in items:
        if "=" not in item:
            raise ParameterError(f"{item!r}: expected NAME.param=value")
        lhs, rhs = item.split("=", 1)
        if "." not in lhs:
            raise ParameterError(
                f"{item!r}: expected NAME.param=value (NAME is an optimizer or the problem)"
            )
        name, param = lhs.rsplit(".", 1)
        name, param = name.strip(), param.strip()
        if not name or not param:
            raise ParameterError(f"{item!r}: empty name or parameter")
        out.setdefault(name, {})[param] = parse_value(rhs.strip())
    return out


__all__ = ["parse_assignments", "parse_bytes", "parse_selection", "parse_value", "split_list"]
