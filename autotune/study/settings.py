"""What a search is asked to do (`SearchSettings`, and how its trials and confirmation runs are
timed) and whom it tells (`SearchListener`)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Protocol

from autotune.contract.config import TrainConfig
from autotune.contract.events import TrialEvent
from autotune.contract.request import MeasureSettings
from autotune.contract.result import TrialResult
from autotune.study.confirmation.candidate import Candidate
from autotune.study.confirmation.winner import Winner
from autotune.study.execution.layout import Layout
from autotune.study.store.storage import Heartbeat, absolute_storage

__all__ = ["CONFIRM_WINDOW_SECONDS", "SEARCH_WINDOW_SECONDS", "SearchListener", "SearchSettings",
           "confirm_measurement", "search_measurement"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class SearchSettings:
    adapter: Path
    """The adapter file."""
    space_source: str
    """The space file (recorded in the study)."""
    device: str
    """"cuda" or "cpu"."""
    out: Path
    """Output folder: best.yaml, trials.csv, throughput.png, trials/<n>/."""
    storage: str
    """Optuna storage URL or file."""
    study_name: str
    trials: int = 20
    """Stop once the study holds this many finished trials (resumed runs count earlier ones)."""
    timeout: float | None = None
    """Seconds for this invocation; no trial starts after, a running one is cut at the deadline."""
    trial_timeout: float = 300.0
    """Seconds one trial may take, start-up and compile included."""
    seed: int | None = None
    measure: MeasureSettings = MeasureSettings()
    confirm: int = 3
    """After the search, re-run this many top configs (and the baseline); 0 skips it."""
    confirm_repeats: int = 2
    """Fresh runs the winner needs before its lead may be called clear; a config clearly
    behind stops after one."""
    confirm_max_repeats: int | None = None
    """Most runs of a config while the lead stays unclear (None: 2 x confirm_repeats + 1)."""
    confirm_measure: MeasureSettings | None = None
    """Measurement of the confirmation runs (None: `measure`); may be longer than the search's."""
    prune: bool = True
    """Stop trials clearly slower than the best after their first windows."""
    guided: bool = True
    """Start from the baseline and the hand recipe and follow their diagnoses before the
    sampler takes over (False: the baseline, then the sampler alone)."""
    sampler: str = "tpe"
    """"tpe" (multivariate TPE) or "random"."""
    cpus: int | None = None
    """CPUs each trial may use (the hand recipe's workers follow); None: the layout's share."""
    nproc_per_node: int = 1
    """DDP ranks per trial (the runner starts them); the layout a result holds for."""
    heartbeat: Heartbeat = Heartbeat()
    """Heartbeats of running trials on a server database: a search that stops sending them
    (its host died) has its trial failed by the others."""
    layout: Layout | None = None
    """Where trials run: one slot per GPU with its share of the CPUs (None: one at a time)."""

    def __post_init__(self) -> None:
        layout = Layout.single(self.cpus) if self.layout is None else self.layout
        object.__setattr__(self, "layout", layout)
        if self.cpus is None:
            object.__setattr__(self, "cpus", layout.cpus_per_trial)
        # One name for the storage whatever the working directory (study.yaml records it).
        object.__setattr__(self, "storage", absolute_storage(self.storage))
        if self.confirm < 0 or self.confirm_repeats < 1 or (
                self.confirm_max_repeats is not None
                and self.confirm_max_repeats < self.confirm_repeats):
            raise ValueError(f"need confirm >= 0 and 1 <= confirm_repeats <= confirm_max_repeats, "
                             f"got {self.confirm=}, {self.confirm_repeats=}, "
                             f"{self.confirm_max_repeats=}")
        if self.trials < 1:
            raise ValueError(f"trials must be at least 1, got {self.trials=}")
        if self.timeout is not None and self.timeout <= 0:
            raise ValueError(f"timeout must be positive, got {self.timeout=}")
        if self.trial_timeout <= 0:
            raise ValueError(f"trial_timeout must be positive, got {self.trial_timeout=}")
        if self.device not in ("cuda", "cpu"):
            raise ValueError(f"device must be cuda or cpu, got {self.device=}")
        if self.sampler not in ("tpe", "random"):
            raise ValueError(f"sampler must be tpe or random, got {self.sampler=}")

    @property
    def trial_layout(self) -> Layout:
        """`layout`, always set once built (`__post_init__` fills in one slot when not given)."""
        if self.layout is None:  # only while __post_init__ runs
            raise RuntimeError("SearchSettings.layout is read before it is set")
        return self.layout


SEARCH_WINDOW_SECONDS = 0.5
"""Seconds of a search trial's timed window."""

CONFIRM_WINDOW_SECONDS = 1.0
"""Seconds of a confirmation run's timed window: longer than the search's, because the search
ranks configs and the confirmation reports the winner's rate."""


def search_measurement(*, budget_seconds: float, tolerance: float) -> MeasureSettings:
    """How a search trial is timed: windows until the median is known to `tolerance`, or for
    at most `budget_seconds` (the user's --measure-seconds, --search-tolerance)."""
    return MeasureSettings(window_seconds=SEARCH_WINDOW_SECONDS, budget_seconds=budget_seconds,
                           tolerance=tolerance)


def confirm_measurement(*, budget_seconds: float, tolerance: float) -> MeasureSettings:
    """How a confirmation run is timed (the user's --confirm-measure-seconds, --tolerance)."""
    return MeasureSettings(window_seconds=CONFIRM_WINDOW_SECONDS, budget_seconds=budget_seconds,
                           tolerance=tolerance)


class SearchListener(Protocol):
    """Progress reporting (the rich display, or nothing in tests)."""

    def started(self, settings: SearchSettings, done: int, unit: str) -> None: ...
    def trial_started(self, number: int, config: TrainConfig, limit: float) -> None: ...
    def trial_event(self, number: int, event: TrialEvent) -> None: ...
    def trial_finished(self, number: int, result: TrialResult, winner: Winner | None) -> None: ...
    def confirm_started(self, cands: list[Candidate], repeats: int) -> None: ...
    def confirm_result(self, cand: Candidate, result: TrialResult) -> None: ...
    def finished(self, winner: Winner | None, *, interrupted: bool = False) -> None: ...
