"""A window in which a batch shape ran for the first time holds a one-off cost (eager BERT on
an H100: 0.16 s a step on a padded length not run before, 0.064 s after): it is set apart and
timed again while first-seen shapes are rare and the budget lasts, and never reported to the
pruner. Where nearly every batch is new (a graph net's node counts), they are the step's rate.
Injected clock: no real time passes."""

from __future__ import annotations

from collections.abc import Callable

import torch
from helpers import FakeClock

from autotune import MeasureSettings, measure
from autotune.trial.measure import Measurement, StepResult, Window
from autotune.trial.shapes import ShapeLog, signature
from autotune.trial.window import FirstRuns, first_run_seconds, one_off_shapes, shapes_cost

SEEN = 1 / 64
NEW = 1 / 16  # a first run of a shape: 4x a seen one's
ITEMS = 8


class ShapedStep:
    """Each call runs one batch; `new(n)` says whether the n-th call's shape is a first."""

    def __init__(self, clock: FakeClock, new: Callable[[int], bool], cost: float) -> None:
        self.clock, self.new, self.cost, self.calls = clock, new, cost, 0

    def __call__(self) -> StepResult:
        first = self.new(self.calls)
        self.clock.now += self.cost if first else SEEN
        self.calls += 1
        return StepResult(items=ITEMS, data_wait=0.0, new_shape=first)


def timed(new: Callable[[int], bool], cost: float = NEW, *, stop_at: float | None = None,
          compiled: Callable[[int], float] | None = None, **settings: float
          ) -> tuple[Measurement, list[Window]]:
    """`compiled(calls)`: the compile seconds so far after that many steps (a recompile)."""
    clock = FakeClock()
    step = ShapedStep(clock, new, cost)
    seen: list[Window] = []
    m = measure(step, sync=lambda: None, finite=lambda: True, clock=clock,
                settings=MeasureSettings(**{"window_seconds": 4 * SEEN, "budget_seconds": 1000.0,
                                            "min_warmup_steps": 3, **settings}),  # type: ignore[arg-type]
                on_window=seen.append, stop_at=stop_at,
                compiled_seconds=None if compiled is None else lambda: compiled(step.calls))
    return m, seen


def test_windows_that_ran_a_shape_first_are_set_apart_and_timed_again() -> None:
    m, seen = timed(lambda n: n in {9, 14, 22})  # after warm-up, in 3 of the timed windows
    assert m.new_shape_windows == 3
    assert {w.new_shapes for w in m.windows} == {0}
    assert m.throughput == ITEMS / SEEN  # the rate a long run has once its shapes are known
    assert seen == list(m.windows)  # the pruner never saw the windows set apart
    assert m.converged


def test_first_seen_shapes_that_cost_nothing_are_counted_after_all() -> None:
    # A transformers GPT-2 in tf32: a new padded length runs as fast as a seen one. Once two
    # windows of each kind show it, the windows set apart count, in the order they ran.
    new_at = {4, 9, 14}  # in the first three timed windows (warm-up takes steps 0-2)
    m, seen = timed(lambda n: n in new_at, cost=SEEN)
    assert m.new_shape_windows == 0
    assert sum(w.new_shapes for w in m.windows) == len(new_at)
    assert m.throughput == ITEMS / SEEN
    assert len(seen) < len(m.windows)  # the pruner saw only those kept as they ran


def test_the_cost_needs_two_windows_of_each_kind_and_a_clear_margin() -> None:
    clean = Window(steps=4, items=32, seconds=1.0, data_wait=0.0)
    slow = Window(steps=4, items=32, seconds=1.2, data_wait=0.0, new_shapes=1)
    near = Window(steps=4, items=32, seconds=1.05, data_wait=0.0, new_shapes=1)
    assert shapes_cost([clean], [slow, slow]) is None
    assert shapes_cost([clean, clean], [slow]) is None
    assert shapes_cost([clean, clean], [slow, slow]) is True
    assert shapes_cost([clean, clean], [near, near]) is False  # 5%: under NEW_SHAPE_COST


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


def test_windows_that_count_are_timed_within_the_budget() -> None:
    # A new shape in every window: no clean window comes, so windows are set apart only while
    # the budget still fits the 3 that must count, not until it ends (a review, 2026-11-27).
    m, _ = timed(lambda n: n % 4 == 0, budget_seconds=1.0)
    window = 3 * SEEN + NEW  # each window: 3 seen steps and a first run
    assert len(m.windows) == 3 and m.new_shape_windows > 0
    assert (m.new_shape_windows + len(m.windows)) * window <= 1.0 + window


