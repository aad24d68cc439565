"""Where a trial process is: the phase it is in, the seconds each phase took, and the events it
streams to its parent (`events.jsonl`, `contract.events`)."""

from __future__ import annotations

import time
from pathlib import Path

from autotune.contract.events import PhaseEvent, TrialEvent, encode
from autotune.contract.phases import Phase
from autotune.contract.request import TrialRequest

__all__ = ["Progress", "time_left"]


class Progress:
    """Which phase the trial is in, streamed as events, and the seconds each one took."""

    def __init__(self, events: Path | None, started: float | None) -> None:
        self.events = events
        """The events file (None: nobody listens, nothing is written)."""
        self.seconds: dict[str, float] = {}
        """Seconds spent in each phase left so far, by the phase's name."""
        self.current: str = Phase.START.value
        self.since = time.perf_counter() if started is None else started
        self.began = self.since
        """When the trial's process (or fork) began: what its time limit counts from."""

    def elapsed(self) -> float:
        return time.perf_counter() - self.began

    def emit(self, event: TrialEvent) -> None:
        if self.events is not None:
            with self.events.open("a") as f:
                f.write(encode(event))

    def enter(self, phase: Phase | str) -> None:
        """Leave the current phase for `phase` ("": the trial is over)."""
        name = phase.value if isinstance(phase, Phase) else phase
        if name == self.current:
            return
        now = time.perf_counter()
        if self.current:
            self.seconds[self.current] = self.seconds.get(self.current, 0.0) + now - self.since
        self.current, self.since = name, now
        if name:
            self.emit(PhaseEvent(phase=name, time=time.time()))


def time_left(request: TrialRequest, progress: Progress) -> float | None:
    """Seconds until the parent kills this trial (None: no limit): from the runner's deadline
    when it sent one, else from the time limit and this process's own start."""
    if request.deadline is not None:
        return request.deadline - time.time()
    if request.time_limit is not None:
        return request.time_limit - progress.elapsed()
    return None
