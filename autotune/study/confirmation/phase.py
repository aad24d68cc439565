"""The search's last phase: run the leaders again in rounds (`rounds`), each run a fresh
process, and record which config wins.

`ConfirmPhase` picks the candidates, fits them to the time left, claims the confirmation
(searches on other hosts sharing the study confirm once, the last to end), runs it and records
it in the study. It is built with what it reads: the settings it needs (`ConfirmSettings`, which
`SearchSettings` is), the study and its lock, the runners, the listener and the clock.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

import optuna

from autotune.contract.request import MeasureSettings
from autotune.contract.result import TrialResult
from autotune.study.confirmation.budget import (
    FRESH_PROCESS_SECONDS,
    fit_to_time,
    run_seconds,
    start_costs,
)
from autotune.study.confirmation.candidate import Candidate, candidates
from autotune.study.confirmation.rounds import record_confirmation, run_confirmation, summarize
from autotune.study.execution.protocol import Runner
from autotune.study.space.bound import SearchSpace
from autotune.study.store import records
from autotune.study.store.claim import Claim, StudyLock, claim_confirmation, end_confirmation, \
    wait_finished
from autotune.study.store.recovery import step_over
from autotune.study.store.storage import Heartbeat
from autotune.study.store.study_attrs import ConfirmationEntry

__all__ = ["ConfirmListener", "ConfirmPhase", "ConfirmSettings"]


class ConfirmSettings(Protocol):
    """What the confirmation reads of the search's settings (`SearchSettings` has each)."""

    @property
    def adapter(self) -> Path: ...
    @property
    def device(self) -> str: ...
    @property
    def out(self) -> Path: ...
    @property
    def seed(self) -> int | None: ...
    @property
    def trial_timeout(self) -> float: ...
    @property
    def heartbeat(self) -> Heartbeat: ...
    @property
    def measure(self) -> MeasureSettings: ...
    @property
    def confirm(self) -> int: ...
    @property
    def confirm_repeats(self) -> int: ...
    @property
    def confirm_max_repeats(self) -> int | None: ...
    @property
    def confirm_measure(self) -> MeasureSettings | None: ...


class ConfirmListener(Protocol):
    """Whom the confirmation tells (part of `SearchListener`)."""

    def confirm_started(self, cands: list[Candidate], repeats: int) -> None: ...
    def confirm_result(self, cand: Candidate, result: TrialResult) -> None: ...


