"""Checkpoint schedules always advance: ``every:X`` with a tiny X once hung a run.

``every:1e-300`` made ``(k + 1)·X`` round back to ``k·X`` (the step is below one ulp of
the pass count), so the runner's "next checkpoint" never moved. Steps below
:data:`MIN_EVERY` are refused, every schedule's next checkpoint is strictly after the
current one, and the runner jumps over all the checkpoints a block crossed at once.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import crfopt
from crfopt.bench import runner
from crfopt.bench.budget import MIN_EVERY, Schedule
from crfopt.bench.runner import run


@pytest.mark.parametrize("x", ["1e-300", "5e-324", "1e-7", "inf", "nan", "-1", "0"])
def test_steps_too_small_or_not_finite_are_refused(x):
    with pytest.raises(ValueError, match=r"every:.*finite number of passes ≥ 1e-06"):
        Schedule(f"every:{x}")


@given(
    spec=st.one_of(
        st.just("default"),
        st.just("log"),
        st.floats(MIN_EVERY, 100.0).map(lambda x: f"every:{x!r}"),
    ),
    x=st.floats(0.0, 1e6),
)
# reached by stepping every:1e-6 from 0: the old formula returned x itself here
@example(spec="every:1e-06", x=0.031252999999999996)
def test_the_next_checkpoint_is_strictly_later(spec, x):
    nxt = Schedule(spec).next_after(x)
    assert nxt > x and math.isfinite(nxt)


def test_the_runner_jumps_over_crossed_checkpoints(monkeypatch):
    """L-BFGS does ≥ 1 pass per iteration, so with every:1e-6 each block crosses a
    million checkpoints; stepping through them one by one was the hang (for 1e-300)
    and is ~3 million calls here. One row per block, a few calls per row."""
    calls = []
    original = runner.Schedule.next_after

    def counted(self, x):
        calls.append(x)
        if len(calls) > 10_000:  # fail, rather than hang as the stalled schedule did
            raise AssertionError(f"next_after called {len(calls)} times, last at {x}")
        return original(self, x)

    monkeypatch.setattr(runner.Schedule, "next_after", counted)
    problem = crfopt.make_synthetic(n=20, seed=2)
    res = run(problem, "lbfgs", passes=3, checkpoints=f"every:{MIN_EVERY}")
    assert res.status in ("budget", "converged"), res.meta["error"]
    assert len(calls) <= 3 * len(res.trace) + 3
