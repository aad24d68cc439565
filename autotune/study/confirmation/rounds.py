"""Confirmation rounds: the top-k configs (and the baseline) again, fresh processes, shuffled.

A search sees each config once, and one lucky window can crown the wrong winner. After the
search, the k best distinct configs and the baseline run again in rounds, each in a shuffled
order, until the leader's lead is clear or a cap of runs is reached: a config clearly behind
stops early, runs are spent only where the decision is open (`lead`). The winner is then
picked on these runs (`winner.pick_winner`).
"""

from __future__ import annotations

import math
import random
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import optuna

from autotune.contract.request import MeasureSettings, TrialRequest
from autotune.contract.result import Status, TrialResult
from autotune.contract.stats import relative_spread
from autotune.study.confirmation.candidate import Candidate, searched_seconds, warm_compile
from autotune.study.confirmation.lead import DISAGREE, disagreement, evidence, standing
from autotune.study.confirmation.winner import pick_winner
from autotune.study.execution.protocol import Runner
from autotune.study.store import records, study_attrs
from autotune.study.store.study_attrs import ConfirmationEntry

__all__ = ["record_confirmation", "run_confirmation", "summarize"]


# A confirmation run is not started with less than this left of the study's budget.
MIN_RUN_SECONDS = 10.0
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
    first: int = 0,
) -> list[ConfirmationEntry]:
    """Run the candidates in rounds, each round every candidate still in question once, in a
    shuffled order (drift on the machine then hits them alike); one entry per candidate,
    fastest (by median) first. With a `deadline`, each round's leader runs first (the
    search's fastest, then the highest median of fresh runs).

    Adaptive: after each round, a candidate clearly behind the leader (`lead.standing`) runs
    no more, and the rounds stop once the leader's lead is clear and it has `repeats` runs, or
    when every candidate still within noise of it has `max_repeats` runs (default
    2 x `repeats` + 1). No run starts with less than `MIN_RUN_SECONDS` left before `deadline`
    (a `clock()` time), and a running one is cut there. Run folders are numbered from `first`."""
    cap = max(repeats, max_repeats if max_repeats is not None else 2 * repeats + 1)
    rng = random.Random(seed)
    runs: dict[int, list[TrialResult]] = {c.trial: [] for c in cands}
    active = list(cands)
    count = first
    while active:
        round_ = list(active)
        rng.shuffle(round_)
        lead = _leader(round_, runs)
        if deadline is not None:
            round_ = _ordered(round_, runs, lead, repeats=repeats)
        started = 0
        gave_way: list[float] = []  # the search's rates of configs that gave way this round
        for i, cand in enumerate(round_):
            left = math.inf if deadline is None else deadline - clock()
            if left < MIN_RUN_SECONDS:
                return summarize(cands, runs)
            if left < _expected_seconds(runs[cand.trial]):
                continue  # its own fresh runs say it cannot finish: it would only be cut
            gave_way.extend(c.search_throughput for c in
                            _crowded_out(lead, round_[i:], runs, left, repeats=repeats))
            if gave_way and cand.search_throughput <= max(gave_way) and not cand.baseline \
                    and cand is not lead and not _first_steady(cand, runs):
                continue  # it gives way, as does any config as slow as one that gave way
            started += 1
            request = TrialRequest(adapter=str(adapter), config=cand.config, device=device,
                                   measure=measure, number=cand.trial,
                                   diagnose=not cand.diagnosed and not runs[cand.trial],
                                   save_compile_artifacts=cand.config.compile != "none")
            limit = _run_limit(cand, trial_timeout, left)
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


