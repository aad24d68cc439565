"""Final confirmation: the top-k configs (and the baseline) again, fresh processes, random order.

A search sees each config once, and one lucky window can crown the wrong winner. After the
search, the k best distinct configs and the baseline run again, `repeats` times each in a
shuffled order, and the winner is the config with the highest median over these runs.
"""

from __future__ import annotations

import dataclasses
import math
import random
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from autotune.contract.config import TrainConfig
from autotune.contract.request import MeasureSettings, TrialRequest
from autotune.contract.result import Status, TrialResult
from autotune.contract.stats import relative_spread
from autotune.study.records import ConfirmationEntry, TrialRecord
from autotune.study.runner import Runner

__all__ = ["Candidate", "candidates", "estimate_seconds", "run_confirmation"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class Candidate:
    trial: int
    config: TrainConfig
    search_throughput: float
    duration_seconds: float
    compile_seconds: float = 0.0
    baseline: bool = False


def candidates(records: Sequence[TrialRecord], k: int) -> list[Candidate]:
    """The k fastest distinct ok configs, plus the baseline (re-measured for a fair speedup)."""
    ok = [r for r in records if r.ok and r.duplicate_of is None and r.config is not None]
    ok.sort(key=lambda r: -(r.value or 0.0))
    chosen: list[TrialRecord] = []
    seen: list[TrainConfig] = []
    for r in ok:
        if r.config not in seen:
            seen.append(r.config)  # type: ignore[arg-type]  # filtered above
            chosen.append(r)
        if len(chosen) == k:
            break
    base = next((r for r in ok if r.baseline), None)
    if base is not None and base not in chosen:
        chosen.append(base)
    return [
        Candidate(trial=r.number, config=r.config,  # type: ignore[arg-type]
                  search_throughput=float(r.value or 0.0),
                  duration_seconds=float(getattr(r.result, "duration_seconds", 0.0) or 0.0),
                  compile_seconds=float(getattr(r.result, "compile_seconds", 0.0) or 0.0),
                  baseline=r.baseline)
        for r in chosen
    ]


# A confirmation run is not started with less than this left of the study's budget.
MIN_RUN_SECONDS = 10.0
# A fresh confirmation process pays what a forked search trial did not: the torch and adapter
# imports and the dataset build (2.9 s + 3.5-6 s on an H100 host), and a compile from the warm
# persistent cache (3.6 s for GPT-2 small) instead of the trial's cold one.
FRESH_PROCESS_SECONDS = 12.0


def estimate_seconds(cands: Sequence[Candidate], repeats: int, *,
                     extra_measure_seconds: float = 0.0) -> float:
    """What confirming these would take: each run as long as its trial without the trial's
    compile, plus a fresh process's start and the longer measurement of a confirmation."""
    return repeats * sum(max(c.duration_seconds - c.compile_seconds, 0.0) + FRESH_PROCESS_SECONDS
                         + extra_measure_seconds for c in cands)


def run_confirmation(
    cands: Sequence[Candidate],
    *,
    adapter: Path,
    device: str,
    runner: Runner,
    out: Path,
    repeats: int,
    trial_timeout: float,
    measure: MeasureSettings,
    seed: int | None = None,
    on_result: Callable[[Candidate, TrialResult], None] | None = None,
    deadline: float | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> list[ConfirmationEntry]:
    """Run the candidates in rounds, each round every candidate once in a shuffled order, so
    that a budget ending early still leaves them equally measured; one entry per candidate,
    fastest (by median) first. No run starts with less than `MIN_RUN_SECONDS` left before
    `deadline` (a `clock()` time), and a running one is cut there."""
    rng = random.Random(seed)
    order: list[Candidate] = []
    for _ in range(repeats):
        round_ = list(cands)
        rng.shuffle(round_)
        order += round_
    runs: dict[int, list[TrialResult]] = {c.trial: [] for c in cands}
    for i, cand in enumerate(order):
        left = math.inf if deadline is None else deadline - clock()
        if left < MIN_RUN_SECONDS:
            break
        request = TrialRequest(adapter=str(adapter), config=cand.config, device=device,
                               measure=measure, number=cand.trial, diagnose=False,
                               save_compile_artifacts=cand.config.compile != "none")
        # Generous but bounded: twice what the trial took, compile caches are warm by now.
        limit = min(trial_timeout, 2 * cand.duration_seconds + 60, left)
        result = runner.run(request, out / "confirm" / f"{i:02d}-trial{cand.trial}", timeout=limit)
        runs[cand.trial].append(result)
        if on_result is not None:
            on_result(cand, result)
        if result.status is Status.INTERRUPTED:
            break
    summary = []
    for c in cands:
        values = [r.throughput for r in runs[c.trial] if r.status is Status.OK and r.throughput]
        summary.append(ConfirmationEntry(
            trial=c.trial,
            baseline=c.baseline,
            search_throughput=c.search_throughput,
            throughputs=tuple(values),
            median=statistics.median(values) if values else None,
            spread=relative_spread(values) if len(values) > 1 else None,
            statuses=tuple(r.status.value for r in runs[c.trial]),
            compile_artifacts=next((r.compile_artifacts for r in reversed(runs[c.trial])
                                    if r.compile_artifacts), ""),
        ))
    summary.sort(key=lambda s: -(s.median or 0.0))
    return summary
