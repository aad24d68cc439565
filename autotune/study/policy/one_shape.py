"""One shape: when an adapter's knob keeps a step's batches one shape while the best's vary.

Figures measured at varying shapes do not rank configs of one shape. On a transformers GPT-2
padded per batch (H100, 2026-11-25/26) bf16 autocast ran 41k real tokens/s eager against tf32's
58k; padded to 1024 it ran 78.7k eager against tf32's 55.7k, and 206k with CUDA graphs, while
the best of per-batch shapes (tf32, mask dropped, compiled with dynamic shapes) ran 74k. A
search that compiled only what led at varying shapes ended at 74k (0.36 of 206k), and the one
CUDA-graph start it had for the padded trial was pushed behind each new best's loader checks
until the budget ended.

So, once the eager stages are done and an eager trial kept one shape while others varied:
1. the knob values that keep the shape one are put on the best eager config, and that config
   runs eager in every amp dtype (on a GPU; on a CPU the config alone), seconds each;
2. the fastest eager config of one shape is then compiled, with CUDA graphs on a GPU (one
   shape, one graph), ahead of the ladder's other follow-ups (`Ladder.add(urgent=True)`): an
   expected gain of 2-3x goes before checks worth a few percent.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from autotune.contract.config import TrainConfig
from autotune.contract.request import known_incompatible
from autotune.study.policy.eager import _measured, dtype_starts
from autotune.study.policy.starts import EAGER, FOLLOW, Start, eager_live
from autotune.study.space.bound import SearchSpace
from autotune.study.store.records import MeasuredRecord, TrialRecord

__all__ = ["OneShapeStage", "compiled_forms", "shape_fixing"]


def shape_fixing(space: SearchSpace, ran: Sequence[MeasuredRecord]) -> dict[str, Any]:
    """The adapter-knob values that keep the batches one shape: of the fastest trial whose
    shapes did not vary, each value whose trial kept one shape where a trial differing from it
    in that value alone saw shapes vary (a batch size that leaves a short last batch varies
    the shape too, whatever the adapter's knobs: only such pairs tell which knob did it)."""
    one = [r for r in ran if r.result.shapes_vary is False]
    if not one:
        return {}
    fastest = max(one, key=lambda r: r.rate)
    varying = [r.config for r in ran if r.result.shapes_vary]
    fixing = {}
    for name, value in fastest.config.params.items():
        if any(space.changed(other, **{name: value}) == r.config
               for r in one if r.config.params.get(name) == value
               for other in varying if other.params.get(name) != value):
            fixing[name] = value
    return fixing


class OneShapeStage:
    """Queues, once, the eager trials of one shape (step 1 above), then, once, the compile of
    the fastest of them (step 2). `due` returns (eager starts, urgent compiled starts)."""

    def __init__(self, space: SearchSpace, *, device: str) -> None:
        self.space = space
        self.device = device
        self.eager_queued = False
        self.compiled_queued = False

    def due(self, finished: Sequence[TrialRecord], pending: Sequence[Start]
            ) -> tuple[list[Start], list[Start]]:
        """`finished`: the study's records (running ones too); `pending`: the ladder's."""
        if self.compiled_queued or any(role.startswith(EAGER) for role, _ in pending) \
                or eager_live(finished):
            return [], []  # done, or the eager stages (`scan`) still run: on
            # several devices, an eager trial running on another is not measured yet
        ran = _measured(finished)
        varying = [r for r in ran if r.result.shapes_vary]
        if not varying:
            return [], []  # one shape throughout: nothing to fix
        fixing = shape_fixing(self.space, ran)
        if not fixing:
            return [], []
        seen = {r.config for r in finished if r.config is not None and r.result is not None}
        if not self.eager_queued:
            self.eager_queued = True
            starts = self._eager(ran, finished, fixing, seen)
            if starts:
                return starts, []
        one = [r for r in ran if r.config.compile == "none" and r.result.shapes_vary is False
               and all(r.config.params.get(k) == v for k, v in fixing.items())]
        if not one:
            return [], []
        lead = max(one, key=lambda r: r.rate)  # it may lead already: eager bf16 of one shape
        forms = compiled_forms(self.space, lead.config, device=self.device)
        if any(c in seen for _, c in forms):
            self.compiled_queued = True  # compiled already, by the ladder or TPE
            return [], []
        self.compiled_queued = bool(forms)  # else a later, compilable leader may come
        return [], forms[:1]

    def _eager(self, ran: Sequence[MeasuredRecord], finished: Sequence[TrialRecord],
               fixing: dict[str, Any], seen: set[TrainConfig]) -> list[Start]:
        """The best eager config of varying shapes with the shape-fixing values, in each dtype."""
        varying = [r for r in ran if r.config.compile == "none" and r.result.shapes_vary]
        if not varying:
            return []
        leader = max(varying, key=lambda r: r.rate).config
        base: TrainConfig = self.space.changed(leader, compile="none", **fixing)
        if any(base.params.get(k) != v for k, v in fixing.items()) or not self.space.holds(base) \
                or known_incompatible(base, self.device) is not None:
            return []
        starts = [] if base in seen else [(f"{EAGER}{base.describe()}", base)]
        if self.device == "cuda":
            starts += [s for s in dtype_starts(self.space, base, finished, device=self.device)
                       if s[1].amp_dtype != base.amp_dtype
                       and all(s[1].params.get(k) == v for k, v in fixing.items())]
        return starts


def compiled_forms(space: SearchSpace, config: TrainConfig, *, device: str) -> list[Start]:
    """`config` compiled: with CUDA graphs on a GPU (one shape, one graph) when the space has
    them, else the default mode; those the space holds and the device can run."""
    modes = [m for m in (("reduce-overhead", "default") if device == "cuda" else ("default",))
             if m in space.values("compile")]
    forms = [config.replace(compile=m) for m in modes]
    return [(f"{FOLLOW}{c.describe()}", c) for c in forms
            if space.holds(c) and known_incompatible(c, device) is None]
