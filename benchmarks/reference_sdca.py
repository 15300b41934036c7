"""A straightforward NumPy SDCA-gap epoch, in the style of the reference sdca4crf code.

This is P2's baseline (reports/performance.md): the same algorithm as crfopt's
``sdca-gap`` (docs/algorithms.md §3.1–3.3: Gibbs initialization, gap sampler with ρ = 0.8,
safeguarded Newton line search to 1e-3) written the way research code usually is — one
sequence at a time, per-sequence NumPy arrays for the dual marginals, log-space
forward–backward with ``logsumexp`` over each position, a Python sum tree for sampling.
It works on dense problems (OCR's pixels) and is used only to time an epoch.
"""

from __future__ import annotations

import math

import numpy as np


def logsumexp(x: np.ndarray, axis: int) -> np.ndarray:
    # scipy's logsumexp validates and broadcasts at ~10x the cost of these three lines
    m = x.max(axis=axis, keepdims=True)
    return np.squeeze(m, axis=axis) + np.log(np.exp(x - m).sum(axis=axis))


def forward_backward(su: np.ndarray, sp: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
    """log Z, node log-marginals (T×K) and edge log-marginals (T−1×K×K) of one chain."""
    T, K = su.shape
    la = np.empty((T, K))
    lb = np.zeros((T, K))
    la[0] = su[0]
    for t in range(1, T):
        la[t] = su[t] + logsumexp(la[t - 1][:, None] + sp[t - 1], axis=0)
    for t in range(T - 2, -1, -1):
        lb[t] = logsumexp(sp[t] + (su[t + 1] + lb[t + 1])[None, :], axis=1)
    log_z = float(logsumexp(la[-1], axis=0))
    node = la + lb - log_z
    edge = la[:-1, :, None] + sp + (su[1:] + lb[1:])[:, None, :] - log_z
    return log_z, node, edge


def tree_sum(f_node: np.ndarray, f_edge: np.ndarray) -> float:
    T = f_node.shape[0]
    if T == 1:
        return float(f_node.sum())
    return float(f_edge.sum() - f_node[1:-1].sum())


def kl_tree(lp_n, lp_e, lq_n, lq_e) -> float:
    """KL(p‖q) of two chain distributions given by their log-marginals."""
    return tree_sum(np.exp(lp_n) * (lp_n - lq_n), np.exp(lp_e) * (lp_e - lq_e))


class SumTree:
    """Sampling ∝ weights with O(log n) updates (as REF's sampler)."""

    def __init__(self, weights: np.ndarray):
        self.n = len(weights)
        self.size = 1 << (self.n - 1).bit_length()
        self.tree = np.zeros(2 * self.size)
        self.tree[self.size : self.size + self.n] = weights
        for j in range(self.size - 1, 0, -1):
            self.tree[j] = self.tree[2 * j] + self.tree[2 * j + 1]

    def update(self, i: int, value: float) -> None:
        j = i + self.size
        self.tree[j] = value
        j //= 2
        while j:
            self.tree[j] = self.tree[2 * j] + self.tree[2 * j + 1]
            j //= 2

    def sample(self, u: float) -> int:
        x = u * self.tree[1]
        j = 1
        while j < self.size:
            if x < self.tree[2 * j]:
                j = 2 * j
            else:
                x -= self.tree[2 * j]
                j = 2 * j + 1
        return min(j - self.size, self.n - 1)


class NumpySDCA:
    """SDCA-gap on a dense crfopt problem, one NumPy sequence at a time."""

    def __init__(self, problem, seed: int = 0, rho: float = 0.8, sub_precision: float = 1e-3):
        kd = problem.data
        if not kd.dense:
            raise ValueError("the NumPy reference handles dense problems (OCR) only")
        self.n, self.K = problem.n, problem.n_labels
        self.lam, self.rho, self.eps = problem.lam, rho, sub_precision
        self.rng = np.random.default_rng(seed)
        off = kd.offsets
        self.X = [np.ascontiguousarray(kd.X[off[i] : off[i + 1]]) for i in range(self.n)]
        self.Y = [kd.y[off[i] : off[i + 1]] for i in range(self.n)]
        A = kd.X.shape[1]
        K, n = self.K, self.n
        self.WE = np.zeros((K, A))
        self.WT = np.zeros((K, K))
        self.mu_n, self.mu_e = [], []
        ln = self.lam * n
        # Gibbs initialization (c = 10) and w = ŵ(μ) = Σ_i (F(y_i) − E_μi F) / (λ n)
        for X, y in zip(self.X, self.Y):
            T = len(y)
            su = np.zeros((T, K))
            su[np.arange(T), y] = 10.0
            sp = np.zeros((max(T - 1, 0), K, K))
            sp[np.arange(T - 1), y[:-1], y[1:]] = 10.0
            _, node, edge = forward_backward(su, sp)
            self.mu_n.append(node)
            self.mu_e.append(edge)
            onehot = np.zeros((T, K))
            onehot[np.arange(T), y] = 1.0
            self.WE += (onehot - np.exp(node)).T @ X / ln
            pair = np.zeros((K, K))
            np.add.at(pair, (y[:-1], y[1:]), 1.0)
            self.WT += (pair - np.exp(edge).sum(axis=0)) / ln
        self.gaps = np.full(n, 100.0)
        self.tree = SumTree(self.gaps.copy())
        self.ls_evals = 0

    def sample(self) -> int:
        if self.rng.random() < self.rho:
            return self.tree.sample(self.rng.random())
        return int(self.rng.integers(self.n))

    def step(self) -> None:
        i = self.sample()
        X, mun, mue = self.X[i], self.mu_n[i], self.mu_e[i]
        T = X.shape[0]
        su = X @ self.WE.T
        sp = np.broadcast_to(self.WT, (T - 1, self.K, self.K))
        _, nun, nue = forward_backward(su, sp)
        g = kl_tree(mun, mue, nun, nue)
        r = kl_tree(nun, nue, mun, mue)
        ln = self.lam * self.n
        pm_n, pm_e, pn_n, pn_e = np.exp(mun), np.exp(mue), np.exp(nun), np.exp(nue)
        dE = (pm_n - pn_n).T @ X / ln
        dT = (pm_e - pn_e).sum(axis=0) / ln
        a = float((dE * dE).sum() + (dT * dT).sum())
        gamma = self.line_search(g, r, a, pm_n, pm_e, pn_n, pn_e, nun, nue)
        if gamma > 0:
            self.mu_n[i] = (
                np.logaddexp(math.log1p(-gamma) + mun, math.log(gamma) + nun)
                if (gamma < 1)
                else nun
            )
            self.mu_e[i] = (
                np.logaddexp(math.log1p(-gamma) + mue, math.log(gamma) + nue)
                if (gamma < 1)
                else nue
            )
            self.WE += gamma * dE
            self.WT += gamma * dT
        self.gaps[i] = g
        self.tree.update(i, max(g, 0.0))

    def line_search(self, g, r, a, pm_n, pm_e, pn_n, pn_e, ln_n, ln_e) -> float:
        """rtsafe on f'(γ) (docs/algorithms.md §3.2)."""
        lna = self.lam * self.n * a
        if g + r <= 0:
            return 0.0
        if -lna >= 0:
            return 1.0
        dn, de = pn_n - pm_n, pn_e - pm_e

        def derivs(x: float) -> tuple[float, float]:
            self.ls_evals += 1
            gn, ge = pm_n + x * dn, pm_e + x * de
            with np.errstate(divide="ignore"):
                d1 = tree_sum(dn * (ln_n - np.log(gn)), de * (ln_e - np.log(ge))) - x * lna
            d2 = -tree_sum(dn * dn / gn, de * de / ge) - lna
            return d1, d2

        lo, hi = 1.0, 0.0
        x, dx2, dx = 0.5, 1.0, 1.0
        u, du = derivs(x)
        for _ in range(100):
            newton = u / du
            cand = x - newton
            if min(lo, hi) < cand < max(lo, hi) and abs(newton) <= abs(dx2) / 2:
                dx2, dx, x = dx, newton, cand
            else:
                dx2, dx = dx, (hi - lo) / 2
                x = lo + dx
            if abs(dx) < self.eps:
                return x
            u, du = derivs(x)
            if u < 0:
                lo = x
            else:
                hi = x
        return x

    def weights(self, problem) -> np.ndarray:
        A = problem.n_attributes
        return problem.pack(self.WE[:, :A], self.WE[:, A : A + 3], self.WT)
