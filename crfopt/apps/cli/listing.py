"""What ``crfopt list`` shows, and a cache of it so that listing needs no plugin import.

Loading the registry imports every plugin, and the plugins import the numba kernels
(and L-BFGS scipy.optimize): seconds on a cold machine for a table of names. The
listing is a pure function of the source files that produced it, so the first
``crfopt list`` stores its rows in the user cache (``$CRFOPT_CACHE/cli`` or the
platform's, as for data) with every file it depends on and that file's size and
modification time; later calls check those (a few hundred ``stat``) and print the rows
without importing the plugins.

What the cache depends on, each invalidating it when it changes:

* the source files of every module loaded while the registry was built, outside the
  Python installation (crfopt itself, the built-in plugin and dataset packages, the
  ``--plugin-dir`` files, an entry-point plugin under development);
* the folders holding the plugin modules and the ``--plugin-dir`` folders (a plugin
  file added or removed changes the folder);
* the ``site-packages`` folders (installing, upgrading or removing a distribution,
  hence an entry-point plugin, changes them);
* the Python executable and version, the ``--plugin-dir`` list, ``CRFOPT_DISABLE_PLUGINS``.

Only a clean load is cached: a plugin that failed or warned is loaded (and reported)
again on every call. ``CRFOPT_STRICT_PLUGINS`` and ``CRFOPT_TRACE_PLUGINS`` bypass the
cache, since they exist to watch the plugins load.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: bump when the stored rows change shape or meaning
CACHE_FORMAT = 2
#: set to 1 to ignore (and not write) the cache
NO_CACHE_ENV = "CRFOPT_NO_LIST_CACHE"
_BYPASS_ENV = ("CRFOPT_STRICT_PLUGINS", "CRFOPT_TRACE_PLUGINS", NO_CACHE_ENV)


@dataclass(frozen=True)
class OptimizerFamily:
    """Variants registered by one plugin module: what they share and what they set."""

    name: str
    source: str
    #: parameter → default, equal in every variant
    shared: dict[str, Any]
    #: (variant, summary, parameters whose default differs between variants)
    variants: list[tuple[str, str, dict[str, Any]]]


def optimizer_families(reg: Any) -> list[OptimizerFamily]:
    """The registry's optimizers grouped by the module that registers them (one family
    per plugin module, e.g. ``builtin:sdca``), in name order. A parameter is shared when
    every variant of the family has it with one default; a family of one variant has
    no shared parameters (all are its own)."""
    groups: dict[str, list[str]] = {}
    for name in sorted(reg.optimizers):
        groups.setdefault(reg.optimizers[name].source, []).append(name)
    out = []
    for source, names in groups.items():
        params = {
            n: {k: v.default for k, v in reg.optimizers[n].parameters().items()} for n in names
        }
        first = params[names[0]]
        shared = {}
        if len(names) > 1:
            shared = {
                k: v
                for k, v in first.items()
                if all(k in params[n] and _same(params[n][k], v) for n in names)
            }
        variants = [
            (n, reg.optimizers[n].summary, {k: v for k, v in params[n].items() if k not in shared})
            for n in names
        ]
        out.append(OptimizerFamily(min(names, key=len), source, shared, variants))
    return out


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b


def params_text(params: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in params.items()) or "—"


def listing_rows(reg: Any) -> dict[str, list[dict[str, Any]]]:
    """What ``crfopt list`` prints, as plain text (JSON-serialisable, so it can be cached):
    ``optimizers`` (one entry per family: name, source, shared-parameter text, variants
    ``[name, summary, parameter text]``, ``parameters`` rows ``[name, type, default,
    accepts, help]`` with per-variant defaults where they differ, and ``details``: per
    variant its summary, reference, capabilities and parameter rows), ``problems``
    (name, summary, source) and ``failures`` (plugin, source, error)."""
    families = []
    for fam in optimizer_families(reg):
        single = len(fam.variants) == 1
        names = [n for n, _, _ in fam.variants]
        families.append(
            {
                "name": fam.name,
                "source": fam.source,
                "shared": params_text(fam.shared),
                "variants": [
                    [
                        name,
                        _penalty_summary(summary, reg.optimizers[name]),
                        params_text(own) if own or single else "(shared)",
                    ]
                    for name, summary, own in fam.variants
                ],
                "parameters": family_parameter_rows(reg, names),
                "details": {n: optimizer_detail(reg.optimizers[n]) for n in names},
            }
        )
    problems = [
        {"name": name, "summary": reg.problems[name].summary, "source": reg.problems[name].source}
        for name in sorted(reg.problems)
    ]
    failures = [{"name": f.name, "source": f.source, "error": f.error} for f in reg.failures]
    return {"optimizers": families, "problems": problems, "failures": failures}


def _penalty_summary(summary: str, spec: Any) -> str:
    """A variant's summary, marked when it also minimizes the elastic net (σ > 0 is
    refused, with the reason, by the variants that do not declare ℓ1)."""
    return summary if "l1" not in spec.regularizers else f"{summary}; accepts ℓ1 (--l1)"


def value_text(v: Any) -> str:
    """A default as the selection grammar writes it (true, none, 0.001)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    return "none" if v is None else str(v)


def _param_row(name: str, p: Any, default: str) -> list[str]:
    from crfopt.optim.parse import describe_values

    return [name, p.type.__name__, default, describe_values(p), p.help]