class ConfirmPhase:
    """Confirms the leaders of `study` once its search trials have ended."""

    def __init__(self, *, settings: ConfirmSettings, study: optuna.Study, lock: StudyLock,
                 space: SearchSpace, listener: ConfirmListener, search_runner: Runner,
                 confirm_runner: Runner, clock: Callable[[], float],
                 signalled: Callable[[], bool]) -> None:
        self.settings = settings
        self.study = study
        self.lock = lock
        self.space = space
        self.listener = listener
        self.search_runner = search_runner
        """Its measured start-up plans what a confirmation run's start-up costs."""
        self.confirm_runner = confirm_runner
        self.clock = clock
        self.signalled = signalled
        """Whether a signal stopped the search: nothing more is run nor recorded."""
        self.confirmed_by: Claim | None = None
        """Set when another search confirms (or confirmed) the leaders instead of this one."""

    def candidates(self) -> list[Candidate]:
        if self.settings.confirm == 0:
            return []
        return candidates(records.read_records(self.study), self.settings.confirm)

    def costs(self) -> tuple[float, float, float]:
        """What a confirmation run is planned to pay beyond its search trial: the first run's
        start-up, each later run's, and the confirmation's longer measurement (its budget less
        the search's)."""
        s = self.settings
        first, later = start_costs(self.search_runner, self.confirm_runner)
        confirm = s.confirm_measure or s.measure
        return first, later, max(0.0, confirm.budget_seconds - s.measure.budget_seconds)

    def run(self, deadline: float | None) -> None:
        s = self.settings
        if s.confirm == 0:
            return
        # Searches sharing the study end their running trials first, and the last to end
        # confirms: a dead one's trial is failed by the heartbeat check meanwhile.
        wait = s.trial_timeout + s.heartbeat.grace + 30.0
        wait_finished(self.study, None, recover=self._step_over, stop=self.signalled,
                      timeout=wait if deadline is None else min(wait, deadline - self.clock()))
        cands = self.candidates()
        if not any(not c.baseline for c in cands) or self.signalled():
            return  # nothing but the baseline ran ok: nothing to confirm
        unrun: list[Candidate] = []
        if deadline is not None:  # fewer configs, so that the leader can run twice
            first, later, gap = self.costs()
            left = deadline - self.clock() - (first - later)  # the first run starts cold
            kept = fit_to_time(cands, left, lambda c: run_seconds(
                c, measure_gap_seconds=gap, start_seconds=later))
            # Those left out stay in the verdict, by their search trial alone (`lead.standing`).
            cands, unrun = kept, [c for c in cands if c not in kept]
        # The longest the confirmation may take (each run's limit is at most the trial's).
        seconds = (s.confirm_max_repeats or s.confirm_repeats) * len(cands) * (
            s.trial_timeout + FRESH_PROCESS_SECONDS)
        self.confirmed_by = claim_confirmation(self.study, self.lock,
                                               done=records.count_finished(self.study),
                                               seconds=seconds)
        if self.confirmed_by is not None:
            return  # another search confirms these trials, or did
        finished = False
        try:
            finished = self._rounds(cands, deadline, unrun)
        finally:
            end_confirmation(self.study, self.lock, finished=finished)

    def _rounds(self, cands: list[Candidate], deadline: float | None,
                unrun: Sequence[Candidate] = ()) -> bool:
        """Run the rounds and record them, with an entry of no runs for each of `unrun`;
        whether they were recorded (not when signalled)."""
        s = self.settings
        self.listener.confirm_started(cands, s.confirm_repeats)
        runs: list[tuple[Candidate, TrialResult]] = []
        # A resumed study's earlier confirmations left their folders: number on after them (from
        # 0 again, a Ctrl-C'd and resumed search's runs shared numbers, 2-CPU VM, 2026-11-28).
        folder = s.out / "confirm"
        earlier = sum(1 for _ in folder.iterdir()) if folder.is_dir() else 0

        def on_result(cand: Candidate, result: TrialResult) -> None:
            runs.append((cand, result))
            self.listener.confirm_result(cand, result)

        def confirm(these: Sequence[Candidate]) -> list[ConfirmationEntry]:
            return run_confirmation(
                these, adapter=s.adapter, device=s.device, runner=self.confirm_runner,
                out=s.out, repeats=s.confirm_repeats, max_repeats=s.confirm_max_repeats,
                trial_timeout=s.trial_timeout, measure=s.confirm_measure or s.measure,
                seed=s.seed, on_result=on_result, deadline=deadline, clock=self.clock,
                first=earlier + len(runs))

        summary = confirm(cands)
        if self.signalled():
            self._keep(runs)
            return False
        kept = [e for e in summary if not e.baseline]
        if unrun and all(e.statuses and e.median is None for e in kept):
            # Every config kept failed its fresh runs (a compile cut, an OOM): the configs left
            # out to give the leader two runs get the time left, fastest by the search first,
            # rather than the baseline alone ending as the winner. Not one that gave way to the
            # leader's runs, unrun: a config left out, slower by the search, then took the
            # time left (a token-budget loader, 2-CPU VM, 2026-11-27).
            summary += confirm(unrun)
            unrun = []
            if self.signalled():
                self._keep(runs)
                return False
        summary += summarize(unrun, {c.trial: [] for c in unrun})
        record_confirmation(self.study, summary, runs)
        return True

    def _keep(self, runs: Sequence[tuple[Candidate, TrialResult]]) -> None:
        """After a signal: the runs that ended before it, as trials (trials.csv shows them), but
        no summary nor winner: a resumed search confirms again. Dropped until then, a Ctrl-C
        during the confirmation lost every fresh run that had finished."""
        for cand, result in runs:
            if result.status.says_something:
                records.add_confirmation_run(self.study, cand.trial, result)

    def _step_over(self) -> None:
        step_over(self.study, self.lock, self.space)  # trials of searches that died (hosts)
