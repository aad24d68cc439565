"""What a runner is: the `Runner` protocol the search drives trials through, every
capability declared (stop, prune, close, start ahead), and `RunnerBase`, its defaults."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from autotune.contract.request import TrialRequest
from autotune.contract.result import TrialResult
from autotune.study.execution.tail import EventCallback

__all__ = ["EventCallback", "Runner", "RunnerBase"]


class Runner(Protocol):
    """What the search asks of a way to run trials; `RunnerBase` gives what a runner that
    cannot stop, prune or start ahead does."""

    @property
    def prunes(self) -> bool:
        """Whether `prune` stops a running trial: only then are its windows reported to the
        pruner (a runner that cannot prune runs every trial to its end)."""
        ...

    @property
    def starts_ahead(self) -> bool:
        """Whether each run's process is started during the run before it (`SpareRunner`)."""
        ...

    @property
    def start_seconds(self) -> float | None:
        """What starting a trial's process took here, once measured (a fork server's)."""
        ...

    def run(
        self,
        request: TrialRequest,
        trial_dir: Path,
        *,
        timeout: float,
        on_event: EventCallback | None = None,
    ) -> TrialResult: ...

    def interrupt(self, reason: str) -> None:
        """Stop the running trial (from a signal handler): it ends as `interrupted`."""
        ...

    def prune(self, reason: str) -> None:
        """Stop the running trial early, as `pruned` (see `prunes`)."""
        ...

    def close(self) -> None:
        """Stop whatever the runner keeps between runs (a server, a spare process)."""
        ...


class RunnerBase:
    """The defaults of `Runner`: nothing to interrupt, prune or close, each process started
    when its run starts, its start-up not measured."""

    prunes: bool = False
    starts_ahead: bool = False
    start_seconds: float | None = None

    def interrupt(self, reason: str) -> None:
        """Nothing runs apart from the caller's own thread: nothing to stop."""

    def prune(self, reason: str) -> None:
        """Not able to stop a trial early (`prunes` is False)."""

    def close(self) -> None:
        """Nothing kept between runs."""
