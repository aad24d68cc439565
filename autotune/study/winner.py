"""Which config the study hands back: the confirmed winner, else the search's fastest trial."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from autotune.study.records import ConfirmationEntry, TrialRecord

__all__ = ["Winner", "best_and_baseline", "pick_winner"]


@dataclasses.dataclass(frozen=True)
class Winner:
    """The config best.yaml reports, with the figures it is judged on."""

    record: TrialRecord
    throughput: float
    baseline: float | None
    confirmation: list[ConfirmationEntry] | None
    """Repeated runs of the top configs after the search (None until confirmed)."""

    @property
    def speedup(self) -> float | None:
        return self.throughput / self.baseline if self.baseline else None


def best_and_baseline(records: Sequence[TrialRecord]) -> tuple[TrialRecord | None, float | None]:
    """The fastest ok trial of the search, and the baseline's throughput (None if not ok)."""
    ok = [r for r in records if r.ok]
    best = max(ok, key=lambda r: r.value or 0.0, default=None)
    baseline = next((r.value for r in ok if r.baseline), None)
    return best, baseline


def pick_winner(records: Sequence[TrialRecord],
                confirmation: list[ConfirmationEntry] | None) -> Winner | None:
    """The confirmed winner when the last run confirmed, else the search's fastest trial."""
    best, baseline = best_and_baseline(records)
    if confirmation:
        ranked = [c for c in confirmation if c.median]
        by_number = {r.number: r for r in records}
        if ranked and ranked[0].trial in by_number:
            base = next((c.median for c in ranked if c.baseline), baseline)
            return Winner(by_number[ranked[0].trial], ranked[0].median or 0.0, base,
                          confirmation)
    if best is None:
        return None
    return Winner(best, float(best.value or 0.0), baseline, None)
