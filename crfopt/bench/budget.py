"""When a run stops and when it is looked at: the budget, the checkpoint schedule, the clock.

The runner (crfopt/bench/runner.py) keeps the three apart from the optimizer's own
convergence test: a :class:`Budget` ends a run, a :class:`Schedule` places the
checkpoints at which it is evaluated, and the clock times the optimizer's blocks only.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["MIN_EVERY", "Budget", "Schedule"]


@dataclass(frozen=True)
class Budget:
    """When a run stops (whichever comes first). ``None`` means no limit of that kind.

    ``passes`` counts effective passes, (oracle_calls + forward_calls)/n (§2), of the
    iterations: initialization work (``init_passes``) is not charged to the budget;
    ``target_suboptimality`` is P(w) - P* (absolute; needs P*), ``target_gap`` the true
    duality gap of the checkpoint evaluation. Targets are checked at checkpoints.
    """

    passes: float | None = 10.0
    oracle_calls: int | None = None
    updates: int | None = None
    iterations: int | None = None
    seconds: float | None = None
    target_suboptimality: float | None = None
    target_gap: float | None = None

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            if value is not None and not (isinstance(value, (int, float)) and value > 0):
                raise ValueError(f"budget {name} must be positive, got {value!r}")
        if (
            all(
                getattr(self, k) is None
                for k in ("passes", "oracle_calls", "updates", "iterations", "seconds")
            )
            and self.target_suboptimality is None
            and self.target_gap is None
        ):
            raise ValueError("a budget needs at least one limit or target")

    def as_dict(self) -> dict[str, Any]:
        """The limits that are set, and ``passes`` even when it is not: ``Budget(**d)``
        must give this budget back, and an absent ``passes`` would come back as the
        default 10 (a grid's tasks are rebuilt that way)."""
        return {k: v for k, v in asdict(self).items() if v is not None or k == "passes"}


#: The smallest ``every:X`` step, in passes (a checkpoint per millionth of a pass).
MIN_EVERY = 1e-6


class Schedule:
    """Checkpoints in effective passes.

    ``"default"``: 0, 0.25, 0.5, 0.75, 1, then every pass. ``"log"``: 0 then
    geometric (×10^0.2) from 0.1 pass, never more than 5 passes apart.
    ``"every:X"``: 0, X, 2X, … . A list of floats: exactly those.
    """

    def __init__(self, spec: str | Sequence[float] = "default") -> None:
        self.spec = spec
        if isinstance(spec, str):
            if spec not in ("default", "log") and not spec.startswith("every:"):
                raise ValueError(
                    f"unknown checkpoint schedule {spec!r}; use 'default', 'log', "
                    "'every:X' or a list of passes"
                )
            if spec.startswith("every:"):
                try:
                    self._every = float(spec.split(":", 1)[1])
                except ValueError:
                    raise ValueError(f"bad schedule {spec!r}: X must be a number") from None
                if not self._every >= MIN_EVERY or not math.isfinite(self._every):
                    # below this, X·k stops advancing in floats (X = 1e-300 hung the
                    # runner) and a run would be all checkpoints, no optimization
                    raise ValueError(
                        f"bad schedule {spec!r}: X must be a finite number of passes "
                        f"≥ {MIN_EVERY:g}"
                    )
            self._points: list[float] | None = None
        else:
            pts = sorted(float(x) for x in spec)
            if not pts or pts[0] < 0:
                raise ValueError("checkpoint lists need non-negative passes")
            self._points = pts

    def describe(self) -> str | list[float]:
        return self.spec if isinstance(self.spec, str) else list(self._points or [])

    def next_after(self, x: float) -> float:
        """The first checkpoint strictly after ``x`` passes (inf if none)."""
        eps = 1e-12
        if self._points is not None:
            for p in self._points:
                if p > x + eps:
                    return p
            return math.inf
        if self.spec == "default":
            if x < 1.0 - eps:
                return (math.floor(x / 0.25 + eps) + 1) * 0.25
            return math.floor(x + eps) + 1.0
        if self.spec == "log":
            if x < 0.1 - eps:
                return 0.1
            k = math.floor(math.log10(x / 0.1) / 0.2 + eps) + 1
            return min(0.1 * 10 ** (0.2 * k), x + 5.0)
        k = math.floor(x / self._every + eps) + 1
        nxt = k * self._every
        return nxt if nxt > x + eps else (k + 1) * self._every  # strictly after x


class Clock:
    """Seconds spent inside the optimizer's blocks: the only timed region."""

    __slots__ = ("elapsed",)

    def __init__(self) -> None:
        self.elapsed = 0.0

    @contextlib.contextmanager
    def timing(self) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.elapsed += time.perf_counter() - t0
