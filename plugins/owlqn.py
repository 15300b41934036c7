"""OWL-QN on the elastic-net primal (docs/algorithms.md §3.12; Andrew & Gao 2007).

The full-batch baseline for σ > 0, and what CRFsuite trains with whenever c1 > 0
(``lbfgs`` with ``orthantwise_c = c1``). P(w) = f(w) + σ‖w‖₁ with f = L + λ/2‖·‖²
smooth; the problem's ``value_and_gradient`` gives P(w) and ∇f(w) in one counted pass
(n oracle calls). Each iteration:

1. the pseudo-gradient ◇P(w): ∇f ± σ on non-zero coordinates, and on zero ones the
   one-sided derivative that points downhill (0 when neither does);
2. the L-BFGS two-loop recursion applied to ◇P with the last m pairs
   (s = Δw, y = Δ∇f: the curvature is the smooth part's), then every coordinate of
   the direction whose sign disagrees with −◇P set to zero;
3. a backtracking line search along the orthant ξ (sign of w, or of −◇P where w = 0):
   each trial point is projected onto ξ's orthant (coordinates that cross zero become
   zero) and accepted when P(w') ≤ P(w) + c ⟨◇P(w), w' − w⟩; the step halves.

Defaults are CRFsuite's (liblbfgs as CRFsuite sets it for c1 > 0): m = 6
(``num_memories``), at most 20 trials per line search (``max_linesearch``),
backtracking with c = 1e-4 (``ftol``) and halving, first step 1/‖d‖, then 1. With σ = 0
no coordinate is projected and this is L-BFGS with an Armijo backtracking search.

No tolerance stops the method: the runner's budget does. It stops itself
(``converged``) only when the pseudo-gradient is exactly zero or when a line search
from a fresh memory finds no decrease in floating point.
"""

from __future__ import annotations

import numpy as np

import crfopt


def pseudo_gradient(w: np.ndarray, grad: np.ndarray, sigma: float) -> np.ndarray:
    """◇P(w) of P = f + σ‖·‖₁ from the smooth gradient ``grad`` = ∇f(w) (Andrew & Gao eq. 4)."""
    out = np.empty_like(grad)
    _pseudo_gradient(np.asarray(w, dtype=float), np.asarray(grad, dtype=float), sigma, out)
    return out


# The vector algebra of an iteration, one loop per step: dozens of dim-sized NumPy and
# BLAS calls with their temporaries cost as much as a value+gradient pass on a
# 700-sentence problem (docs/algorithms.md §3.12). fastmath vectorizes the sums.
@crfopt.jit(fastmath=True)
def _pseudo_gradient(w, grad, sigma, out):
    """``out`` = ◇P(w); returns whether any entry is non-zero."""
    nonzero = False
    for j in range(w.shape[0]):
        g = grad[j]
        if w[j] > 0:
            v = g + sigma
        elif w[j] < 0:
            v = g - sigma
        elif w[j] == 0 and g + sigma < 0:  # the one-sided derivative that descends
            v = g + sigma
        elif w[j] == 0 and g - sigma > 0:
            v = g - sigma
        else:
            v = 0.0
        out[j] = v
        nonzero = nonzero or v != 0
    return nonzero


@crfopt.jit(fastmath=True)
def _two_loop(pg, S, Y, rho, newest, count, alpha, d):
    """``d`` = −H·◇P by the two-loop recursion over the ``count`` newest pairs of the ring
    buffers ``S``, ``Y`` (row ``newest`` the newest), H₀ = ⟨s, y⟩/⟨y, y⟩ of the newest."""
    m = S.shape[0]
    for j in range(d.shape[0]):
        d[j] = -pg[j]
    for t in range(count):
        k = (newest - t) % m
        alpha[t] = rho[k] * _dot(S[k], d)
        _axpy(-alpha[t], Y[k], d)
    if count:
        y = Y[newest]
        h0 = 1.0 / (rho[newest] * _dot(y, y))
        for j in range(d.shape[0]):
            d[j] *= h0
    for t in range(count - 1, -1, -1):
        k = (newest - t) % m
        _axpy(alpha[t] - rho[k] * _dot(Y[k], d), S[k], d)


@crfopt.jit(fastmath=True, inline=True)
def _dot(a, b):
    # on 1-D rows indexed from 0 (not S[k, j], whose index numba wraps around when
    # negative), so that LLVM vectorizes the loop
    acc = 0.0
    for j in range(a.shape[0]):
        acc += a[j] * b[j]
    return acc


@crfopt.jit(fastmath=True, inline=True)
def _axpy(c, x, y):
    """y += c·x."""
    for j in range(x.shape[0]):
        y[j] += c * x[j]


@crfopt.jit(fastmath=True)
def _constrain(d, pg):
    """Zero every coordinate of ``d`` that does not descend along −◇P; returns ‖d‖² after."""
    norm2 = 0.0
    for j in range(d.shape[0]):
        if d[j] * pg[j] >= 0:
            d[j] = 0.0
        norm2 += d[j] * d[j]
    return norm2


@crfopt.jit(fastmath=True)
def _trial_point(w, d, step, pg, project, w_new):
    """``w_new`` = w + step·d, projected onto the orthant ξ (sign of w, or of −◇P where
    w = 0) when ``project``; returns ⟨◇P, w_new − w⟩."""
    slope = 0.0
    for j in range(w.shape[0]):
        v = w[j] + step * d[j]
        if project:
            xi = w[j] if w[j] != 0 else -pg[j]
            if v * xi <= 0:  # leave no coordinate on the other side of 0
                v = 0.0
        w_new[j] = v
        slope += pg[j] * (v - w[j])
    return slope


