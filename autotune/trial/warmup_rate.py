"""The rate a step runs at in warm-up, streamed before its timed windows, so that the search can
stop a trial that cannot come near the best (`study.policy.pruning`) before it has paid for them.

Warm-up waits for step times to settle and drains the loader's queue: for a slow config that is
most of its trial. On an H100 a Faster R-CNN at fp16 took 4.75 s a step, 39 s of warm-up and 14 s
of windows, to read 0.06x the best (2026-11-26). The wrapper times each step from its call to the
next call (warm-up synchronizes after each step, so the interval holds the step's device work),
leaves out the first (compiling, first-call setup), any step during which compile seconds
grew (a recompile is a fixed cost), the first `SHAPE_SETUP_STEPS` steps at a batch shape no
step ran (a per-shape cost paid once) and, past those, any such step that took `FIRST_RUN_COST`
times the median step at a shape run before, and emits the rest in chunks of at least
`CHUNK_SECONDS`.
"""

from __future__ import annotations

import statistics
import time
from collections import deque
from collections.abc import Callable

from autotune.contract.events import WarmupEvent
from autotune.trial.warmup import RECOMPILE_SECONDS, Step, StepResult

__all__ = ["CHUNK_SECONDS", "FIRST_RUN_COST", "SHAPE_SETUP_STEPS", "WarmupRate"]

CHUNK_SECONDS = 1.0
"""Seconds of steps per event at least: a 10-ms step writes a line a second, not a hundred."""

SHAPE_SETUP_STEPS = 4
"""Steps at a new batch shape left out of the warm rate after the first step, in all (not per
shape): a new shape can pay a setup its repeats do not. A held-out speech model on padded
batches (H200, 2026-11-28) ran bf16 steps of 43-51 ms at a length seen before and about 200 ms
at a new one (cuDNN's attention plans it per shape); in the first process on the host to run
bf16, 2.8, 2.2 and 1.8 s (its kernels compiled, then cached). Its first bf16 trial was stopped
as hopeless on its steps 2 and 3, at 0.06x the fp32 leader; bf16 was the winner, found by
chance later. Only the first few: a step whose every batch has a new shape pays it every
step."""

FIRST_RUN_COST = 2.0
"""How many times the median step at a shape run before (`SEEN_STEPS` of them, the latest) a
step at a new shape must take to be left out of the warm rate past the first
`SHAPE_SETUP_STEPS`: a batch whose padded lengths are spread (the speech model's ~150) runs new
ones through most of warm-up; eager BERT's first runs took 2.5x its repeats, the speech
model's 4.4x. Where no shape repeats, none is known, and every step counts."""

SEEN_STEPS = 16
"""Steps at a shape run before whose median `FIRST_RUN_COST` is judged against, the latest."""


class WarmupRate:
    """`step`, timed call to call until `stop()` (the first timed window), with each chunk of
    steps that compiled nothing handed to `emit` as a `WarmupEvent`; `on_recompile` is called
    after each step but the first that compiled again."""

    def __init__(self, step: Step, emit: Callable[[WarmupEvent], None], *,
                 compiled_seconds: Callable[[], float | None] | None = None,
                 clock: Callable[[], float] = time.perf_counter,
                 on_recompile: Callable[[], None] | None = None) -> None:
        self.step, self.emit, self.clock = step, emit, clock
        self._compiled = compiled_seconds or (lambda: None)
        self._on_recompile = on_recompile
        self._calls = 0
        self._last: tuple[float, float | None, StepResult] | None = None  # start, compiled
        self._new_shapes = 0  # steps at a new shape left out so far
        self._seen: deque[float] = deque(maxlen=SEEN_STEPS)  # steps at a shape run before
        self._items = self._seconds = 0.0
        self._steps = 0
        self._stopped = False

    def __call__(self) -> StepResult:
        if self._stopped:  # timed windows: nothing added to what they time
            return self.step()
        now, compiled = self.clock(), self._compiled()
        if self._last is not None:
            self._close(now, compiled)
        result = self.step()
        if self._calls and self._on_recompile is not None and _grew(compiled, self._compiled()):
            self._on_recompile()
        self._calls += 1
        self._last = (now, compiled, result)
        return result

    def stop(self) -> None:
        """Warm-up is over: the rest are timed windows."""
        self._stopped = True

    def _close(self, now: float, compiled: float | None) -> None:
        """The last call ended at `now`: count it unless it was the first or compiled."""
        assert self._last is not None
        start, before, result = self._last
        if self._calls < 2 or _grew(before, compiled) or now <= start:
            return
        seconds = now - start
        if result.new_shape and (self._new_shapes < SHAPE_SETUP_STEPS
                                 or self._costly(seconds, result.new_share)):
            self._new_shapes += 1
            return
        if not result.new_shape:
            self._seen.append(seconds)
        self._items += result.items
        self._seconds += seconds
        self._steps += 1
        if self._seconds >= CHUNK_SECONDS:
            self.emit(WarmupEvent(items=self._items, seconds=self._seconds, steps=self._steps))
            self._items = self._seconds = 0.0
            self._steps = 0

    def _costly(self, seconds: float, share: float) -> bool:
        """Whether a step at a new shape took `FIRST_RUN_COST` times the median step at a shape
        run before, in the `share` of its micro-batches at new shapes: one in 4 at twice a
        micro-batch's time makes a step of 1.25x (False while fewer than two such steps ran)."""
        return (len(self._seen) >= 2
                and seconds > (1 + (FIRST_RUN_COST - 1) * share) * statistics.median(self._seen))


def _grew(before: float | None, after: float | None) -> bool:
    """Whether compile seconds grew between two readings (a step that compiled)."""
    return before is not None and after is not None and after - before > RECOMPILE_SECONDS
