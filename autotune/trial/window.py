"""One timed window of a training step: how many steps it runs (`plan_windows`), timing it
between two synchronizations (`time_window`), and whether a window that ran a batch shape for
the first time holds a one-off cost to set apart (`one_off_shapes`)."""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Callable, Sequence

from autotune.contract.request import MeasureSettings
from autotune.trial.warmup import Step, WarmUp

__all__ = ["NEW_SHAPE_COST", "NEW_SHAPES_STEADY", "FirstRuns", "Window", "WindowPlan",
           "first_run_seconds", "one_off_shapes", "plan_windows", "shapes_cost", "time_window"]

NEW_SHAPES_STEADY = 0.5
"""Share of timed steps whose batch shape ran for the first time, from which first-seen shapes
are the step's steady state (every batch new: a graph net's node counts) rather than one-off
costs that a long run pays once per shape (BERT's ~80 padded lengths)."""


NEW_SHAPE_COST = 0.10
"""How much slower a step must run, in the windows that ran first-seen shapes, than in those
that did not, for those shapes to hold a cost worth setting apart (BERT's: 38% in 4-step
windows; a transformers GPT-2 in tf32 pays nothing per new length)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Window:
    steps: int
    items: int
    seconds: float
    data_wait: float
    new_shapes: int = 0
    """Steps in it whose batch shapes the step had not run before."""

    @property
    def throughput(self) -> float:
        return self.items / self.seconds


def one_off_shapes(window: Window, timed: Sequence[Window]) -> bool:
    """Whether `window` ran a shape for the first time while first-seen shapes are rare among
    the steps timed so far (`timed`, this window included). A first run of a shape can cost far
    more than the next: eager BERT-base in bf16 on an H100 took a median 0.16 s on a padded
    length it had not run and 0.064 s on one it had (torch 2.11, 2026-11-27; what it pays per
    shape was not profiled), and the search's 4-step windows read 49k-139k tokens/s. A long run pays
    that once per length, so such a window is set apart like a recompiled one."""
    steps = sum(w.steps for w in timed)
    new = sum(w.new_shapes for w in timed)
    return window.new_shapes > 0 and steps > 0 and new < NEW_SHAPES_STEADY * steps


@dataclasses.dataclass(frozen=True, kw_only=True)
class WindowPlan:
    """How long each timed window is."""

    steps: int
    """Steps per window."""
    min_steps: int
    """Steps a window always runs, even past `max_seconds`."""
    max_seconds: float
    """Host seconds after which a window ends early (never before `min_steps`)."""


def plan_windows(warm: WarmUp, s: MeasureSettings, *, gathered: bool) -> WindowPlan:
    """Window lengths from the warm-up's steady step (`gathered`: DDP ranks measure as one)."""
    # At least 3 rounds of all workers: an input-bound loader delivers whole batches in bursts,
    # and a shorter window reads noise (design rule; 2x spread seen with 15 workers, 10 steps).
    # Not when the step never waited while warm-up drained the loader's queue: its batches were
    # there, bursts or not (GPT-2 on an H100 with 8 workers: 24-step windows, 11 s instead of 3).
    # Size windows by wall time per step (data wait included): an input-bound step sized by its
    # compute time alone would run into the 2x cap every window.
    wall = warm.step_wall
    # A step as long as a window is a window: the fewest-steps rule is for short steps' jitter
    # (GPT-2 fp32 on an H100, 1.28-s steps: 3 windows of 3 steps agreed within 0.1%).
    rounds = 1 if wall >= s.window_seconds else s.min_window_steps
    if not warm.kept_up:
        rounds = max(rounds, math.ceil(3 * s.num_workers / s.grad_accum))
    per_window = max(rounds, math.ceil(s.window_seconds / max(wall, 1e-9)))
    cycle = 0 if gathered else s.epoch_steps  # ranks' shards may differ: they plan alike
    if cycle and cycle <= 2 * per_window:
        # A short epoch's end is a cost that recurs every `cycle` steps: the sampler's new pass
        # and the workers' queue filling again while the step waits (augment.py on 2 CPUs: the
        # epoch's first of 16 steps took 69 ms, the others 18-42). Windows of 2.5 epochs hold 2
        # or 3 of them (28-43 steps spread 2.2-2.5% sd, 32 and 48 1.4% and 1.0%); whole epochs
        # hold as many ends each; at most 2x the window planned.
        per_window = rounds = math.ceil(per_window / cycle) * cycle
    # Across ranks a window is not cut short by one rank's clock: all must run its steps.
    max_seconds = math.inf if gathered else 2 * s.window_seconds
    return WindowPlan(steps=per_window, min_steps=rounds, max_seconds=max_seconds)


