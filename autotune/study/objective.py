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
from autotune.contract.events import TrialEvent
from autotune.contract.fmt import human
from autotune.contract.noise import likely_cause
from autotune.contract.request import MeasureSettings, TrialRequest, known_incompatible
from autotune.contract.result import Status, TrialResult, Verdict
from autotune.study.execution.protocol import Runner
from autotune.study.policy.compile_prior import first_compile
from autotune.study.policy.pruning import PRUNE_RATIO
from autotune.study.store.records import MeasuredRecord, TrialRecord, measured
from autotune.study.policy.eager import cannot_win, recompiling
from autotune.study.policy.refused import refused
from autotune.study.policy.start_cost import eager_seconds
from autotune.study.policy.twins import null_threads, runs_alike

__all__ = ["Objective", "Outcome"]

# A trial below this fraction of the best so far is not diagnosed: the ladder follows the best
# trial's diagnosis only. 1.0: only a trial that becomes the best pays for it (1.5-12 s on an
# H100; the median fixed cost of a GPT-2 search was 4.9 s with 0.9). A confirmation candidate
# that was not diagnosed is diagnosed in its first fresh run (confirmation/rounds.py), for
# best.yaml.
DIAGNOSE_FROM = 1.0

# A batch behind an overhead-bound trial's, in the same compile mode, is not run when even this
# many times its share of that trial's rate stays under the pruner's bar (PRUNE_RATIO of the
# best). An overhead-bound step's time is the host's launches, the same at any
# batch: on the H100 tinyblocks grid, each compile mode's rate grew 4x from bs 32 to 128 and
# 3-4x from 128 to 512. The margin leaves room for knobs that change the launches (dtype,
# checkpointing): with a best as fast as the overhead-bound trial, a quarter of its batch is
# skipped, half is run.
BATCH_SHARE_MARGIN = 1.5


