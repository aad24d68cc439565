"""Which config the study hands back: the confirmed winner, else the search's fastest trial.

The winner is picked on the confirmation runs (`lead`): the leader when its lead is clear;
otherwise the configs within noise of each other tie, and the cheapest of those whose median is
as near the leader's as the leader's own runs are to each other wins (less peak memory, then
fewer DataLoader workers, then no compile): at equal speed, what costs less.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from optuna.trial import TrialState

from autotune.contract.noise import SPREAD_WARNING
from autotune.contract.result import TrialResult
from autotune.contract.stats import relative_spread
from autotune.study.confirmation.lead import (DISAGREE, EQUAL, UNRUN_REACH, clearly_ahead,
                                              disagreement, evidence, ratio_interval, standing)
from autotune.study.store.records import CONFIRM, WINNER, TrialRecord
from autotune.study.store.study_attrs import ConfirmationEntry

__all__ = ["BASELINE_KEPT", "Decision", "Winner", "best_and_baseline", "cheapest",
           "confirmation_runs", "decide", "pick_winner"]

BASELINE_KEPT = "baseline kept"
"""The verdict where the leader's fresh runs fell below the baseline's search rate and the
baseline got no fresh run (`_defaults_stand`): the defaults are handed back."""

# Peak memory within this fraction of the smallest counts as the same (host RSS and the caching
# allocator's reserve move by a few percent between runs of one config).
MEMORY_TIE = 0.10


@dataclasses.dataclass(frozen=True, kw_only=True)
class Decision:
    """How sure the confirmation is of its winner, and the numbers behind it."""

    confidence: str
    """"high": the winner's lead is clear, or it ties configs its runs show no more than 2%
    faster than the leader (`lead.not_faster`), its own runs agree within `SPREAD_WARNING` and
    the baseline's within 2x; else "low"."""
    verdict: str
    """"clear lead", "tie within noise", "too few runs", "only one config confirmed" or
    "baseline kept" (`BASELINE_KEPT`)."""
    runs: int
    """Fresh runs of the winner that were ok."""
    runner_up: int | None = None
    """The search trial with the next highest median."""
    ratio: float | None = None
    """The winner's median over the runner-up's."""
    interval: tuple[float, float] | None = None
    """95% bootstrap interval of that ratio (search rates counted for a config run once)."""
    runner_up_runs: int = 0
    tied: tuple[int, ...] = ()
    """Search trials within noise of the leader (the leader first) when the lead is unclear."""
    leader: int | None = None
    """The highest median, when a cheaper tied config was picked instead."""
    spread: float = 1.0
    """The winner's fastest run over its slowest."""
    own_spread: float = 0.0
    """The winner's runs' (max - min) / median, as confidence weighs it (0: one run)."""
    baseline_spread: float | None = None
    """The baseline's fastest run over its slowest (its search rate counted when run once)."""
    speedup_interval: tuple[float, float] | None = None
    """The winner's slowest run over the baseline's fastest, and its fastest over their slowest."""
    speedup_clear: bool = True
    """The winner's runs beat the baseline's beyond their noise (`lead.clearly_ahead`, as a lead
    is judged), when both were run; a search rate counts for a config run once fresh."""

    @property
    def speedup_confirmed(self) -> bool:
        """A ratio to the baseline stands only when the baseline's runs agree with each other
        and the winner's beat them beyond their noise (a tie's 1.21x over runs 0.97-1.22x
        apart, one baseline run above the winner's, did not)."""
        return (self.baseline_spread is not None and self.baseline_spread < DISAGREE
                and self.speedup_clear)

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        for key in ("interval", "tied", "speedup_interval"):
            data[key] = list(data[key]) if data[key] is not None else None
        data["speedup_confirmed"] = self.speedup_confirmed
        return data


