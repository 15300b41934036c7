"""The one test double: SGD whose faults are parameters.

A plain stochastic gradient method with a constant step (it keeps every contract of the
conformance suite) plus switches for what tests need to provoke: NaN weights, an error
in ``step()`` (``RuntimeError``, ``TypeError`` or ``MemoryError``), a hang, slow steps,
and a warm start that does counted work in ``setup()``. It is a valid plugin file, loaded
with ``--plugin-dir tests/doubles`` (or :func:`plugin_dir`), and importable as
``doubles.scripted`` for tests that build specs directly.

Registered variants: ``scripted`` (no fault by default), ``warm`` (6 passes of counted
work in ``setup()``) and the four broken plugins the conformance suite must catch
(``broken-nan-late``, ``broken-nan-early``, ``broken-raises``, ``broken-heavy-init``).
"""

import shutil
import time
from pathlib import Path

import numpy as np

import crfopt

FAULTS = ("none", "nan", "raise", "type-error", "memory", "hang")


class Scripted(crfopt.Optimizer):
    """SGD with a constant step (SBA15 §6); ``fault`` strikes from iteration ``at`` on."""

    parameters = {
        "step_size": crfopt.Param(0.05, float, "constant step eta", low=0.0),
        "fault": crfopt.Param("none", str, "what goes wrong from iteration `at` on", FAULTS),
        "at": crfopt.Param(25, int, "first iteration of the fault", low=1),
        "sleep": crfopt.Param(0.0, float, "seconds to sleep per step", low=0.0),
        "warm_passes": crfopt.Param(0, int, "passes of gradient descent in setup()", low=0),
    }
    capabilities = frozenset({"stochastic"})

    def setup(self):
        self._w = self.problem.zeros()
        self._it = 0
        for _ in range(self.params["warm_passes"]):
            _, grad = self.problem.value_and_gradient(self._w)  # n counted oracle calls
            self._w -= 0.1 * grad

    @property
    def w(self):
        return self._w

    def step(self):
        i = int(self.rng.integers(self.problem.n))
        grad = self.problem.oracle(i, self._w, gradient=True).gradient.to_dense(self.problem)
        self._w -= self.params["step_size"] * (grad + self.problem.lam * self._w)
        self._it += 1
        if self._it >= self.params["at"]:
            self._fault(self.params["fault"])
        if self.params["sleep"]:
            time.sleep(self.params["sleep"])
        self.count(iterations=1, updates=1)

    def _fault(self, fault):
        if fault == "nan":
            self._w[:] = np.nan
        elif fault == "raise":
            raise RuntimeError("scripted failure in step")
        elif fault == "type-error":
            raise TypeError("broken-raises: unsupported operand in step")
        elif fault == "memory":
            raise MemoryError("simulated allocation failure")
        elif fault == "hang":
            while True:
                time.sleep(0.05)


def spec(name="scripted", **defaults):
    """An OptimizerSpec of the double with the given default parameters."""
    return crfopt.OptimizerSpec(name, Scripted, defaults, summary="test double", reference="tests")


@crfopt.hookimpl
def crfopt_register_optimizers():
    return [
        spec(),
        spec("broken-nan-late", fault="nan", at=81),
        spec("broken-nan-early", fault="nan", at=6),
        spec("broken-raises", fault="type-error", at=1),
        spec("broken-heavy-init", warm_passes=20),
        spec("warm", warm_passes=6),
    ]


def plugin_dir(tmp_path):
    """A fresh plugin folder holding this file (so a test may add more plugins to it)."""
    d = Path(tmp_path) / "plugins"
    d.mkdir(exist_ok=True)
    shutil.copy(__file__, d / "scripted.py")
    return d
