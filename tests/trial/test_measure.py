"""The measurement loop with an injected clock: no real time passes, no GPU needed.

Step durations are powers of two so that the fake clock's sums are exact in floating point.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
from helpers import FakeClock

from autotune import MeasureSettings, measure
from autotune.trial.measure import Measurement, NonFiniteLoss, StepResult, Window, relative_spread
from autotune.trial.trend import EXTEND, still_rising

FAST = 1 / 64
SLOW = 1 / 32
COMPILE = 4.0
ITEMS = 8


class FakeStep:
    """Advances the clock by `duration(n)` on its n-th call (0-based) and reports `wait` of it
    as time spent waiting for data."""

    def __init__(self, clock: FakeClock, duration: Callable[[int], float], wait: float = 0.0) -> None:
        self.clock = clock
        self.duration = duration
        self.wait = wait
        self.calls = 0
        self.syncs = 0

    def __call__(self) -> StepResult:
        self.clock.now += self.duration(self.calls)
        self.calls += 1
        return StepResult(items=ITEMS, data_wait=self.wait)

    def sync(self) -> None:
        self.syncs += 1


def run(
    duration: Callable[[int], float],
    *,
    wait: float = 0.0,
    finite: Callable[[], bool] = lambda: True,
    on_window: Callable[[Window], None] | None = None,
    stop_at: float | None = None,
    **settings: float,
) -> tuple[Measurement, FakeStep]:
    clock = FakeClock()
    step = FakeStep(clock, duration, wait)
    defaults: dict[str, float] = {"window_seconds": 4 * FAST, "budget_seconds": 1000.0}
    m = measure(
        step,
        sync=step.sync,
        finite=finite,
        settings=MeasureSettings(**{**defaults, **settings}),  # type: ignore[arg-type]
        clock=clock,
        on_window=on_window,
        stop_at=stop_at,
    )
    return m, step


def compile_then(steady: float) -> Callable[[int], float]:
    """A compiled step: the first call compiles, then every step takes `steady`."""
    return lambda n: COMPILE + steady if n == 0 else steady


def alternating_windows(warmup: int, per_window: int) -> Callable[[int], float]:
    """Steady warm-up, then windows of `per_window` steps alternately fast and slow."""

    def duration(n: int) -> float:
        if n < warmup:
            return FAST
        return FAST if ((n - warmup) // per_window) % 2 == 0 else SLOW

    return duration


def test_warmup_discards_the_compile_step() -> None:
    m, step = run(compile_then(FAST), min_warmup_steps=3)
    assert m.settled
    assert m.warmup_steps == 3  # compile step + two steady steps that agree
    assert m.warmup_seconds == COMPILE + 3 * FAST
    # No timed window contains the compile step: every window runs at the steady rate.
    assert {w.seconds / w.steps for w in m.windows} == {FAST}
    assert m.throughput == ITEMS / FAST
    assert m.step_seconds == FAST


def test_compile_seconds_is_first_step_minus_steady_step() -> None:
    m, _ = run(compile_then(FAST))
    assert m.compile_seconds == pytest.approx(COMPILE)
    m, _ = run(lambda n: FAST)  # nothing to compile
    assert m.compile_seconds == 0.0


def test_compile_seconds_excludes_data_wait() -> None:
    m, _ = run(compile_then(FAST), wait=FAST / 4)
    assert m.compile_seconds == pytest.approx(COMPILE)


def test_warmup_waits_for_step_times_to_settle() -> None:
    # Slowly settling: 4 s, 2 s, 1 s, 0.5 s, ... until FAST: ratios of 2 are above 1.25.
    times = [4.0, 2.0, 1.0, 0.5, 0.25, 0.125, 0.0625, 1 / 32]
    m, _ = run(lambda n: times[n] if n < len(times) else FAST, min_warmup_steps=3)
    assert m.settled
    assert m.warmup_steps == len(times) + 2  # the last two agree from the second FAST step on
    assert m.throughput == ITEMS / FAST


def test_warmup_gives_up_after_max_warmup_steps() -> None:
    m, _ = run(lambda n: FAST if n % 2 else SLOW * 2, max_warmup_steps=7, max_windows=3)
    assert not m.settled
    assert m.warmup_steps == 7


def test_warmup_drains_the_loaders_prefetch() -> None:
    # Settled after step 3; 6 prefetched batches at 2 batches per step need 3 more steps.
    m, _ = run(lambda n: FAST, min_warmup_steps=3, prefetch_batches=6, grad_accum=2)
    assert m.warmup_steps == 6


def test_converges_when_windows_agree() -> None:
    m, step = run(lambda n: FAST, min_windows=3, agree=3, tolerance=0.03)
    assert m.converged
    assert len(m.windows) == 3
    assert m.spread == 0.0
    assert step.syncs >= 2 * len(m.windows)  # every window is bracketed by synchronization


def test_an_outlier_window_does_not_move_the_median() -> None:
    # Window 1 is slow (still warming caches); every later window agrees. The outlier widens
    # the confidence interval, so it takes more windows to converge, but not the median.
    m, _ = run(lambda n: SLOW if 3 <= n < 7 else FAST, min_warmup_steps=3, min_window_steps=4,
               window_seconds=2 * FAST, agree=3, tolerance=0.03, max_windows=100)
    assert m.converged
    assert m.uncertainty <= 0.03
    assert m.windows[0].throughput == ITEMS / SLOW
    assert {w.throughput for w in m.windows[1:]} == {ITEMS / FAST}
    assert m.throughput == ITEMS / FAST  # the median ignores the outlier
    assert m.spread == 0.0  # the last `agree` windows agree


def test_windows_within_tolerance_converge() -> None:
    # Windows 1% apart agree under a 3% tolerance.
    def duration(n: int) -> float:
        return FAST * (1.01 if ((n - 3) // 4) % 2 else 1.0) if n >= 3 else FAST

    m, _ = run(duration, min_warmup_steps=3, min_window_steps=4, window_seconds=2 * FAST,
               tolerance=0.03)
    assert m.converged
    assert len(m.windows) == 3
    assert 0 < m.spread <= 0.03


def test_alternating_windows_do_not_converge_and_stop_at_max_windows() -> None:
    m, _ = run(alternating_windows(warmup=3, per_window=4), min_warmup_steps=3,
               min_window_steps=4, window_seconds=2 * FAST, max_windows=7, tolerance=0.03)
    assert not m.converged
    assert len(m.windows) == 7
    assert m.spread == pytest.approx(relative_spread([ITEMS / FAST, ITEMS / SLOW, ITEMS / FAST]))
    assert m.spread > 0.03


def test_alternating_windows_stop_at_the_budget() -> None:
    # Windows take 4 * FAST = 1/16 s or 4 * SLOW = 1/8 s; the budget is 1/2 s.
    m, _ = run(alternating_windows(warmup=3, per_window=4), min_warmup_steps=3,
               min_window_steps=4, window_seconds=2 * FAST, max_windows=1000, budget_seconds=0.5)
    assert not m.converged
    elapsed = [sum(w.seconds for w in m.windows[: i + 1]) for i in range(len(m.windows))]
    assert elapsed[-1] >= 0.5  # stopped once the budget was spent...
    assert elapsed[-2] < 0.5  # ...and not before
    assert len(m.windows) == 6


def climbing_then_steady(warmup: int, climb: int) -> Callable[[int], float]:
    """SLOW through warm-up; then `climb` windows of 4 steps alternating SLOW and 2 x SLOW
    (new shapes paying for their plans, unevenly); then FAST for good."""
    def duration(n: int) -> float:
        if n == 0:
            return COMPILE
        if n < warmup:
            return SLOW
        window = (n - warmup) // 4
        return (SLOW if window % 2 == 0 else 2 * SLOW) if window < climb else FAST
    return duration


def test_windows_still_climbing_at_the_budget_drop_their_earlier_half_and_go_on() -> None:
    # Four climbing windows (0.75 s), then fast ones of 1/16 s: at the 1-s budget the later
    # half of 8 windows runs twice the earlier's rate. The earlier half is dropped and what is
    # left agrees on the fast rate.
    m, _ = run(climbing_then_steady(warmup=3, climb=4), min_warmup_steps=3, min_window_steps=4,
               window_seconds=2 * SLOW, max_windows=1000, budget_seconds=1.0, tolerance=0.02)
    assert m.rising_windows == 4
    assert m.throughput == pytest.approx(4 * ITEMS / (4 * FAST))  # the steady rate
    assert all(w.seconds == pytest.approx(4 * FAST) for w in m.windows)


def test_windows_still_climbing_at_max_windows_drop_their_earlier_half_too() -> None:
    # The same climb with time to spare: the window count's cap, not the budget, ends them.
    m, _ = run(climbing_then_steady(warmup=3, climb=4), min_warmup_steps=3, min_window_steps=4,
               window_seconds=2 * SLOW, max_windows=8, budget_seconds=100.0, tolerance=0.02)
    assert m.rising_windows == 4
    assert m.throughput == pytest.approx(4 * ITEMS / (4 * FAST))  # the steady rate


def speeding_up(warmup: int, factor: float) -> Callable[[int], float]:
    """SLOW through warm-up, then each window of 4 steps `factor` times as long as the one
    before, down to SLOW / 32: at 0.96 a step that gets faster for 3 s of windows."""
    return lambda n: COMPILE if n == 0 else (
        SLOW if n < warmup else max(SLOW / 32, SLOW * factor ** ((n - warmup) // 4)))


def test_a_climb_that_never_ends_stops_at_extend_budgets(monkeypatch: pytest.MonkeyPatch) -> None:
    # Every window set reads as climbing; windows alternate 1/8 and 3/16 s and never agree.
    # Only the cap ends the timing (a step past 5000 calls fails the test instead of hanging).
    monkeypatch.setattr("autotune.trial.measure.still_rising", lambda rates, tol: len(rates) >= 6)

    def duration(n: int) -> float:
        assert n < 5000, "the climb's extension did not stop"
        return COMPILE if n == 0 else (SLOW if ((n - 3) // 4) % 2 == 0 else 1.5 * SLOW)

    m, step = run(duration, min_warmup_steps=3, min_window_steps=4, window_seconds=2 * SLOW,
                  max_windows=10_000, budget_seconds=1.0, tolerance=0.02)
    timed = step.clock.now - m.warmup_seconds
    assert m.rising_windows > 0 and not m.converged
    assert EXTEND * 1.0 <= timed <= EXTEND * 1.0 + 4 * 1.5 * SLOW  # to the cap, not past it


def test_a_climb_extended_past_the_trials_deadline_ends_before_it() -> None:
    warm = 4.0 + 2 * SLOW  # the compile step and two steady ones
    m, step = run(speeding_up(warmup=3, factor=0.96), min_warmup_steps=3, min_window_steps=4,
                  window_seconds=2 * SLOW, max_windows=10_000, budget_seconds=1.0, tolerance=0.02,
                  stop_at=warm + 1.6)
    assert m.rising_windows > 0
    assert step.clock.now <= warm + 1.6


@pytest.mark.parametrize(("rates", "rising"), [
    ([1, 1, 1, 2, 2, 2], True),
    ([1, 1, 1, 1.15, 1.15, 1.15], False),  # not clearly: 15% is the bar, not past it
    ([1, 1, 1, 1.2, 1.2, 1.2], True),
    ([1, 1, 2, 2, 2], False),  # fewer than MIN_WINDOWS
    ([1, 1, 1, 2, 2, 0.9], False),  # the last window fell back below the earlier median
    ([2, 2, 2, 1, 1, 1], False),  # falling is not a warm-up
    ([1, 1, 1, 1, 2, 2, 2], True),  # odd: the later half is the longer
])
def test_still_rising(rates: list[float], rising: bool) -> None:
    assert still_rising([float(r) for r in rates], tolerance=0.05) is rising


def test_a_loose_tolerance_raises_the_bar() -> None:
    assert still_rising([1.0, 1.0, 1.0, 1.2, 1.2, 1.2], tolerance=0.05)
    assert not still_rising([1.0, 1.0, 1.0, 1.2, 1.2, 1.2], tolerance=0.1)  # 2 x 10% = 20%


def test_windows_stop_at_the_trials_deadline_unconverged_but_measured() -> None:
    # The same noisy windows with a budget of 1000 s: the trial's own time limit (stop_at, at
    # 1 s on the fake clock) ends them, where being killed at the limit would lose them all.
    m, step = run(alternating_windows(warmup=3, per_window=4), min_warmup_steps=3,
                  min_window_steps=4, window_seconds=2 * FAST, max_windows=1000, stop_at=1.0)
    assert not m.converged
    # No window starts that, as long as the last one, would end past it: windows here are
    # 4 * FAST or 4 * SLOW, so they end at most 4 * (SLOW - FAST) past it, and the last gap
    # before it is shorter than one slow window.
    assert 1.0 - 4 * SLOW <= step.clock.now < 1.0 + 4 * (SLOW - FAST)
    assert m.throughput > 0 and len(m.windows) > 3


@pytest.mark.parametrize(
    ("num_workers", "grad_accum", "expected"),
    [
        (0, 1, 4),  # window_seconds / step: 4 steps
        (1, 4, 4),  # 3 rounds of 1 worker at 4 batches per step is less than that
        (2, 1, 6),  # 3 rounds of 2 workers, one batch per step
        (4, 2, 6),  # two batches per step
        (5, 2, 8),  # ceil(15 / 2)
    ],
)
def test_window_length_covers_three_rounds_of_workers(
    num_workers: int, grad_accum: int, expected: int
) -> None:
    # Steps that wait for data (a tenth of each): the workers' bursts show in short windows.
    m, _ = run(lambda n: FAST, wait=FAST / 10, window_seconds=4 * FAST, min_window_steps=3,
               num_workers=num_workers, grad_accum=grad_accum, prefetch_batches=2)
    assert {w.steps for w in m.windows} == {expected}


def test_window_with_many_workers_is_not_cut_by_the_time_cap() -> None:
    # 8 workers, 1/4 s steps, 1 s windows: 3 rounds of the workers take 24 steps (6 s).
    m, _ = run(lambda n: 0.25, wait=0.05, window_seconds=1.0, min_window_steps=3, num_workers=8,
               grad_accum=1, max_windows=3)
    assert {w.steps for w in m.windows} == {24}


@pytest.mark.parametrize(("wait", "expected"), [(0.0, 4), (FAST * 0.009, 4), (FAST * 0.02, 24)])
def test_a_loader_that_kept_up_in_warm_up_leaves_windows_to_window_seconds(
        wait: float, expected: int) -> None:
    # 8 workers; warm-up drained 16 prefetched batches. Waiting under 1% of those steps' time
    # means the batches were there: windows of window_seconds (4 steps), not 3 rounds (24).
    m, step = run(lambda n: FAST, wait=wait, window_seconds=4 * FAST, min_window_steps=3,
                  num_workers=8, prefetch_batches=16)
    assert {w.steps for w in m.windows} == {expected}
    # Kept up: all 16 drained. Behind (every pull waits): a round of the 8 workers shows the
    # queue is empty, and the drain ends there.
    assert m.warmup_steps >= (16 if expected == 4 else 8)


def test_a_loader_not_drained_in_warm_up_keeps_the_rounds_rule() -> None:
    # No prefetched batches were drained after settling (warm-up gave up unsettled): nothing
    # says the loader keeps up, so windows still span 3 rounds of the 8 workers.
    m, _ = run(lambda n: FAST * (1 + n % 2), window_seconds=4 * FAST, min_window_steps=3,
               num_workers=8, max_warmup_steps=6, settle_ratio=1.05)
    assert {w.steps for w in m.windows} == {24}


def test_window_length_covers_window_seconds() -> None:
    m, _ = run(lambda n: FAST, window_seconds=0.5, min_window_steps=3)
    assert {w.steps for w in m.windows} == {32}  # 0.5 s / (1/64 s)
    assert {w.seconds for w in m.windows} == {0.5}
    assert {w.items for w in m.windows} == {32 * ITEMS}


def test_a_step_as_long_as_a_window_is_timed_alone() -> None:
    # 1/4 s steps against 1/8 s windows: one step a window, not the fewest-steps rule's 3...
    m, _ = run(lambda n: 0.25, window_seconds=0.125, min_window_steps=3, max_windows=3)
    assert {w.steps for w in m.windows} == {1} and len(m.windows) == 3
    # ...unless the loader's workers need their rounds: 2 workers, steps that waited for data.
    m, _ = run(lambda n: 0.25, wait=0.05, window_seconds=0.125, min_window_steps=3,
               num_workers=2, max_windows=3)
    assert {w.steps for w in m.windows} == {6}


def test_non_finite_loss_in_warmup() -> None:
    with pytest.raises(NonFiniteLoss, match="warm-up"):
        run(lambda n: FAST, finite=lambda: False)


def test_non_finite_loss_in_a_timed_window() -> None:
    answers = iter([True, True, False])
    windows: list[Window] = []
    with pytest.raises(NonFiniteLoss, match="timed window 2"):
        run(lambda n: FAST, finite=lambda: next(answers), on_window=windows.append)
    assert len(windows) == 2


def test_data_wait_fraction() -> None:
    m, _ = run(lambda n: FAST, wait=FAST / 4)
    assert m.data_wait_fraction == pytest.approx(0.25)
    assert m.summary()["data_wait_fraction"] == pytest.approx(0.25)


def test_on_window_sees_every_window() -> None:
    seen: list[Window] = []
    m, _ = run(lambda n: FAST, on_window=seen.append)
    assert tuple(seen) == m.windows


def test_summary_keys() -> None:
    m, _ = run(compile_then(FAST))
    summary = m.summary()
    assert summary["throughput"] == ITEMS / FAST
    assert summary["converged"] is True
    assert summary["windows"] == len(m.windows)
    assert set(summary) == {
        "throughput", "spread", "step_seconds", "data_wait_fraction", "warmup_steps",
        "warmup_seconds", "compile_seconds", "windows", "converged", "settled",
    }


def test_relative_spread() -> None:
    assert relative_spread([90.0, 100.0, 110.0]) == pytest.approx(0.2)
    assert relative_spread([]) == math.inf
    assert relative_spread([0.0, 0.0]) == math.inf


@pytest.mark.parametrize(
    "bad",
    [{"agree": 1}, {"min_windows": 0}, {"tolerance": 0.0}, {"tolerance": 1.0},
     {"window_seconds": 0.0}, {"budget_seconds": -1.0}],
)
def test_invalid_settings(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="="):
        MeasureSettings(**bad)  # type: ignore[arg-type]


def test_timed_start_hook_runs_once_between_warmup_and_the_first_window() -> None:
    clock = FakeClock()
    step = FakeStep(clock, compile_then(FAST))
    seen: list[tuple[str, int]] = []
    m = measure(
        step, sync=step.sync, finite=lambda: True, clock=clock,
        settings=MeasureSettings(window_seconds=4 * FAST, budget_seconds=1000.0),
        on_window=lambda w: seen.append(("window", step.calls)),
        on_timed_start=lambda: seen.append(("start", step.calls)),
    )
    assert seen[0] == ("start", m.warmup_steps)  # after every warm-up step, before any timed one
    assert [kind for kind, _ in seen] == ["start"] + ["window"] * len(m.windows)


# -- DDP ranks: one measurement -------------------------------------------------------------------


class TwoRanks:
    """A `gather` that plays this process as rank 0 of two, rank 1 `slower` times slower in
    every time it reports, with the same items; remembers each call's values."""

    def __init__(self, slower: float) -> None:
        self.slower = slower
        self.calls: list[tuple[float, ...]] = []

    def __call__(self, values: tuple[float, ...]) -> list[tuple[float, ...]]:
        self.calls.append(values)
        if len(values) == 4:  # a window: seconds, items, data wait, elapsed
            seconds, items, wait, elapsed = values
            return [values, (seconds * self.slower, items, wait, elapsed * self.slower)]
        return [values, tuple(v * self.slower for v in values)]  # warm-up: wall, compute


