"""The compiled oracle API that optimizer plugins call from their own inner loops.

Every function here exists twice with the same signature: numba-compiled (default) and
pure NumPy (``CRFOPT_DISABLE_JIT=1``). A plugin decorates its loop with
:func:`crfopt.jit` and calls these with ``problem.data`` and ``problem.counters.array``:

.. code-block:: python

    from crfopt import jit, kernels

    @jit
    def sweep(data, counters, w, order, log_nodes, log_edges):
        for i in order:
            log_z, nll = kernels.oracle(data, counters, i, w, log_nodes, log_edges)
            ...
            counters[kernels.UPDATES] += 1

Names: score tables are ``unary`` (T × K), ``pairwise`` ((T-1) × K × K, one table per
position) and ``transition`` (K × K, shared by every position), as on the problem;
marginals are ``nodes`` / ``edges`` (linear) and ``log_nodes`` / ``log_edges``; a
direction is (``E_loc``, ``trans_loc``) (below).

Counted inference (each bumps ``oracle_calls`` or ``forward_calls``, docs/algorithms.md §2):

``oracle(data, counters, i, w, log_nodes, log_edges) -> (log_z, nll)``
    log-marginals of ν_i(w): nodes into ``log_nodes[:T]``, edges into ``log_edges[:T-1]``.
``oracle_marginals(data, counters, i, w, log_nodes, log_edges, nodes, edges) -> (log_z, nll)``
    both the log-marginals and the linear marginals of ν_i(w) (for dual methods).
``oracle_sums(data, counters, i, w, nodes, edge_sum) -> (log_z, nll)``
    linear node marginals and the K×K sum of pairwise marginals (the gradient form).
``oracle_sums_scores(data, counters, i, unary, transition, nodes, edge_sum) -> (log_z, nll)``
    the gradient form on score tables with shared transitions (methods that keep
    w = s·u implicitly compute the scores themselves).
``forward(data, counters, i, w) -> (log_z, nll)``
    forward recursion only.
``oracle_scores(data, counters, i, unary, pairwise, log_nodes, log_edges) -> log_z``
    on arbitrary score tables (unary T×K, pairwise (T-1)×K×K).
``oracle_scores_marginals(data, counters, i, unary, pairwise, log_nodes, log_edges, nodes,``
``edges) -> log_z``
    the same with the linear marginals too.
``oracle_scores_bonus(data, counters, i, unary, transition, bonus, pairwise, log_nodes,``
``log_edges, nodes, edges, linear, logs=True) -> log_z``
    either of the two on edge tables θ_t = ``transition`` + ``bonus`` at the ground-truth
    pair (y_t, y_{t+1}), which it writes into ``pairwise[:T-1]``; bit for bit the same,
    with ``transition`` scanned for its extremes and exponentiated once per call instead
    of once per position (OEG's trials). ``logs=False`` with ``linear``: the linear
    marginals only (the log arrays are work space, contents unspecified; the compiled
    twin skips the log-marginals), log Z and the linear marginals unchanged.
``forward_scores(data, counters, i, unary, transition) -> log_z``
    forward only, on score tables with shared transitions (SAG's line-search trials).

``oracle_sums_scores`` and ``forward_scores`` take an optional last argument ``work``, a
:class:`crfopt.pieces.ChainWork` from ``pieces.chain_work(max_len, K)``: the scaled pass's
tables then come from it instead of ten allocations per call (the NumPy twins accept and
ignore it).

Uncounted linear algebra (no inference): ``unary_scores``, ``local_scores``,
``truth_score`` (the ground truth's score under given tables),
``expected_emission``, ``truth_transitions``, ``add_local``, ``dot_local``, ``norm2_local``,
``support_bounds``, ``emission_matrix``, ``transition_matrix``;
``local_gradient(data, i, nodes, edge_sum, work, truth, E_loc, trans_loc) -> ‖∇ℓ_i‖²``
(∇ℓ_i on the sequence's support from ν_i's marginals, §1.5);
``difference_direction(data, i, node_diff, P, Q, div, E_loc, trans_loc)`` (the direction
E_p F − E_q F of two chain distributions from their node-marginal difference and summed
pairwise marginals: ∇ℓ_i, SAG's gradient change, SDCA's and OEG's dual steps);
``node_residual(data, i, nodes, out) -> T`` (ν_i's node marginals minus the one-hot
truth, whose Xᵀ-image is ∇ℓ_i's emission block); and the chain
functionals ``chain_entropy`` / ``chain_kl`` of given log-marginals (§1.3, §5.3), and
``chain_entropy_linlog(nodes, edges, log_nodes, log_edges, T, K)`` /
``chain_kl_linlog(p_nodes, p_edges, lp_nodes, lp_edges, lq_nodes, lq_edges, T, K)``
for loops that already hold linear and log marginals (no exp/log evaluated).

Cache hints, in :mod:`crfopt.kernels.prefetch` beside the vector log/exp of
:mod:`crfopt.kernels.vmath` (no effect on any value; no-ops without the JIT):
``prefetch_read(a, lo, n)`` / ``prefetch_write(a, lo, n)`` ask for the cache lines of
the flat entries ``a.reshape(-1)[lo:lo+n]`` ahead of a loop that will read or update
them, for arrays larger than the caches read in an order the hardware cannot guess;
``stream_copy(dst, lo, src, n)`` copies ``src``'s first ``n`` entries into that span of a
float64 ``dst`` with streaming stores, for a block of a large table that the loop writes
and does not read back soon (a plain copy without the JIT).

A direction on sequence ``i`` is a pair (``E_loc`` of shape |S_i|×K on the sequence's
distinct attributes ``data.support[lo:hi]`` with ``lo, hi = support_bounds(data, i)``,
``trans_loc`` K×K); for dense problems S_i is every attribute.
"""

