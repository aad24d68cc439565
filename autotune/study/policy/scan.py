"""The eager scan on a GPU, before any compile: the amp dtypes, then the knobs one at a time,
then the values that beat the leader together.

Each step is eager (seconds a trial) and runs at the best eager config of its time:
1. every amp dtype of the space (`eager.dtype_starts`);
2. the fused optimizer, each value of the space's convolution knobs and of the adapter's own
   knobs, one knob at a time (`optimizer_start`, `kernel_knob_starts`, `adapter_knob_starts`);
3. the values of step 2 that read more than `GAIN` faster than the config they were set on, all
   at once (`combined_start`): one knob at a time finds each gain, but the next leader carries
   only the one that led. On a transformers GPT-2 padded per batch (H100, 2026-11-26) the scan
   read vocab_multiple_of=64 at 1.08x and padding_mask=drop at 1.20x; the leader after it had
   the mask dropped and the vocabulary unpadded, and the search confirmed 207k real tokens/s
   where the same config with the vocabulary padded ran 243k.

The stage keeps its steps in memory: a resumed study scans again at its leader then.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from autotune.contract.config import TrainConfig
from autotune.contract.request import known_incompatible
from autotune.contract.result import Verdict
from autotune.study.policy.eager import _measured, dtype_starts
from autotune.study.policy.optimizer import impl_refused
from autotune.study.policy.starts import EAGER, Start, eager_live
from autotune.study.space.bound import SearchSpace
from autotune.study.store.records import MeasuredRecord, TrialRecord

__all__ = ["GAIN", "KERNEL_KNOBS", "MAX_KNOB_VALUES", "OPTIMIZER_KNOB", "DtypeStage",
           "adapter_knob_starts", "combined_start", "kernel_knob_starts", "optimizer_start"]

KERNEL_KNOBS = (("memory_format", "channels_last"), ("cudnn_benchmark", True))
"""The convolution knobs a space may hold, each with the value that departs from PyTorch's
default: measured eagerly at the leader once its dtype is known (NHWC pays under AMP: ResNet-50
bf16 on an H100), so that the ladder compiles the layout that leads. For a model without
convolutions they cost one eager trial each and change nothing."""

OPTIMIZER_KNOB = ("optimizer_impl", "fused")
"""The fused optimizer step, measured eagerly at the leader once its dtype is known (the
optimizer is never compiled: the ladder's compile of the leader keeps it). Set before the
dtypes were measured it ran at a dtype that then lost: on a Llama-style transformers LM padded
per batch (H100, 2026-11-26) fused read 1.29x at bf16 (eager, launch-bound), tf32 led and was
compiled without it, and the compiled tf32 step ran 1.035x faster fused."""

_SCANNED = (OPTIMIZER_KNOB, *KERNEL_KNOBS)
"""The space's own knobs the scan sets one at a time (besides the adapter's)."""

GAIN = 0.02
"""A knob value joins the combination only when its one trial read more than this above the
config it was set on: a search trial's median is known to about +-5%, and a value within a
percent or two of the leader is as likely noise as gain."""

MAX_KNOB_VALUES = 4
"""An adapter knob with more values than this (an int range) is measured eagerly at its ends
and its middle only: a range of 16-4096 would otherwise queue 4,081 trials."""


def adapter_knob_starts(space: SearchSpace, leader: TrainConfig,
                        finished: Sequence[TrialRecord], *, device: str) -> list[Start]:
    """Each value of the adapter's own knobs at `leader`, one knob at a time, eager: the
    adapter knows what they do, the tool does not, and eager they cost seconds (padding to one
    length, an attention implementation). Those that lead are compiled by the ladder, and one
    that keeps the batches one shape is taken up by `one_shape.OneShapeStage`."""
    def each() -> Iterator[tuple[str, Any]]:
        for name in leader.params:
            values = space.values(name)
            if len(values) > MAX_KNOB_VALUES:  # a range: its ends and its middle, the rest to TPE
                values = (values[0], values[len(values) // 2], values[-1])
            yield from ((name, value) for value in values)

    return _each_alone(space, leader, finished, each(), device=device)


def optimizer_start(space: SearchSpace, leader: TrainConfig,
                    finished: Sequence[TrialRecord], *, device: str) -> list[Start]:
    """`leader` with the fused optimizer, eager, where the space holds it, it has not run and
    the adapter's optimizer takes it (`optimizer.impl_refused`)."""
    return [s for s in _each_alone(space, leader, finished, [OPTIMIZER_KNOB], device=device)
            if impl_refused(s[1], finished) is None]


def kernel_knob_starts(space: SearchSpace, leader: TrainConfig,
                       finished: Sequence[TrialRecord], *, device: str) -> list[Start]:
    """Each convolution knob of the space (`KERNEL_KNOBS`) set at `leader`, eager, one at a
    time, where it is not set already and has not run; none when `leader`'s trial found no
    convolution in the model (`TrialResult.conv_weights`: nothing for them to act on)."""
    mine = next((r.result for r in finished if r.config == leader and r.result is not None), None)
    if mine is not None and mine.conv_weights == 0:
        return []
    return _each_alone(space, leader, finished, KERNEL_KNOBS, device=device)