def test_ranks_count_every_ranks_items_over_the_slowest_ranks_time() -> None:
    gather = TwoRanks(slower=2.0)
    clock = FakeClock()
    step = FakeStep(clock, lambda n: FAST)
    m = measure(step, sync=step.sync, finite=lambda: True, clock=clock, gather=gather,
                settings=MeasureSettings(window_seconds=4 * FAST, budget_seconds=1000.0))
    # Global rate: both ranks' items over rank 1's (twice as long) window.
    assert m.throughput == pytest.approx(2 * ITEMS / (2 * FAST))
    assert m.step_seconds == pytest.approx(2 * FAST)
    # Each warm-up step and each window was agreed on (the decisions use the agreed values).
    assert len(gather.calls) == m.warmup_steps + len(m.windows)
    # Window length follows the slowest rank's step: 4 x FAST of target is 2 of its steps, so
    # the floor (min_window_steps) decides, on both ranks alike.
    assert {w.steps for w in m.windows} == {MeasureSettings().min_window_steps}


def test_ranks_never_cut_a_window_on_one_ranks_clock() -> None:
    # A window that slows down 100x would be cut at 2 x window_seconds in one process; across
    # ranks every rank must run the same steps, so it runs to its length.
    def steps(gather: Callable[[tuple[float, ...]], list[tuple[float, ...]]] | None) -> list[int]:
        clock = FakeClock()
        step = FakeStep(clock, lambda n: FAST if n < 10 else 100 * FAST)
        m = measure(step, sync=step.sync, finite=lambda: True, clock=clock, gather=gather,
                    settings=MeasureSettings(window_seconds=16 * FAST, budget_seconds=1000.0,
                                             max_windows=3))
        return [w.steps for w in m.windows]

    assert steps(None)[0] < 16  # one process: cut at the time cap
    assert steps(lambda v: [v, v]) == [16, 16, 16]
