"""What confirming costs: a fresh run's planned seconds, what the search holds back for the
confirmation, and which candidates a confirmation of so many seconds can decide between."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from autotune.study.confirmation.candidate import WARM_COMPILE_SECONDS, Candidate, searched_seconds
from autotune.study.execution.protocol import Runner

__all__ = ["CONFIRM_SHARE", "FRESH_PROCESS_SECONDS", "SPARE_PROCESS_SECONDS", "TWO_RUNS_SHARE",
           "WARM_COMPILE_SECONDS", "estimate_seconds", "fit_to_time", "reserve_seconds",
           "run_seconds", "start_costs"]

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
CONFIRM_SHARE = 1 / 3
"""At most this share of `--timeout` is held back from the search for confirming: on a noisy
2-CPU VM, whose runs time their whole budget, the estimate held back 125 of 150 s and the
search ran 3 trials; the confirmation's rounds adapt to whatever is left."""
TWO_RUNS_SHARE = 1 / 2
"""Up to this share of `--timeout` is held back when two runs of each of the two leaders and one
of the baseline need more than CONFIRM_SHARE (`reserve_seconds`)."""


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


def reserve_seconds(cands: Sequence[Candidate], repeats: int, *, timeout: float | None,
                    measure_gap_seconds: float, start_seconds: float,
                    later_start_seconds: float) -> float:
    """What the search holds back from `timeout` for confirming these: `estimate_seconds`, at
    most CONFIRM_SHARE of the timeout, but never less than two runs of each of the two leaders
    by the search and one of the baseline (a winner needs two fresh runs, and so does telling
    it from the next), up to TWO_RUNS_SHARE of it. On an H100 a transformers GPT-2 whose leader
    compiled for 94 s, and a ResNet whose leader compiled, each kept a third of ~500 s and
    confirmed its winner once (confidence low); the quick start (140 s, 2-CPU VM) kept 47 s,
    four fresh runs, and its leader and a twin 0.3% behind had three between them."""
    reserve = estimate_seconds(cands, repeats, measure_gap_seconds=measure_gap_seconds,
                               start_seconds=start_seconds, later_start_seconds=later_start_seconds)
    if timeout is None:
        return reserve
    leaders = sorted((c for c in cands if not c.baseline), key=lambda c: -c.search_throughput)
    base = [c for c in cands if c.baseline]

    def cost(c: Candidate) -> float:
        return run_seconds(c, measure_gap_seconds=measure_gap_seconds,
                           start_seconds=later_start_seconds)

    two_runs = (start_seconds - later_start_seconds + sum(map(cost, base))
                + 2 * sum(map(cost, leaders[:2]))) if leaders else 0.0
    floor = min(two_runs, TWO_RUNS_SHARE * timeout)
    return min(reserve, max(CONFIRM_SHARE * timeout, floor))


def run_seconds(c: Candidate, *, measure_gap_seconds: float, start_seconds: float) -> float:
    """One fresh run of `c`, planned: its trial without the trial's compile (a compiled
    config's warm one back, `WARM_COMPILE_SECONDS` at most), a process's start-up, and the
    confirmation's longer measurement (all of `measure_gap_seconds` for a config whose search
    windows did not converge, half of it for one whose did)."""
    gap = measure_gap_seconds if not c.converged else measure_gap_seconds / 2
    return searched_seconds(c) + start_seconds + gap


def fit_to_time(cands: Sequence[Candidate], seconds: float,
                run: Callable[[Candidate], float]) -> list[Candidate]:
    """The candidates a confirmation of `seconds` can decide between: a first round of each
    and a second run of the leader by the search, as `run` plans them. Drops the slowest by
    the search (never the baseline, the leader, nor a `steady` one) until that fits. Where
    every candidate fits only one run, none gets a second and no lead can be called: an H100
    ResNet search confirmed its 3 leaders and the baseline once each in 162 s and ended
    `confidence low`."""
    kept = list(cands)
    while True:
        others = sorted((c for c in kept if not c.baseline), key=lambda c: -c.search_throughput)
        droppable = [c for c in others[1:] if not c.steady]
        if not droppable or sum(map(run, kept)) + run(others[0]) <= seconds:
            return kept
        kept.remove(droppable[-1])
