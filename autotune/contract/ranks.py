"""The ranks of a DDP trial: what each leaves in the trial folder, and how their outcomes make
the trial's one outcome.

Each rank writes `ranks/<rank>.pid` as it starts (its pid leads its own process group, as
`torch.distributed.run` starts each rank in a session of its own: the parent kills each group)
and `ranks/<rank>.json` (its own outcome) as it stops. The ranks then agree on the trial's
outcome and rank 0 writes `result.json`; when they cannot agree (a rank died or hangs), the
parent merges the rank files the same way (`merge_ranks`).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from autotune.contract.files import atomic_write_text
from autotune.contract.result import Status, TrialResult

__all__ = ["RANKS_DIR", "RankOutcome", "merge_ranks", "pid_path", "read_pids", "read_ranks",
           "waited_only"]

RANKS_DIR = "ranks"

# Which rank's own failure is the trial's when several ranks failed: running out of memory on
# any rank is the trial's OOM (the config does not fit), then an error, then a non-finite loss.
_CAUSE_ORDER = (Status.OOM, Status.ERROR, Status.NAN, Status.CRASHED, Status.TIMEOUT)


@dataclasses.dataclass(frozen=True, kw_only=True)
class RankOutcome:
    """One rank's own outcome."""

    rank: int
    result: TrialResult
    waited: str = ""
    """Why it failed, when only because of another rank: "timeout" (a collective timed out
    waiting for it), "gone" (its connection closed), "stopped" (it said it was leaving). Such a
    rank is not the cause. "": its own outcome."""

    def to_dict(self) -> dict[str, Any]:
        return {"rank": self.rank, "waited": self.waited, "result": self.result.to_dict()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RankOutcome:
        return cls(rank=int(data["rank"]), waited=str(data["waited"]),
                   result=TrialResult.from_dict(data["result"]))

    def save(self, trial_dir: Path) -> None:
        folder = trial_dir / RANKS_DIR
        folder.mkdir(exist_ok=True)
        atomic_write_text(folder / f"{self.rank}.json", json.dumps(self.to_dict(), indent=2))


def pid_path(trial_dir: Path, rank: int) -> Path:
    return trial_dir / RANKS_DIR / f"{rank}.pid"


def read_pids(trial_dir: Path) -> list[int]:
    """The pids the ranks recorded (each leads its own process group)."""
    pids = []
    for path in sorted((trial_dir / RANKS_DIR).glob("*.pid")):
        try:
            pids.append(int(path.read_text()))
        except (OSError, ValueError):
            continue  # being written as the rank was killed
    return pids


def read_ranks(trial_dir: Path) -> list[RankOutcome]:
    """The outcomes the ranks wrote, by rank."""
    outcomes = []
    for path in (trial_dir / RANKS_DIR).glob("*.json"):
        try:
            outcomes.append(RankOutcome.from_dict(json.loads(path.read_text())))
        except (OSError, ValueError, KeyError):
            continue
    return sorted(outcomes, key=lambda o: o.rank)


def merge_ranks(outcomes: Sequence[RankOutcome], *, collective_timeout: float | None = None
                ) -> TrialResult:
    """The trial's outcome from its ranks' own.

    All ok: rank 0's result (its windows are already the global rate, agreed by every rank),
    with the largest peak memory of any rank. Otherwise the cause: the failure of a rank that
    did not merely wait for another, OOM first, its reason prefixed with its rank. When every
    failed rank only waited: a timeout if one waited past the collective timeout (a rank is
    stuck, or far slower), else a crash (a rank went away).
    """
    if not outcomes:
        raise ValueError("no rank outcome to merge")
    ordered = sorted(outcomes, key=lambda o: o.rank)
    memory = {name: _largest(getattr(o.result, name) for o in ordered)
              for name in ("peak_allocated_mb", "peak_reserved_mb", "peak_rss_mb")}
    if all(o.result.status is Status.OK for o in ordered):
        return ordered[0].result.replace(**memory)
    causes = [o for o in ordered if o.result.status is not Status.OK and not o.waited]
    if causes:
        cause = min(causes, key=lambda o: (_rank_of(o.result.status), o.rank))
        return cause.result.replace(reason=f"rank {cause.rank}: {cause.result.reason}", **memory)
    return waited_only(ordered, collective_timeout=collective_timeout, **memory)


def waited_only(outcomes: Sequence[RankOutcome], *, collective_timeout: float | None,
                missing: Sequence[int] = (), **fields: Any) -> TrialResult:
    """The trial's outcome when the ranks that reported only waited for others (`missing`:
    the ranks that left no outcome)."""
    waiting = [o for o in outcomes if o.waited]
    first = waiting[0] if waiting else None
    said = f" (rank {first.rank}: {first.result.reason})" if first else ""
    who = f"rank(s) {list(missing)}" if missing else "a rank"
    if any(o.waited == "timeout" for o in waiting):
        limit = f" of {collective_timeout:g} s" if collective_timeout is not None else ""
        return TrialResult(
            status=Status.TIMEOUT, unit=first.result.unit if first else "samples",
            reason=f"{who} did not reach a collective within its timeout{limit}: stuck, or far "
            f"slower than the others{said}", **fields)
    return TrialResult(
        status=Status.CRASHED, unit=first.result.unit if first else "samples",
        reason=f"{who} stopped without an outcome (see the log){said}", **fields)


def _rank_of(status: Status) -> int:
    return _CAUSE_ORDER.index(status) if status in _CAUSE_ORDER else len(_CAUSE_ORDER)


def _largest(values: Any) -> float | None:
    present = [v for v in values if v is not None]
    return max(present) if present else None