@dataclasses.dataclass(frozen=True)
class Winner:
    """The config best.yaml reports, with the figures it is judged on."""

    record: TrialRecord
    """The search trial of the winning config (its diagnosis, memory, compile time)."""
    throughput: float
    baseline: float | None
    confirmation: list[ConfirmationEntry] | None
    """Repeated runs of the top configs after the search (None until confirmed)."""
    decision: Decision | None = None
    """How the confirmation decided (None until confirmed)."""
    study_trial: int | None = None
    """The trial recording this winner in the study: Optuna's best trial (None until recorded)."""
    study_value: float | None = None
    """The value that trial was told: the confirmed rate, or just above the study's highest
    when a single search window read higher (`records.add_winner`)."""
    runs: dict[int, tuple[TrialResult, ...]] | None = None
    """Each confirmed search trial's fresh runs as the study recorded them (what else ran on
    the machine meanwhile: the cause of a spread), when they were recorded."""

    @property
    def speedup(self) -> float | None:
        return self.throughput / self.baseline if self.baseline else None


def best_and_baseline(records: Sequence[TrialRecord]) -> tuple[TrialRecord | None, float | None]:
    """The fastest ok trial of the search, and the baseline's throughput (None if not ok)."""
    ok = [r for r in records if r.ok and r.search]
    best = max(ok, key=lambda r: r.value or 0.0, default=None)
    baseline = next((r.value for r in ok if r.baseline), None)
    return best, baseline


def pick_winner(records: Sequence[TrialRecord],
                confirmation: list[ConfirmationEntry] | None) -> Winner | None:
    """The confirmed winner when the last run confirmed, else the search's fastest trial."""
    best, baseline = best_and_baseline(records)
    by_number = {r.number: r for r in records}
    if confirmation and any(c.median for c in confirmation):
        chosen, decision = decide(confirmation, by_number)
        if chosen.trial in by_number:
            base = next((c.median for c in confirmation if c.baseline and c.median), baseline)
            mark = max((r for r in records if r.role == WINNER and r.confirms == chosen.trial),
                       key=lambda r: r.number, default=None)
            return Winner(by_number[chosen.trial], chosen.median or chosen.search_throughput,
                          base, confirmation,
                          decision, mark.number if mark else None, mark.value if mark else None,
                          confirmation_runs(records, confirmation))
    if best is None:
        return None
    # Unconfirmed: Optuna's best trial is the highest value told, an earlier confirmation's
    # winner included (this search's ended before confirming, or skipped it).
    top = max((r for r in records if r.state == TrialState.COMPLETE and r.value is not None),
              key=lambda r: r.value or 0.0, default=best)
    return Winner(best, float(best.value or 0.0), baseline, None,
                  study_trial=top.number, study_value=top.value)


def confirmation_runs(records: Sequence[TrialRecord], entries: Sequence[ConfirmationEntry]
                      ) -> dict[int, tuple[TrialResult, ...]]:
    """The recorded runs of each entry: the latest confirmation runs of its trial, as many as
    the entry counts (an earlier confirmation of the same trial ran before them)."""
    runs = {}
    for e in entries:
        mine = [r.result for r in sorted(records, key=lambda r: r.number)
                if r.role == CONFIRM and r.confirms == e.trial and r.result is not None]
        if e.statuses and len(mine) >= len(e.statuses):
            runs[e.trial] = tuple(mine[len(mine) - len(e.statuses):])
    return runs