@crfopt.jit(fastmath=True)
def _store_pair(w_new, w, g_new, g, s, y):
    """s = w_new − w, y = g_new − g into the ring rows ``s``, ``y``; returns ⟨s, y⟩."""
    sy = 0.0
    for j in range(w.shape[0]):
        s[j] = w_new[j] - w[j]
        y[j] = g_new[j] - g[j]
        sy += s[j] * y[j]
    return sy


class OWLQN(crfopt.Optimizer):
    """Orthant-wise limited-memory quasi-Newton (OWL-QN) on P(w), from w = 0 (§3.12)."""

    parameters = {
        "memory": crfopt.Param(
            6, int, "correction pairs m (CRFsuite's num_memories; §3.12 [choice])", low=1
        ),
        "max_line_search": crfopt.Param(
            20, int, "backtracking trials per iteration (CRFsuite's max_linesearch)", low=1
        ),
        "armijo": crfopt.Param(
            1e-4, float, "sufficient-decrease constant c (liblbfgs's ftol)", low=0.0, high=0.5
        ),
    }
    capabilities = frozenset()
    regularizers = ("l2", "l1")
    # One iteration: at least one evaluation (n oracle calls each), one update; the
    # first also evaluates w = 0 (so no setup work is hidden in the initialization).
    cost = crfopt.Cost(oracle_calls=(1, None), per_pass=True)

    def setup(self) -> None:
        dim, m = self.problem.dim, self.params["memory"]
        self._w = self.problem.zeros()
        self._f: float | None = None
        self._g: np.ndarray | None = None
        # the last m pairs (s, y) and 1/⟨s, y⟩ in ring buffers, row _newest the newest
        self._S = np.zeros((m, dim))
        self._Y = np.zeros((m, dim))
        self._rho = np.zeros(m)
        self._newest, self._pairs = -1, 0
        self._alpha = np.zeros(m)
        self._pg = np.empty(dim)
        self._d = np.empty(dim)

    @property
    def w(self) -> np.ndarray:
        return self._w

    # ---------------------------------------------------------------- internals
    def _line_search(
        self, d: np.ndarray, pg: np.ndarray, step: float
    ) -> tuple[np.ndarray, float, np.ndarray] | None:
        """The first projected trial point with sufficient decrease, or None."""
        p, w, f = self.problem, self._w, self._f
        project = p.l1 > 0
        c = self.params["armijo"]
        for _ in range(self.params["max_line_search"]):
            w_new = np.empty_like(w)
            slope = _trial_point(w, d, step, pg, project, w_new)
            f_new, g_new = p.value_and_gradient(w_new)  # n oracle calls
            if np.isfinite(f_new) and f_new <= f + c * slope:
                return w_new, f_new, g_new
            step *= 0.5
        return None

    def _iterate(self) -> bool:
        """One OWL-QN iteration; False (and ``converged``) when no progress is possible."""
        p = self.problem
        if self._g is None:  # the first iteration also pays for P(0), ∇f(0)
            self._f, self._g = p.value_and_gradient(self._w)
        pg, d = self._pg, self._d
        if not _pseudo_gradient(self._w, self._g, p.l1, pg):
            self.converged = True
            return False
        for fresh in (False, True):
            if fresh:  # the quasi-Newton model failed: steepest descent from no memory
                if not self._pairs:
                    break
                self._pairs = 0
            _two_loop(pg, self._S, self._Y, self._rho, self._newest, self._pairs, self._alpha, d)
            # keep only coordinates that descend along −◇P
            norm2 = _constrain(d, pg) if p.l1 else float(d @ d)
            if norm2 == 0:
                np.negative(pg, out=d)
                norm2 = float(pg @ pg)
            step = 1.0 if self._pairs else 1.0 / np.sqrt(norm2)
            found = self._line_search(d, pg, step)
            if found is not None:
                break
        else:  # pragma: no cover - the loop always breaks
            found = None
        if found is None:
            self.converged = True
            return False
        w_new, f_new, g_new = found
        k = (self._newest + 1) % self.params["memory"]
        sy = _store_pair(w_new, self._w, g_new, self._g, self._S[k], self._Y[k])
        if sy > 0:  # f is λ-strongly convex, so only a zero step leaves this false
            self._rho[k] = 1.0 / sy
            self._newest = k
            self._pairs = min(self._pairs + 1, self.params["memory"])
        elif self._pairs == self.params["memory"]:
            self._pairs -= 1  # row k held the oldest pair, now overwritten: forget it
        self._w, self._f, self._g = w_new, f_new, g_new
        self.count(updates=1)
        return True

    # ---------------------------------------------------------------- contract
    def run_block(self, k: int) -> int:
        done = 0
        # d·pg, ‖d‖ and the ℓ1 term of P are BLAS and NumPy calls on dim-sized vectors:
        # on two threads they fought the batch kernels for the cores
        with crfopt.pieces.one_blas_thread():
            while done < k and not self.converged:
                if not self._iterate():
                    break
                done += 1
        return done


@crfopt.hookimpl
def crfopt_register_optimizers() -> list[crfopt.OptimizerSpec]:
    return [
        crfopt.OptimizerSpec(
            "owlqn",
            OWLQN,
            summary="OWL-QN on the elastic-net primal (CRFsuite's c1 > 0 trainer), "
            "n oracle calls per evaluation",
            reference="Andrew & Gao 2007; docs/algorithms.md §3.12",
        )
    ]
