"""Work counters owned by a :class:`~crfopt.CRFProblem` (docs/algorithms.md §2).

The counters are one small ``int64`` array. Counted oracle kernels, compiled or not,
increment it themselves, so an optimizer's compiled inner loop is counted exactly as a
Python call is. The slot indices are public constants so that compiled plugin code can
bump ``updates`` and ``iterations`` without a Python call.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

ORACLE_CALLS = 0
FORWARD_CALLS = 1
UPDATES = 2
ITERATIONS = 3
LS_EVALS = 4
INIT_ORACLE_CALLS = 5
INIT_FORWARD_CALLS = 6
N_COUNTERS = 7

COUNTER_NAMES: tuple[str, ...] = (
    "oracle_calls",
    "forward_calls",
    "updates",
    "iterations",
    "ls_evals",
    "init_oracle_calls",
    "init_forward_calls",
)


def new_counter_array() -> np.ndarray:
    """A fresh zeroed counter array."""
    return np.zeros(N_COUNTERS, dtype=np.int64)


@dataclass(frozen=True)
class CounterSnapshot:
    """An immutable copy of the counters at one instant, with effective passes."""

    oracle_calls: int
    forward_calls: int
    updates: int
    iterations: int
    ls_evals: int
    init_oracle_calls: int
    init_forward_calls: int
    n: int

    @property
    def effective_passes(self) -> float:
        """(oracle_calls + forward_calls) / n: SBA15 §6 charges every forward pass in full."""
        return (self.oracle_calls + self.forward_calls) / self.n

    def as_dict(self) -> dict[str, float]:
        out: dict[str, float] = {name: getattr(self, name) for name in COUNTER_NAMES}
        out["effective_passes"] = self.effective_passes
        return out


class Counters:
    """Named, read-mostly view of a problem's counter array.

    Attributes mirror :data:`COUNTER_NAMES`; :attr:`array` is the raw array that compiled
    kernels receive. Optimizers report ``updates`` and ``iterations`` with
    :meth:`add_updates` / :meth:`add_iterations` (or by incrementing the slots in compiled
    code); oracle and forward calls are counted by the kernels alone.
    """

    __slots__ = ("_array", "_n")

    def __init__(self, array: np.ndarray, n: int) -> None:
        self._array = array
        self._n = n

    @property
    def array(self) -> np.ndarray:
        return self._array

    def __getattr__(self, name: str) -> int:
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return int(self._array[COUNTER_NAMES.index(name)])
        except ValueError:
            raise AttributeError(name) from None

    @property
    def effective_passes(self) -> float:
        return (int(self._array[ORACLE_CALLS]) + int(self._array[FORWARD_CALLS])) / self._n

    def add_updates(self, k: int = 1) -> None:
        self._array[UPDATES] += k

    def add_iterations(self, k: int = 1) -> None:
        self._array[ITERATIONS] += k

    def add_ls_evals(self, k: int = 1) -> None:
        self._array[LS_EVALS] += k

    def snapshot(self) -> CounterSnapshot:
        values = [int(v) for v in self._array]
        return CounterSnapshot(*values, n=self._n)

    def reset(self) -> None:
        self._array[:] = 0

    def __repr__(self) -> str:
        parts = ", ".join(f"{name}={int(v)}" for name, v in zip(COUNTER_NAMES, self._array))
        return f"Counters({parts}, effective_passes={self.effective_passes:.4g})"
