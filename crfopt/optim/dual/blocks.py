"""A dual block: the stored marginals μ_i of one sequence, mixed with ν_i and stored back.

The pieces every dual coordinate method is made of (SDCA, its parallel and prox
variants; docs/algorithms.md §3.1, §5.2–5.4): load μ_i from the dual storage
(:func:`load`), ask the counted oracle for ν_i = ν_i(w) and form δ = ν_i − μ_i with the
two block divergences (:func:`block_gaps`), the primal direction of the block
(:func:`block_direction`), and, once a step γ is chosen, store μ_γ = μ_i + γδ as logs and
return its entropy (:func:`store_mixture`). All work in a :class:`Scratch` of one
sequence's tables, allocated once per run by :func:`make_scratch`.

The dual storage is a :class:`crfopt.DualMarginals`' pair of arrays (``log_nodes``
N × K, ``log_edges`` (N − n) × K × K, float64 or float32): sequence i's rows start at
``s = offsets[i]`` (nodes) and ``s − i`` (edges).

Mixtures are formed in linear space, μ + γδ, and their logs taken with the vectorized
log; where an entry is below :data:`TINY` the linear form could lose its relative
precision (or underflow), and its log comes from log space instead (:func:`log_mix`,
§5.2).
"""

from __future__ import annotations

import math
from collections import namedtuple

import numpy as np

from crfopt import kernels
from crfopt.kernels.jit import jit
from crfopt.kernels.vmath import log_scalar, vexp, vlog

__all__ = [
    "TINY",
    "Scratch",
    "block_direction",
    "block_gaps",
    "load",
    "log_mix",
    "log_mix_scalar",
    "make_scratch",
    "mix_tables",
    "store_mixture",
]

# Below this a linear-space mixture could lose its relative precision (or underflow):
# take the log of the mixture in log space instead (§5.2).
TINY = 1e-280

# Work arrays of one iteration. Each table exists flat (for the vectorized log/exp over
# all its entries) and shaped (nodes L×K, edges (L-1)×K×K) as a view of the same memory.
# m: μ_i, nu: ν_i, d: δ = ν - μ, x: μ + γδ; a leading l marks logs.
_FIELDS = ("m", "lm", "nu", "lnu", "d", "x", "lx")
Scratch = namedtuple(
    "Scratch",
    [f"{f}n_f" for f in _FIELDS]
    + [f"{f}e_f" for f in _FIELDS]
    + [f"{f}n" for f in _FIELDS]
    + [f"{f}e" for f in _FIELDS]
    + ["sum_m", "sum_nu"],  # K × K: Σ_t of μ_i's and ν_i's edge marginals
)
Scratch.__doc__ = """The tables of one sequence's dual block (:func:`make_scratch`).

For each of m (μ_i), lm (log μ_i), nu (ν_i), lnu (log ν_i), d (δ = ν_i − μ_i), x (μ_γ)
and lx (log μ_γ): ``<f>n_f`` / ``<f>e_f`` flat node / edge tables and ``<f>n`` (L × K) /
``<f>e`` ((L−1) × K × K) views of the same memory; ``sum_m``, ``sum_nu`` the K × K sums
of the edge marginals over positions."""

#: The number of flat tables a Scratch holds per node and per edge entry (memory sizing).
SCRATCH_TABLES = len(_FIELDS)


def make_scratch(max_len: int, K: int) -> Scratch:
    """Allocate the work arrays for sequences of up to ``max_len`` tokens."""
    L = max_len
    E = max(L - 1, 1)
    flat_n = [np.zeros(L * K) for _ in _FIELDS]
    flat_e = [np.zeros(E * K * K) for _ in _FIELDS]
    return Scratch(
        *flat_n,
        *flat_e,
        *[a.reshape(L, K) for a in flat_n],
        *[a.reshape(E, K, K) for a in flat_e],
        np.zeros((K, K)),
        np.zeros((K, K)),
    )


