"""A window in which a batch shape ran for the first time holds a one-off cost (eager BERT on
an H100: 0.16 s a step on a padded length not run before, 0.064 s after): it is set apart and
timed again while first-seen shapes are rare and the budget lasts, and never reported to the
pruner. Where nearly every batch is new (a graph net's node counts), they are the step's rate.
Injected clock: no real time passes."""

from __future__ import annotations

from collections.abc import Callable

from helpers import FakeClock

from autotune import MeasureSettings, measure
from autotune.trial.measure import Measurement, StepResult, Window
from autotune.trial.window import one_off_shapes

SEEN = 1 / 64
NEW = 1 / 16  # a first run of a shape: 4x a seen one's
ITEMS = 8


class ShapedStep:
    """Each call runs one batch; `new(n)` says whether the n-th call's shape is a first."""

    def __init__(self, clock: FakeClock, new: Callable[[int], bool]) -> None:
        self.clock, self.new, self.calls = clock, new, 0

    def __call__(self) -> StepResult:
        first = self.new(self.calls)
        self.clock.now += NEW if first else SEEN
        self.calls += 1
        return StepResult(items=ITEMS, data_wait=0.0, new_shape=first)


def timed(new: Callable[[int], bool], **settings: float) -> tuple[Measurement, list[Window]]:
    clock = FakeClock()
    step = ShapedStep(clock, new)
    seen: list[Window] = []
    m = measure(step, sync=lambda: None, finite=lambda: True, clock=clock,
                settings=MeasureSettings(**{"window_seconds": 4 * SEEN, "budget_seconds": 1000.0,
                                            "min_warmup_steps": 3, **settings}),  # type: ignore[arg-type]
                on_window=seen.append)
    return m, seen


def test_windows_that_ran_a_shape_first_are_set_apart_and_timed_again() -> None:
    m, seen = timed(lambda n: n in {9, 14, 22})  # after warm-up, in 3 of the timed windows
    assert m.new_shape_windows == 3
    assert {w.new_shapes for w in m.windows} == {0}
    assert m.throughput == ITEMS / SEEN  # the rate a long run has once its shapes are known
    assert seen == list(m.windows)  # the pruner never saw the windows set apart
    assert m.converged


def test_a_step_whose_every_batch_is_a_new_shape_is_that_slow() -> None:
    m, _ = timed(lambda n: True)
    assert m.new_shape_windows == 0
    assert m.throughput == ITEMS / NEW


def test_past_the_budget_every_window_counts() -> None:
    # A new shape every third step: under the steady share (half), so windows are set apart
    # while the budget lasts; every 4-step window holds one, and past the budget they count.
    m, _ = timed(lambda n: n % 3 == 1, budget_seconds=0.5)
    assert m.new_shape_windows > 0
    assert m.windows and all(w.new_shapes for w in m.windows)
    assert sum(w.seconds for w in m.windows) < 0.5 + 3 * 4 * NEW  # ended soon after the budget


def test_the_rule_weighs_first_seen_steps_among_all_timed_steps() -> None:
    clean = Window(steps=4, items=32, seconds=1.0, data_wait=0.0)
    one = Window(steps=4, items=32, seconds=2.0, data_wait=0.0, new_shapes=1)
    assert one_off_shapes(one, [clean, clean, one])
    assert not one_off_shapes(clean, [clean, clean])
    # 3 of 4 steps new: the step's steady state.
    many = Window(steps=4, items=32, seconds=2.0, data_wait=0.0, new_shapes=3)
    assert not one_off_shapes(many, [many])
