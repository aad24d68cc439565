"""How long an eager trial of a config will likely take, from the eager trials measured here.

The time-left check before a trial (`Objective`) modelled only compiles, so an eager config whose
knob makes every trial slow to start was started with too little left and cut in its first
step: MobileNetV3 on an H200 (2026-11-28, run 4, #14), cuDNN's benchmark with 12 s left, where
the one trial with that knob had taken 37 s (24 s of warm-up against 4 s without it).

Each knob value of the config that an eager trial here ran with says: a trial with it took at
least the quickest of those trials. The config takes at least the largest of those minimums.
Values no eager trial ran with say nothing (a batch size never tried is not guessed).
"""

from __future__ import annotations

from collections.abc import Sequence

from autotune.contract.config import KNOBS, TrainConfig
from autotune.study.store.records import MeasuredRecord, TrialRecord, measured

__all__ = ["eager_seconds", "quickest_seconds"]


def _seconds(record: TrialRecord) -> float | None:
    """What the trial took to give its rate: its duration, less its diagnosis (which a trial
    slower than the best skips)."""
    result = record.result
    if result is None or not result.duration_seconds:
        return None
    return max(0.0, result.duration_seconds - result.phases.get("diagnosis", 0.0))


def eager_seconds(config: TrainConfig, finished: Sequence[TrialRecord]
                  ) -> tuple[float, str, int] | None:
    """For an eager `config`: the least seconds a trial of it likely takes, the knob value
    that says so ("cudnn_benchmark=True") and the trial that took them. None for a compiled
    config, or when no knob value of it ran eagerly here."""
    if config.graph is not None:
        return None
    eager = [(r, s) for r, s in _timed(finished) if r.config.graph is None]
    worst: tuple[float, str, int] | None = None
    for spec in KNOBS:
        value = getattr(config, spec.name)
        alike = [(s, r.number) for r, s in eager if getattr(r.config, spec.name) == value]
        if not alike:
            continue
        least, number = min(alike)
        if worst is None or least > worst[0]:
            worst = (least, f"{spec.name}={value}", number)
    return worst


def quickest_seconds(finished: Sequence[TrialRecord]) -> float | None:
    """The least seconds a trial here took to give its rate (None before any did). With less
    left, `eager_seconds` and the compile estimate hold back every config the sampler can
    propose, so the search ends there, and the confirmation has the rest, not up to
    `CONVERGED_REPEATS` proposals in a row each "not run" (a held-out DeepLabV3 on an H200 had
    ten such rows in its last 13 s, 2026-11-29, run 2: there configs of 9 s still fit, which
    the exploration after such a row now proposes, `explore.exploration`)."""
    return min((s for _, s in _timed(finished)), default=None)


def _timed(finished: Sequence[TrialRecord]) -> list[tuple[MeasuredRecord, float]]:
    """The trials measured here to the end, not copies, with the seconds each took."""
    return [(r, s) for r in measured(finished)
            if r.ok and r.duplicate_of is None and (s := _seconds(r)) is not None]