def _ordered(round_: list[Candidate], runs: dict[int, list[TrialResult]], lead: Candidate, *,
             repeats: int) -> list[Candidate]:
    """A round under a deadline: the leader first (`_leader`), so that should the budget cut
    the round short, the config best.yaml would name was re-run; then the baseline, until it
    has run once; the rest as shuffled. Once the leader has its `repeats` ok runs, the others
    go before it, those with the fewest fresh runs first (then the fastest by the search): a
    held-out MobileNetV3 search (H200, 2026-11-28) ran its leader a third time while two near
    twins never ran, and the verdict was "too few runs"; the quick start ran its leader four
    times and the config tied with it once.
    A run of the second while the leader got none made a config 0.94x the baseline by the
    search the winner; in three 140-s quick starts (2-CPU VM, 2026-11-26) the second round ran
    a contender first and the leader, run once, could not be called with confidence high. Every
    speedup is told against the baseline, and a held-out 120-s search (2-CPU VM, 2026-11-28)
    ended with no fresh run of it."""
    base = next((c for c in round_ if c.baseline and not runs[c.trial] and c is not lead), None)
    rest = [c for c in round_ if c is not lead and c is not base]
    first = [base] if base is not None else []
    if sum(r.status is Status.OK for r in runs[lead.trial]) < repeats:
        return [lead, *first, *rest]
    rest.sort(key=lambda c: (len(runs[c.trial]), -c.search_throughput))
    return [*first, *rest, lead]


def _run_limit(cand: Candidate, trial_timeout: float, left: float) -> float:
    """A fresh run's time limit. Generous but bounded: twice what the trial took, compile
    caches are warm by now; a compiled config never less than its trial took plus a minute,
    though, whose own limit counted its compile apart (`TrialRequest.compile_grace`): a
    Llama-style LM padded per batch compiled 126 s in a 175-s trial, and its fresh run, cut at
    the 144-s trial limit while still compiling, made the baseline the winner (H100,
    2026-11-26)."""
    floor = cand.duration_seconds + 60 if cand.config.compile != "none" else 0.0
    return min(max(trial_timeout, floor), 2 * cand.duration_seconds + 60, left)


def _crowded_out(lead: Candidate, rest: Sequence[Candidate], runs: dict[int, list[TrialResult]],
                 left: float, *, repeats: int) -> list[Candidate]:
    """The slowest configs by the search among `rest` (this round's runs still to come) that
    the time `left` cannot pay for beside the runs a verdict needs: the baseline's and the
    leader's up to `repeats`. Each run is costed at its config's own fresh runs, else at its
    search trial scaled as the fresh runs so far compare with theirs, and never below what
    every fresh run pays whatever its config (`_least_fresh_seconds`). The plan before the
    confirmation sizes runs from the search's trials, and a fresh run costs more: on a 2-CPU
    VM forked trials of 3-6 s, fresh runs of 11 s, and a 0.69x config took the time of the
    leader's second run (quick start, 2026-11-26). Scaled alone, a leader whose search trial
    ran long (7 s, not converged) made the others' 12-s runs look like 10-s ones, and the
    leader's second run missed the deadline by a second (quick start, 2026-11-26 11:13)."""
    if not math.isfinite(left):
        return []
    by_trial = {c.trial: c for c in rest} | {lead.trial: lead}
    scales = [_expected_seconds(done) / searched_seconds(by_trial[n])
              for n, done in runs.items()
              if n in by_trial and _expected_seconds(done) and searched_seconds(by_trial[n])]
    if not scales:
        return []  # no fresh run of these timed yet: the plan's estimate stands
    fixed = _least_fresh_seconds(runs)

    def cost(c: Candidate) -> float:
        own = _expected_seconds(runs[c.trial])
        if own:
            return own
        return max(searched_seconds(c) * statistics.median(scales), fixed + warm_compile(c))

    # The leader's runs still owed, this round's among them: once it has `repeats`, another
    # run of it crowds out nothing (a MobileNetV3's leader ran a third time, its twins never).
    owed = max(0, repeats - sum(r.status is Status.OK for r in runs[lead.trial]))
    need = sum(cost(c) for c in rest if c is not lead) + owed * cost(lead)
    droppable = sorted((c for c in rest if c is not lead and not c.baseline
                        and not _first_steady(c, runs)), key=lambda c: c.search_throughput)
    dropped = []
    while droppable and need > left:
        slowest = droppable.pop(0)
        dropped.append(slowest)
        need -= cost(slowest)
    return dropped


