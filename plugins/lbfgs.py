"""L-BFGS on the primal (docs/algorithms.md §3.9; SBA15 §3, LPL18 §6.1).

The batch baseline: scipy's L-BFGS-B from w = 0. Every function evaluation inside
scipy's line search is a full pass, charged as n oracle calls; every iteration (scipy's
callback) is one update.

scipy runs its own loop, so it runs in a worker thread that pauses in the callback
after each iteration until the runner asks for more; the runner's blocks of k
iterations are then exactly k L-BFGS-B iterations of one uninterrupted scipy run, with
scipy's memory intact between checkpoints.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

import numpy as np

import crfopt

if TYPE_CHECKING:
    import scipy.optimize


class _Cancelled(Exception):
    pass


class LBFGS(crfopt.Optimizer):
    """Limited-memory BFGS (scipy L-BFGS-B) on P(w), from w = 0 (docs/algorithms.md §3.9)."""

    parameters = {
        "memory": crfopt.Param(
            10, int, "number of correction pairs, maxcor (§3.9 [choice])", low=1
        ),
        "max_line_search": crfopt.Param(
            20, int, "line-search evaluations per iteration, maxls", low=1
        ),
    }
    capabilities = frozenset()
    # One iteration: at least one function evaluation (n oracle calls each), one update.
    cost = crfopt.Cost(oracle_calls=(1, None), per_pass=True)

    def setup(self) -> None:
        self._w = self.problem.zeros()
        self._cond = threading.Condition()
        self._granted = 0
        self._done = 0
        self._finished = False
        self._cancel = False
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None

    @property
    def w(self) -> np.ndarray:
        return self._w

    # scipy side ------------------------------------------------------------------
    def _fun(self, x: np.ndarray) -> tuple[float, np.ndarray]:
        return self.problem.value_and_gradient(x)  # n oracle calls

    def _callback(self, intermediate_result: scipy.optimize.OptimizeResult | np.ndarray) -> None:
        from scipy.optimize import OptimizeResult

        # SciPy >= 1.11 sees the parameter name and passes an OptimizeResult; SciPy 1.10
        # (allowed by pyproject.toml) always passes the iterate itself as a plain array.
        if isinstance(intermediate_result, OptimizeResult):
            x = intermediate_result.x
        else:
            x = intermediate_result
        with self._cond:
            self._w = np.array(x, dtype=float)
            self.count(updates=1)
            self._done += 1
            self._cond.notify_all()
            while self._done >= self._granted and not self._cancel:
                self._cond.wait()
            if self._cancel:
                raise _Cancelled

    def _target(self) -> None:
        # imported here, not with the module: every process that loads the registry
        # imports each built-in plugin, and scipy.optimize alone costs it 0.45 s
        import scipy.optimize

        try:
            # L-BFGS-B's own vector algebra (dim-sized BLAS calls between evaluations)
            # on one thread: on two it fought the batch kernels for the cores
            with crfopt.pieces.one_blas_thread():
                scipy.optimize.minimize(
                    self._fun,
                    self.problem.zeros(),
                    jac=True,
                    method="L-BFGS-B",
                    callback=self._callback,
                    # No tolerance stops: the runner's budget decides; scipy ends only when its
                    # line search can make no further progress in floating point.
                    options={
                        "maxcor": self.params["memory"],
                        "maxls": self.params["max_line_search"],
                        "maxiter": 10**9,
                        "maxfun": 10**9,
                        "ftol": 0.0,
                        "gtol": 0.0,
                    },
                )
        except _Cancelled:
            pass
        except BaseException as exc:  # re-raised in the runner's thread
            self._error = exc
        finally:
            with self._cond:
                self._finished = True
                self._cond.notify_all()

    # runner side -----------------------------------------------------------------
    def run_block(self, k: int) -> int:
        with self._cond:
            start = self._done
            if not self._finished:
                self._granted = start + k
                if self._thread is None:
                    self._thread = threading.Thread(target=self._target, daemon=True)
                    self._thread.start()
                self._cond.notify_all()
                while self._done < start + k and not self._finished:
                    self._cond.wait()
            if self._error is not None:
                raise self._error
            ran = self._done - start
            if self._finished and ran < k:
                self.converged = True
            return ran

    def close(self) -> None:
        with self._cond:
            self._cancel = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join()


@crfopt.hookimpl
def crfopt_register_optimizers() -> list[crfopt.OptimizerSpec]:
    return [
        crfopt.OptimizerSpec(
            "lbfgs",
            LBFGS,
            summary="L-BFGS-B (scipy) on the primal, n oracle calls per evaluation",
            reference="SBA15 §3; docs/algorithms.md §3.9",
        )
    ]
