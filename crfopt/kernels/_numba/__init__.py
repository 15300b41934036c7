"""The compiled twin of the kernels (numba), one module per concern.

=================  ==========================================================
``scores``         weight blocks as views, unary and ground-truth scores
``tables``         extremes and exponentials of edge score tables
``chain``          scaled and log-space forward–backward on one chain
``oracles``        the counted oracles (one helper charges every call)
``local``          features and directions on one sequence's support
``functionals``    entropy and KL of chain marginals
``batch``          full-batch evaluation (uncounted, parallel)
``decode``         Viterbi
=================  ==========================================================

Every public function has a twin with the same signature in
:mod:`crfopt.kernels._numpy`; tests hold the two to 1e-10. Callers reach the twin
:data:`crfopt.kernels.twin.impl` selects, never this package by name.
"""

from __future__ import annotations

from crfopt.kernels._numba.batch import (
    BATCH_CHUNKS,
    all_unary,
    batch_entropy,
    batch_expected_emission,
    batch_expected_features,
    batch_kl,
    batch_log_marginals,
    batch_value_grad,
    finish_gradient,
)
from crfopt.kernels._numba.chain import (
    LOG_SPAN_LIMIT,
    chain_log_marginals,
    chain_log_partition,
    chain_marginal_sums,
)
from crfopt.kernels._numba.decode import (
    PARALLEL_FROM,
    batch_viterbi,
    chain_viterbi,
    csr_node_marginals,
    csr_viterbi,
)
from crfopt.kernels._numba.functionals import (
    chain_entropy,
    chain_entropy_linlog,
    chain_kl,
    chain_kl_linlog,
)
from crfopt.kernels._numba.local import (
    add_local,
    difference_direction,
    dot_local,
    expected_emission,
    local_gradient,
    node_residual,
    norm2_local,
    truth_transitions,
)
from crfopt.kernels._numba.oracles import (
    forward,
    forward_scores,
    oracle,
    oracle_marginals,
    oracle_scores,
    oracle_scores_bonus,
    oracle_scores_marginals,
    oracle_sums,
    oracle_sums_scores,
)
from crfopt.kernels._numba.scores import (
    emission_matrix,
    local_scores,
    support_bounds,
    transition_matrix,
    truth_score,
    unary_scores,
)

#: The modules of this package, by concern (tests walk them for their compiled functions).
MODULES = (
    "scores",
    "tables",
    "chain",
    "oracles",
    "local",
    "functionals",
    "batch",
    "decode",
)

__all__ = [
    "BATCH_CHUNKS",
    "LOG_SPAN_LIMIT",
    "MODULES",
    "PARALLEL_FROM",
    "add_local",
    "all_unary",
    "batch_entropy",
    "batch_expected_emission",
    "batch_expected_features",
    "batch_kl",
    "batch_log_marginals",
    "batch_value_grad",
    "batch_viterbi",
    "chain_entropy",
    "chain_entropy_linlog",
    "chain_kl",
    "chain_kl_linlog",
    "chain_log_marginals",
    "chain_log_partition",
    "chain_marginal_sums",
    "chain_viterbi",
    "csr_node_marginals",
    "csr_viterbi",
    "difference_direction",
    "dot_local",
    "emission_matrix",
    "expected_emission",
    "finish_gradient",
    "forward",
    "forward_scores",
    "local_gradient",
    "local_scores",
    "node_residual",
    "norm2_local",
    "oracle",
    "oracle_marginals",
    "oracle_scores",
    "oracle_scores_bonus",
    "oracle_scores_marginals",
    "oracle_sums",
    "oracle_sums_scores",
    "support_bounds",
    "transition_matrix",
    "truth_score",
    "truth_transitions",
    "unary_scores",
]