STALLED = 0.25
"""A timed window that waited for data this share of its time or more shows the loader's
bursts: its plan, sized for a loader that kept up in warm-up, is lengthened (`burst_plan`)."""


def burst_plan(plan: WindowPlan, window: Window, s: MeasureSettings) -> WindowPlan | None:
    """Windows of 3 rounds of all workers, when `window` stalled for data though `plan` was
    sized shorter: warm-up judged the loader to keep up from steps its full queue served (a
    held-out timm ViT with 9 workers: 7-step windows read 3.2k images/s on queued batches and
    0.6k on the stalls between, the median 1.97k where fresh runs read 1.19-1.41k; H100,
    2026-11-27). None when the plan already spans the rounds or the loader has no workers. A
    short epoch's whole-epoch windows stay whole epochs (`plan_windows`)."""
    rounds = math.ceil(3 * s.num_workers / s.grad_accum)
    if not s.num_workers or plan.steps >= rounds or window.data_wait < STALLED * window.seconds:
        return None
    cycle = s.epoch_steps
    if cycle and cycle <= 2 * rounds:
        rounds = math.ceil(rounds / cycle) * cycle
    return WindowPlan(steps=rounds, min_steps=rounds, max_seconds=plan.max_seconds)


def time_window(step: Step, plan: WindowPlan, sync: Callable[[], None],
                clock: Callable[[], float]) -> Window:
    """`plan.steps` steps between two synchronizations, ended early (never before its
    `min_steps`) once the host has spent its `max_seconds`, so that a slowdown cannot stretch
    one window over the budget."""
    sync()
    t0 = clock()
    items = steps = new_shapes = 0
    wait = 0.0
    while steps < plan.steps and (steps < plan.min_steps or clock() - t0 < plan.max_seconds):
        result = step()
        items += result.items
        wait += result.data_wait
        new_shapes += result.new_shape
        steps += 1
    sync()
    return Window(steps=steps, items=items, seconds=clock() - t0, data_wait=wait,
                  new_shapes=new_shapes)


def shapes_cost(clean: Sequence[Window], apart: Sequence[Window], *, least: int = 2,
                margin: float = NEW_SHAPE_COST) -> bool | None:
    """Whether the windows set apart for first-seen shapes (`apart`) ran their steps clearly
    slower than the windows that ran none (`clean`): the median step by `margin` or more. None
    until `least` of each have run."""
    if len(clean) < least or len(apart) < least:
        return None
    return _median_step(apart) > (1 + margin) * _median_step(clean)


def _median_step(windows: Sequence[Window]) -> float:
    """The median of the windows' seconds a step."""
    return statistics.median(w.seconds / w.steps for w in windows)


def first_run_seconds(clean: Sequence[Window], apart: Sequence[Window]) -> tuple[float, float]:
    """The median step of the `clean` windows, and what a step at a first-seen shape took
    beyond it: the median over the `apart` windows of their seconds past that many clean
    steps, per first-seen step (at least 0)."""
    step = _median_step(clean)
    extra = statistics.median((w.seconds - w.steps * step) / w.new_shapes for w in apart)
    return step, max(0.0, extra)


LATE_COST = 2 * NEW_SHAPE_COST
"""How much slower the windows set apart must run than the one clean window there is, when the
timing ends before two of each have run (`shapes_cost`), for their first runs' cost to be taken
from them: a wider margin, for a single window's noise."""


def _late_cost(kept: Sequence[Window], apart: Sequence[Window]) -> tuple[float, float] | None:
    """`first_run_seconds` from one clean window or more, when the windows set apart ran their
    steps `LATE_COST` slower (the held-out speech model in bf16, H200, 2026-11-28: a trial cut
    short with one clean window counted one holding a ~2-s first run, and read 487k frames/s
    where an expert's bf16 config ran 644k side by side). None otherwise."""
    clean = [w for w in kept if not w.new_shapes]
    if not shapes_cost(clean, apart, least=1, margin=LATE_COST):
        return None
    return first_run_seconds(clean, apart)


