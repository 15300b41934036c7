"""Counted oracles (docs/algorithms.md §1.5, §2): inference on one sequence, charged.

Every entry point starts with :func:`_counted`, which charges one call to its counter
(``oracle_calls`` or ``forward_calls``) and one chain execution to the split's audit cell,
so a plugin's compiled loop counts exactly as a Python call through the problem does.
The oracles on ``w`` form the unary scores and the transition view with
:func:`_scores_at` and return (log Z_i, ℓ_i) through :func:`_with_nll`; the oracles on
score tables (OEG, dual initialization, line-search trials) return log Z of the tables
given.
"""

from __future__ import annotations

import numba
import numpy as np

from crfopt.kernels._numba.chain import (
    NO_BASE,
    NO_TRUTH,
    chain_log_marginals,
    chain_log_partition,
    chain_marginal_sums,
    chain_marginals,
)
from crfopt.kernels._numba.flags import NJIT
from crfopt.kernels._numba.scores import transition_matrix, truth_score, unary_scores
from crfopt.kernels.counters import FORWARD_CALLS, ORACLE_CALLS


@numba.njit(inline="always", **NJIT)
def _counted(data, counters, i, slot):
    """Charge one call to counter ``slot`` and one chain execution to the audit cell;
    returns (T_i, K)."""
    counters[slot] += 1
    data.audit[0] += 1
    return data.offsets[i + 1] - data.offsets[i], data.n_labels


@numba.njit(inline="always", **NJIT)
def _scores_at(data, i, w, T, K):
    """(unary scores of sequence i in a new T × K table, the transition view of w)."""
    unary = np.empty((T, K))
    unary_scores(data, i, w, unary)
    return unary, transition_matrix(data, w)


@numba.njit(inline="always", **NJIT)
def _with_nll(data, i, log_z, unary, transition):
    """(log Z_i, ℓ_i = log Z_i - s(x_i, y_i)) under the given scores."""
    return log_z, log_z - truth_score(data, i, unary, transition)


@numba.njit(**NJIT)
def oracle(data, counters, i, w, log_nodes, log_edges):
    """Counted oracle: (log Z_i, ℓ_i(w)); log-marginals of ν_i(w) into the outputs.

    ``log_nodes`` needs ≥ T_i rows of K, ``log_edges`` ≥ T_i - 1 tables of K × K.
    """
    T, K = _counted(data, counters, i, ORACLE_CALLS)
    unary, transition = _scores_at(data, i, w, T, K)
    shared = transition.reshape((1, K, K))
    log_z = chain_log_marginals(unary, shared, True, T, K, log_nodes, log_edges)
    return _with_nll(data, i, log_z, unary, transition)


@numba.njit(**NJIT)
def oracle_marginals(data, counters, i, w, log_nodes, log_edges, nodes, edges):
    """Counted oracle with both forms of ν_i(w): log-marginals and linear marginals.

    What dual methods need (SDCA's line search mixes linear marginals and takes their
    logs); costs the same as :func:`oracle` on the scaled path.
    """
    T, K = _counted(data, counters, i, ORACLE_CALLS)
    unary, transition = _scores_at(data, i, w, T, K)
    shared = transition.reshape((1, K, K))
    log_z = chain_marginals(
        unary, shared, True, T, K, log_nodes, log_edges, True, nodes, edges, NO_BASE, NO_TRUTH
    )
    return _with_nll(data, i, log_z, unary, transition)


@numba.njit(**NJIT)
def oracle_sums(data, counters, i, w, nodes, edge_sum):
    """Counted oracle in gradient form: (log Z_i, ℓ_i); linear node marginals into
    ``nodes[:T]`` and Σ_t pairwise marginals into ``edge_sum`` (overwritten)."""
    T, K = _counted(data, counters, i, ORACLE_CALLS)
    unary, transition = _scores_at(data, i, w, T, K)
    edge_sum[:, :] = 0.0
    log_z = chain_marginal_sums(unary, transition, T, K, nodes, edge_sum)
    return _with_nll(data, i, log_z, unary, transition)


@numba.njit(**NJIT)
def oracle_sums_scores(data, counters, i, unary, transition, nodes, edge_sum, work=None):
    """Counted oracle in gradient form on score tables with shared transitions.

    For methods that keep w implicitly (w = s·u): (log Z, ℓ_i) of the chain with these
    scores; linear node marginals into ``nodes`` and Σ_t pairwise marginals into
    ``edge_sum`` (overwritten). ``nll`` uses the sequence's ground truth. ``work``, a
    ChainWork (``pieces.chain_work``), spares the call its allocations.
    """
    T, K = _counted(data, counters, i, ORACLE_CALLS)
    edge_sum[:, :] = 0.0
    log_z = chain_marginal_sums(unary, transition, T, K, nodes, edge_sum, work)
    return _with_nll(data, i, log_z, unary, transition)


