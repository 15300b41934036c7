"""Test doubles: optimizer plugins with one defect each, for the conformance suite.

Each variant is plain SGD with a constant step (the docs' example, which keeps every
contract) plus one defect, so a test can check that the suite reports that defect and
nothing misleading. Loaded as a ``--plugin-dir`` file by tests/test_conformance.py.
"""

import numpy as np

import crfopt


class SGD(crfopt.Optimizer):
    """SGD with a constant step (SBA15 §6): the conforming base of the doubles."""

    parameters = {"step_size": crfopt.Param(0.1, float, "constant step eta", low=0.0)}
    capabilities = frozenset({"stochastic"})

    def setup(self):
        self._w = self.problem.zeros()
        self._t = 0

    @property
    def w(self):
        return self._w

    def step(self):
        i = int(self.rng.integers(self.problem.n))
        grad = self.problem.oracle(i, self._w, gradient=True).gradient
        eta = self.params["step_size"]
        self._w *= 1.0 - eta * self.problem.lam
        self._w -= eta * grad.to_dense(self.problem)
        self._t += 1
        self.defect()
        self.count(iterations=1, updates=1)

    def defect(self):
        pass


class NaNLate(SGD):
    """Weights turn NaN at the 81st step (an overflow after 80 good steps)."""

    def defect(self):
        if self._t > 80:
            self._w[:] = np.nan


class NaNEarly(SGD):
    """Weights turn NaN at the 6th step."""

    def defect(self):
        if self._t > 5:
            self._w[:] = np.nan


class Raises(SGD):
    """step() raises TypeError (not an AssertionError)."""

    def defect(self):
        raise TypeError("broken-raises: unsupported operand in step")


class HeavyInit(SGD):
    """setup() runs 20 passes of gradient descent but declares no initialization cost."""

    def setup(self):
        super().setup()
        for _ in range(20):
            _, grad = self.problem.value_and_gradient(self._w)  # n oracle calls
            self._w -= 0.1 * grad


@crfopt.hookimpl
def crfopt_register_optimizers():
    return [
        crfopt.OptimizerSpec("broken-nan-late", NaNLate, summary="NaN after 80 steps"),
        crfopt.OptimizerSpec("broken-nan-early", NaNEarly, summary="NaN after 5 steps"),
        crfopt.OptimizerSpec("broken-raises", Raises, summary="TypeError in step"),
        crfopt.OptimizerSpec("broken-heavy-init", HeavyInit, summary="undeclared setup work"),
    ]
