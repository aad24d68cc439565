"""An input-bound best's loader steps: how many workers, how deep a prefetch, and the training
process's threads beside the workers (`starts.follow_ups` climbs them)."""

from __future__ import annotations

from autotune.contract.config import TrainConfig
from autotune.study.space.bound import SearchSpace
from autotune.study.store.records import TrialRecord

__all__ = ["CPU_HEADROOM", "free_workers", "loader_climb", "most_workers", "threads_beside"]

CPU_HEADROOM = 0.9
"""An input-bound step at the free cores whose CPUs are busier than this has no core left to
give its loader: every core loading is not tried."""


def loader_climb(space: SearchSpace, config: TrainConfig, best: TrialRecord,
                 cpus: int | None) -> list[TrainConfig]:
    """An input-bound best's loader steps: the free cores loading, the deepest prefetch, and
    every core when the free ones are loading and the CPUs still have room (the main process
    then shares a core: on an H100 a held-out ResNet-18 was fastest at 12-15 workers of 16)."""
    climb = []
    free, most = free_workers(space, cpus), most_workers(space)
    if free > config.num_workers:
        climb.append(space.changed(config, num_workers=free))
    prefetch = max((p for p in space.values("prefetch_factor") if p), default=None)
    if prefetch and (config.prefetch_factor or 2) < prefetch and config.num_workers:
        climb.append(config.replace(prefetch_factor=prefetch))
    threads = threads_beside(space, config, cpus)
    if threads is not None:
        climb.append(threads)
    diagnosis = best.result.diagnosis if best.result is not None else None
    busy = diagnosis.cpu_busy_fraction if diagnosis is not None else None
    if free <= config.num_workers < most and (busy is None or busy < CPU_HEADROOM):
        climb.append(space.changed(config, num_workers=most))
    return climb


def threads_beside(space: SearchSpace, config: TrainConfig, cpus: int | None
                   ) -> TrainConfig | None:
    """`config` with the training process's intra-op threads on the cores its loader workers
    leave (at least one), when the space searches them and that is a change. PyTorch starts a
    thread per core, and each competes with a worker for it: an augmenting loader on a 2-core
    host ran 5.5k images/s with two workers and one thread, 4.2k with two threads (the
    loader in the training process: 3.2k; torch 2.13, 2026-11-25)."""
    if cpus is None or config.num_workers == 0 or len(space.values("intra_op_threads")) < 2:
        return None
    threads = space.changed(config, intra_op_threads=max(1, cpus - config.num_workers))
    return threads if threads != config and space.holds(threads) else None


def most_workers(space: SearchSpace) -> int:
    """Every core loading: the most loader workers the space holds."""
    return max((w for w in space.values("num_workers") if isinstance(w, int)), default=0)


def free_workers(space: SearchSpace, cpus: int | None) -> int:
    """The free cores loading: the most workers the space holds that leave one of the `cpus`
    to the main process (all of them when `cpus` is not known, or the space holds none such)."""
    workers = [w for w in space.values("num_workers") if isinstance(w, int)]
    free = [w for w in workers if cpus is None or w <= max(1, cpus - 1)]
    return max(free or workers, default=0)