def family_parameter_rows(reg: Any, names: Sequence[str]) -> list[list[str]]:
    """Every parameter of the variants ``names``: [name, type, default, accepts, help].

    The default is one value when every variant has it, else ``value (variants)`` per
    distinct value, so a variant's own setting is visible in the family's table. When
    variants declare a parameter differently (SDCA's ``sampler`` accepts other choices in
    the non-uniform variants), each declaration gets its row, naming its variants.
    """
    from crfopt.optim.parse import describe_values

    # parameter → declaration (type, accepts, help) → variants, in declaration order
    groups: dict[str, dict[tuple[str, str, str], list[str]]] = {}
    for n in names:
        for k, p in reg.optimizers[n].parameters().items():
            decl = (p.type.__name__, describe_values(p), p.help)
            groups.setdefault(k, {}).setdefault(decl, []).append(n)
    rows = []
    for k, decls in groups.items():
        for decl, members in decls.items():
            by_value: dict[str, list[str]] = {}
            for n in members:
                value = value_text(reg.optimizers[n].parameters()[k].default)
                by_value.setdefault(value, []).append(n)
            if len(by_value) == 1 and len(members) == len(names):
                default = next(iter(by_value))
            else:
                default = "; ".join(f"{v} ({', '.join(ns)})" for v, ns in by_value.items())
            label = k if len(decls) == 1 else f"{k} ({', '.join(members)})"
            rows.append([label, decl[0], default, decl[1], decl[2]])
    return rows


def optimizer_detail(spec: Any) -> dict[str, Any]:
    """One variant in full (``crfopt list optimizers NAME``)."""
    return {
        "summary": spec.summary,
        "reference": spec.reference,
        "source": spec.source,
        "capabilities": sorted(spec.capabilities),
        "regularizers": list(spec.regularizers),
        "parameters": [
            _param_row(k, p, value_text(p.default)) for k, p in spec.parameters().items()
        ],
    }


def listing(plugin_dirs: Sequence[str]) -> dict[str, list[dict[str, Any]]]:
    """:func:`listing_rows` of the registry of ``plugin_dirs``, from the cache when none of
    what it depends on changed, else by loading every plugin (and caching a clean load)."""
    from crfopt.apps.cli.options import build_registry

    use_cache = not any(os.environ.get(v, "").strip() not in ("", "0") for v in _BYPASS_ENV)
    context = _context(plugin_dirs)
    path = _cache_file(context) if use_cache else None
    if path is not None:
        rows = _read(path, context)
        if rows is not None:
            return rows
    before = set(sys.modules)
    with warnings.catch_warnings(record=True) as caught:
        reg = build_registry(plugin_dirs)
    for w in caught:  # shown as they would have been; a warning load is not cached
        warnings.showwarning(w.message, w.category, w.filename, w.lineno)
    rows = listing_rows(reg)
    if path is not None and not reg.failures and not caught:
        watched = _watched(reg, plugin_dirs, new_modules=set(sys.modules) - before)
        _write(path, context, watched, rows)
    return rows


# --------------------------------------------------------------------------- the cache


def _context(plugin_dirs: Sequence[str]) -> dict[str, Any]:
    """What is not a file but changes the listing."""
    return {
        "format": CACHE_FORMAT,
        "python": [sys.executable, sys.version],
        "plugin_dirs": [os.path.abspath(d) for d in plugin_dirs],
        "disabled": os.environ.get("CRFOPT_DISABLE_PLUGINS", ""),
    }


def _cache_file(context: dict[str, Any]) -> Path | None:
    """One file per context, under the user cache; None when there is no usable one."""
    root = os.environ.get("CRFOPT_CACHE")
    if root:
        base = Path(root).expanduser()
    else:
        # the folder crfopt.data.paths.cache_dir uses (pooch.os_cache is this call),
        # without importing pooch and requests
        import platformdirs

        base = Path(platformdirs.user_cache_dir("crfopt"))
    digest = hashlib.sha256(json.dumps(context, sort_keys=True).encode()).hexdigest()[:16]
    return base / "cli" / f"list-{digest}.json"


def _stamp(path: str) -> list[int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_mtime_ns, st.st_size]


def _installation_dirs() -> list[str]:
    prefixes = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    return sorted(prefixes)


def _inside(path: str, roots: Sequence[str]) -> bool:
    return any(path == r or path.startswith(r + os.sep) for r in roots)


def _watched(reg: Any, plugin_dirs: Sequence[str], new_modules: set[str]) -> dict[str, Any]:
    """path → [mtime_ns, size] of everything the listing depends on (module docstring)."""
    install = _installation_dirs()
    paths: set[str] = set()
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None)
        if not file:
            continue
        real = os.path.realpath(file)
        # crfopt's own modules may have loaded before the registry (the CLI); any other
        # module counts when the load imported it and it is not part of the installation
        ours = name == "crfopt" or name.startswith("crfopt.") or name in new_modules
        if ours and not _inside(real, install):
            paths.add(real)
    for info in reg.plugins:
        file = getattr(info.module, "__file__", None)
        if file:
            paths.add(os.path.dirname(os.path.realpath(file)))
    paths.update(os.path.realpath(d) for d in plugin_dirs)
    paths.update(
        os.path.realpath(p)
        for p in sys.path
        if p and os.path.isdir(p) and _inside(os.path.realpath(p), install)
    )
    return {p: _stamp(p) for p in sorted(paths)}


def _read(path: Path, context: dict[str, Any]) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("context") != context:
        return None
    watched = data.get("watched")
    if not isinstance(watched, dict) or not watched:
        return None
    for p, stamp in watched.items():
        if _stamp(p) != stamp:
            return None
    rows = data.get("rows")
    return rows if isinstance(rows, dict) else None


def _write(path: Path, context: dict[str, Any], watched: dict[str, Any], rows: dict) -> None:
    """Atomically (a concurrent ``list`` reads the old file or the new one); a cache that
    cannot be written only costs the next call its speed."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_text(
            json.dumps({"context": context, "watched": watched, "rows": rows}), encoding="utf-8"
        )
        os.replace(tmp, path)
    except OSError:
        pass
