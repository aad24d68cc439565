"""The measurement against a simulated DataLoader queue: workers that each make a batch in a
fixed time, `prefetch_factor` tasks each in flight, batches handed over in order, and a new task
sent whenever one is handed over (as torch's DataLoader does). No real time passes.

A queue filled while the first step compiled must not be timed: training for hours runs at
the rate the workers make batches, not at the rate a full queue hands them over.
"""

from __future__ import annotations

import sys

import pytest
from helpers import FakeClock

from autotune import MeasureSettings, measure
from autotune.trial.compose import TrainStep
from autotune.trial.measure import Measurement, StepResult
from autotune.trial.warmup import warm_up

COMPUTE = 1 / 128  # seconds of one step's own work
COMPILE = 30.0  # the first step: the workers fill their whole queue meanwhile


class SimulatedLoader:
    """A training step fed by `workers` loader processes, each taking `batch_seconds` per
    batch, with `prefetch` tasks per worker in flight."""

    def __init__(self, clock: FakeClock, *, workers: int, prefetch: int,
                 batch_seconds: float) -> None:
        self.clock = clock
        self.workers = workers
        self.batch_seconds = batch_seconds
        self.free = [0.0] * workers  # when each worker finishes what it was given
        self.ready: dict[int, float] = {}  # batch index -> when it is made
        self.sent = self.handed = self.steps = 0
        for _ in range(workers * prefetch):
            self._send()

    def _send(self) -> None:
        worker = self.sent % self.workers
        start = max(self.clock.now, self.free[worker])
        self.free[worker] = self.ready[self.sent] = start + self.batch_seconds
        self.sent += 1

    def next_batch(self) -> tuple[None, int]:
        made = self.ready.pop(self.handed)
        self.handed += 1
        self.clock.now = max(self.clock.now, made)  # blocked until it is made
        self._send()
        return None, 1

    skip_queued = TrainStep.skip_queued  # the real one, on this loader

    def __call__(self) -> StepResult:
        t0 = self.clock.now
        self.next_batch()
        wait = self.clock.now - t0
        self.clock.now += COMPUTE + (COMPILE if self.steps == 0 else 0.0)
        self.steps += 1
        return StepResult(items=1, data_wait=wait)

    def sync(self) -> None:
        pass


def measured(*, workers: int, prefetch: int, loader_per_step: float, skip: bool,
             loader_type: type[SimulatedLoader] = SimulatedLoader) -> tuple[Measurement, float]:
    """Measure a step whose loader makes a batch in `loader_per_step` x the step's compute
    time (all workers together); return the measurement and the steady rate of training."""
    clock = FakeClock()
    loader = loader_type(clock, workers=workers, prefetch=prefetch,
                         batch_seconds=workers * loader_per_step * COMPUTE)
    settings = MeasureSettings(num_workers=workers, prefetch_batches=workers * prefetch,
                               window_seconds=1.0, budget_seconds=20.0)
    m = measure(loader, sync=loader.sync, finite=lambda: True, clock=clock, settings=settings,
                skip=loader.skip_queued if skip else None)
    steady = 1 / (max(loader_per_step, 1.0) * COMPUTE)
    return m, steady


def test_an_input_bound_steps_first_window_reads_the_workers_not_their_queue() -> None:
    # The step is 4.5x faster than 16 workers with 8 batches each in flight: draining 128
    # queued batches at the step's pace leaves the ones made meanwhile.
    m, steady = measured(workers=16, prefetch=8, loader_per_step=4.5, skip=False)
    # Without the skip the first window read the queue (1.15x and more); now the windows start
    # over once one stalls for data (`window.burst_plan`), so they read the workers anyway.
    assert m.throughput == pytest.approx(steady, rel=0.01)
    m, steady = measured(workers=16, prefetch=8, loader_per_step=4.5, skip=True)
    assert m.throughput == pytest.approx(steady, rel=0.01)
    # The workers given new tasks all at once while the queue was skipped deliver in bunches
    # at first: the first window reads a little low here (with batches of uneven cost, one
    # slow batch can end the skip early, and it may read high).
    assert [w.throughput for w in m.windows] == pytest.approx([steady] * len(m.windows),
                                                              rel=0.03)


def test_a_loader_a_little_slower_than_the_step_is_timed_at_its_own_rate() -> None:
    # 10% slower: the queue would take ~1,400 steps to drain; warm-up never saw a wait, and
    # every window read the step's own rate.
    m, steady = measured(workers=16, prefetch=8, loader_per_step=1.1, skip=False)
    assert m.throughput == pytest.approx(1.1 * steady, rel=0.01)
    m, steady = measured(workers=16, prefetch=8, loader_per_step=1.1, skip=True)
    assert m.throughput == pytest.approx(steady, rel=0.02)


@pytest.mark.parametrize("loader_per_step", [0.5, 0.9])
def test_a_compute_bound_step_after_the_skip_waits_out_the_restart_before_timing(
        loader_per_step: float) -> None:
    # Emptying the queue makes the next step wait for the workers' new batches; warm-up runs
    # steps until one does not wait, so no window holds that wait.
    m, steady = measured(workers=8, prefetch=2, loader_per_step=loader_per_step, skip=True)
    assert [w.throughput for w in m.windows] == pytest.approx([steady] * len(m.windows),
                                                              rel=0.01)
    assert m.converged


class Uncompiled(SimulatedLoader):
    """The same loader behind a step with no compile: its queue has not filled when warm-up
    starts draining it."""

    def __call__(self) -> StepResult:
        self.steps += 1  # never the first step's compile
        return super().__call__()