@jit
def log_mix_scalar(x, y, gamma):
    """log((1-γ) e^x + γ e^y) in log space (§5.2): max-shifted, so mixtures too small for
    linear space keep their precision; exactly x at γ = 0 and y at γ = 1."""
    if gamma <= 0.0:
        return x
    if gamma >= 1.0:
        return y
    a = x + math.log1p(-gamma)
    b = y + math.log(gamma)
    if a < b:
        a, b = b, a
    if a == -math.inf:
        return a
    return a + math.log1p(math.exp(b - a))


@jit
def log_mix(log_a, log_b, gamma, out):
    """out = log((1-γ) exp(log_a) + γ exp(log_b)), elementwise (:func:`log_mix_scalar`)."""
    fa = log_a.ravel()
    fb = log_b.ravel()
    fo = out.ravel()
    for j in range(fa.shape[0]):
        fo[j] = log_mix_scalar(fa[j], fb[j], gamma)


@jit(fastmath=True)
def _count_tiny(x, cnt):
    bad = 0
    for j in range(cnt):
        bad += 1 if x[j] <= TINY else 0
    return bad


@jit(fastmath=True)
def _mix_table(m, d, lm, lnu, x, lx, cnt, gamma):
    """x = μ + γδ and lx = log x over ``cnt`` flat entries (log space where x is tiny)."""
    for j in range(cnt):
        x[j] = m[j] + gamma * d[j]
    vlog(x, lx, cnt)
    if _count_tiny(x, cnt):
        for j in range(cnt):
            if x[j] <= TINY:
                lx[j] = log_mix_scalar(lm[j], lnu[j], gamma)


@jit(inline=True)
def mix_tables(gamma, sc, T, K):
    """x = μ + γδ and log x for the nodes and edges of the current sequence."""
    _mix_table(sc.mn_f, sc.dn_f, sc.lmn_f, sc.lnun_f, sc.xn_f, sc.lxn_f, T * K, gamma)
    _mix_table(sc.me_f, sc.de_f, sc.lme_f, sc.lnue_f, sc.xe_f, sc.lxe_f, (T - 1) * K * K, gamma)


@jit
def expand_rows(row_values, T, K, out):
    """out[t·K² + k·K + l] = row_values[t·K + k] for t < T - 1: a value per edge row
    repeated over its K entries, so that the edge loops run flat over (T-1)·K² entries.

    Loops over a row's K entries are too short for the vectorizer (K = 22, 26 is below
    its 8 lanes × 4 interleaved accumulators and ran scalar); flat loops are long.
    """
    for r in range((T - 1) * K):
        v = row_values[r]
        base = r * K
        for l in range(K):
            out[base + l] = v


@jit(inline=True)
def _stored_rows(mu_n, mu_e, s, es, T, K):
    """Sequence rows ``s``… (nodes) and ``es``… (edges) of the stored tables as flat
    slices. Loops over them index from 0: an offset s·K + j, read from memory and of
    unknown sign, takes numba's negative-index wrap-around per entry (1.25 against
    1.05 ns an edge entry in the commit)."""
    KK = K * K
    return mu_n.reshape(-1)[s * K : (s + T) * K], mu_e.reshape(-1)[es * KK : (es + T - 1) * KK]


@jit
def _load_tables(src_n, src_e, s, es, T, K, lmn, mn, lme, me):
    """Copy μ_i's logs from storage (float64 or float32) into the scratch tables, then
    exponentiate them with ``vexp`` (no work arrays allocated).

    Copy first, exponentiate after: on its own the fused loop (convert, ``exp_scalar``,
    range count per entry) took 16 µs per OCR sequence, the two passes 10 µs, with
    bit-equal results (``vexp`` is ``exp_scalar`` plus libm where that is out of range).
    Within an SDCA epoch the gain is smaller (1–2 %): the reads of μ_i from memory bound
    both.
    """
    TK = T * K
    KK = K * K
    n_e = (T - 1) * KK
    flat_n, flat_e = _stored_rows(src_n, src_e, s, es, T, K)
    for j in range(TK):
        lmn[j] = np.float64(flat_n[j])
    for j in range(n_e):
        lme[j] = np.float64(flat_e[j])
    vexp(lmn, mn, TK)
    vexp(lme, me, (T - 1) * KK)


