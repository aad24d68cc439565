"""Trials side by side: one thread per slot drives that slot's runner; the search's own thread
asks, tells and schedules.

The thread of a slot only waits on its trial process (the runner polls it), so the GIL is no
bottleneck; Optuna's storages are safe to call from several threads (its own `n_jobs` does so).
`GangRunner` runs one config on every slot at once: the confirmation of a multi-GPU search,
measured as an N-rank job on this host would run.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any, Generic, TypeVar

from autotune.contract.config import TrainConfig
from autotune.contract.request import TrialRequest
from autotune.contract.result import Status, TrialResult
from autotune.study.execution.forkserver import ForkServerRunner
from autotune.study.execution.layout import Layout
from autotune.study.execution.protocol import EventCallback, Runner, RunnerBase
from autotune.study.execution.runner import SubprocessRunner
from autotune.study.execution.spare_runner import SpareRunner

__all__ = ["GangRunner", "Job", "Slots", "combine", "slot_runners"]

# How often the search's thread wakes while every slot is busy (to run signal handlers).
POLL_SECONDS = 0.2

T = TypeVar("T")
R = TypeVar("R")


@dataclasses.dataclass(frozen=True, kw_only=True)
class Job(Generic[T]):
    """A trial on a slot, or parked until its twin (the same config on another slot) ends."""

    item: T
    config: TrainConfig
    """The config it measures: never the same on two slots at once."""
    slot: int = -1
    budget_cut: bool = False
    """Its time limit was cut to the study's remaining budget."""
    limit: float | None = None
    """The time limit it started with (None: not started yet)."""


class Slots(Generic[T, R]):
    """A fixed number of slots, each running at most one job (a callable) at a time, and the
    jobs parked because their config was running on another slot."""

    def __init__(self, count: int) -> None:
        if count < 1:
            raise ValueError(f"need at least one slot, got {count=}")
        self._pool = ThreadPoolExecutor(max_workers=count, thread_name_prefix="autotune-slot")
        self._free = list(range(count))
        self._jobs: dict[Future[R], Job[T]] = {}
        self.parked: list[Job[T]] = []

    def __enter__(self) -> Slots[T, R]:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def free(self) -> int | None:
        """A slot with nothing running (the lowest), or None when every slot is busy."""
        return min(self._free) if self._free else None

    @property
    def running(self) -> list[Job[T]]:
        return list(self._jobs.values())

    def twin(self, config: TrainConfig) -> Job[T] | None:
        """The running job measuring `config`, if any."""
        return next((job for job in self._jobs.values() if job.config == config), None)

    def park(self, item: T, config: TrainConfig) -> None:
        self.parked.append(Job(item=item, config=config))

    def release(self) -> Job[T] | None:
        """Unpark the first parked job whose config no longer runs (its twin left no result
        to copy: it runs itself now)."""
        job = next((j for j in self.parked if self.twin(j.config) is None), None)
        if job is not None:
            self.parked.remove(job)
        return job

    def start(self, slot: int, job: Job[T], run: Callable[[], R]) -> None:
        if slot not in self._free:
            raise ValueError(f"slot {slot} is busy or does not exist")
        self._free.remove(slot)
        self._jobs[self._pool.submit(run)] = dataclasses.replace(job, slot=slot)

    def wait(self) -> list[tuple[Job[T], Future[R]]]:
        """Block until at least one job has ended; those jobs, their slots free again.
        `future.result()` gives the job's return value or raises its exception."""
        if not self._jobs:
            return []
        done: set[Future[R]] = set()
        while not done:
            # Short waits: a signal may be delivered to a slot's thread, and Python runs its
            # handler on this thread only when this thread runs again.
            done, _ = wait(list(self._jobs), timeout=POLL_SECONDS, return_when=FIRST_COMPLETED)
        ended = []
        for future in sorted(done, key=lambda f: self._jobs[f].slot):
            job = self._jobs.pop(future)
            self._free.append(job.slot)
            ended.append((job, future))
        return ended

    def close(self) -> None:
        """Wait for the running jobs (callers stop their runners first) and end the threads."""
        self._pool.shutdown(wait=True)


