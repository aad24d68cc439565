"""One rank's place in a DDP trial: its process groups, the lockstep agreements, the outcome.

Every rank (started by `autotune.trial.distributed`) composes the same config with its model in
`DistributedDataParallel` and measures in lockstep with the others (`measure`'s `gather`): each
window counts the items of every rank over the slowest rank's seconds, the global rate.
Whatever happens, the ranks then agree on the outcome before they stop: an OOM on any rank is
the trial's OOM.

Two process groups: the training one (NCCL on CUDA, gloo on a CPU) that DDP all-reduces
over, and a gloo one for the agreements, whose collectives all have one shape, so a rank that
stops can always meet the others wherever they wait. Collectives time out after the request's
`collective_timeout` (the agreements after twice that: a rank stuck in a training collective
reaches them only when that one times out): a stuck rank surfaces as an error in its peers.
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist

from autotune.contract.ranks import RankOutcome, merge_ranks
from autotune.contract.request import TrialRequest
from autotune.contract.result import TrialResult
from autotune.trial.features.ddp import apply_ddp, ddp_kwargs

__all__ = ["PeerStopped", "Rank", "collective_failure"]

_RUNNING, _LEAVING = 0.0, 1.0
_WIDTH = 8
"""Numbers in every agreement: a state, then up to 7 values."""

# What gloo raises (a RuntimeError: it has no exception type of its own) when a peer did not
# come in time, and when one has gone; NCCL's failures arrive as torch.distributed.DistError.
_TIMED_OUT = ("Timed out waiting", "timeout caused pair closure", "Watchdog caught collective "
              "operation timeout")
_GONE = ("Connection closed by peer", "Connection reset by peer", "pair closure")


class PeerStopped(Exception):
    """Another rank stopped (it failed, or finished) while this one was still measuring."""


def collective_failure(exc: BaseException) -> str:
    """How a collective failed because of another rank: "stopped" (it said it was leaving),
    "timeout" (it did not come in time), "gone" (its connection closed); "" for anything else."""
    if isinstance(exc, PeerStopped):
        return "stopped"
    if not isinstance(exc, (RuntimeError, dist.DistError)):
        return ""
    text = str(exc)
    if any(m in text for m in _TIMED_OUT):
        return "timeout"
    if any(m in text for m in _GONE) or isinstance(exc, dist.DistError):
        return "gone"
    return ""


class Rank:
    """This process's place in the trial: set up by `run_trial` once torch is imported."""

    def __init__(self, request: TrialRequest) -> None:
        self.rank = int(os.environ["RANK"])
        self.world_size = int(os.environ["WORLD_SIZE"])
        self.local_rank = int(os.environ["LOCAL_RANK"])
        self.timeout = request.collective_timeout
        c = request.config
        self.knobs = ddp_kwargs(bucket_cap_mb=c.bucket_cap_mb, static_graph=c.static_graph,
                                gradient_as_bucket_view=c.gradient_as_bucket_view)
        self.control: Any = None
        self.waited = ""
        """How this rank's failure was only a consequence of another rank's (see
        `collective_failure`), or "" when it was its own."""
        self._device = torch.device("cpu")

    def device(self, kind: str) -> torch.device:
        """The device this rank trains on: its own GPU (`LOCAL_RANK`), or the CPU."""
        self._device = torch.device(kind, self.local_rank) if kind == "cuda" else torch.device(kind)
        return self._device

    def setup(self) -> None:
        """Join the training process group and the agreement group."""
        device = self._device
        cuda = device.type == "cuda"
        if cuda:
            torch.cuda.set_device(device)
        dist.init_process_group("nccl" if cuda else "gloo",
                                timeout=datetime.timedelta(seconds=self.timeout),
                                device_id=device if cuda else None)
        self.control = dist.new_group(backend="gloo",
                                      timeout=datetime.timedelta(seconds=2 * self.timeout))

    def wrap(self, model: torch.nn.Module) -> torch.nn.Module:
        return apply_ddp(model, self._device, **self.knobs)

    def _exchange(self, state: float, values: tuple[float, ...]) -> list[list[float]]:
        row = torch.zeros(_WIDTH, dtype=torch.float64)
        row[0] = state
        row[1:1 + len(values)] = torch.tensor(values, dtype=torch.float64)
        rows = [torch.empty_like(row) for _ in range(self.world_size)]
        dist.all_gather(rows, row, group=self.control)
        return [r.tolist() for r in rows]

    def gather(self, values: tuple[float, ...]) -> list[tuple[float, ...]]:
        """Every rank's `values`, in rank order; raises `PeerStopped` when another rank is
        leaving instead (it failed, and waits to agree on it)."""
        rows = self._exchange(_RUNNING, values)
        gone = [i for i, r in enumerate(rows) if r[0] != _RUNNING]
        if gone:
            raise PeerStopped(f"rank(s) {gone} stopped while this one was measuring")
        return [tuple(r[1:1 + len(values)]) for r in rows]

    def agreed(self, finite: Callable[[], bool]) -> Callable[[], bool]:
        """`finite`, true only when it is true on every rank (all stop together on a NaN)."""
        return lambda: all(v[0] > 0 for v in self.gather((float(finite()),)))

    def failed(self, exc: BaseException) -> None:
        """Note why the trial failed here (called with the exception that ended it)."""
        self.waited = collective_failure(exc)

    def agree(self, outcome: RankOutcome) -> TrialResult | None:
        """Wait until every rank is leaving, then merge all their outcomes (every rank gets the
        same). None when the others cannot be reached: the parent merges the rank files."""
        if self.control is None:
            return None
        try:
            while not all(r[0] == _LEAVING for r in self._exchange(_LEAVING, ())):
                pass  # a rank still measuring meets this in its gather, and leaves too
            everyone: list[Any] = [None] * self.world_size
            dist.all_gather_object(everyone, outcome.to_dict(), group=self.control)
        except RuntimeError as exc:  # a rank died or hangs: the agreement timed out
            print(f"autotune rank {self.rank}: the ranks could not agree: {exc}", flush=True)
            return None
        return merge_ranks([RankOutcome.from_dict(o) for o in everyone],
                           collective_timeout=self.timeout)

    def close(self) -> None:
        if dist.is_initialized():
            dist.destroy_process_group()