@dataclasses.dataclass(frozen=True, kw_only=True)
class Outcome:
    result: TrialResult
    duplicate_of: int | None = None
    """The earlier trial whose result was reused (the config was not run again)."""
    unaffordable: float | None = None
    """Not run: its compile and run, about this many seconds (`cold_compile`), would not
    finish in what is left."""
    ceiling: float | None = None
    """Not run: the most it could read, implied by an overhead-bound trial at a larger batch
    (`overhead_ceiling`); told as PRUNED at that rate."""


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
        infer_slow: bool = False,
        loader_only: frozenset[str] = frozenset(),
    ) -> None:
        self.adapter = adapter
        self.device = device
        self.out = out
        self.runner = runner
        self.measure = measure
        self.finished = finished
        """The study's finished trials (to find a config measured before)."""
        self.infer_slow = infer_slow
        """Skip a config the pruner would stop anyway, when a measured trial implies it
        (`overhead_ceiling`)."""
        self.loader_only = loader_only
        """The adapter's knobs declared `affects: loader`: left out of the compile-cache key."""

    def __call__(
        self,
        number: int,
        config: TrainConfig,
        *,
        limit: float,
        on_event: Callable[[TrialEvent], None] | None = None,
        budget_cut: bool = False,
        prunable: bool = True,
        compile_grace: float = 0.0,
    ) -> Outcome:
        """`budget_cut`: `limit` is what is left of the search's budget, shorter than a trial's
        own limit; a config that cannot finish in it is not started (`cold_compile`).
        `prunable`: the trial may be pruned (the sampler's, exploration); the guided starts are
        measured to the end, so none of them is skipped as implied slow either.
        `compile_grace`: seconds of the search's budget past `limit` a trial may spend compiling
        (`TrialRequest.compile_grace`)."""
        impossible = known_incompatible(config, self.device)
        if impossible is not None:
            # Never launched; told as infeasible so the sampler learns the combination.
            return Outcome(result=TrialResult(status=Status.ERROR, ran=False,
                                              reason=f"not run: {impossible}"))
        done = self.finished()  # read once: nothing below changes the study
        storm = recompiling(config, done)
        if storm is not None:  # told as infeasible: the sampler learns compile fails here
            return Outcome(result=TrialResult(
                status=Status.ERROR, ran=False, reason=f"not run: compiling this step did not "
                f"settle in trial {storm.number} (it kept recompiling on new shapes), and every "
                f"compile mode traces the same shapes"))
        why = refused(config, done, self.device)
        if why is not None:  # infeasible too: a graph per shape, or a flag it lacks
            return Outcome(result=TrialResult(status=Status.ERROR, ran=False, reason=why))
        earlier = self.measured_before(config, done)
        if earlier is not None and earlier.result is not None:
            return Outcome(result=earlier.result, duplicate_of=earlier.number)
        wall = self.memory_wall(config, done)
        if wall is not None:
            # Memory is a wall, not a dimension to sample: never run a batch at least as large
            # as one that ran out of memory under the same memory-relevant knobs.
            return Outcome(result=TrialResult(
                status=Status.OOM, ran=False, reason=f"not run: implied by trial {wall.number}, which ran "
                f"out of memory at batch_size={wall.config.batch_size}"))
        bound = cannot_win(config, done) if prunable and self.infer_slow else None
        if bound is not None:  # the loader, or the compile gains measured here, hold it back
            return Outcome(ceiling=bound[0], result=TrialResult(status=Status.PRUNED,
                                                                reason=bound[1], ran=False))
        implied = self.overhead_ceiling(config, done) if prunable else None
        if implied is not None:
            ceiling, by = implied
            return Outcome(ceiling=ceiling, result=TrialResult(
                status=Status.PRUNED, ran=False, reason=f"not run: at most {human(ceiling)}/s, implied by "
                f"trial {by.number}, overhead-bound at batch_size={by.config.batch_size} with "
                f"compile={config.compile} ({human(by.rate)}/s): a launch-bound step takes as "
                f"long at a smaller batch"))
        if budget_cut:
            cold = self.too_slow_to_compile(config, limit, done)
            if cold is not None:
                # It would be cut while compiling, a timeout that says nothing about the config.
                prior = first_compile(done, self.device)
                basis = (prior.describe() if prior is not None and prior.trial == cold[1]
                         else f"as trial {cold[1]}'s compile took here")
                return Outcome(unaffordable=cold[0], result=TrialResult(
                    status=Status.TIMEOUT, ran=False, reason=f"not run: compiling and running it would "
                    f"take about {_secs(cold[0], limit)} s ({basis}), more than the "
                    f"{_secs(limit, cold[0])} s left"))
            slow = eager_seconds(config, done)  # a knob that makes every trial slow to start
            if slow is not None and slow[0] > limit:
                return Outcome(unaffordable=slow[0], result=TrialResult(
                    status=Status.TIMEOUT, ran=False, reason=f"not run: eager trials with "
                    f"{slow[1]} took at least {_secs(slow[0], limit)} s here (trial {slow[2]}), "
                    f"more than the {_secs(limit, slow[0])} s left"))
        request = TrialRequest(adapter=str(self.adapter), config=config, device=self.device,
                               measure=self.measure, number=number,
                               diagnose_from=self.diagnose_from(), compile_grace=compile_grace)
        result = self.runner.run(request, self.out / "trials" / str(number), timeout=limit,
                                 on_event=on_event)
        return Outcome(result=result)

    def diagnose_from(self) -> float | None:
        """The rate a trial must reach to be diagnosed: the search acts on the best trial's
        diagnosis only, so one slower than the best skips it (1.5-12 s on an H100)."""
        best = max((r.value for r in self.finished() if r.ok and r.value), default=None)
        return None if best is None else DIAGNOSE_FROM * best

    def too_slow_to_compile(self, config: TrainConfig, limit: float,
                            finished: Sequence[TrialRecord] | None = None
                            ) -> tuple[float, int] | None:
        """`cold_compile`'s estimate when it is more than `limit`, the seconds a trial has:
        started, it would be cut while compiling. Else None."""
        cold = self.cold_compile(config, finished)
        return cold if cold is not None and cold[0] > limit else None

    def cold_compile(self, config: TrainConfig, finished: Sequence[TrialRecord] | None = None
                     ) -> tuple[float, int] | None:
        """What a trial of `config` likely takes when its graph is new to this study: the
        longest compile a trial of the study paid in the same compile mode (any mode when none
        did), plus the shortest rest of a trial (its warm-up steps, windows, start), and that
        trial's number. A graph an earlier trial compiled costs its quickest compile instead
        (the persistent cache holds it, but tracing and cache lookups remain). None when nothing
        is compiled, or no trial compiled yet. (Trials of other hosts
        sharing the study count as cached: their caches are theirs, so such a graph may still
        be cut here, as before this check.)"""
        graph = self.graph(config)
        if graph is None:
            return None
        ran = [(r, seconds) for r in measured(self.finished() if finished is None else finished)
               if r.duplicate_of is None and (seconds := r.result.duration_seconds)]
        past_compile = [r for r, _ in ran if r.result.compile_seconds is not None
                        or r.status is Status.PRUNED]  # pruned: its windows ran, after compile
        # (record, its compile's seconds, the rest of its seconds) of each that timed a compile
        timed = [(r, c, max(0.0, seconds - c)) for r, seconds in ran
                 if (c := r.result.compile_seconds) is not None]
        same = [t for t in timed if self.graph(t[0].config) == graph]
        if same:
            # Compiled here before: the cache holds its graphs, but Dynamo still traces the model
            # and looks them up (a transformers GPT-2: 44 s with every graph cached, H100).
            quickest, compile_seconds, _ = min(same, key=lambda t: t[1])
            return compile_seconds + min(t[2] for t in timed), quickest.number
        if any(self.graph(r.config) == graph for r in past_compile):
            return None  # compiled by a trial that was pruned: its compile was not timed
        compiled = [t for t in timed if t[0].config.graph is not None]
        if not compiled:  # nothing compiled yet: the prior from an eager trial's op count
            prior = first_compile(self.finished() if finished is None else finished,
                                  self.device)
            if prior is None or not timed or any(r.config.graph is not None for r in past_compile):
                return None
            return prior.seconds + min(t[2] for t in timed), prior.trial
        same_mode = [t for t in compiled if t[0].config.compile == config.compile]
        compiled = same_mode or compiled
        longest, compile_seconds, _ = max(compiled, key=lambda t: t[1])
        rest = min(t[2] for t in timed)
        return compile_seconds + rest, longest.number

    def graph(self, config: TrainConfig) -> tuple[object, ...] | None:
        """`config.graph` without the adapter's loader-only knobs: a batch padded otherwise by
        the collate reaches the same compiled model (its shapes count apart, as recompiles)."""
        if config.graph is None or not self.loader_only:
            return config.graph
        return config.replace(params={k: v for k, v in config.params.items()
                                      if k not in self.loader_only}).graph

    def memory_wall(self, config: TrainConfig, finished: Sequence[TrialRecord] | None = None
                    ) -> MeasuredRecord | None:
        """A finished trial that ran out of memory at this batch size or a smaller one, with
        the same memory-relevant knobs (dtype, compile, checkpointing, allocator). `finished`:
        the study's finished trials when the caller has read them (else read here), as for
        `measured_before` and `cold_compile`."""
        mine = _memory_knobs(config)
        for record in measured(self.finished() if finished is None else finished):
            if (record.status is Status.OOM
                    and record.config.batch_size <= config.batch_size
                    and _memory_knobs(record.config) == mine
                    and record.result.ran):
                return record
        return None

    def overhead_ceiling(self, config: TrainConfig,
                         finished: Sequence[TrialRecord] | None = None
                         ) -> tuple[float, MeasuredRecord] | None:
        """The most `config` could read, and the trial that implies it, when that would be
        pruned: a trial diagnosed overhead-bound in the same compile mode, with at least
        `config`'s accumulation and twice its batch, bounds it at BATCH_SHARE_MARGIN x its rate
        x the batch ratio, and that is below PRUNE_RATIO x the best so far. None otherwise, and
        always without `infer_slow` (a search without pruning)."""
        if not self.infer_slow:
            return None
        ran = [r for r in measured(self.finished() if finished is None else finished)
               if r.ok and r.value and r.duplicate_of is None]
        best = max((r.rate for r in ran), default=None)
        bounds = [(BATCH_SHARE_MARGIN * r.rate * config.batch_size / r.config.batch_size, r)
                  for r in ran
                  if r.verdict is Verdict.OVERHEAD
                  and r.config.compile == config.compile
                  and r.config.compile_scope == config.compile_scope
                  and r.config.grad_accum >= config.grad_accum
                  and r.config.batch_size >= 2 * config.batch_size]
        if not bounds or best is None:
            return None
        ceiling, by = min(bounds, key=lambda b: b[0])
        return (ceiling, by) if ceiling < PRUNE_RATIO * best else None

    def measured_before(self, config: TrainConfig,
                        finished: Sequence[TrialRecord] | None = None
                        ) -> MeasuredRecord | None:
        """The finished trial that ran `config` (or refused it): its result can be copied. A
        config skipped as implied slow is not one: it is judged again, on what is known now. A
        reading taken while other work held the machine (`likely_cause`; a held-out user's bf16
        recipe, 1.44k against 51.1k in a quiet run, was copied twice) is measured again, once."""
        done = self.finished() if finished is None else finished
        threads = null_threads(done)  # null's count runs as null does (`twins`)
        alike = [r for r in measured(done) if r.duplicate_of is None
                 and runs_alike(r.config, config, threads) and not _implied(r)]
        quiet = [r for r in alike if likely_cause([r.result]) is None]
        if quiet or len(alike) < 2:
            return quiet[0] if quiet else None
        return max(alike, key=lambda r: r.result.throughput or 0.0)  # the less slowed


def _implied(record: MeasuredRecord) -> bool:
    return record.status is Status.PRUNED and not record.result.ran


def _memory_knobs(config: TrainConfig) -> tuple[Any, ...]:
    values = config.to_dict()
    # The adapter's knobs count too: the tool cannot know which change the memory a step needs.
    return tuple(values[spec.name] for spec in KNOBS if spec.memory and spec.name != "batch_size"
                 ) + (config.params,)


def _secs(value: float, other: float) -> str:
    """`value` in whole seconds, or to a tenth where whole seconds would read equal to `other`
    ("about 14 s, more than the 14 s left")."""
    return f"{value:.0f}" if f"{value:.0f}" != f"{other:.0f}" else f"{value:.1f}"