def test_a_deadline_that_cuts_the_timing_short_keeps_the_windows_set_apart() -> None:
    # The trial's own limit ends the windows: rather than too few, the latest windows set
    # apart count.
    m, _ = timed(lambda n: n % 4 == 0, stop_at=0.8)
    assert len(m.windows) == 3 and m.new_shape_windows == 3  # 3 of the 6 set apart count


def test_a_deadline_after_one_clean_window_takes_the_first_runs_out_of_those_set_apart() -> None:
    # The held-out speech model in bf16 (H200, 2026-11-28): one clean window, then a new
    # length in every window until the trial's limit; the windows set apart came back as timed
    # and the trial read 487k frames/s, an expert's bf16 config 644k side by side. One clean
    # window against those set apart, 75% slower, shows the cost.
    m, _ = timed(lambda n: n >= 10 and n % 4 == 2, stop_at=0.6)
    assert [w.new_shapes for w in m.windows] == [0, 1, 1] and m.new_shape_windows == 4
    assert m.throughput == ITEMS / SEEN
    # First runs no slower than repeats by the wider margin: counted as timed.
    m, _ = timed(lambda n: n >= 10 and n % 4 == 2, cost=SEEN * 1.6, stop_at=0.6)
    assert m.throughput < ITEMS / SEEN


