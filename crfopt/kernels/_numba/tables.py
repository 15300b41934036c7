"""Extremes and exponentials of edge score tables, for the scaled forward–backward.

The scaled pass (:mod:`crfopt.kernels._numba.chain`) works on E = exp(θ_edge - max θ_edge)
and its transpose; these kernels find the maxima (and the spans that decide between the
scaled and the log-space pass) and form E, Eᵀ for a shared transition table, for one
table per position, and for OEG's tables that equal one base table but at the
ground-truth pair (:func:`exp_tables_bonus`).
"""

from __future__ import annotations

import math

import numba
import numpy as np

from crfopt.kernels._numba.flags import FAST, NJIT
from crfopt.kernels.vmath import exp_scalar, vexp


@numba.njit(**NJIT)
def row_span(unary, T, K):
    """The largest max - min over the first T rows of a score table."""
    span = 0.0
    for t in range(T):
        mx = unary[t, 0]
        mn = mx
        for k in range(1, K):
            v = unary[t, k]
            if v > mx:
                mx = v
            if v < mn:
                mn = v
        if mx - mn > span:
            span = mx - mn
    return span


@numba.njit(**NJIT)
def table_span(transition, K):
    """(max, max - min) of a K × K table (:func:`table_extrema`)."""
    mx, mn = table_extrema(transition, K)
    return mx, mx - mn


@numba.njit(**NJIT)
def table_extrema(transition, K):
    """(max, min) of a K × K table.

    Four running extrema instead of one: a single max/min chain is a loop-carried
    dependency that LLVM will not vectorize without ``nnan``, and every oracle call pays
    it on K² entries (0.66 µs of a 4.5 µs forward pass at K = 26; four lanes: 0.20 µs).
    Max and min are exact, so the lanes change no result.
    """
    mx0 = transition[0, 0]
    mx1 = mx2 = mx3 = mn0 = mn1 = mn2 = mn3 = mx0
    for k in range(K):
        row = transition[k]
        l = 0
        while l + 4 <= K:
            v0 = row[l]
            v1 = row[l + 1]
            v2 = row[l + 2]
            v3 = row[l + 3]
            mx0 = v0 if v0 > mx0 else mx0
            mn0 = v0 if v0 < mn0 else mn0
            mx1 = v1 if v1 > mx1 else mx1
            mn1 = v1 if v1 < mn1 else mn1
            mx2 = v2 if v2 > mx2 else mx2
            mn2 = v2 if v2 < mn2 else mn2
            mx3 = v3 if v3 > mx3 else mx3
            mn3 = v3 if v3 < mn3 else mn3
            l += 4
        while l < K:
            v0 = row[l]
            mx0 = v0 if v0 > mx0 else mx0
            mn0 = v0 if v0 < mn0 else mn0
            l += 1
    mx = max(max(mx0, mx1), max(mx2, mx3))
    mn = min(min(mn0, mn1), min(mn2, mn3))
    return mx, mn


@numba.njit(inline="always", **FAST)
def _shift_exp_transpose(table, mx, K, shifted, E, ET):
    """E = exp(table - mx) and ET = Eᵀ for one K × K table, ``shifted`` (K² entries)
    holding the differences: the K² exponentials go through the vectorized exp.

    Per-sequence oracles redo this for every call (w changes between calls); ``mx`` is
    the table's maximum, already known from the caller's span test (a second scan of
    the K² entries cost as much as their exponentials).
    """
    for k in range(K):
        for l in range(K):
            shifted[k * K + l] = table[k, l] - mx
    vexp(shifted, E.reshape(K * K), K * K)
    for k in range(K):
        for l in range(K):
            ET[l, k] = E[k, l]


@numba.njit(**FAST)
def exp_table(transition, K, mT, E, ET):
    """E = exp(W - mT) and its transpose for one K × K table W of maximum mT."""
    _shift_exp_transpose(transition, mT, K, np.empty(K * K), E, ET)


@numba.njit(**FAST)
def exp_tables(pairwise, T, K, E, ET, mT):
    """Per-position E_t = exp(θ_t - max θ_t) and transposes for (T-1, K, K) edge tables,
    with the maxima already in ``mT`` (:func:`table_maxima`). The exponential of each
    entry does not depend on how the entries are batched, so table by table gives the
    bits one call over all of them gave."""
    shifted = np.empty(K * K)
    for t in range(T - 1):
        _shift_exp_transpose(pairwise[t], mT[t], K, shifted, E[t], ET[t])


