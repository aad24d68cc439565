"""The objective: one config in, one `TrialResult` out.

A combination known to fail is refused without a process; a config measured before reuses
that trial's result; anything else runs through the runner in a trial folder of its own.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from autotune.contract.config import KNOBS, TrainConfig
from autotune.contract.request import MeasureSettings, TrialRequest, known_incompatible
from autotune.contract.result import Status, TrialResult
from autotune.study.records import TrialRecord
from autotune.study.runner import Runner

__all__ = ["Objective", "Outcome"]

# A trial below this fraction of the best so far is not diagnosed: the ladder follows the best
# trial's diagnosis only. 1.0: only a trial that becomes the best pays for it (1.5-12 s on an
# H100; the median fixed cost of a GPT-2 search was 4.9 s with 0.9). A confirmation candidate
# that was not diagnosed is diagnosed in its first fresh run (confirm.py), for best.yaml.
DIAGNOSE_FROM = 1.0


@dataclasses.dataclass(frozen=True, kw_only=True)
class Outcome:
    result: TrialResult
    duplicate_of: int | None = None
    """The earlier trial whose result was reused (the config was not run again)."""
    unaffordable: bool = False
    """Not run: a graph this study has not compiled yet would not finish in what is left."""


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
        budget_cut: bool = False,
    ) -> Outcome:
        """`budget_cut`: `limit` is what is left of the search's budget, shorter than a trial's
        own limit; a config that cannot finish in it is not started (`cold_compile`)."""
        impossible = known_incompatible(config, self.device)
        if impossible is not None:
            # Never launched; told as infeasible so the sampler learns the combination.
            return Outcome(result=TrialResult(status=Status.ERROR,
                                              reason=f"not run: {impossible}"))
        earlier = self.measured_before(config)
        if earlier is not None and earlier.result is not None:
            return Outcome(result=earlier.result, duplicate_of=earlier.number)
        wall = self.memory_wall(config)
        if wall is not None:
            # Memory is a wall, not a dimension to sample: never run a batch at least as large
            # as one that ran out of memory under the same memory-relevant knobs.
            return Outcome(result=TrialResult(
                status=Status.OOM, reason=f"not run: implied by trial {wall.number}, which ran "
                f"out of memory at batch_size={wall.config.batch_size}"))  # type: ignore[union-attr]
        if budget_cut:
            cold = self.cold_compile(config)
            if cold is not None and cold[0] > limit:
                # It would be cut while compiling, a timeout that says nothing about the config.
                return Outcome(unaffordable=True, result=TrialResult(
                    status=Status.TIMEOUT, reason=f"not run: its graph is not compiled in this "
                    f"study yet, and a first compile and run took {cold[0]:.0f} s here (trial "
                    f"{cold[1]}), more than the {limit:.0f} s left"))
        request = TrialRequest(adapter=str(self.adapter), config=config, device=self.device,
                               measure=self.measure, number=number,
                               diagnose_from=self.diagnose_from())
        result = self.runner.run(request, self.out / "trials" / str(number), timeout=limit,
                                 on_event=on_event)
        return Outcome(result=result)

    def diagnose_from(self) -> float | None:
        """The rate a trial must reach to be diagnosed: the search acts on the best trial's
        diagnosis only, so one slower than the best skips it (1.5-12 s on an H100)."""
        best = max((r.value for r in self.finished() if r.ok and r.value), default=None)
        return None if best is None else DIAGNOSE_FROM * best

    def cold_compile(self, config: TrainConfig, finished: Sequence[TrialRecord] | None = None
                     ) -> tuple[float, int] | None:
        """What a trial of `config` likely takes when its graph is new to this study: the
        longest compile a trial of the study paid in the same compile mode (any mode when none
        did), plus the shortest rest of a trial (its warm-up steps, windows, start), and that
        trial's number; None when the graph was compiled by an earlier trial (the persistent
        cache holds it), nothing is compiled, or no trial compiled yet. (Trials of other hosts
        sharing the study count as cached: their caches are theirs, so such a graph may still
        be cut here, as before this check.)"""
        graph = config.graph
        if graph is None:
            return None
        ran = [r for r in (self.finished() if finished is None else finished)
               if r.result is not None and r.config is not None
               and r.duplicate_of is None and r.result.duration_seconds]
        past_compile = [r for r in ran if r.result.compile_seconds is not None  # type: ignore[union-attr]
                        or r.status is Status.PRUNED]  # pruned: its windows ran, after compile
        if any(r.config.graph == graph for r in past_compile):  # type: ignore[union-attr]
            return None
        timed = [r for r in ran if r.result.compile_seconds is not None]  # type: ignore[union-attr]
        compiled = [r for r in timed if r.config.graph is not None]  # type: ignore[union-attr]
        if not compiled:
            return None
        same_mode = [r for r in compiled if r.config.compile == config.compile]  # type: ignore[union-attr]
        compiled = same_mode or compiled
        longest = max(compiled, key=lambda r: r.result.compile_seconds)  # type: ignore[union-attr, arg-type, return-value]
        rest = min(max(0.0, r.result.duration_seconds - r.result.compile_seconds)  # type: ignore[union-attr, operator]
                   for r in timed)
        return longest.result.compile_seconds + rest, longest.number  # type: ignore[union-attr, operator]

    def memory_wall(self, config: TrainConfig, finished: Sequence[TrialRecord] | None = None
                    ) -> TrialRecord | None:
        """A finished trial that ran out of memory at this batch size or a smaller one, with
        the same memory-relevant knobs (dtype, compile, checkpointing, allocator). `finished`:
        the study's finished trials when the caller has read them (else read here), as for
        `measured_before` and `cold_compile`."""
        mine = _memory_knobs(config)
        for record in self.finished() if finished is None else finished:
            if (record.status is Status.OOM and record.config is not None
                    and record.config.batch_size <= config.batch_size
                    and _memory_knobs(record.config) == mine
                    and not record.result.reason.startswith("not run")):  # type: ignore[union-attr]
                return record
        return None

    def measured_before(self, config: TrainConfig,
                        finished: Sequence[TrialRecord] | None = None) -> TrialRecord | None:
        for record in self.finished() if finished is None else finished:
            if record.config == config and record.result is not None:
                return record
        return None


def _memory_knobs(config: TrainConfig) -> tuple[Any, ...]:
    values = config.to_dict()
    return tuple(values[spec.name] for spec in KNOBS if spec.memory and spec.name != "batch_size")
