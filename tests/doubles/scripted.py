"""The one test double: SGD whose faults are parameters.

A plain stochastic gradient method with a constant step (it keeps every contract of the
conformance suite) plus switches for what tests need to provoke: NaN weights, an error
in ``step()`` (``RuntimeError``, ``TypeError`` or ``MemoryError``), a hang, slow steps,
a warm start that does counted work in ``setup()``, and the attacks on other runs of
one process that run isolation must stop (issue 17): rewriting the labels
(``mutate-labels``: re-flags the array writeable, else writes through its raw address as
compiled code could), forcing λ (``mutate-lam``), a thread that keeps calling the oracle
after the run (``leftover-thread``, for ``LINGER`` seconds) and resetting the counters at
every step (``reset-counters``). The one-shot faults strike at iteration ``at`` only.
It is a valid plugin file, loaded with ``--plugin-dir tests/doubles`` (or
:func:`plugin_dir`), and importable as ``doubles.scripted`` for tests that build specs
directly.

Registered variants: ``scripted`` (no fault by default), ``warm`` (6 passes of counted
work in ``setup()``) and the six broken plugins the conformance suite must catch
(``broken-nan-late``, ``broken-nan-early``, ``broken-raises``, ``broken-heavy-init``,
``broken-resets-counters``, ``broken-mutates-lam``).
"""

import ctypes
import shutil
import threading
import time
from pathlib import Path

import numpy as np

import crfopt

FAULTS = (
    "none",
    "nan",
    "raise",
    "type-error",
    "memory",
    "hang",
    "mutate-labels",
    "mutate-lam",
    "leftover-thread",
    "reset-counters",
)
ONE_SHOT = ("mutate-labels", "mutate-lam", "leftover-thread")
LINGER = 10.0  # seconds a leftover thread keeps calling the oracle (outlives the next run)


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
        fault = self.params["fault"]
        if self._it == self.params["at"] or (
            self._it > self.params["at"] and fault not in ONE_SHOT
        ):
            self._fault(fault)
        if self.params["sleep"]:
            time.sleep(self.params["sleep"])
        self.count(updates=1)

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
        elif fault == "mutate-labels":
            y = self.problem.labels
            try:
                y.setflags(write=True)
                target = y
            except ValueError:  # sealed: write through the raw address instead
                raw = (ctypes.c_byte * y.nbytes).from_address(y.ctypes.data)
                target = np.frombuffer(raw, dtype=y.dtype)
            target[:] = (target + 1) % self.problem.n_labels
        elif fault == "mutate-lam":
            object.__setattr__(self.problem, "_lam", 10.0 * self.problem.lam)
        elif fault == "leftover-thread":
            problem, w = self.problem, self._w.copy()
            deadline = time.monotonic() + LINGER

            def keep_calling():
                while time.monotonic() < deadline:
                    problem.oracle(0, w)
                    time.sleep(0.001)

            threading.Thread(target=keep_calling, name="scripted-leftover", daemon=True).start()
        elif fault == "reset-counters":
            self.problem.counters.reset()


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
        spec("broken-resets-counters", fault="reset-counters", at=3),
        spec("broken-mutates-lam", fault="mutate-lam", at=3),
        spec("warm", warm_passes=6),
    ]


def plugin_dir(tmp_path):
    """A fresh plugin folder holding this file (so a test may add more plugins to it)."""
    d = Path(tmp_path) / "plugins"
    d.mkdir(exist_ok=True)
    shutil.copy(__file__, d / "scripted.py")
    return d