class GangRunner(RunnerBase):
    """A `Runner` that runs each request on every slot at once, the same config on each: one
    process per GPU, each with its own CPUs, as the ranks of a job on this host share it.

    Its result is the slowest slot's (a synchronized job steps at the pace of its slowest
    rank), or the first slot's failure; the reason lists every slot's rate.
    """

    def __init__(self, runners: Sequence[Runner], names: Sequence[str] | None = None) -> None:
        if not runners:
            raise ValueError("a gang needs at least one runner")
        self.runners = list(runners)
        self.names = list(names or [f"slot{i}" for i in range(len(runners))])
        self.starts_ahead = all(r.starts_ahead for r in self.runners)
        # One pool for the gang's life: a process started from a thread dies with that thread
        # (Linux's parent-death signal follows the thread), and a slot's spare process, started
        # during one run, must outlive the run's thread to be the next run.
        self._pool = ThreadPoolExecutor(max_workers=len(self.runners),
                                        thread_name_prefix="autotune-gang")

    def run(self, request: TrialRequest, trial_dir: Path, *, timeout: float,
            on_event: EventCallback | None = None) -> TrialResult:
        trial_dir.mkdir(parents=True, exist_ok=True)
        futures = [self._pool.submit(runner.run, request, trial_dir / name, timeout=timeout)
                   for runner, name in zip(self.runners, self.names)]
        while not all(f.done() for f in futures):
            wait(futures, timeout=POLL_SECONDS)  # let signal handlers run (see Slots.wait)
        results = [f.result() for f in futures]
        result = combine(results, self.names)
        result.save(trial_dir / "result.json")
        return result

    def interrupt(self, reason: str) -> None:
        for runner in self.runners:
            runner.interrupt(reason)

    def close(self) -> None:
        for runner in self.runners:
            runner.close()
        self._pool.shutdown(wait=True)


def combine(results: Sequence[TrialResult], names: Sequence[str]) -> TrialResult:
    """One result for a config run on several slots at once."""
    for name, result in zip(names, results):
        if result.status is not Status.OK or not result.throughput:
            return result.replace(reason=f"on {name}: {result.reason}".rstrip(": "))
    rates = [r.throughput or 0.0 for r in results]
    slowest = min(range(len(results)), key=lambda i: rates[i])
    each = ", ".join(f"{name} {rate:.4g}/s" for name, rate in zip(names, rates))
    return results[slowest].replace(
        reason=f"the slowest of {len(results)} concurrent runs ({each}; median "
               f"{statistics.median(rates):.4g}/s)")


def slot_runners(layout: Layout, *, out: Path, cache_dir: Path | None, ahead: bool = True
                 ) -> tuple[list[ForkServerRunner], Runner]:
    """The search's runners, one fork server per slot (pinned to its GPU and CPUs: every trial
    it forks inherits them), and the confirmation's: fresh processes, each started one run
    ahead when `ahead` (a GPU device: `SpareRunner`), on every slot at once when there are
    several, as the ranks of a job in this layout would run."""
    one = layout.concurrent == 1
    search = [ForkServerRunner(log=out / ("forkserver.log" if one else f"forkserver-{s.name}.log"),
                               cache_dir=cache_dir, env=s.env()) for s in layout.slots]
    fresh: list[Runner] = [
        SpareRunner(log=out / ("spares.log" if one else f"spares-{s.name}.log"),
                    cache_dir=cache_dir, env=s.env()) if ahead
        else SubprocessRunner(cache_dir=cache_dir, env=s.env())
        for s in layout.slots]
    return search, fresh[0] if one else GangRunner(fresh, [s.name for s in layout.slots])
