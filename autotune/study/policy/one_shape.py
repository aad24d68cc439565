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
from autotune.study.policy.eager import _measured, dtype_starts, one_shape_compiled
from autotune.study.policy.starts import EAGER, Start
from autotune.study.space.bound import SearchSpace
from autotune.study.store.records import MeasuredRecord, TrialRecord

__all__ = ["OneShapeStage", "shape_fixing"]


def shape_fixing(ran: Sequence[MeasuredRecord]) -> dict[str, Any]:
    """The adapter-knob values that keep the batches one shape: of the fastest trial whose
    shapes did not vary, each value with which every trial kept one shape while some trial
    without it saw shapes vary (an attention kernel shared with varying trials is not one)."""
    known = [r for r in ran if r.result.shapes_vary is not None]
    one = [r for r in known if r.result.shapes_vary is False]
    if not one:
        return {}
    fastest = max(one, key=lambda r: r.rate)
    fixing = {}
    for name, value in fastest.config.params.items():
        with_value = [r for r in known if r.config.params.get(name) == value]
        without = [r for r in known if r.config.params.get(name) != value]
        if all(r.result.shapes_vary is False for r in with_value) \
                and any(r.result.shapes_vary for r in without):
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
        if self.compiled_queued or any(role.startswith(EAGER) for role, _ in pending):
            return [], []  # done, or the eager stages (dtypes, adapter knobs) still run
        ran = _measured(finished)
        varying = [r for r in ran if r.result.shapes_vary]
        if not varying:
            return [], []  # one shape throughout: nothing to fix
        fixing = shape_fixing(ran)
        if not fixing:
            return [], []
        if not self.eager_queued:
            self.eager_queued = True
            starts = self._eager(ran, finished, fixing)
            if starts:
                return starts, []
        one = [r for r in ran if r.config.compile == "none" and r.result.shapes_vary is False]
        if not one:
            return [], []
        self.compiled_queued = True
        lead = max(one, key=lambda r: r.rate)  # it may lead already: eager bf16 of one shape
        return [], one_shape_compiled(self.space, lead, max(varying, key=lambda r: r.rate),
                                      device=self.device)

    def _eager(self, ran: Sequence[MeasuredRecord], finished: Sequence[TrialRecord],
               fixing: dict[str, Any]) -> list[Start]:
        """The best eager config of varying shapes with the shape-fixing values, in each dtype."""
        varying = [r for r in ran if r.config.compile == "none" and r.result.shapes_vary]
        if not varying:
            return []
        leader = max(varying, key=lambda r: r.rate).config
        base: TrainConfig = self.space.changed(leader, compile="none", **fixing)
        if any(base.params.get(k) != v for k, v in fixing.items()) or not self.space.holds(base) \
                or known_incompatible(base, self.device) is not None:
            return []
        seen = {r.config for r in finished if r.config is not None and r.result is not None}
        starts = [] if base in seen else [(f"{EAGER}{base.describe()}", base)]
        if self.device == "cuda":
            starts += [s for s in dtype_starts(self.space, base, finished, device=self.device)
                       if s[1].amp_dtype != base.amp_dtype]
        return starts
