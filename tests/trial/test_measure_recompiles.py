"""A window in which Dynamo compiled (a recompile: a new shape, a new path) is a fixed cost, not
the step's rate: it is dropped and timed again, at most MAX_RECOMPILED_WINDOWS times, and never
reported to the pruner. Injected clock and compile timer: no real time passes."""

from __future__ import annotations

from helpers import FakeClock, RecompilingStep

from autotune import MeasureSettings, measure
from autotune.trial.measure import MAX_RECOMPILED_WINDOWS, Window

STEP = 1 / 64
RECOMPILE = 8.0


def timed(recompile_at: set[int], **settings: float) -> tuple[object, list[Window]]:
    clock = FakeClock()
    step = RecompilingStep(clock, recompile_at, step=STEP, compile=RECOMPILE)
    seen: list[Window] = []
    m = measure(step, sync=lambda: None, finite=lambda: True, clock=clock,
                settings=MeasureSettings(**{"window_seconds": 4 * STEP, "budget_seconds": 1000.0,
                                            "min_warmup_steps": 3, **settings}),  # type: ignore[arg-type]
                on_window=seen.append, compiled_seconds=lambda: step.compiled)
    return m, seen


def test_a_window_that_recompiled_is_timed_again() -> None:
    m, seen = timed({8})  # after warm-up (3 steps), inside the second timed window
    assert m.recompiled_windows == 1  # type: ignore[attr-defined]
    assert {w.seconds / w.steps for w in m.windows} == {STEP}  # type: ignore[attr-defined]
    assert m.throughput == 8 / STEP  # type: ignore[attr-defined]
    assert all(w.seconds / w.steps == STEP for w in seen)  # the pruner never saw the compile


def test_without_recompiles_nothing_is_dropped() -> None:
    m, _ = timed(set())
    assert m.recompiled_windows == 0  # type: ignore[attr-defined]


def test_a_step_that_recompiles_in_every_window_is_that_slow() -> None:
    m, _ = timed(set(range(10, 400)), max_windows=8)
    assert m.recompiled_windows == MAX_RECOMPILED_WINDOWS  # type: ignore[attr-defined]
    assert m.throughput < 8 / STEP / 10  # type: ignore[attr-defined]  # the recompiles count
