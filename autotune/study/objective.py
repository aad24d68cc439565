"""The objective: one config in, one `TrialResult` out.

A combination known to fail is refused without a process; a config measured before reuses
that trial's result; anything else runs through the runner in a trial folder of its own.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

from autotune.contract.config import TrainConfig
from autotune.contract.request import MeasureSettings, TrialRequest, known_incompatible
from autotune.contract.result import Status, TrialResult
from autotune.study.records import TrialRecord
from autotune.study.runner import Runner

__all__ = ["Objective", "Outcome"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class Outcome:
    result: TrialResult
    duplicate_of: int | None = None
    """The earlier trial whose result was reused (the config was not run again)."""


class Objective:
    def __init__(
        self,
        *,
        adapter: Path,
        device: str,
        out: Path,
        runner: Runner,
        measure: MeasureSettings,
        finished: Callable[[], list[TrialRecord]],
    ) -> None:
        self.adapter = adapter
        self.device = device
        self.out = out
        self.runner = runner
        self.measure = measure
        self.finished = finished
        """The study's finished trials (to find a config measured before)."""

    def __call__(
        self,
        number: int,
        config: TrainConfig,
        *,
        limit: float,
        on_event: Callable[[dict[str, Any]], None] | None = None,
    ) -> Outcome:
        impossible = known_incompatible(config, self.device)
        if impossible is not None:
            # Never launched; told as infeasible so the sampler learns the combination.
            return Outcome(result=TrialResult(status=Status.ERROR,
                                              reason=f"not run: {impossible}"))
        earlier = self.measured_before(config)
        if earlier is not None and earlier.result is not None:
            return Outcome(result=earlier.result, duplicate_of=earlier.number)
        request = TrialRequest(adapter=str(self.adapter), config=config, device=self.device,
                               measure=self.measure, number=number)
        result = self.runner.run(request, self.out / "trials" / str(number), timeout=limit,
                                 on_event=on_event)
        return Outcome(result=result)

    def measured_before(self, config: TrainConfig) -> TrialRecord | None:
        for record in self.finished():
            if record.config == config and record.result is not None:
                return record
        return None