def _each_alone(space: SearchSpace, leader: TrainConfig, finished: Sequence[TrialRecord],
                values: Iterable[tuple[str, Any]], *, device: str) -> list[Start]:
    """`leader` with each (knob, value) set alone, eager: those that change it, that the space
    keeps (not undone by a condition) and holds, that have not run and the device can run."""
    seen = {r.config for r in finished if r.config is not None and r.result is not None}
    starts = []
    for name, value in values:
        config = space.changed(leader, compile="none", **{name: value})
        if value != _value(leader, name) and _value(config, name) == value \
                and config not in seen and space.holds(config) \
                and known_incompatible(config, device) is None:
            starts.append((f"{EAGER}{config.describe()}", config))
    return starts


def _value(config: TrainConfig, name: str) -> Any:
    return config.params[name] if name in config.params else getattr(config, name)


def combined_start(space: SearchSpace, leader: TrainConfig, finished: Sequence[TrialRecord], *,
                   device: str) -> list[Start]:
    """`leader` (eager) with every knob value that, set on it alone, read more than `GAIN`
    faster than it: each knob's fastest such value, the largest gains first, a value the
    others leave inactive (`when:`) or the device refuses dropped. Nothing when fewer than two
    knobs gained (one alone ran already), when `leader` was not measured, or when the
    combination ran."""
    ran: list[MeasuredRecord] = _measured(finished)
    base = next((r.rate for r in ran if r.config == leader), None)
    if base is None:
        return []
    names = [*leader.params, *(name for name, _ in _SCANNED)]
    gains: dict[str, tuple[float, Any]] = {}
    for r in ran:
        for name in names:
            value = _value(r.config, name)
            if value == _value(leader, name) or r.rate <= base * (1 + GAIN) \
                    or space.changed(leader, compile="none", **{name: value}) != r.config:
                continue
            if name not in gains or r.rate > gains[name][0]:
                gains[name] = (r.rate, value)
    chosen: dict[str, Any] = {}
    for name, (_, value) in sorted(gains.items(), key=lambda g: -g[1][0]):
        config = space.changed(leader, compile="none", **chosen, **{name: value})
        if all(_value(config, n) == v for n, v in {**chosen, name: value}.items()) \
                and space.holds(config) and known_incompatible(config, device) is None:
            chosen[name] = value
    if len(chosen) < 2:
        return []
    config = space.changed(leader, compile="none", **chosen)
    seen = {r.config for r in finished if r.config is not None and r.result is not None}
    return [] if config in seen else [(f"{EAGER}{config.describe()}", config)]


class DtypeStage:
    """The scan (the module's steps), on a GPU, each step once and after the last one's trials
    have run: the dtypes at the best eager config (when the step is input-bound, only once the
    loader's knobs are settled: no loader start pending), then the knobs one at a time at the
    best eager config then, then their gains together at that same config."""

    def __init__(self, space: SearchSpace, *, device: str) -> None:
        self.space = space
        self.device = device
        self.queued = False
        # Nothing to queue second: no adapter knob, no optimizer or convolution knob in the space.
        self.knobs_queued = not space.baseline.params and not any(
            len(space.values(name)) > 1 for name, _ in _SCANNED)
        self.done = self.knobs_queued
        self.scanned: TrainConfig | None = None
        """The config the knobs were set on, one at a time."""

    def due(self, finished: Sequence[TrialRecord], pending: Sequence[Start]) -> list[Start]:
        """The next step's starts, once the last step's trials have run; a step with nothing
        to run (every dtype ran already, no knob gained) is passed over in the same call, so
        that no compile is fed while a later step still has eager trials to queue."""
        if self.device != "cuda" or (self.queued and self.done):
            return []
        eager = [r for r in _measured(finished) if r.config.compile == "none"]
        if not eager:
            return []
        leader = max(eager, key=lambda r: r.rate)
        seen = {r.config for r in finished if r.result is not None}
        if not self.queued:
            if leader.verdict is Verdict.INPUT and any(c not in seen for _, c in pending):
                return []  # the loader is the limit and its climb goes on
            self.queued = True
            starts = dtype_starts(self.space, leader.config, finished, device=self.device)
            if starts:
                return starts
        # The next step once no eager trial of the last is left to run (on several devices,
        # one running on another is not measured yet).
        if any(role.startswith(EAGER) and c not in seen for role, c in pending) \
                or eager_live(finished):
            return []
        if not self.knobs_queued:
            self.knobs_queued = True
            self.scanned = leader.config
            starts = (optimizer_start(self.space, leader.config, finished, device=self.device)
                      + kernel_knob_starts(self.space, leader.config, finished, device=self.device)
                      + adapter_knob_starts(self.space, leader.config, finished,
                                            device=self.device))
            if starts:
                return starts
        self.done = True
        return (combined_start(self.space, self.scanned, finished, device=self.device)
                if self.scanned is not None else [])
