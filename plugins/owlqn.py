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
    if sigma == 0:
        return grad.copy()
    right = grad + sigma  # derivative of P to the right of 0
    left = grad - sigma
    pg = np.where(w > 0, right, np.where(w < 0, left, 0.0))
    at_zero = w == 0
    pg[at_zero & (right < 0)] = right[at_zero & (right < 0)]
    pg[at_zero & (left > 0)] = left[at_zero & (left > 0)]
    return pg


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
        self._w = self.problem.zeros()
        self._f: float | None = None
        self._g: np.ndarray | None = None
        self._s: list[np.ndarray] = []
        self._y: list[np.ndarray] = []
        self._rho: list[float] = []

    @property
    def w(self) -> np.ndarray:
        return self._w

    # ---------------------------------------------------------------- internals
    def _direction(self, pg: np.ndarray) -> np.ndarray:
        """−H·◇P by the two-loop recursion (H₀ = ⟨s, y⟩/⟨y, y⟩ of the newest pair)."""
        q = -pg
        alphas = []
        for s, y, rho in zip(reversed(self._s), reversed(self._y), reversed(self._rho)):
            a = rho * float(s @ q)
            alphas.append(a)
            q -= a * y
        if self._s:
            y = self._y[-1]
            q *= 1.0 / (self._rho[-1] * float(y @ y))
        for (s, y, rho), a in zip(zip(self._s, self._y, self._rho), reversed(alphas)):
            b = rho * float(y @ q)
            q += (a - b) * s
        return q

    def _line_search(
        self, d: np.ndarray, pg: np.ndarray, step: float
    ) -> tuple[np.ndarray, float, np.ndarray] | None:
        """The first projected trial point with sufficient decrease, or None."""
        p, w, f = self.problem, self._w, self._f
        sigma = p.l1
        # the orthant searched: w's signs, and −◇P's where w = 0
        xi = np.where(w != 0, np.sign(w), np.sign(-pg)) if sigma else None
        c = self.params["armijo"]
        for _ in range(self.params["max_line_search"]):
            w_new = w + step * d
            if xi is not None:
                w_new[w_new * xi <= 0] = 0.0  # leave no coordinate on the other side of 0
            f_new, g_new = p.value_and_gradient(w_new)  # n oracle calls
            if np.isfinite(f_new) and f_new <= f + c * float(pg @ (w_new - w)):
                return w_new, f_new, g_new
            step *= 0.5
        return None

    def _iterate(self) -> bool:
        """One OWL-QN iteration; False (and ``converged``) when no progress is possible."""
        p = self.problem
        if self._g is None:  # the first iteration also pays for P(0), ∇f(0)
            self._f, self._g = p.value_and_gradient(self._w)
        pg = pseudo_gradient(self._w, self._g, p.l1)
        if not np.any(pg):
            self.converged = True
            return False
        for fresh in (False, True):
            if fresh:  # the quasi-Newton model failed: steepest descent from no memory
                if not self._s:
                    break
                self._s, self._y, self._rho = [], [], []
            d = self._direction(pg)
            if p.l1:
                d[d * pg >= 0] = 0.0  # keep only coordinates that descend along −◇P
            if not np.any(d):
                d = -pg
            step = 1.0 if self._s else 1.0 / float(np.linalg.norm(d))
            found = self._line_search(d, pg, step)
            if found is not None:
                break
        else:  # pragma: no cover - the loop always breaks
            found = None
        if found is None:
            self.converged = True
            return False
        w_new, f_new, g_new = found
        s, y = w_new - self._w, g_new - self._g
        sy = float(s @ y)
        if sy > 0:  # f is λ-strongly convex, so only a zero step leaves this false
            self._s.append(s)
            self._y.append(y)
            self._rho.append(1.0 / sy)
            if len(self._s) > self.params["memory"]:
                del self._s[0], self._y[0], self._rho[0]
        self._w, self._f, self._g = w_new, f_new, g_new
        self.count(updates=1)
        return True

    # ---------------------------------------------------------------- contract
    def run_block(self, k: int) -> int:
        done = 0
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