class FirstRuns:
    """The timed windows set apart because a batch shape ran first in them, and each window's
    place in time, so that those shown to cost nothing count after all, in the order they ran.
    Once such runs are shown to cost (`shapes_cost`), a window that must count though it ran
    first-seen shapes counts without their extra seconds (`counted`)."""

    def __init__(self, known: tuple[float, float] | None = None) -> None:
        self.apart: list[Window] = []
        self.costly: bool | None = None if known is None else True
        """Whether first runs of shapes cost (`shapes_cost`; None: not known yet)."""
        self.known = known
        """A clean step's seconds and a first run's extra (`first_run_seconds`), once costly."""
        self.discounted = 0
        """Windows counted without their first runs' extra seconds."""
        self._place: dict[int, int] = {}
        self._count = 0

    def counted(self, window: Window, timed: Sequence[Window]) -> Window:
        """`window` as it counts among `timed`: without the extra seconds of its first runs of
        shapes when they are one-offs whose cost is known, never faster than clean steps. A
        held-out speech model in bf16 (H200, 2026-11-28): 5-step windows read 750-860k frames/s
        clean and 230-450k with a new length; its windows, lengthened to 45 steps after a stall
        for data, each held new lengths and read 476-681k: 553k, below tf32's 563k, where an
        expert's bf16 config ran 1.04x the tf32 winner side by side."""
        if self.known is None or not one_off_shapes(window, [*timed, *self.apart, window]):
            return window
        step, extra = self.known
        # Never below clean steps plus the window's own wait for data: a first run's cost
        # overlaps a loader's stall, and one taken out twice would read too fast.
        floor = window.steps * step + window.data_wait
        seconds = max(window.seconds - window.new_shapes * extra, floor)
        if seconds >= window.seconds:
            return window
        counted = dataclasses.replace(window, seconds=seconds)
        self._place[id(counted)] = self._place.get(id(window), 0)
        self.discounted += 1
        return counted

    def stamp(self, window: Window) -> None:
        """Note `window`'s place in time (call as it is timed: an id reused by a window made
        after one was freed gets a later place)."""
        self._count += 1
        self._place[id(window)] = self._count

    def take(self, window: Window, timed: Sequence[Window], *, room: bool) -> bool:
        """Set `window` apart, and say so, when it ran a shape first (`one_off_shapes` over
        `timed`, the other windows timed so far), unless such runs were shown to cost nothing
        or there is no `room` (the budget must still fit the windows that count)."""
        if self.costly is False or not room \
                or not one_off_shapes(window, [*timed, *self.apart, window]):
            return False
        self.apart.append(window)
        return True

    def settle(self, kept: list[Window]) -> list[Window]:
        """`kept`, with the windows set apart folded back in once the windows so far show
        first runs of shapes costing nothing (judged again after each window)."""
        if not self.apart or self.costly is False:
            return kept
        clean = [w for w in kept if not w.new_shapes]
        self.costly = shapes_cost(clean, self.apart)
        if self.costly is False:  # first runs cost nothing after all: none is discounted
            kept, self.apart, self.known = self.in_order(kept + self.apart), [], None
        elif self.costly:
            self.known = first_run_seconds(clean, self.apart)
        return kept

    def top_up(self, kept: list[Window], least: int) -> list[Window]:
        """`kept` with the latest windows set apart added until there are `least` (a deadline
        cut the timing short): what was measured, rather than too few windows. Their first
        runs' cost is taken out when known, from one clean window if need be (`_late_cost`)."""
        short = max(0, least - len(kept))
        if not short or not self.apart:
            return kept
        if self.known is None and self.costly is None:
            self.known = _late_cost(kept, self.apart)
        back, self.apart = self.apart[-short:], self.apart[:-short]
        return self.in_order(kept + [self.counted(w, kept) for w in back])

    def in_order(self, windows: Sequence[Window]) -> list[Window]:
        return sorted(windows, key=lambda w: self._place.get(id(w), 0))
