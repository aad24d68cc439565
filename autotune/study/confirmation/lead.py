"""Is one config's lead over another real, or within the noise of their runs?

Confirmation re-runs the leaders in fresh processes; each run's rate is one sample of what a
config does on this machine. A lead is *clear* when the leader's worst run beats the other's best
run, or when a bootstrap interval of the ratio of their medians lies above 1 (the two agree for
two or three runs each; the bootstrap helps from about five). A config measured only once fresh
also counts its search trial as a run: a second opinion, from a forked process and shorter
windows, that only makes a lead harder to call when the search was lucky.
"""

from __future__ import annotations

import dataclasses
import math
import random
import statistics
from collections.abc import Sequence

from autotune.study.store.study_attrs import ConfirmationEntry

__all__ = ["DISAGREE", "EQUAL", "UNRUN_REACH", "Standing", "clearly_ahead", "disagreement",
           "equivalent", "evidence", "not_faster", "ratio_interval", "standing"]

DISAGREE = 2.0
"""Runs of one config whose fastest is this many times its slowest contradict each other: the
machine, not the config, set their rates (the issue that motivated this read 55 and 2.8k/s)."""
# A percentile bootstrap's interval is stable to about a percent from a few thousand resamples
# (Efron & Tibshirani 1993, "An Introduction to the Bootstrap", ch. 13).
RESAMPLES = 2000
LEVEL = 0.95
UNRUN_REACH = 0.10
"""While fewer than two configs ran fresh, a config confirmed by no fresh run counts as a
contender while its search rate is within this of the leader's median (search rates fell
0.91-1.22x of their fresh medians on a 2-CPU VM); further behind, it is behind. Once two have,
their own search-to-fresh ratios say how fast its fresh runs would likely be (`_fastest_fresh`):
faster than the leader's median is a contender, else behind."""
EQUAL = 0.02
"""Configs whose ratio of medians is known to lie within this of 1 are as fast as each other for
any purpose (the confirmation's own tolerance): more runs would not make one the winner."""


def evidence(entry: ConfirmationEntry) -> tuple[float, ...]:
    """The runs a decision weighs: the fresh ones, plus the search trial's rate while there is
    fewer than two fresh ones."""
    runs = tuple(entry.throughputs)
    if len(runs) < 2 and entry.search_throughput > 0:
        runs += (entry.search_throughput,)
    return runs


def disagreement(values: Sequence[float]) -> float:
    """Fastest over slowest (1.0 for one value or none; infinite with a rate of 0)."""
    if len(values) < 2:
        return 1.0
    low = min(values)
    return max(values) / low if low > 0 else math.inf


def ratio_interval(a: Sequence[float], b: Sequence[float], *, seed: int = 0
                   ) -> tuple[float, float]:
    """The 95% percentile-bootstrap interval of median(a) / median(b): resample each with
    replacement, take the ratio of the medians, read its 2.5th and 97.5th percentiles."""
    if not a or not b:
        raise ValueError(f"need runs on both sides, got {len(a)=} and {len(b)=}")
    rng = random.Random(seed)  # reproducible: the same runs always give the same interval
    ratios = []
    for _ in range(RESAMPLES):
        den = statistics.median(rng.choices(b, k=len(b)))
        num = statistics.median(rng.choices(a, k=len(a)))
        ratios.append(num / den if den > 0 else math.inf)
    ratios.sort()
    tail = (1 - LEVEL) / 2
    return ratios[int(tail * RESAMPLES)], ratios[min(RESAMPLES - 1, int((1 - tail) * RESAMPLES))]


def clearly_ahead(a: Sequence[float], b: Sequence[float]) -> bool:
    """Whether runs `a` beat runs `b` beyond their noise (two runs each at least)."""
    if len(a) < 2 or len(b) < 2:
        return False
    return min(a) > max(b) or ratio_interval(a, b)[0] > 1.0


def not_faster(other: Sequence[float], leader: Sequence[float]) -> bool:
    """Whether fresh runs (two each at least) show `other` no more than `EQUAL` faster than
    `leader`: the interval of median(other) / median(leader) ends at or below 1 + EQUAL. The
    one-sided form of `equivalent` (a non-inferiority margin): the leader may be faster still,
    but no run would show the other worth picking. Twins on a 2-CPU VM (bs=256 against bs=128
    x 2, 8.54k and 8.31k over 6 runs each) are 2.7% apart at ~2% a run: neither clear nor
    equivalent in the 4-5 runs a quick start's confirmation has."""
    if len(other) < 2 or len(leader) < 2:
        return False
    return ratio_interval(other, leader)[1] <= 1 + EQUAL


def equivalent(a: Sequence[float], b: Sequence[float]) -> bool:
    """Whether fresh runs `a` and `b` (two each at least) show the two configs equally fast:
    the interval of their ratio lies within `EQUAL` of 1."""
    if len(a) < 2 or len(b) < 2:
        return False
    low, high = ratio_interval(a, b)
    return low >= 1 / (1 + EQUAL) and high <= 1 + EQUAL