def test_a_window_past_the_recompile_cap_counts_even_if_it_ran_a_new_shape() -> None:
    # Every window from the 2nd on recompiles (8 s of compile each) on a new shape: 3 are
    # dropped as recompiled, and the rest count, as before first runs were set apart.
    m, _ = timed(lambda n: n >= 7 and n % 4 == 3, compiled=lambda calls: 8.0 * max(0, (calls - 3) // 4))
    assert m.recompiled_windows == 3
    assert m.new_shape_windows == 0


def test_the_rule_weighs_first_seen_steps_among_all_timed_steps() -> None:
    clean = Window(steps=4, items=32, seconds=1.0, data_wait=0.0)
    one = Window(steps=4, items=32, seconds=2.0, data_wait=0.0, new_shapes=1)
    assert one_off_shapes(one, [clean, clean, one])
    assert not one_off_shapes(clean, [clean, clean])
    # 3 of 4 steps new: the step's steady state.
    many = Window(steps=4, items=32, seconds=2.0, data_wait=0.0, new_shapes=3)
    assert not one_off_shapes(many, [many])


def test_windows_fold_back_in_the_order_they_were_timed() -> None:
    # An id freed by a window the trend logic dropped and reused by a later window gets the
    # later place (a review found two windows sharing one place before, 2026-11-27).
    first = FirstRuns()
    a = Window(steps=4, items=32, seconds=1.0, data_wait=0.0)
    b = Window(steps=4, items=32, seconds=2.0, data_wait=0.0)
    first.stamp(a)
    first.stamp(b)
    assert first.in_order([b, a]) == [a, b]
    first.stamp(a)  # as if `a` were a new window made where a freed one lived
    assert first.in_order([a, b]) == [b, a]


def test_windows_that_must_count_though_they_ran_a_new_shape_count_without_its_known_cost() -> None:
    # A held-out speech model in bf16 (H200, 2026-11-28): clean windows read 750-860k frames/s,
    # those with a new length 230-450k; once every window held a new length they all counted
    # as timed, and the eager dtype that won read 0.85x what it ran. Two clean windows and two
    # set apart show the cost (3/64 s a first run); then every window holds one first run.
    new = lambda n: n in {5, 13} or (n >= 20 and n % 4 == 0)  # noqa: E731
    m, seen = timed(new, budget_seconds=0.6)
    assert m.new_shape_windows == 3 + 1 and [w.new_shapes for w in m.windows] == [0, 0, 1]
    assert m.throughput == ITEMS / SEEN  # counted as 4 seen steps, not 3 and a first run
    assert seen == list(m.windows)  # the pruner read it so too
    # Before the cost is known (no window set apart: no room), a window counts as timed.
    m, _ = timed(new, budget_seconds=0.3)
    assert m.throughput < ITEMS / SEEN and m.new_shape_windows == 0


def test_a_known_first_run_cost_is_taken_out_at_most_down_to_clean_steps() -> None:
    clean = Window(steps=4, items=32, seconds=1.0, data_wait=0.0)
    apart = Window(steps=4, items=32, seconds=2.0, data_wait=0.0, new_shapes=1)
    assert first_run_seconds([clean, clean], [apart, apart]) == (0.25, 1.0)
    first = FirstRuns()
    first.apart = [apart, apart]
    assert first.settle([clean, clean]) == [clean, clean] and first.known == (0.25, 1.0)
    # Two first runs in 8 steps (a quarter: one-offs): 2 s of their extra out, 0.25 s a step.
    two = Window(steps=8, items=64, seconds=4.5, data_wait=0.0, new_shapes=2)
    assert first.counted(two, [clean, clean]).seconds == 2.5
    # Never faster than clean steps: 8 clean steps take 2 s; plus the window's data wait (a
    # first run's cost overlaps a loader's stall: a review, 2026-11-28).
    cheap = Window(steps=8, items=64, seconds=2.6, data_wait=0.0, new_shapes=2)
    assert first.counted(cheap, [clean, clean]).seconds == 2.0
    waited = Window(steps=8, items=64, seconds=4.5, data_wait=2.2, new_shapes=2)
    assert first.counted(waited, [clean, clean]).seconds == 4.2
    stalled = Window(steps=8, items=64, seconds=4.5, data_wait=2.5, new_shapes=2)
    assert first.counted(stalled, [clean, clean]) is stalled  # nothing to take out
    # Most steps new (a graph net's node counts): the step's steady rate, counted as timed.
    many = Window(steps=4, items=32, seconds=4.0, data_wait=0.0, new_shapes=3)
    assert first.counted(many, [many]) is many
    # Windows timed anew (3 rounds of the workers after a stall) keep what was learned.
    assert FirstRuns(first.known).counted(two, [clean]).seconds == 2.5
    assert FirstRuns().counted(two, [clean]) is two
    assert first.discounted == 3  # each window it took seconds from


def test_first_runs_shown_to_cost_nothing_after_all_are_no_longer_discounted() -> None:
    # Costly on the first windows, then clean windows as slow as those set apart: the cost is
    # withdrawn, and a later window with a first run counts as timed (a review, 2026-11-28).
    first = FirstRuns()
    clean = [Window(steps=10, items=80, seconds=1.0, data_wait=0.0)] * 2
    apart = Window(steps=10, items=80, seconds=2.0, data_wait=0.0, new_shapes=2)
    first.apart = [apart, apart]
    first.settle(list(clean))
    assert first.known is not None
    slow = [Window(steps=10, items=80, seconds=1.9, data_wait=0.0)] * 3
    first.apart = [apart, apart]
    first.settle([*clean, *slow])
    assert first.costly is False and first.known is None
    one = Window(steps=10, items=80, seconds=1.9, data_wait=0.0, new_shapes=1)
    assert first.counted(one, [*clean, *slow]) is one


class SpeechStep:
    """A speech batch on a `ShapeLog`: its features padded per batch to two lengths in warm-up
    and to a new one in 3 of the timed windows, its concatenated labels of a new length at
    every step; a step costs NEW at a features' length no step ran, SEEN after."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock, self.shapes, self.calls, self.ran = clock, ShapeLog(), 0, set()

    def __call__(self) -> StepResult:
        frames = {2: 480, 9: 560, 14: 640, 22: 720}.get(self.calls, (400, 480)[self.calls % 2])
        batch = {"feats": torch.zeros(4, frames, 80), "labels": torch.zeros(100 + self.calls)}
        self.shapes.add(signature(batch), items=ITEMS)
        new = self.shapes.run_last()
        self.clock.now += NEW if frames not in self.ran else SEEN
        self.ran.add(frames)
        self.calls += 1
        return StepResult(items=ITEMS, data_wait=0.0, new_shape=new)


def test_a_tensor_new_at_every_step_does_not_hide_the_first_runs_that_cost() -> None:
    # The held-out speech model (H200, 2026-11-28): its labels, new at every step, made every
    # step read as a first run, so no window was set apart and those that ran a new length of
    # its features counted: windows disagreed by 17-70%.
    clock = FakeClock()
    m = measure(SpeechStep(clock), sync=lambda: None, finite=lambda: True, clock=clock,
                settings=MeasureSettings(window_seconds=4 * SEEN, budget_seconds=1000.0,
                                         min_warmup_steps=3))
    assert m.new_shape_windows == 3
    assert m.throughput == ITEMS / SEEN  # the rate a long run has once its lengths are known
