"""The rate a step runs at in warm-up, streamed for the search's hopeless check: steps timed call
to call, the first (compiling) and any that compiled again left out, a second of them per event,
nothing once the timed windows start. Injected clock: no real time passes."""

from __future__ import annotations

import pytest
from helpers import FakeClock, RecompilingStep

from autotune import MeasureSettings
from autotune.contract.events import WarmupEvent
from autotune.trial.measure import measure
from autotune.trial.warmup_rate import CHUNK_SECONDS, WarmupRate


def test_chunks_of_steps_after_the_first_that_compiled_nothing() -> None:
    clock = FakeClock()
    step = RecompilingStep(clock, {0, 5}, step=0.25, compile=9.0)  # 8 items a call
    events: list[WarmupEvent] = []
    rated = WarmupRate(step, events.append, compiled_seconds=lambda: step.compiled, clock=clock)
    for _ in range(12):
        rated()
    # Calls 0 (the first) and 5 (a recompile) are left out; each chunk holds 1 s of steps.
    assert [(e.steps, e.seconds) for e in events] == [(4, 1.0), (4, 1.0)]
    assert all(e.items / e.seconds == pytest.approx(8 / 0.25) for e in events)
    assert sum(e.steps for e in events) * 0.25 >= 2 * CHUNK_SECONDS
    rated.stop()  # the windows: nothing more, and nothing read around their steps
    reads: list[float] = []
    rated.clock = lambda: reads.append(clock()) or clock()  # type: ignore[method-assign]
    for _ in range(12):
        rated()
    assert len(events) == 2 and reads == [] and step.calls == 24


def test_a_measured_step_streams_its_warm_up_and_is_timed_as_before() -> None:
    clock = FakeClock()
    settings = MeasureSettings(min_warmup_steps=20, max_warmup_steps=40, window_seconds=1.0,
                               budget_seconds=4.0, max_windows=3)
    plain = RecompilingStep(clock, {0}, step=0.2, compile=5.0)
    before = measure(plain, sync=lambda: None, finite=lambda: True, settings=settings,
                     clock=clock)
    step = RecompilingStep(clock, {0}, step=0.2, compile=5.0)
    events: list[WarmupEvent] = []
    rated = WarmupRate(step, events.append, clock=clock)
    m = measure(rated, sync=lambda: None, finite=lambda: True, settings=settings, clock=clock,
                on_timed_start=rated.stop)
    assert m.throughput == before.throughput and m.warmup_steps == before.warmup_steps
    assert len(events) >= 2 and all(e.items / e.seconds == pytest.approx(8 / 0.2)
                                 for e in events)
    # Never the first step, nor the last (its call-to-call time ends in the first window).
    assert sum(e.steps for e in events) <= m.warmup_steps - 2


def test_a_step_after_the_first_that_compiled_again_is_told_as_it_ends() -> None:
    clock = FakeClock()
    step = RecompilingStep(clock, {0, 3, 7}, step=0.25, compile=9.0)
    told: list[int] = []
    rated = WarmupRate(step, lambda e: None, compiled_seconds=lambda: step.compiled, clock=clock,
                       on_recompile=lambda: told.append(step.calls))
    for _ in range(10):
        rated()
    assert told == [4, 8]  # calls 3 and 7 (0-based), as each returned; the first is no recompile
