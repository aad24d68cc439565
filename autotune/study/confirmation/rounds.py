"""Confirmation rounds: the top-k configs (and the baseline) again, fresh processes, shuffled.

A search sees each config once, and one lucky window can crown the wrong winner. After the
search, the k best distinct configs and the baseline run again in rounds, each in a shuffled
order, until the leader's lead is clear or a cap of runs is reached: a config clearly behind
stops early, runs are spent only where the decision is open (`lead`). The winner is then
picked on these runs (`winner.pick_winner`).
"""

from __future__ import annotations

import dataclasses
import math
import random
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import optuna

from autotune.contract.config import TrainConfig
from autotune.contract.request import MeasureSettings, TrialRequest
from autotune.contract.result import Status, TrialResult
from autotune.contract.stats import relative_spread
from autotune.study.confirmation.lead import standing
from autotune.study.confirmation.winner import pick_winner
from autotune.study.execution.protocol import Runner
from autotune.study.store import records, study_attrs
from autotune.study.store.records import MeasuredRecord, TrialRecord, measured
from autotune.study.store.study_attrs import ConfirmationEntry

__all__ = ["CONFIRM_SHARE", "Candidate", "candidates", "estimate_seconds", "fit_to_time",
           "record_confirmation", "run_confirmation", "run_seconds", "start_costs"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class Candidate:
    trial: int
    config: TrainConfig
    search_throughput: float
    duration_seconds: float
    compile_seconds: float = 0.0
    baseline: bool = False
    diagnosed: bool = True
    """Whether its search trial was diagnosed; if not, its first fresh run is (for best.yaml)."""
    converged: bool = True
    """Whether its search trial's windows agreed within tolerance before its budget ran out: a
    config whose did not will likely time a confirmation run's whole budget too."""


def candidates(records: Sequence[TrialRecord], k: int) -> list[Candidate]:
    """The k fastest distinct ok configs, plus the baseline (re-measured for a fair speedup)."""
    ok = [r for r in measured(records) if r.ok and r.search and r.duplicate_of is None]
    ok.sort(key=lambda r: -r.rate)
    chosen: list[MeasuredRecord] = []
    seen: list[TrainConfig] = []
    for r in ok:
        if r.config not in seen:
            seen.append(r.config)
            chosen.append(r)
        if len(chosen) == k:
            break
    base = next((r for r in ok if r.baseline), None)
    if base is not None and base not in chosen:
        chosen.append(base)
    return [
        Candidate(trial=r.number, config=r.config, search_throughput=float(r.rate),
                  duration_seconds=float(r.result.duration_seconds or 0.0),
                  compile_seconds=float(r.result.compile_seconds or 0.0),
                  baseline=r.baseline,
                  diagnosed=r.result.diagnosis is not None,
                  converged=r.result.converged is not False)
        for r in chosen
    ]


# A confirmation run is not started with less than this left of the study's budget.
MIN_RUN_SECONDS = 10.0
# A fresh confirmation process pays what a forked search trial did not: the torch and adapter
# imports and the dataset build, and a compile from the warm persistent cache instead of the
# trial's cold one. The start-up is measured once the fork server has started (its own
# start-up is those imports and that build); until then, what it took on the H100 host (2.9 s
# + 3.5-6 s, and the compile imports). A run started one run ahead (`study.spare`) pays what
# of its start-up the run before it left to do: at most SPARE_PROCESS_SECONDS, planned. A
# compiled config pays its compile again, from the cache: at most WARM_COMPILE_SECONDS (GPT-2
# small on the H100: 4.0-4.5 s in its confirmation runs).
FRESH_PROCESS_SECONDS = 12.0
SPARE_PROCESS_SECONDS = 4.0
WARM_COMPILE_SECONDS = 4.5
CONFIRM_SHARE = 1 / 3
"""At most this share of `--timeout` is held back from the search for confirming: on a noisy
2-CPU VM, whose runs time their whole budget, the estimate held back 125 of 150 s and the
search ran 3 trials; the confirmation's rounds adapt to whatever is left."""


def start_costs(search_runner: Runner, confirm_runner: Runner) -> tuple[float, float]:
    """The start-up seconds a confirmation's first run and each later run pay: the search
    runner's measured start-up (`start_seconds`, else FRESH_PROCESS_SECONDS), and for later
    runs of a runner that starts them ahead (`starts_ahead`) at most SPARE_PROCESS_SECONDS."""
    start = search_runner.start_seconds or FRESH_PROCESS_SECONDS
    ahead = confirm_runner.starts_ahead
    return start, min(start, SPARE_PROCESS_SECONDS) if ahead else start


def estimate_seconds(cands: Sequence[Candidate], repeats: int, *,
                     measure_gap_seconds: float = 0.0,
                     start_seconds: float = FRESH_PROCESS_SECONDS,
                     later_start_seconds: float | None = None) -> float:
    """What confirming these will likely take: a first round of every candidate, then
    `repeats - 1` more of the two leaders by the search (the others are usually dropped as
    clearly behind). Each run is as long as its trial without the trial's compile (a compiled
    config's warm one back: `WARM_COMPILE_SECONDS` at most), plus a
    fresh process's start-up (`start_seconds` for the first run, `later_start_seconds` for
    each later one: the same unless they start ahead) and the longer measurement of a
    confirmation: `measure_gap_seconds` (confirmation's budget less the search's) for a config
    whose search windows did not converge, half of it for one whose did."""
    later = start_seconds if later_start_seconds is None else later_start_seconds

    def cost(c: Candidate) -> float:
        return run_seconds(c, measure_gap_seconds=measure_gap_seconds, start_seconds=later)

    leaders = sorted((c for c in cands if not c.baseline), key=lambda c: -c.search_throughput)[:2]
    if not leaders:
        return 0.0  # the baseline alone is never confirmed: nothing to hold back yet
    return (start_seconds - later + sum(map(cost, cands))
            + (repeats - 1) * sum(map(cost, leaders)))


def run_seconds(c: Candidate, *, measure_gap_seconds: float, start_seconds: float) -> float:
    """One fresh run of `c`, planned: its trial without the trial's compile (a compiled
    config's warm one back, `WARM_COMPILE_SECONDS` at most), a process's start-up, and the
    confirmation's longer measurement (all of `measure_gap_seconds` for a config whose search
    windows did not converge, half of it for one whose did)."""
    gap = measure_gap_seconds if not c.converged else measure_gap_seconds / 2
    warm = min(c.compile_seconds, WARM_COMPILE_SECONDS) if c.config.compile != "none" else 0.0
    return max(c.duration_seconds - c.compile_seconds, 0.0) + warm + start_seconds + gap


def fit_to_time(cands: Sequence[Candidate], seconds: float,
                run: Callable[[Candidate], float]) -> list[Candidate]:
    """The candidates a confirmation of `seconds` can decide between: a first round of each
    and a second run of the leader by the search, as `run` plans them. Drops the slowest by
    the search (never the baseline, nor the leader) until that fits. Where every candidate
    fits only one run, none gets a second and no lead can be called: an H100 ResNet search
    confirmed its 3 leaders and the baseline once each in 162 s and ended `confidence low`."""
    kept = list(cands)
    while True:
        others = sorted((c for c in kept if not c.baseline), key=lambda c: -c.search_throughput)
        if len(others) <= 1 or sum(map(run, kept)) + run(others[0]) <= seconds:
            return kept
        kept.remove(others[-1])


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
    max_repeats: int | None = None,
    seed: int | None = None,
    on_result: Callable[[Candidate, TrialResult], None] | None = None,
    deadline: float | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> list[ConfirmationEntry]:
    """Run the candidates in rounds, each round every candidate still in question once, in a
    shuffled order (drift on the machine then hits them alike); one entry per candidate,
    fastest (by median) first. With a `deadline`, the search's fastest runs first.

    Adaptive: after each round, a candidate clearly behind the leader (`lead.standing`) runs
    no more, and the rounds stop once the leader's lead is clear and it has `repeats` runs, or
    when every candidate still within noise of it has `max_repeats` runs (default
    2 x `repeats` + 1). No run starts with less than `MIN_RUN_SECONDS` left before `deadline`
    (a `clock()` time), and a running one is cut there."""
    cap = max(repeats, max_repeats if max_repeats is not None else 2 * repeats + 1)
    rng = random.Random(seed)
    runs: dict[int, list[TrialResult]] = {c.trial: [] for c in cands}
    active = list(cands)
    count = 0
    while active:
        round_ = list(active)
        rng.shuffle(round_)
        if deadline is not None and not count:
            # The first run is the search's leader: should the budget cut the first round
            # short, the config best.yaml would name was re-run (a run of the second while the
            # leader got none made a config 0.94x the baseline by the search the winner).
            lead = max(round_, key=lambda c: c.search_throughput)
            round_.remove(lead)
            round_.insert(0, lead)
        started = 0
        for cand in round_:
            left = math.inf if deadline is None else deadline - clock()
            if left < MIN_RUN_SECONDS:
                return summarize(cands, runs)
            if left < _expected_seconds(runs[cand.trial]):
                continue  # its own fresh runs say it cannot finish: it would only be cut
            started += 1
            request = TrialRequest(adapter=str(adapter), config=cand.config, device=device,
                                   measure=measure, number=cand.trial,
                                   diagnose=not cand.diagnosed and not runs[cand.trial],
                                   save_compile_artifacts=cand.config.compile != "none")
            # Generous but bounded: twice what the trial took, compile caches are warm by now.
            limit = min(trial_timeout, 2 * cand.duration_seconds + 60, left)
            result = runner.run(request, out / "confirm" / f"{count:02d}-trial{cand.trial}",
                                timeout=limit)
            count += 1
            runs[cand.trial].append(result)
            if on_result is not None:
                on_result(cand, result)
            if result.status is Status.INTERRUPTED:
                return summarize(cands, runs)
        if not started:
            return summarize(cands, runs)  # none of them fits in what is left
        active = next_round(cands, runs, repeats=repeats, cap=cap)
    return summarize(cands, runs)


def _expected_seconds(done: list[TrialResult]) -> float:
    """How long another fresh run of a config takes, from its earlier ones (0: none yet)."""
    seconds = [r.duration_seconds for r in done if r.status is Status.OK and r.duration_seconds]
    return statistics.median(seconds) if seconds else 0.0


def next_round(cands: Sequence[Candidate], runs: dict[int, list[TrialResult]], *, repeats: int,
               cap: int) -> list[Candidate]:
    """Who runs again: while some candidates are within the leader's noise, they and the
    leader, up to `cap` runs each; once all are behind, the leader alone until it has
    `repeats` ok runs (its own spread is part of the verdict)."""
    now = standing(summarize(cands, runs))
    if now.leader is None:
        return []
    lead = next(c for c in cands if c.trial == now.leader.trial)
    under_cap = len(runs[lead.trial]) < cap
    if not now.contenders:
        return [lead] if under_cap and len(now.leader.throughputs) < repeats else []
    wanted = [c for c in cands if c.trial in now.contenders and len(runs[c.trial]) < cap]
    if not wanted:
        return []  # the rest is noise the cap allows no more runs to settle
    return [c for c in cands if c in wanted or (c is lead and under_cap)]


def summarize(cands: Sequence[Candidate], runs: dict[int, list[TrialResult]]
              ) -> list[ConfirmationEntry]:
    """One entry per candidate with its ok runs' rates, fastest median first."""
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


def record_confirmation(study: optuna.Study, entries: list[ConfirmationEntry],
                        runs: Sequence[tuple[Candidate, TrialResult]]) -> None:
    """Store a finished confirmation: each run as a trial, the summary, and the winner as the
    trial Optuna (and optuna-dashboard) call the best, so every output names one winner."""
    for cand, result in runs:
        records.add_confirmation_run(study, cand.trial, result)
    study_attrs.write_confirmation(study, entries)
    winner = pick_winner(records.read_records(study), entries)
    if winner is None or winner.confirmation is None or winner.decision is None:
        return  # no run was ok: the search's fastest trial stays the answer
    entry = next(e for e in entries if e.trial == winner.record.number)
    searched = winner.record.result
    result = (searched or TrialResult(status=Status.OK)).replace(
        throughput=winner.throughput, spread=entry.spread,
        reason=f"confirmed: median of {len(entry.throughputs)} fresh run(s) of trial "
               f"{entry.trial}, {winner.decision.verdict}, confidence {winner.decision.confidence}")
    records.add_winner(study, entry.trial, result, winner.decision.to_dict())