from __future__ import annotations

from crfopt.kernels import threads as _threads  # noqa: F401  (OpenMP spinning bounded first)
from crfopt.kernels.counters import (
    FORWARD_CALLS,
    INIT_FORWARD_CALLS,
    INIT_ORACLE_CALLS,
    ITERATIONS,
    LS_EVALS,
    ORACLE_CALLS,
    UPDATES,
)
from crfopt.kernels.twin import impl as _impl

oracle = _impl.oracle
oracle_marginals = _impl.oracle_marginals
oracle_sums = _impl.oracle_sums
oracle_sums_scores = _impl.oracle_sums_scores
forward = _impl.forward
oracle_scores = _impl.oracle_scores
oracle_scores_marginals = _impl.oracle_scores_marginals
oracle_scores_bonus = _impl.oracle_scores_bonus
forward_scores = _impl.forward_scores

unary_scores = _impl.unary_scores
truth_score = _impl.truth_score
local_scores = _impl.local_scores
expected_emission = _impl.expected_emission
local_gradient = _impl.local_gradient
difference_direction = _impl.difference_direction
node_residual = _impl.node_residual
truth_transitions = _impl.truth_transitions
add_local = _impl.add_local
dot_local = _impl.dot_local
norm2_local = _impl.norm2_local
support_bounds = _impl.support_bounds
emission_matrix = _impl.emission_matrix
transition_matrix = _impl.transition_matrix
chain_entropy = _impl.chain_entropy
chain_kl = _impl.chain_kl
chain_entropy_linlog = _impl.chain_entropy_linlog
chain_kl_linlog = _impl.chain_kl_linlog

__all__ = [
    "FORWARD_CALLS",
    "INIT_FORWARD_CALLS",
    "INIT_ORACLE_CALLS",
    "ITERATIONS",
    "LS_EVALS",
    "ORACLE_CALLS",
    "UPDATES",
    "add_local",
    "chain_entropy",
    "chain_entropy_linlog",
    "chain_kl",
    "chain_kl_linlog",
    "difference_direction",
    "dot_local",
    "emission_matrix",
    "expected_emission",
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
