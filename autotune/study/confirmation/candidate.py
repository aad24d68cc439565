"""A confirmation's candidates: the configs the search's trials say to run again, and what a
fresh run of each is planned to cost."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from autotune.contract.config import TrainConfig
from autotune.study.store.records import MeasuredRecord, TrialRecord, measured

__all__ = ["BEHIND", "WARM_COMPILE_SECONDS", "Candidate", "candidates", "searched_seconds",
           "warm_compile"]


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
    shapes_vary: bool = False
    """Whether its batches' shapes varied: compiled, a fresh run then compiles much of its
    graph again, the cache notwithstanding (`warm_compile`)."""
    steady: bool = False
    """Taken in place of the k-th fastest as the fastest config whose windows agreed, the
    faster ones' not (`candidates`): `fit_to_time` keeps it as it keeps the leader."""


BEHIND = 0.5
"""A config the search read below this share of the fastest reading is no candidate: search
readings have stood at most 1.6x above fresh runs (a held-out timm ViT before its windows were
fixed), and holding back two fresh runs of such a config cost a compile trial its time. On an
H100 (2026-11-27) a held-out T5-small's hand recipe read 0.45x the tf32 leader; the search kept
about 100 s for two runs of it that the confirmation never ran, its dynamic compile was cut 15 s
after its first step, and the search ended 120 s inside its budget."""


def candidates(records: Sequence[TrialRecord], k: int) -> list[Candidate]:
    """The k fastest distinct ok configs, plus the baseline (re-measured for a fair speedup),
    less those clearly behind (`BEHIND`; the baseline stays) and those whose optimizer_impl
    their optimizer left as built (`_left_as_built`).

    When none of the k fastest converged (their windows did not agree), the last place goes to
    the fastest config that did, if its rate lies within the leader's own spread of the
    leader's: a reading that did not settle may stand far above what the config runs. On an
    H100 a held-out launch-bound tabular model's three leaders read 64-67k rows/s with windows
    17-24% apart and ran 44-52k fresh, while a config read 58.6k with 5.5% spread, and a
    config like it ran 59k side by side, was left out (2026-11-26)."""
    ok = [r for r in measured(records) if r.ok and r.search and r.duplicate_of is None
          and not _left_as_built(r)]
    ok.sort(key=lambda r: -r.rate)
    chosen: list[MeasuredRecord] = []
    seen: list[TrainConfig] = []
    for r in ok:
        if r.config not in seen:
            seen.append(r.config)
            chosen.append(r)
        if len(chosen) == k:
            break
    steady = _steady(ok, chosen)
    if steady is not None:
        last = max(i for i, r in enumerate(chosen) if not r.baseline)
        chosen[last] = steady
    if ok:
        chosen = [r for r in chosen if r.rate >= BEHIND * ok[0].rate]
    base = next((r for r in ok if r.baseline), None)
    if base is not None and base not in chosen:
        chosen.append(base)
    return [
        Candidate(trial=r.number, config=r.config, search_throughput=float(r.rate),
                  duration_seconds=float(r.result.duration_seconds or 0.0),
                  compile_seconds=float(r.result.compile_seconds or 0.0),
                  baseline=r.baseline,
                  diagnosed=r.result.diagnosis is not None,
                  converged=r.result.converged is not False,
                  shapes_vary=bool(r.result.shapes_vary),
                  steady=r is steady)
        for r in chosen
    ]


def _left_as_built(r: MeasuredRecord) -> bool:
    """Whether `r` asked for an optimizer_impl its own optimizer does not take: it measured the
    optimizer as built under another name (trials running beside the first may ask before the
    search knows; `study.policy.optimizer`)."""
    takes = r.result.optimizer_impls
    return takes is not None and r.config.optimizer_impl not in takes


def _steady(ok: Sequence[MeasuredRecord], chosen: Sequence[MeasuredRecord]
            ) -> MeasuredRecord | None:
    """The fastest converged config not chosen, when none of the chosen (the baseline apart,
    at least two) converged and its rate is within the leader's spread of the leader's; else
    None."""
    top = [r for r in chosen if not r.baseline]
    if len(top) < 2 or any(r.result.converged is not False for r in top):
        return None
    leader = top[0]
    floor = leader.rate * (1.0 - (leader.result.spread or 0.0))
    picked = {r.config for r in chosen}
    return next((r for r in ok if r.result.converged is True and not r.baseline
                 and r.config not in picked and r.rate >= floor), None)


WARM_COMPILE_SECONDS = 4.5
"""What a compiled config's fresh run pays to compile again, from the warm cache, at most
(GPT-2 small on the H100: 4.0-4.5 s in its confirmation runs); `budget` plans with it too."""


def searched_seconds(c: Candidate) -> float:
    """Its search trial's seconds with a warm compile in place of the cold one: a fresh run
    compiles from the cache the search filled (a quick start's 15-s compiled trial, 10 s of it
    compiling, was costed at 24 s and gave way)."""
    return max(c.duration_seconds - c.compile_seconds, 0.0) + warm_compile(c)


def warm_compile(c: Candidate) -> float:
    """What a fresh run of `c` pays to compile from the warm cache (0 for an eager config): at
    most WARM_COMPILE_SECONDS, but its search trial's whole compile when its shapes varied. A
    Llama-style transformers LM padded per batch (H100, 2026-11-26) compiled 107 and 118 s in
    its search trials and 55-89 s in its fresh runs (one graph of seven missed the cache each
    time): planned at 4.5 s, its first fresh run took 141 s and left no time for the second."""
    if c.config.compile == "none":
        return 0.0
    return c.compile_seconds if c.shapes_vary else min(c.compile_seconds, WARM_COMPILE_SECONDS)
