"""Final confirmation: the top-k configs (and the baseline) again, fresh processes, random order.

A search sees each config once, and one lucky window can crown the wrong winner. After the
search, the k best distinct configs and the baseline run again, `repeats` times each in a
shuffled order, and the winner is the config with the highest median over these runs.
"""

from __future__ import annotations

import dataclasses
import random
import statistics
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from optuna.trial import FrozenTrial, TrialState

from autotune.config import TrainConfig
from autotune.measure import MeasureSettings, relative_spread
from autotune.result import Status, TrialResult
from autotune.runner import Runner
from autotune.worker import TrialRequest

__all__ = ["Candidate", "candidates", "estimate_seconds", "run_confirmation"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class Candidate:
    trial: int
    config: TrainConfig
    search_throughput: float
    duration_seconds: float
    baseline: bool = False


def candidates(trials: Sequence[FrozenTrial], k: int) -> list[Candidate]:
    """The k fastest distinct ok configs, plus the baseline (re-measured for a fair speedup)."""
    ok = [t for t in trials if t.state == TrialState.COMPLETE
          and (t.user_attrs.get("result") or {}).get("status") == "ok"
          and "duplicate_of" not in t.user_attrs]
    ok.sort(key=lambda t: -(t.value or 0.0))
    chosen: list[FrozenTrial] = []
    seen: list[dict[str, Any]] = []
    for t in ok:
        if t.user_attrs["config"] not in seen:
            seen.append(t.user_attrs["config"])
            chosen.append(t)
        if len(chosen) == k:
            break
    base = next((t for t in ok if t.user_attrs.get("baseline")), None)
    if base is not None and base not in chosen:
        chosen.append(base)
    return [
        Candidate(trial=t.number, config=TrainConfig(**t.user_attrs["config"]),
                  search_throughput=float(t.value or 0.0),
                  duration_seconds=float(t.user_attrs["result"].get("duration_seconds") or 0.0),
                  baseline=bool(t.user_attrs.get("baseline")))
        for t in chosen
    ]


def estimate_seconds(cands: Sequence[Candidate], repeats: int) -> float:
    """What confirming these would take, judged by how long their trials took."""
    return repeats * sum(c.duration_seconds for c in cands)


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
) -> list[dict[str, Any]]:
    """Run each candidate `repeats` times in a shuffled order; one summary dict per candidate,
    fastest (by median) first."""
    order = [c for c in cands for _ in range(repeats)]
    random.Random(seed).shuffle(order)
    runs: dict[int, list[TrialResult]] = {c.trial: [] for c in cands}
    for i, cand in enumerate(order):
        request = TrialRequest(adapter=str(adapter), config=cand.config, device=device,
                               measure=measure, number=cand.trial, diagnose=False)
        # Generous but bounded: twice what the trial took, compile caches are warm by now.
        limit = min(trial_timeout, 2 * cand.duration_seconds + 60)
        result = runner.run(request, out / "confirm" / f"{i:02d}-trial{cand.trial}", timeout=limit)
        runs[cand.trial].append(result)
        if on_result is not None:
            on_result(cand, result)
        if result.status is Status.INTERRUPTED:
            break
    summary = []
    for c in cands:
        values = [r.throughput for r in runs[c.trial] if r.status is Status.OK and r.throughput]
        summary.append({
            "trial": c.trial,
            "baseline": c.baseline,
            "search_throughput": c.search_throughput,
            "throughputs": values,
            "median": statistics.median(values) if values else None,
            "spread": relative_spread(values) if len(values) > 1 else None,
            "statuses": [r.status.value for r in runs[c.trial]],
        })
    summary.sort(key=lambda s: -(s["median"] or 0.0))
    return summary