@dataclasses.dataclass(frozen=True, kw_only=True)
class Standing:
    """Where the confirmed configs stand after the runs so far (trial numbers of the search)."""

    leader: ConfirmationEntry | None
    """The highest median of fresh runs (None when no run was ok)."""
    behind: tuple[int, ...]
    """Clearly behind the leader, or never run and, by their search rate, no faster than it:
    they need no more runs."""
    contenders: tuple[int, ...]
    """Within the noise of the leader: more runs may separate them."""
    failed: tuple[int, ...]
    """No fresh run was ok (out of memory, an error, a timeout)."""
    equal: tuple[int, ...] = ()
    """As fast as the leader, shown by their fresh runs (`equivalent`), or shown no more than
    `EQUAL` faster than it (`not_faster`): no run would make them worth picking over it."""

    @property
    def settled(self) -> bool:
        """Nothing more runs could change: every other config is behind the leader or as fast,
        and the leader has two fresh runs."""
        return (self.leader is not None and len(self.leader.throughputs) >= 2
                and not self.contenders)

    @property
    def clear(self) -> bool:
        """The leader is ahead of every other config, with two fresh runs of its own."""
        return self.settled and not self.equal


def standing(entries: Sequence[ConfirmationEntry]) -> Standing:
    ran = [e for e in entries if e.median is not None]
    failed = tuple(e.trial for e in entries if e.median is None and e.statuses)
    if not ran:
        return Standing(leader=None, behind=(), contenders=(), failed=failed)
    leader = max(ran, key=lambda e: e.median or 0.0)
    lead = evidence(leader)
    behind, contenders, equal = [], [], []
    # A candidate the time left no run for is judged by its search trial alone (a
    # confirmation that let a near contender give way must not call its leader's lead clear).
    fastest = _fastest_fresh(ran)
    for e in entries:
        if e.median is None and not e.statuses and e.search_throughput > 0:
            if fastest is None:  # within UNRUN_REACH of the leader it may be as fast
                near = e.search_throughput >= (leader.median or 0.0) * (1 - UNRUN_REACH)
                (contenders if near else behind).append(e.trial)
                continue
            most = e.search_throughput * fastest  # the fastest its fresh runs would likely be
            top = leader.median or 0.0
            # Never run, it is not tied: behind only where it cannot be faster.
            (behind if most <= top else contenders).append(e.trial)
    for e in ran:
        if e is leader:
            continue
        if clearly_ahead(lead, evidence(e)) and not _within_scatter(leader, e):
            behind.append(e.trial)
        elif equivalent(leader.throughputs, e.throughputs) \
                or not_faster(_calibrated(e, ran), leader.throughputs):
            equal.append(e.trial)
        else:
            contenders.append(e.trial)
    return Standing(leader=leader, behind=tuple(behind), contenders=tuple(contenders),
                    failed=failed, equal=tuple(equal))


def _within_scatter(leader: ConfirmationEntry, other: ConfirmationEntry) -> bool:
    """Whether the leader's lead over `other` is smaller than `other`'s own readings are apart
    (its fresh runs, and its search rate while run once): such a lead is no clearer than the
    noise that set it. A held-out transformers model on the 2-CPU VM (2026-11-28): bf16 led the
    fp32 baseline by 1.04x, 31.6k and 32.1k against a fresh 30.5k and a search 23.8k, and was
    called a clear lead; a check minutes later read the winner 0.86x. Readings `DISAGREE` or
    more apart are not a scatter to weigh a lead against: the machine set them (the warnings
    say so), and the leader's runs that beat all of them stay ahead."""
    if not leader.median or not other.median:
        return False
    scatter = disagreement(evidence(other))
    return scatter < DISAGREE and leader.median / other.median < scatter


def _fastest_fresh(ran: Sequence[ConfirmationEntry]) -> float | None:
    """The highest a config's fresh median may be per unit of its search rate, as this study's
    own confirmed configs show: their lowest search-to-fresh ratio, made lower still by the
    spread of those ratios. None while fewer than two configs (the baseline aside) have both.
    Search rates are forked processes' short windows: on a 2-CPU VM they read 0.91-1.22x the
    fresh medians over many studies, but within one study alike (a quick start: 1.051, 1.055)."""
    ratios = _search_ratios(ran)
    if len(ratios) < 2:
        return None
    return max(ratios) / min(ratios) ** 2


def _calibrated(entry: ConfirmationEntry, ran: Sequence[ConfirmationEntry]) -> tuple[float, ...]:
    """A config run fresh once: that run and its search rate divided by what the search rates
    of two or more other configs (the baseline aside) read over their fresh medians; else its
    fresh runs alone. Only to show it no faster than the leader (`not_faster`), never behind:
    a quick start's config ran 7.03k fresh, its search had read 8.0k, and the others' search
    rates read 1.03-1.10x their fresh runs. A config run twice or more: its fresh runs."""
    ratios = _search_ratios(ran, besides=entry)
    if len(entry.throughputs) != 1 or entry.search_throughput <= 0 or len(ratios) < 2:
        return tuple(entry.throughputs)
    return (*entry.throughputs, entry.search_throughput / statistics.median(ratios))


def _search_ratios(ran: Sequence[ConfirmationEntry], besides: ConfirmationEntry | None = None
                   ) -> list[float]:
    """Search rate over fresh median of each config run fresh (the baseline and `besides`
    aside) whose search measured it."""
    return [e.search_throughput / e.median for e in ran
            if e is not besides and not e.baseline and e.median and e.search_throughput > 0]