@numba.njit(**NJIT)
def forward(data, counters, i, w):
    """Counted forward-only call: (log Z_i, ℓ_i(w))."""
    T, K = _counted(data, counters, i, FORWARD_CALLS)
    unary, transition = _scores_at(data, i, w, T, K)
    log_z = chain_log_partition(unary, transition.reshape((1, K, K)), True, T, K)
    return _with_nll(data, i, log_z, unary, transition)


@numba.njit(**NJIT)
def oracle_scores(data, counters, i, unary, pairwise, log_nodes, log_edges):
    """Counted oracle on arbitrary score tables: unary (T × K), pairwise (T-1 × K × K).

    Returns log Z(θ); log-marginals into the outputs. Serves OEG and dual initialization.
    """
    T, K = _counted(data, counters, i, ORACLE_CALLS)
    if T == 1:
        return chain_log_marginals(unary, np.zeros((1, K, K)), True, T, K, log_nodes, log_edges)
    return chain_log_marginals(unary, pairwise, False, T, K, log_nodes, log_edges)


@numba.njit(**NJIT)
def _one_token(unary, K, log_nodes, log_edges, linear, nodes, edges):
    """A chain of one token: no edge table, the shared path on a zero one."""
    one = np.zeros((1, K, K))
    return chain_marginals(
        unary, one, True, 1, K, log_nodes, log_edges, linear, nodes, edges, NO_BASE, NO_TRUTH
    )


@numba.njit(**NJIT)
def oracle_scores_marginals(data, counters, i, unary, pairwise, log_nodes, log_edges, nodes, edges):
    """:func:`oracle_scores` with the linear marginals too: nodes into ``nodes[:T]``, edges
    into ``edges[:T-1]`` (on the scaled path products of the messages, no exp; OEG's
    trials need both forms and took an exp of every edge entry otherwise)."""
    T, K = _counted(data, counters, i, ORACLE_CALLS)
    if T == 1:
        return _one_token(unary, K, log_nodes, log_edges, True, nodes, edges)
    return chain_marginals(
        unary, pairwise, False, T, K, log_nodes, log_edges, True, nodes, edges, NO_BASE, NO_TRUTH
    )


@numba.njit(**NJIT)
def oracle_scores_bonus(
    data,
    counters,
    i,
    unary,
    transition,
    bonus,
    pairwise,
    log_nodes,
    log_edges,
    nodes,
    edges,
    linear,
    logs=True,
):
    """Counted oracle on unary scores and edge tables θ_t = ``transition`` + ``bonus`` at
    the ground-truth pair (y_t, y_{t+1}): the form of OEG's trial scores (§3.8), whose
    edge part is one K × K table plus ρ_i·c on the truth.

    Writes θ_t into ``pairwise[:T-1]`` (``transition[y_t, y_{t+1}] + bonus`` at the pair)
    and returns log Z; the log-marginals go into ``log_nodes``/``log_edges`` and, with
    ``linear``, the linear ones into ``nodes``/``edges``. Bit for bit
    :func:`oracle_scores` (``linear``: :func:`oracle_scores_marginals`) on the tables it
    writes, but ``transition`` is scanned for its extremes and exponentiated once instead
    of once per position (:func:`bonus_table_maxima`, :func:`exp_tables_bonus`).
    ``logs=False`` with ``linear``: the log-marginal arrays are work space, their contents
    unspecified, and the scaled path skips them (:func:`chain_marginals`' ``want_logs``);
    log Z and the linear marginals are bit for bit those of ``logs=True``.
    """
    T, K = _counted(data, counters, i, ORACLE_CALLS)
    s = data.offsets[i]
    y = data.y
    for t in range(T - 1):
        for k in range(K):
            for l in range(K):
                pairwise[t, k, l] = transition[k, l]
        k = y[s + t]
        l = y[s + t + 1]
        pairwise[t, k, l] = transition[k, l] + bonus
    if T == 1:
        return _one_token(unary, K, log_nodes, log_edges, linear, nodes, edges)
    return chain_marginals(
        unary,
        pairwise[: T - 1],
        False,
        T,
        K,
        log_nodes,
        log_edges,
        linear,
        nodes,
        edges,
        transition,
        y[s : s + T],
        logs,
    )


@numba.njit(**NJIT)
def forward_scores(data, counters, i, unary, transition, work=None):
    """Counted forward-only call on score tables with shared transitions: log Z(θ).
    ``work``, a ChainWork (``pieces.chain_work``), spares the call its allocations."""
    T, K = _counted(data, counters, i, FORWARD_CALLS)
    return chain_log_partition(unary, transition.reshape((1, K, K)), True, T, K, work)