@numba.njit(**FAST)
def exp_tables_bonus(pairwise, base, mB, truth, T, K, E, ET, mT, slot, rep, rep_idx):
    """:func:`exp_tables` for tables equal to ``base`` but at the truth pair
    (``truth[t]``, ``truth[t + 1]``) of each position (:func:`oracle_scores_bonus`).

    exp(base - mB) (mB = max base) and its transpose go into E[0], ET[0], once: they serve every
    position whose maximum is base's (``slot[t] = 0``), with the one row that holds the
    truth entry replaced (``rep[t]``, ``rep_idx[t]``: the row of E and of ET), and only
    that entry exponentiated. A position whose truth entry is its maximum gets its own
    table, as in :func:`exp_tables`. Bit for bit :func:`exp_tables`: each entry is the
    same difference, exponentiated by the same arithmetic (``exp_scalar`` where
    ``vexp`` takes it, libm where ``vexp`` does).
    """
    shares = 0
    for t in range(T - 1):
        shares += 1 if mT[t] == mB else 0
    if shares:  # else every truth entry is its table's maximum (OEG's first visits)
        exp_table(base, K, mB, E[0], ET[0])
    Eb = E[0]
    EbT = ET[0]
    shifted = np.empty(K * K)
    own = 0
    for t in range(T - 1):
        mx = mT[t]
        if mx == mB:
            k = truth[t]
            l = truth[t + 1]
            x = pairwise[t, k, l] - mx
            v = exp_scalar(x) if (x >= -708.0 and x < 709.0) else math.exp(x)
            slot[t] = 0
            rep_idx[t, 0] = k
            rep_idx[t, 1] = l
            for j in range(K):
                rep[t, 0, j] = Eb[k, j]
                rep[t, 1, j] = EbT[l, j]
            rep[t, 0, l] = v
            rep[t, 1, k] = v
            continue
        own += 1
        slot[t] = own
        rep_idx[t, 0] = -1
        rep_idx[t, 1] = -1
        _shift_exp_transpose(pairwise[t], mx, K, shifted, E[own], ET[own])


@numba.njit(**NJIT)
def table_maxima(pairwise, shared, T, K, mT):
    """Largest max - min over the edge tables that a chain of length T uses; each
    table's max into ``mT`` (one entry when ``shared``), for the exponentials after."""
    if shared:
        mT[0], span = table_span(pairwise[0], K)
        return span
    span = 0.0
    for t in range(T - 1):
        mT[t], s = table_span(pairwise[t], K)
        if s > span:
            span = s
    return span


@numba.njit(**NJIT)
def bonus_table_maxima(pairwise, base, truth, T, K, mT):
    """(:func:`table_maxima`, max base) for tables equal to ``base`` but at the truth pair
    (:func:`exp_tables_bonus`): one scan of ``base`` instead of T - 1 scans of K².

    Where a position's truth entry e is at least base's v there, and v is above
    min base, the table's min is min base; its max is e if e > max base, else max base
    unless e equals it (then the two scans could keep zeros of different sign). Such a
    position takes both from base's scan: the same values, bit for bit, since entries
    that cannot be an extremum do not change which entry each of the scan's lanes keeps.
    Any other position (a negative or NaN bonus, a truth entry at base's minimum or
    equal to its maximum) is scanned as :func:`table_maxima` does.
    """
    mB, nB = table_extrema(base, K)
    span = 0.0
    for t in range(T - 1):
        k = truth[t]
        l = truth[t + 1]
        v = base[k, l]
        e = pairwise[t, k, l]
        if e >= v and v > nB and e != mB:  # False with any NaN
            mx = e if e > mB else mB
            s = mx - nB
        else:
            mx, s = table_span(pairwise[t], K)
        mT[t] = mx
        if s > span:
            span = s
    return span, mB


@numba.njit(**NJIT)
def lse_row(x, K):
    """log Σ_k exp(x[k]) over the first K entries, max-shifted (-inf if all are)."""
    mx = x[0]
    for k in range(1, K):
        if x[k] > mx:
            mx = x[k]
    if mx == -np.inf:
        return mx
    s = 0.0
    for k in range(K):
        s += math.exp(x[k] - mx)
    return mx + math.log(s)


@numba.njit(**NJIT)
def clip0(x):
    """min(x, 0): a log-probability that rounding pushed above 0 is 0."""
    return x if x < 0.0 else 0.0


@numba.njit(**NJIT)
def fill_zero(a):
    """a[:, :] = 0 as a loop. The batch chunk kernels run under parallel_chunksize(1),
    and an array expression in a parallel=True function is a parfor of its own,
    scheduled one entry per piece of work (see the reduction of batch._batch_chunks):
    each chunk kernel's only parfor is its prange (tests/test_oracle.py checks)."""
    for r in range(a.shape[0]):
        for k in range(a.shape[1]):
            a[r, k] = 0.0
