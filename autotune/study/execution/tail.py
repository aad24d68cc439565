"""Follow a running trial's events file: each window's rate, its phase and since when, the
first step's seconds, handed on to the search as they come."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from autotune.contract.events import (FirstStepEvent, PhaseEvent, RecompileEvent, TrialEvent,
                                      WarmupEvent, WindowEvent, decode)
from autotune.contract.phases import Phase, stalled
from autotune.contract.recompiles import recompile_note

__all__ = ["EventCallback", "EventTail"]

EventCallback = Callable[[TrialEvent], None]


class EventTail:
    """Reads new lines of the trial's events file and hands them to a callback."""

    def __init__(self, path: Path, callback: EventCallback | None) -> None:
        self.path = path
        self.callback = callback
        self.offset = 0
        self.rates: list[float] = []
        """Each timed window's rate so far."""
        self.warmup_rates: list[float] = []
        """Each warm-up chunk's rate so far (`WarmupEvent`)."""
        self.warmup_steps = (0, 0.0)
        """The warm-up steps after the first that compiled nothing, and their seconds."""
        self.phase: str = Phase.START.value
        self.started = self.phase_since = time.time()
        """When the trial entered `phase` (wall clock: the trial stamps its events so)."""
        self.stepped = False
        """Whether a warm-up step has finished."""
        self.first_step: float | None = None  # its seconds (compiling, for a compiled config)
        self.recompiled: RecompileEvent | None = None
        """The last recompile after the first step, if any."""

    def poll(self) -> None:
        if not self.path.is_file():
            return
        with self.path.open() as f:
            f.seek(self.offset)
            while True:
                line = f.readline()
                if not line.endswith("\n"):
                    break  # incomplete: read it next time
                self.offset = f.tell()
                event = decode(line)  # a garbled line raises; an unknown kind is skipped
                if event is None:
                    continue
                if isinstance(event, WindowEvent):
                    self.rates.append(float(event.throughput))
                elif isinstance(event, WarmupEvent) and event.seconds > 0:
                    self.warmup_rates.append(event.items / event.seconds)
                    steps, seconds = self.warmup_steps
                    self.warmup_steps = (steps + event.steps, seconds + event.seconds)
                elif isinstance(event, PhaseEvent):
                    self.phase = event.phase
                    self.phase_since = float(event.time)
                elif isinstance(event, FirstStepEvent):
                    self.stepped = True
                    self.first_step = float(event.seconds)
                elif isinstance(event, RecompileEvent):
                    self.recompiled = event
                if self.callback is not None:
                    self.callback(event)

    def compile_allowance(self, grace: float) -> float:
        """What the limit grows by for compiling (`TrialRequest.compile_grace`): all of `grace`
        while the first step runs, its seconds (at most `grace`) after it, none before."""
        if self.first_step is not None:
            return min(grace, self.first_step)
        return grace if self.phase == Phase.WARMUP else 0.0

    def stalled(self, *, compiling: bool, counts_steps: bool = True) -> str:
        """Where the trial is, in words, and for how long it has been there; what it
        recompiled after its first step and why, if it did. `counts_steps`: the trial reports
        its warm-up steps (`WarmupEvent`; a DDP trial's ranks do not)."""
        self.poll()
        r = self.recompiled
        where = stalled(self.phase, max(0.0, time.time() - self.phase_since),
                        before=max(0.0, self.phase_since - self.started),
                        compiling=compiling, stepped=self.stepped, windows=len(self.rates),
                        first_step=self.first_step,
                        later_steps=self.warmup_steps if r is None and counts_steps else None)
        note = "" if r is None else recompile_note(r.count, r.seconds, r.reasons)
        return f"{where}; {note}" if note else where
