"""Warm-up of a step whose batches change shape: settled means a stable rate of items per
second over groups of steps, not equal step times (injected clock: no real time passes)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from helpers import FakeClock

from autotune import MeasureSettings
from autotune.trial.measure import Measurement, measure
from autotune.trial.warmup import RATE_STEPS, StepResult, warm_up

COMPILE = 4.0
# Padded lengths of successive batches: each step's time is its length's, its items too, so the
# rate never changes while no two neighbouring steps take times within 1.25x of each other.
LENGTHS = (4, 8, 5, 10, 6, 12, 7)
TOKENS_PER_LENGTH = 100
SECONDS_PER_LENGTH = 1 / 64


class VaryingStep:
    """Step n runs a batch of LENGTHS[n % 7]; `extra(n)` seconds are added (compiling)."""

    def __init__(self, clock: FakeClock, extra: Callable[[int], float]) -> None:
        self.clock = clock
        self.extra = extra
        self.calls = 0

    def __call__(self) -> StepResult:
        length = LENGTHS[self.calls % len(LENGTHS)]
        self.clock.now += length * SECONDS_PER_LENGTH + self.extra(self.calls)
        self.calls += 1
        return StepResult(items=length * TOKENS_PER_LENGTH, data_wait=0.0)


def compiles_at(*steps: int) -> Callable[[int], float]:
    return lambda n: COMPILE if n in steps else 0.0


SETTINGS = MeasureSettings(window_seconds=0.5, budget_seconds=1000.0, min_warmup_steps=3,
                           max_warmup_steps=60)


def test_steps_of_varying_length_at_a_constant_rate_settle() -> None:
    clock = FakeClock()
    warm = warm_up(VaryingStep(clock, compiles_at(0)), sync=lambda: None, settings=SETTINGS,
                   clock=clock, varying=lambda: True)
    assert warm.settled
    # The compile step, then two groups of RATE_STEPS steps whose rates agree.
    assert warm.steps == 2 * RATE_STEPS + 1
    assert warm.compile_seconds > COMPILE - max(LENGTHS) * SECONDS_PER_LENGTH


def test_the_step_time_rule_never_settles_on_them() -> None:
    # Why the rate: equal step times never come (an H100 GPT-2 on padded batches was killed
    # "still warming up after 127 s").
    clock = FakeClock()
    warm = warm_up(VaryingStep(clock, compiles_at(0)), sync=lambda: None, settings=SETTINGS,
                   clock=clock)
    assert not warm.settled and warm.steps == SETTINGS.max_warmup_steps


def test_a_recompile_in_warm_up_holds_it_until_two_groups_run_without_one() -> None:
    clock = FakeClock()
    warm = warm_up(VaryingStep(clock, compiles_at(0, 5)), sync=lambda: None, settings=SETTINGS,
                   clock=clock, varying=lambda: True)
    assert warm.settled
    assert warm.steps == 5 + 2 * RATE_STEPS + 1  # the first two groups after step 5


def run(step: Callable[[], StepResult], clock: FakeClock,
        varying: Callable[[], bool] | None) -> Measurement:
    return measure(step, sync=lambda: None, finite=lambda: True, settings=SETTINGS, clock=clock,
                   varying=varying)


def test_windows_of_varying_steps_converge_on_their_rate() -> None:
    clock = FakeClock()
    m = run(VaryingStep(clock, compiles_at(0)), clock, lambda: True)
    assert m.settled and m.converged
    rate = TOKENS_PER_LENGTH / SECONDS_PER_LENGTH
    assert m.throughput == pytest.approx(rate, rel=0.1)


def test_fixed_shapes_keep_the_step_time_rule() -> None:
    # Shapes that never varied: the same measurement as without the question.
    def steps() -> tuple[Callable[[], StepResult], FakeClock]:
        clock = FakeClock()
        state = {"n": 0}

        def step() -> StepResult:
            clock.now += (COMPILE if state["n"] == 0 else 0.0) + 1 / 64
            state["n"] += 1
            return StepResult(items=8, data_wait=0.0)

        return step, clock

    asked, clock = steps()
    with_question = run(asked, clock, lambda: False)
    plain, clock = steps()
    assert with_question == run(plain, clock, None)
    assert with_question.warmup_steps == 3