def _first_steady(c: Candidate, runs: dict[int, list[TrialResult]]) -> bool:
    """Whether `c` is the steady candidate (`Candidate.steady`) before its first fresh run: it
    is there because the faster ones' search reads may stand above what they run, and the
    slowest by the search, it would be the first to give way."""
    return c.steady and not runs[c.trial]


def _leader(round_: Sequence[Candidate], runs: dict[int, list[TrialResult]]) -> Candidate:
    """The round's leader: the highest median of ok fresh runs, else the search's fastest."""
    now = standing(summarize(round_, runs)).leader
    if now is None:
        return max(round_, key=lambda c: c.search_throughput)
    return next(c for c in round_ if c.trial == now.trial)


def _least_fresh_seconds(runs: dict[int, list[TrialResult]]) -> float:
    """What any fresh run has cost so far without its compile: the least of the ok runs'
    seconds less their compile seconds. A fresh run pays the process's start-up, the dataset
    and the measurement window whatever its config; on a 2-CPU VM these are most of it (11.6-
    13.2 s for configs whose search trials took 5-7 s). Until a second config has run it is
    the leader's run alone: the cautious side (a config gives way rather than the leader's
    second run missing the deadline)."""
    seconds = [r.duration_seconds - (r.compile_seconds or 0.0) for done in runs.values()
               for r in done if r.status is Status.OK and r.duration_seconds]
    return max(0.0, min(seconds)) if seconds else 0.0


def _expected_seconds(done: list[TrialResult]) -> float:
    """How long another fresh run of a config takes, from its earlier ones (0: none yet)."""
    seconds = [r.duration_seconds for r in done if r.status is Status.OK and r.duration_seconds]
    return statistics.median(seconds) if seconds else 0.0


def next_round(cands: Sequence[Candidate], runs: dict[int, list[TrialResult]], *, repeats: int,
               cap: int) -> list[Candidate]:
    """Who runs again: while some candidates are within the leader's noise, they and the
    leader, up to `cap` runs each; once all are behind, the leader alone until it has
    `repeats` ok runs (its own spread is part of the verdict). And the baseline, run fresh,
    while its runs (with its search trial's while it has one) disagree by DISAGREE or more, up
    to `repeats` + 1 runs, a median one outlier cannot set: every speedup is told against it.
    A held-out search on a loaded 2-CPU VM (2026-11-28) read its baseline 5.03k in the search
    and 467 fresh, called the winner 40x, and ended with 40 s of its budget unspent."""
    summary = summarize(cands, runs)
    wanted = _contested(cands, runs, summary, repeats=repeats, cap=cap)
    base = next((c for c in cands if c.baseline and runs[c.trial]), None)
    if base is not None and base not in wanted and len(runs[base.trial]) <= repeats and disagreement(
            evidence(next(e for e in summary if e.trial == base.trial))) >= DISAGREE:
        return [c for c in cands if c in wanted or c is base]
    return wanted


def _contested(cands: Sequence[Candidate], runs: dict[int, list[TrialResult]],
               summary: list[ConfirmationEntry], *, repeats: int, cap: int) -> list[Candidate]:
    """`next_round`'s leader and the candidates still within its noise."""
    now = standing(summary)
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
    how = (f"confirmed: median of {len(entry.throughputs)} fresh run(s)" if entry.throughputs
           else "kept: the search's rate, no fresh run")
    result = (searched or TrialResult(status=Status.OK)).replace(
        throughput=winner.throughput, spread=entry.spread,
        reason=f"{how} of trial {entry.trial}, {winner.decision.verdict}, confidence "
               f"{winner.decision.confidence}")
    records.add_winner(study, entry.trial, result, winner.decision.to_dict())
