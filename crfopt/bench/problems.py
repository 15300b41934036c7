"""Problems by name or by path: the registry's problems and the user's own corpus files.

This is where the two sources of problems meet, above both the registry (optim) and the
corpus readers (data), so neither has to know the other.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from crfopt.core.problem import CRFProblem
from crfopt.data.corpus import load_corpus
from crfopt.optim.registry import Registry, get_registry

#: the keyword arguments :func:`crfopt.data.corpus.load_corpus` takes.
CORPUS_PARAMS = (
    "columns",
    "template",
    "template_format",
    "test",
    "label",
    "encoding",
    "lam",
    "bias",
    "min_count",
)


def is_corpus_path(registry: Registry, name: str | os.PathLike[str]) -> bool:
    """True when ``name`` is not a registered problem but a corpus file."""
    key = os.fspath(name)
    return key not in registry.problems and Path(key).is_file()


def check_corpus_params(params: Mapping[str, Any]) -> None:
    """Reject parameters :func:`crfopt.data.corpus.load_corpus` does not take, listing the valid."""
    unknown = sorted(set(params) - set(CORPUS_PARAMS))
    if unknown:
        raise ValueError(
            f"corpus file: unknown parameter(s) {', '.join(map(repr, unknown))}; "
            f"valid parameters: {', '.join(CORPUS_PARAMS)}"
        )


def load_from(registry: Registry, name: str | os.PathLike[str], **params: Any) -> CRFProblem:
    """Build a problem registered in ``registry``, or a user corpus from a file path.

    ``l1`` (σ, the ℓ1 weight; ``--l1`` and ``--set NAME.l1=…``) is every problem's
    parameter, not a loader's: the data and λ are loaded as usual (and cached as
    usual), then σ is set with ``CRFProblem.with_regularization``.
    """
    key = os.fspath(name)
    l1 = params.pop("l1", None)
    if is_corpus_path(registry, key):
        check_corpus_params(params)
        problem = load_corpus(key, **params)
    else:
        problem = registry.problem(key).create(**params)
    return problem if l1 is None else problem.with_regularization(l1=l1)


def load_problem(
    name: str | os.PathLike[str],
    *,
    plugin_dirs: Iterable[str | os.PathLike[str]] = (),
    **params: Any,
) -> CRFProblem:
    """Load a problem by registered name (``"ocr"``, ``"synthetic"``…) or corpus path.

    Examples
    --------
    >>> import crfopt
    >>> problem = crfopt.load_problem("synthetic", n=20, seed=1)
    >>> problem.n
    20
    """
    return load_from(get_registry(plugin_dirs), name, **params)
