"""What a trial process tells its parent while it runs: typed events, one JSON line each.

The trial appends each event to `events.jsonl` in its folder (`encode`); the parent tails the
file and reads each complete line back (`decode`): the runner follows the phase (to say where a
killed trial was stuck), the pruner the windows' rates, the display both.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, ClassVar

__all__ = ["ComposedEvent", "FirstStepEvent", "PhaseEvent", "RecompileEvent", "SparePausedEvent",
           "TrialEvent", "WarmupEvent", "WindowEvent", "decode", "encode"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class PhaseEvent:
    """The trial entered a phase (`contract.phases.Phase`)."""

    KIND: ClassVar[str] = "phase"
    phase: str
    """The phase's name (`Phase.value`)."""
    time: float
    """When it entered it, wall clock (`time.time()`): the parent's clock may differ from the
    trial's `perf_counter`, not from this."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class WindowEvent:
    """A timed window ended (`trial.measure.Window`)."""

    KIND: ClassVar[str] = "window"
    throughput: float
    """Its rate, units/s."""
    seconds: float | None = None
    """Its wall time (None: not known, as in a replayed window)."""
    steps: int | None = None
    """Its optimizer steps."""
    data_wait: float | None = None
    """Seconds of it spent waiting for the DataLoader."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class ComposedEvent:
    """The step is built: model, optimizer, loader and every knob applied."""

    KIND: ClassVar[str] = "composed"


@dataclasses.dataclass(frozen=True, kw_only=True)
class FirstStepEvent:
    """The first warm-up step finished: past it, a slow warm-up is not compiling."""

    KIND: ClassVar[str] = "first_step"
    seconds: float
    """How long that step took (compiling included)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class WarmupEvent:
    """Warm-up steps after the first that compiled nothing, at least a second of them
    (`trial.warmup_rate`): the rate the step runs at before its timed windows."""

    KIND: ClassVar[str] = "warmup"
    items: float
    """Their units (samples, tokens, ...)."""
    seconds: float
    """Their wall time, call to call (the step's device work included)."""
    steps: int


@dataclasses.dataclass(frozen=True, kw_only=True)
class RecompileEvent:
    """A warm-up step after the first compiled again (`contract.recompiles`): so a trial killed
    while warming up says why its compile did not settle."""

    KIND: ClassVar[str] = "recompile"
    count: int | None
    """Graphs compiled since the first step (None: Dynamo's counters could not be read)."""
    seconds: float | None
    """Seconds compiling since the first step."""
    reasons: str = ""
    """The guards that failed (`short_reason`), joined by `recompiles.SEPARATOR`, the latest
    last; "" when Dynamo gave none."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class SparePausedEvent:
    """The trial paused a spare process before its timed windows (`trial.spare`)."""

    KIND: ClassVar[str] = "spare_paused"
    pid: int
    """The spare's process id."""


TrialEvent = (PhaseEvent | WindowEvent | ComposedEvent | FirstStepEvent | WarmupEvent
              | RecompileEvent | SparePausedEvent)
"""Any event a trial sends."""

_KINDS: dict[str, type[TrialEvent]] = {
    kind.KIND: kind
    for kind in (PhaseEvent, WindowEvent, ComposedEvent, FirstStepEvent, WarmupEvent,
                 RecompileEvent, SparePausedEvent)
}


def encode(event: TrialEvent) -> str:
    """One line of `events.jsonl` (newline included): the kind under "event", then the fields."""
    return json.dumps({"event": event.KIND, **dataclasses.asdict(event)}) + "\n"


def decode(line: str) -> TrialEvent | None:
    """The event on one line of `events.jsonl`; None for a kind this version does not know
    (a reader skips it). A line that is not a JSON object, or an event without its fields,
    raises `ValueError` naming the line."""
    try:
        data: Any = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not a trial event (not JSON): {line.strip()[:200]!r}") from exc
    if not isinstance(data, dict):
        raise ValueError(f"not a trial event (not a JSON object): {line.strip()[:200]!r}")
    name = data.get("event")
    kind = _KINDS.get(name) if isinstance(name, str) else None
    if kind is None:
        return None
    fields = {f.name for f in dataclasses.fields(kind)}
    try:
        return kind(**{k: v for k, v in data.items() if k in fields})
    except TypeError as exc:
        raise ValueError(f"a {kind.KIND} event without its fields: {line.strip()[:200]!r}") \
            from exc
