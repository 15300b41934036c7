"""The one selection grammar of crfopt, shared by the CLI and the Python API.

Three forms, all read here and nowhere else:

- a value: ``0.5``, ``1e-3``, ``true``, ``none``, ``gap`` (:func:`parse_value`);
- a selection: ``NAME`` or ``NAME[param=value,...]`` (:func:`parse_selection`), the
  notation :func:`crfopt.optim.contract.display_name` writes, so a name shown in a table
  can be pasted back into ``--optimizers``; several are comma-separated, commas inside
  ``[...]`` do not split (:func:`split_list`);
- a sweep: a selection whose parameter lists several values, ``sg[step_size=1,0.1,0.01]``
  or, as benchopt writes it, ``sg[step_size=[1,0.1,0.01]]``; a comma followed by text
  without ``=`` adds a value to the parameter before it. Several swept parameters give
  their cartesian product (:func:`parse_sweep`, :func:`expand_selection`), one run each;
- an assignment: ``NAME.param=value`` (:func:`parse_assignments`, ``--set``);
- a memory size: ``2G``, ``512M`` (:func:`parse_bytes`, ``--max-memory``).

Every malformed input raises :class:`~crfopt.optim.contract.ParameterError` saying what
was expected.
"""

from __future__ import annotations

import itertools
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


def _split_top(text: str) -> list[str]:
    """``text`` split at commas outside ``[...]`` (empty parts kept, for positions)."""
    parts, depth, cur = [], 0, ""
    for ch in text:
        depth += (ch == "[") - (ch == "]")
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    return parts


def parse_sweep(text: str) -> tuple[str, dict[str, list[Any]]]:
    """``"sg[step_size=1,0.1,0.01]"`` → (``"sg"``, {``"step_size"``: [1, 0.1, 0.01]}).

    Inside the brackets a part ``param=value`` starts a parameter and a part without
    ``=`` is one more value of the parameter before it (so ``a=1,2,b=x`` is a=1,2 and
    b=x); ``param=[v1,v2]`` (benchopt's notation) is the same list. Values are read by
    :func:`parse_value`; their type and range are the optimizer's to check
    (:meth:`crfopt.optim.contract.OptimizerSpec.resolve`). A parameter named twice or a
    value given twice is an error: it would silently run one configuration twice.
    """
    m = _SELECTION.match(text)
    if not m:
        raise ParameterError(
            f"bad optimizer selection {text!r}: expected NAME, NAME[param=value,...] or "
            "a sweep NAME[param=value1,value2,...]"
        )
    name, inner = m.group(1), m.group(2)
    values: dict[str, list[Any]] = {}
    current: str | None = None
    closed = False  # the current parameter's values came as [v1,v2]: nothing may follow
    for part in _split_top(inner or ""):
        if not part.strip():
            continue
        if "=" in part:
            k, v = (x.strip() for x in part.split("=", 1))
            if not k or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", k):
                raise ParameterError(f"bad parameter name {k!r} in {text!r}: expected param=value")
            if k in values:
                raise ParameterError(f"parameter {k!r} is given twice in {text!r}")
            current, closed = k, v.startswith("[")
            if closed:
                if not v.endswith("]") or v.count("[") != 1 or v.count("]") != 1:
                    raise ParameterError(
                        f"bad value list {v!r} of {k!r} in {text!r}: expected [value1,value2,...]"
                    )
                items = [x for x in v[1:-1].split(",") if x.strip()]
                if not items:
                    raise ParameterError(f"empty value list for {k!r} in {text!r}")
                values[k] = [parse_value(x.strip()) for x in items]
            else:
                values[k] = [parse_value(v)]
        else:
            if current is None:
                raise ParameterError(
                    f"bad override {part.strip()!r} in {text!r}: expected param=value first"
                )
            if closed or "[" in part or "]" in part:
                raise ParameterError(
                    f"bad value {part.strip()!r} of {current!r} in {text!r}: a value list "
                    "is either param=v1,v2,... or param=[v1,v2,...]"
                )
            values[current].append(parse_value(part.strip()))
    for k, vs in values.items():
        seen: list[Any] = []
        for v in vs:
            # 1 and 1.0 are one value (True == 1 is not: a bool is not a number here)
            if any(v == s and isinstance(v, bool) == isinstance(s, bool) for s in seen):
                raise ParameterError(f"value {v!r} of {k!r} is given twice in {text!r}")
            seen.append(v)
    return name, values


def expand_selection(text: str) -> list[tuple[str, dict[str, Any]]]:
    """A selection or sweep as the runs it stands for: [(name, overrides), ...].

    ``"sg[step_size=1,0.1]"`` → [("sg", {"step_size": 1}), ("sg", {"step_size": 0.1})];
    several swept parameters give their cartesian product, the first parameter varying
    slowest; a plain selection gives one run.
    """
    name, values = parse_sweep(text)
    keys = list(values)
    return [
        (name, dict(zip(keys, combo))) for combo in itertools.product(*(values[k] for k in keys))
    ]


def parse_selection(text: str) -> tuple[str, dict[str, Any]]:
    """``"sdca-gap[non_uniformity=0.5,sampler=gap]"`` → (name, overrides): one run.

    A sweep (a parameter with several values) is refused here; :func:`expand_selection`
    reads it.
    """
    name, values = parse_sweep(text)
    swept = [k for k, vs in values.items() if len(vs) > 1]
    if swept:
        raise ParameterError(
            f"{text!r} is a sweep over {', '.join(swept)} (several values): it stands for "
            "several runs, where one optimizer is expected"
        )
    return name, {k: vs[0] for k, vs in values.items()}


def describe_values(param: Any) -> str:
    """The values a :class:`~crfopt.optim.contract.Param` accepts, as a person reads
    them: its choices (``gap | uniform``), else its range (``[0, 1]``, ``≥ 1``), with
    ``or none`` when it may be unset; ``any`` when nothing restricts it."""
    if param.type is bool:
        text = "true | false"
    elif param.choices is not None:
        text = " | ".join(map(str, param.choices))
    elif param.low is not None and param.high is not None:
        text = f"[{_num(param.low)}, {_num(param.high)}]"
    elif param.low is not None:
        text = f"≥ {_num(param.low)}"
    elif param.high is not None:
        text = f"≤ {_num(param.high)}"
    else:
        text = "any"
    return f"{text} or none" if param.allow_none else text


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e15 else f"{x:g}"


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


__all__ = [
    "describe_values",
    "expand_selection",
    "parse_assignments",
    "parse_bytes",
    "parse_selection",
    "parse_sweep",
    "parse_value",
    "split_list",
]
