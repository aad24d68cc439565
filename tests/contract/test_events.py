"""The events a trial sends its parent: one JSON line each, read back as the same typed event."""

from __future__ import annotations

import json

import pytest

from autotune.contract.events import (
    ComposedEvent,
    FirstStepEvent,
    PhaseEvent,
    SparePausedEvent,
    TrialEvent,
    WindowEvent,
    decode,
    encode,
)

EVENTS: list[TrialEvent] = [
    PhaseEvent(phase="warmup", time=1_700_000_000.25),
    WindowEvent(throughput=1234.5, seconds=0.52, steps=8, data_wait=0.01),
    WindowEvent(throughput=99.0),
    ComposedEvent(),
    FirstStepEvent(seconds=12.5),
    SparePausedEvent(pid=4242),
]


@pytest.mark.parametrize("event", EVENTS, ids=lambda e: type(e).__name__)
def test_an_event_round_trips_through_its_line(event: TrialEvent) -> None:
    line = encode(event)
    assert line.endswith("\n") and line.count("\n") == 1
    assert decode(line) == event


def test_the_wire_is_the_json_line_the_trial_always_wrote() -> None:
    # Readers of events.jsonl outside the package (tests, scripts) see the same keys, in order.
    line = encode(WindowEvent(throughput=2.0, seconds=1.0, steps=4, data_wait=0.5))
    assert line == '{"event": "window", "throughput": 2.0, "seconds": 1.0, "steps": 4, ' \
                   '"data_wait": 0.5}\n'
    assert json.loads(encode(PhaseEvent(phase="model", time=3.0))) == \
        {"event": "phase", "phase": "model", "time": 3.0}
    assert json.loads(encode(ComposedEvent())) == {"event": "composed"}


def test_an_unknown_kind_is_skipped_and_unknown_fields_ignored() -> None:
    assert decode('{"event": "from_a_later_version", "x": 1}\n') is None
    assert decode('{"no_event": true}\n') is None
    assert decode('{"event": ["window"]}\n') is None
    assert decode('{"event": "first_step", "seconds": 2.0, "new": 1}\n') == \
        FirstStepEvent(seconds=2.0)


@pytest.mark.parametrize("line", ['{"event": "window", "throughp', "garbage\n", "[1, 2]\n",
                                  '{"event": "window", "seconds": 1.0}\n'],
                         ids=["cut", "not-json", "not-an-object", "missing-field"])
def test_a_garbled_line_raises_naming_it(line: str) -> None:
    with pytest.raises(ValueError, match="event"):
        decode(line)
