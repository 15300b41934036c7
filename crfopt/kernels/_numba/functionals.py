"""Entropy and KL divergence of chain marginals (docs/algorithms.md §1.3, §5.3).

The chain-rule forms: H̃(μ) = H(μ_1) + Σ_t H(Y_{t+1} | Y_t) and D̃(μ ‖ ν) as a sum of
non-negative conditional KLs, from log-marginals (``chain_entropy``, ``chain_kl``) or,
for loops that hold both forms already, from linear and log marginals with no
transcendental function (``chain_entropy_linlog``, ``chain_kl_linlog``).
"""

from __future__ import annotations

import math

import numba
import numpy as np

from crfopt.kernels._numba.flags import FAST, NJIT
from crfopt.kernels._numba.tables import lse_row


@numba.njit(**NJIT)
def chain_entropy(log_nodes, log_edges, T, K):
    """H̃(μ) = H(μ_1) + Σ_t H(Y_{t+1} | Y_t), μ_t taken as row sums of the edge tables."""
    H = 0.0
    if T == 1:
        for k in range(K):
            lp = log_nodes[0, k]
            if lp > -np.inf:
                H -= math.exp(lp) * lp
        return H
    lr = np.empty(K)
    for k in range(K):
        lr[k] = lse_row(log_edges[0, k], K)
        if lr[k] > -np.inf:
            H -= math.exp(lr[k]) * lr[k]
    for t in range(T - 1):
        tab = log_edges[t]
        for k in range(K):
            if t > 0:
                lr[k] = lse_row(tab[k], K)
            for l in range(K):
                lp = tab[k, l]
                if lp > -np.inf:
                    H -= math.exp(lp) * (lp - lr[k])
    return H


@numba.njit(**NJIT)
def chain_kl(mu_nodes, mu_edges, nu_nodes, nu_edges, T, K):
    """D̃(μ ‖ ν) as a sum of non-negative conditional KLs (§5.3); 0 log 0 = 0."""
    D = 0.0
    if T == 1:
        for k in range(K):
            lp = mu_nodes[0, k]
            if lp > -np.inf:
                D += math.exp(lp) * (lp - nu_nodes[0, k])
        return D
    lm = np.empty(K)
    ln = np.empty(K)
    for k in range(K):
        lm[k] = lse_row(mu_edges[0, k], K)
        ln[k] = lse_row(nu_edges[0, k], K)
        if lm[k] > -np.inf:
            D += math.exp(lm[k]) * (lm[k] - ln[k])
    for t in range(T - 1):
        tm = mu_edges[t]
        tn = nu_edges[t]
        for k in range(K):
            if t > 0:
                lm[k] = lse_row(tm[k], K)
                ln[k] = lse_row(tn[k], K)
            for l in range(K):
                lp = tm[k, l]
                if lp > -np.inf:
                    D += math.exp(lp) * ((lp - lm[k]) - (tn[k, l] - ln[k]))
    return D


@numba.njit(**FAST)
def chain_kl_linlog(p_nodes, p_edges, lp_nodes, lp_edges, lq_nodes, lq_edges, T, K):
    """D̃(p ‖ q) in the chain-rule form (§5.3) from linear p and the logs of p and q.

    For loops that hold both forms of p already (SDCA): the node log-marginals give the
    conditionals, so no transcendental function is evaluated. Entries with p = 0 add
    nothing (0 log 0 = 0); p > 0 where q = 0 gives +inf.
    """
    total = 0.0
    for k in range(K):
        if p_nodes[0, k] > 0.0:
            total += p_nodes[0, k] * (lp_nodes[0, k] - lq_nodes[0, k])
    for t in range(T - 1):
        for k in range(K):
            rp = lp_nodes[t, k]
            rq = lq_nodes[t, k]
            for l in range(K):
                p = p_edges[t, k, l]
                if p > 0.0:
                    total += p * ((lp_edges[t, k, l] - rp) - (lq_edges[t, k, l] - rq))
    return total


@numba.njit(**FAST)
def chain_entropy_linlog(nodes, edges, log_nodes, log_edges, T, K):
    """H̃(μ) in the chain-rule form (§1.3) from linear and log marginals, 0 log 0 = 0."""
    H = 0.0
    for k in range(K):
        if nodes[0, k] > 0.0:
            H -= nodes[0, k] * log_nodes[0, k]
    for t in range(T - 1):
        for k in range(K):
            r = log_nodes[t, k]
            for l in range(K):
                p = edges[t, k, l]
                if p > 0.0:
                    H -= p * (log_edges[t, k, l] - r)
    return H