@jit(inline=True)
def load(mu_n, mu_e, s, es, T, K, sc):
    """μ_i (rows ``s``/``es`` of the storage, float64 or float32) into ``sc``: its logs
    and their exponentials."""
    _load_tables(mu_n, mu_e, s, es, T, K, sc.lmn_f, sc.mn_f, sc.lme_f, sc.me_f)


@jit(fastmath=True)
def _delta_kls(T, K, mn, lmn, nun, lnun, dn, me, lme, nue, lnue, de, rm, rn):
    """δ = ν - μ into ``dn``/``de`` and (D̃(μ‖ν), D̃(ν‖μ)) in one pass over the tables.

    The chain-rule forms of ``kernels.chain_kl_linlog`` (§5.3): both KLs share the
    conditional log-ratio of each entry, D̃(ν‖μ)'s being its negation. ``rm``/``rn``
    receive the rows' node logs repeated over their edge entries (flat, long loops).
    """
    g = 0.0
    r = 0.0
    for j in range(T * K):
        dn[j] = nun[j] - mn[j]
    for k in range(K):
        dl = lmn[k] - lnun[k]
        m = mn[k]
        nu = nun[k]
        g += m * dl if m > 0.0 else 0.0
        r -= nu * dl if nu > 0.0 else 0.0
    expand_rows(lmn, T, K, rm)
    expand_rows(lnun, T, K, rn)
    for j in range((T - 1) * K * K):
        m = me[j]
        nu = nue[j]
        de[j] = nu - m
        dl = (lme[j] - rm[j]) - (lnue[j] - rn[j])
        g += m * dl if m > 0.0 else 0.0
        r -= nu * dl if nu > 0.0 else 0.0
    return g, r


@jit(inline=True)
def block_gaps(data, counters, mu_n, mu_e, w, sc, i, T, K):
    """Load μ_i, ask the counted oracle for ν_i = ν_i(w), form δ = ν_i − μ_i; returns
    (g_i, r_i) = (D̃(μ_i‖ν_i), D̃(ν_i‖μ_i)), clipped at 0 (LPL18 eqs. 10–11, 20)."""
    s = data.offsets[i]
    load(mu_n, mu_e, s, s - i, T, K, sc)
    kernels.oracle_marginals(data, counters, i, w, sc.lnun, sc.lnue, sc.nun, sc.nue)
    g_i, r_i = _delta_kls(
        T,
        K,
        sc.mn_f,
        sc.lmn_f,
        sc.nun_f,
        sc.lnun_f,
        sc.dn_f,
        sc.me_f,
        sc.lme_f,
        sc.nue_f,
        sc.lnue_f,
        sc.de_f,
        sc.xe_f,
        sc.lxe_f,
    )
    return (g_i if g_i > 0.0 else 0.0), (r_i if r_i > 0.0 else 0.0)


@jit(inline=True)
def block_direction(data, w, lam_n, sc, i, T, K, E_loc, trans_loc):
    """v = (E_{μ_i}F − E_{ν_i}F)/(λn) on the sequence's support (LPL18 Alg. 2, corrected
    form, docs/algorithms.md §1.4), from the tables :func:`block_gaps` left; returns
    a = ‖v‖², b = ⟨w, v⟩."""
    xn, mn, nun = sc.xn, sc.mn, sc.nun
    sum_m, sum_nu, me, nue = sc.sum_m, sc.sum_nu, sc.me, sc.nue
    for t in range(T):  # x is free until the line search: it holds (μ − ν)/(λn) a moment
        for k in range(K):
            xn[t, k] = (mn[t, k] - nun[t, k]) / lam_n
    sum_m[:, :] = 0.0
    sum_nu[:, :] = 0.0
    for t in range(T - 1):
        for k in range(K):
            for l in range(K):
                sum_m[k, l] += me[t, k, l]
                sum_nu[k, l] += nue[t, k, l]
    kernels.difference_direction(data, i, xn, sum_m, sum_nu, lam_n, E_loc, trans_loc)
    a = kernels.norm2_local(data, i, E_loc, trans_loc)
    return a, kernels.dot_local(data, i, w, E_loc, trans_loc)


