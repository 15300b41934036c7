"""The pieces of dual methods (``crfopt.dual``; docs/algorithms.md §3.1–3.3, §3.14, §5).

The dual variables are the log-marginals μ_i of every sequence, kept in a
:class:`crfopt.DualMarginals`. Built-in SDCA, its parallel and prox variants, and OEG
are made of these pieces; a third-party dual method reaches their speed with the same
ones.

:mod:`~crfopt.dual.initialization` (re-exported here)
    ``initial_dual`` (gibbs, mixture, uniform μ⁰), ``gibbs_scores``.
No inference (re-exported from the core): ``conjugate_weights`` ŵ(μ), ``dual_direction``
    z(μ), ``entropies`` H̃(μ_i) of every sequence, ``soft_threshold`` S_σ (arrays): what a
    dual method's setup needs from μ⁰ without an oracle call.
:mod:`~crfopt.dual.blocks`
    one sequence's dual block: its scratch tables, load from storage, the counted
    oracle's ν_i and the block gaps, the primal direction, the mixture μ_γ stored back.
:mod:`~crfopt.dual.search`
    the step γ: Newton and golden-section line searches on the block objective.
:mod:`~crfopt.dual.prox`
    the ℓ1 part: the prox segment of a step and the local re-thresholding of w.
:mod:`~crfopt.dual.state`
    a coordinate method's state over all sequences (μ, w, stored gaps, running totals),
    its initialization, the commit of a step, and the parameters of these pieces.
"""

from __future__ import annotations

from crfopt.core.duality import conjugate_weights, dual_direction, entropies, soft_threshold
from crfopt.optim.dual import blocks, prox, search, state
from crfopt.optim.dual.blocks import log_mix, log_mix_scalar
from crfopt.optim.dual.initialization import INITIALIZATIONS, gibbs_scores, initial_dual

__all__ = [
    "INITIALIZATIONS",
    "blocks",
    "conjugate_weights",
    "dual_direction",
    "entropies",
    "gibbs_scores",
    "initial_dual",
    "log_mix",
    "log_mix_scalar",
    "prox",
    "search",
    "soft_threshold",
    "state",
]
