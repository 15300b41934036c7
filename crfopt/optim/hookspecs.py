"""The plugin contract: hook specifications of the ``crfopt`` pluggy project.

A plugin is a module (built-in, installed under the ``crfopt`` entry-point group, or a
``.py`` file in a ``--plugin-dir``) that implements any of the hooks below, marked with
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


@hookspec
def crfopt_register_metrics() -> list:  # type: ignore[empty-body]
    """Return the checkpoint metrics this plugin provides.

    Return a list of :class:`crfopt.MetricSpec`: a name (which is also the results
    column it fills, lower case with underscores: ``chunk_f1``), a function
    ``compute(checkpoint) -> float`` of a :class:`crfopt.bench.evaluator.Checkpoint`
    (the problem, the read-only weights, cached uncounted predictions), an optional
    ``applies(problem) -> bool`` (a metric that does not apply writes no column), and a
    ``cost``: ``"cheap"`` metrics are computed at every checkpoint, ``"expensive"`` ones
    at every ``every``-th checkpoint and at the last. Metrics are computed in the
    evaluation phase: never counted, never timed, never seen by the optimizer.
    """