def decide(entries: Sequence[ConfirmationEntry], by_number: dict[int, TrialRecord]
           ) -> tuple[ConfirmationEntry, Decision]:
    """The winning entry and how sure that is (`entries` holds at least one ok run)."""
    now = standing(entries)
    leader = now.leader
    if leader is None:
        raise ValueError(f"no confirmation run was ok: {[e.statuses for e in entries]}")
    others = sorted((e for e in entries if e.median and e is not leader),
                    key=lambda e: -(e.median or 0.0))
    chosen: ConfirmationEntry = leader
    tied: tuple[int, ...] = ()
    if not others:
        verdict = "only one config confirmed"
    elif now.clear:
        verdict = "clear lead"
    elif not now.equal and not set(now.contenders) & {e.trial for e in others}:
        # Ahead of the rest, but the budget allowed it one run, or no run of a config whose
        # search rate says it may be faster (`lead.UNRUN_REACH`, `lead._fastest_fresh`).
        verdict = "too few runs"
    else:
        verdict = "tie within noise"
        pool = [leader] + [e for e in others if e.trial in now.contenders + now.equal]
        tied = tuple(e.trial for e in pool)
        base_median = next((e.median for e in pool if e.baseline), None)
        if base_median is not None:  # tied with the baseline: nothing slower than it is cheaper
            pool = [e for e in pool if (e.median or 0.0) >= base_median]
        # Cheaper decides between configs as fast as each other, not for one tied only by the
        # scatter of its own runs while its median sits further below the leader's than the
        # leader's runs spread (a 2-CPU VM: 10.7k and 10.4k against 10.6k, 8.05k and 5.89k).
        reach = max(EQUAL, relative_spread(evidence(leader)))
        near = [e for e in pool if e is leader or (e.median or 0.0) >= (leader.median or 0.0)
                * (1 - reach)]
        chosen = cheapest(near, by_number)
    base = next((e for e in entries if e.baseline), None)
    if _defaults_stand(leader, base):
        assert base is not None  # for the type checker: _defaults_stand said so
        chosen, verdict, tied = base, BASELINE_KEPT, ()
    base_runs = evidence(base) if base is not None and base.throughputs else ()
    spread = disagreement(chosen.throughputs)
    base_spread = disagreement(base_runs) if base_runs and base is not chosen else None
    # What the winner is compared with: the next fastest, or the faster leader it tied with.
    runner = leader if chosen is not leader else (others[0] if others else None)
    # Sure of the pick: a clear lead, or a tie whose runs show the configs equally fast; and
    # of its figure: its own runs agree as closely as runs get without a warning (runs 1.9x
    # apart made a clear lead "high" before).
    own_spread = relative_spread(chosen.throughputs) if len(chosen.throughputs) >= 2 else 0.0
    high = ((verdict == "clear lead" or (verdict == "tie within noise" and now.settled))
            and len(chosen.throughputs) >= 2 and own_spread <= SPREAD_WARNING
            and (base_spread is None or base_spread < DISAGREE))
    mine = evidence(chosen)
    return chosen, Decision(
        confidence="high" if high else "low",
        verdict=verdict,
        runs=len(chosen.throughputs),
        runner_up=runner.trial if runner is not None else None,
        ratio=(chosen.median or chosen.search_throughput) / runner.median
        if runner is not None and runner.median else None,
        interval=ratio_interval(mine, evidence(runner)) if runner is not None else None,
        runner_up_runs=len(runner.throughputs) if runner is not None else 0,
        tied=tied,
        leader=leader.trial if chosen is not leader else None,
        spread=spread,
        own_spread=own_spread,
        baseline_spread=base_spread,
        speedup_interval=(min(mine) / max(base_runs), max(mine) / min(base_runs))
        if base_runs and base is not chosen and min(base_runs) > 0 else None,
        speedup_clear=not base_runs or base is chosen or clearly_ahead(mine, base_runs),
    )


def _defaults_stand(leader: ConfirmationEntry, base: ConfirmationEntry | None) -> bool:
    """Whether the baseline, which the budget left no fresh run (none started: one that ran and
    failed is no reason to hand it back), read more in the search than the `leader`'s fresh
    median by more than `lead.UNRUN_REACH` (what a search rate may stand above a fresh one):
    nothing then shows any config faster than the defaults. On a 2-CPU VM shared with another
    search (2026-11-28) a compiled config ran 1.45k tokens/s fresh against the baseline's 17.2k
    in the search, and best.yaml handed it back at 0.08x the baseline."""
    return (base is not None and leader is not base and not base.statuses
            and base.search_throughput > 0 and leader.median is not None
            and leader.median < base.search_throughput * (1 - UNRUN_REACH))


def cheapest(pool: Sequence[ConfirmationEntry], by_number: dict[int, TrialRecord]
             ) -> ConfirmationEntry:
    """Among configs tied within noise: less peak memory, then fewer workers, then no compile,
    then the higher median."""
    def memory(e: ConfirmationEntry) -> float:
        result = by_number[e.trial].result if e.trial in by_number else None
        if result is None:
            return float("inf")
        return float(result.peak_reserved_mb or result.peak_rss_mb or float("inf"))

    least = min(memory(e) for e in pool)
    small = [e for e in pool if memory(e) <= least * (1 + MEMORY_TIE)]

    def cost(e: ConfirmationEntry) -> tuple[int, bool, float]:
        config = by_number[e.trial].config if e.trial in by_number else None
        workers = config.num_workers if config is not None else 0
        compiled = config is not None and config.compile != "none"
        return workers, compiled, -(e.median or 0.0)

    return min(small, key=cost)