@jit(fastmath=True)
def _store_fused(gamma, T, K, mn, dn, me, de, xn, lxn, rows, mu_n, mu_e, s, es):
    """Store log μ_γ (μ_γ = μ + γδ) as sequence i's dual and return (H̃(μ_γ), bad).

    One pass per table: mix, log (``log_scalar``, inlined so the loop vectorizes),
    store clipped at 0 and the chain-rule entropy of ``kernels.chain_entropy_linlog``.
    The node tables x, log x are written (the entropy's conditionals need them, repeated
    per edge entry into ``rows``). ``bad`` counts entries μ_γ ≤ TINY, whose log must
    come from log space: the caller then redoes the store through the tables (every
    stored entry is overwritten).
    """
    TK = T * K
    KK = K * K
    bad = 0
    for j in range(TK):
        x = mn[j] + gamma * dn[j]
        xn[j] = x
        lxn[j] = log_scalar(x)
        bad += 0 if x > TINY else 1
    if bad:
        return 0.0, bad
    n_e = (T - 1) * KK
    dst_n, dst_e = _stored_rows(mu_n, mu_e, s, es, T, K)  # the stores run in long loops
    for j in range(TK):
        v = lxn[j]
        dst_n[j] = v if v < 0.0 else 0.0
    H = 0.0
    for k in range(K):
        H -= xn[k] * lxn[k]
    expand_rows(lxn, T, K, rows)
    acc = 0.0
    for j in range(n_e):
        x = me[j] + gamma * de[j]
        lx = log_scalar(x)
        bad += 0 if x > TINY else 1
        dst_e[j] = lx if lx < 0.0 else 0.0
        acc += x * (lx - rows[j])
    return H - acc, bad


@jit(inline=True)
def _store_tables(mu_n, mu_e, sc, s, es, T, K, gamma):
    """:func:`_store_fused` through the tables x = μ_γ, lx = log μ_γ (:func:`mix_tables`,
    log space where μ_γ is tiny); returns H̃(μ_γ)."""
    lxn, lxe = sc.lxn, sc.lxe
    mix_tables(gamma, sc, T, K)
    for t in range(T):
        for k in range(K):
            v = lxn[t, k]
            mu_n[s + t, k] = v if v < 0.0 else 0.0
    for t in range(T - 1):
        for k in range(K):
            for l in range(K):
                v = lxe[t, k, l]
                mu_e[es + t, k, l] = v if v < 0.0 else 0.0
    return kernels.chain_entropy_linlog(sc.xn, sc.xe, lxn, lxe, T, K)


@jit(inline=True)
def store_mixture(mu_n, mu_e, sc, s, es, T, K, gamma):
    """Store μ_γ = μ_i + γδ as logs in rows ``s``/``es`` (clipped at 0; exact at γ ∈ {0, 1})
    and return H̃(μ_γ): one fused pass, or the log-space tables when some entry of μ_γ is
    tiny (:func:`mix_tables`)."""
    h_new, bad = _store_fused(
        gamma,
        T,
        K,
        sc.mn_f,
        sc.dn_f,
        sc.me_f,
        sc.de_f,
        sc.xn_f,
        sc.lxn_f,
        sc.xe_f,
        mu_n,
        mu_e,
        s,
        es,
    )
    if bad:
        h_new = _store_tables(mu_n, mu_e, sc, s, es, T, K, gamma)
    return h_new