def test_a_loader_behind_the_step_ends_the_drain_after_a_round_of_waits() -> None:
    # A held-out MobileNetV3 at batch 768 (H200, 2026-11-28): 15 workers, 4 batches each in
    # flight, 3x slower than the step. Draining all 60 at the loader's pace outlasted the
    # trial; once a round of the workers' batches in a row was waited for, nothing queued is
    # left to drain.
    m, steady = measured(workers=15, prefetch=4, loader_per_step=3.0, skip=True,
                         loader_type=Uncompiled)
    assert m.warmup_steps is not None
    assert m.warmup_steps < MeasureSettings().min_warmup_steps + 15 + 15
    assert m.throughput == pytest.approx(steady, rel=0.01)  # 1 / (3 x the step's compute)


class Handover(SimulatedLoader):
    """Each pull costs the training process a little even from a full queue (unpickling the
    batch, reading its shapes): a twentieth of the step's compute."""

    def next_batch(self) -> tuple[None, int]:
        out = super().next_batch()
        self.clock.now += COMPUTE / 20
        return out


def test_a_full_queue_is_drained_whatever_each_handover_costs() -> None:
    # A review's case: 16 workers, 4 batches each, a loader 1.5x slower than the step, the
    # queue filled during the compile. A handover cost counted as waiting ended the drain
    # after 19 steps, though 64 batches were still queued.
    m, _ = measured(workers=16, prefetch=4, loader_per_step=1.5, skip=False,
                    loader_type=Handover)
    assert m.warmup_steps is not None and m.warmup_steps >= 64


def test_skipping_ends_at_the_first_pull_that_blocks() -> None:
    clock = FakeClock()
    loader = SimulatedLoader(clock, workers=4, prefetch=2, batch_seconds=1.0)
    clock.now = 10.0  # all 8 made
    assert loader.skip_queued(1e-3, 100) == 8 + 1  # the queue, then one that blocked
    assert clock.now == 11.0  # the first new batch: sent at 10 s, made in 1 s


def test_across_ranks_warm_up_goes_on_while_any_rank_waited_for_its_new_batches() -> None:
    # This rank never waits; the other one waits half of each step after the skip. Every rank
    # must run the same steps, and the refill is over only when no rank waited.
    clock = FakeClock()
    skipped: list[int] = []

    def step() -> StepResult:
        clock.now += COMPUTE
        return StepResult(items=1, data_wait=0.0)

    def gather(values: tuple[float, ...]) -> list[tuple[float, ...]]:
        if not skipped:
            return [values, values]
        wall = values[0]  # wall, compute, wait, items, shapes varied
        return [values, (wall, wall / 2, wall / 2, *values[3:])]

    def skip(waited: float, most: int) -> int:
        skipped.append(most)
        return 0

    settings = MeasureSettings(num_workers=4, prefetch_batches=8, min_warmup_steps=3)
    warm = warm_up(step, sync=lambda: None, settings=settings, clock=clock, gather=gather,
                   skip=skip)
    assert skipped == [2 * 8 + 4]
    drained = 3 + 8  # settled after 3 steps, then the prefetched batches
    assert warm.kept_up and warm.steps == drained + 4 + 1  # a round of the workers, plus one


@pytest.mark.parametrize("loader_per_step", [1.5, 2.0])
def test_windows_sized_for_a_loader_that_kept_up_grow_once_one_stalls(
        monkeypatch: pytest.MonkeyPatch, loader_per_step: float) -> None:
    # Warm-up drained a queue the first step had filled and saw no wait, so windows were
    # planned at 7 steps; 9 workers restarted together then hand over bunches of 9 with
    # stalls between. A held-out timm ViT so read 3.2k images/s on bunches and 0.6k on
    # stalls, median 1.97k against 1.19-1.41k fresh (H100, 2026-11-27). Once a window stalls,
    # the windows start over at 3 rounds of the workers.
    monkeypatch.setattr(sys.modules[__name__], "COMPILE", 0.15)  # a first step of 0.15 s
    clock = FakeClock()
    loader = SimulatedLoader(clock, workers=9, prefetch=2,
                             batch_seconds=9 * loader_per_step * COMPUTE)
    settings = MeasureSettings(num_workers=9, prefetch_batches=18, window_seconds=0.05,
                               budget_seconds=1.0)
    m = measure(loader, sync=loader.sync, finite=lambda: True, clock=clock, settings=settings,
                skip=loader.skip_queued)
    steady = 1 / (loader_per_step * COMPUTE)
    assert all(w.steps >= 27 for w in m.windows)
    assert m.throughput == pytest.approx(steady, rel=0.01) and m.converged


def test_windows_do_not_start_over_when_a_longer_one_would_end_past_the_limit(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # 0.3 s left after warm-up: 3 rounds of 9 workers (27 steps of ~16 ms) would end past it,
    # and a trial killed at its limit loses every window it measured. The short ones are kept.
    monkeypatch.setattr(sys.modules[__name__], "COMPILE", 0.15)
    clock = FakeClock()
    loader = SimulatedLoader(clock, workers=9, prefetch=2, batch_seconds=9 * 2.0 * COMPUTE)
    settings = MeasureSettings(num_workers=9, prefetch_batches=18, window_seconds=0.05,
                               budget_seconds=1.0)
    until: list[float] = []

    def stop_at() -> float:
        until.append(clock.now + 0.3)
        return until[0]

    m = measure(loader, sync=loader.sync, finite=lambda: True, clock=clock, settings=settings,
                skip=loader.skip_queued, stop_at=stop_at)
    assert m.windows and all(w.steps < 27 for w in m.windows)
    assert clock.now <= until[0]
