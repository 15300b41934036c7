"""The plugin contract: hook specifications of the ``crfopt`` pluggy project.

A plugin is a module (built-in, installed under the ``crfopt`` entry-point group, or a
``.py`` file in a ``--plugin-dir``) that implements one or both hooks below, marked with
:data:`crfopt.hookimpl`::

    import crfopt

    @crfopt.hookimpl
    def crfopt_register_optimizers():
        return [crfopt.OptimizerSpec("my-sgd", MySGD, summary="plain SGD")]

Specs grow by adding keyword arguments; implementations that take fewer keep working,
because pluggy matches arguments by name.
"""

from __future__ import annotations

import pluggy

PROJECT = "crfopt"

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def crfopt_register_optimizers() -> list:  # type: ignore[empty-body]
    """Return the optimizer variants this plugin provides.

    Called once each time a plugin manager is built (every CLI command, every
    :func:`crfopt.compare`). Return a list of :class:`crfopt.OptimizerSpec`: a variant
    name (lower case, family first, hyphens: ``sdca-gap``), the
    :class:`crfopt.Optimizer` subclass, the variant's default parameters, a one-line
    summary, the paper reference, and capability flags. Two variants with one name are
    an error naming both sources.
    """


@hookspec
def crfopt_register_problems() -> list:  # type: ignore[empty-body]
    """Return the problem definitions this plugin provides.

    Return a list of :class:`crfopt.ProblemSpec`: a name (``ocr``, ``conll2000``), a
    loader ``load(**params) -> CRFProblem``, its default parameters, a one-line summary,
    the files it reads (for ``crfopt fetch``) and notes on provenance shown by
    ``crfopt info``. Loading happens only when a problem is asked for by name.
    """
