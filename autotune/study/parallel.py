"""The search loop's scheduling: keep every slot busy while the budget lasts.

`SlotLoop` is the part of `Search` that fills free slots (a parked trial first, then a new one
asked of the sampler), starts each trial's objective on its slot's thread, and tells trials as
they end (`Search._finish`). A trial asked while its config runs on another slot of this search
is parked, never started twice; one whose config runs in another search (another host) waits
for that one in its slot and copies its result.
"""

from __future__ import annotations

import dataclasses
from contextlib import ExitStack

import optuna
from optuna.trial import TrialState

from autotune.contract.config import TrainConfig
from autotune.contract.errors import InputError
from autotune.contract.events import TrialEvent
from autotune.contract.result import Status, TrialResult
from autotune.study.confirmation.rounds import CONFIRM_SHARE, estimate_seconds
from autotune.study.execution.slots import Job, Slots
from autotune.study.objective import Outcome
from autotune.study.policy.pruning import report_windows
from autotune.study.policy.starts import prunable
from autotune.study.store import records
from autotune.study.store.claim import running_twin, wait_finished
from autotune.study.store.recovery import take_over
from autotune.study.store.storage import ask, beating

__all__ = ["CONVERGED_REPEATS", "MIN_TRIAL_SECONDS", "SlotLoop"]

# A trial is not started with less than this left of the study's budget.
MIN_TRIAL_SECONDS = 10.0
# The search ends once this many trials in a row were configs measured before: the sampler
# has nothing new to propose (a small space, spent), and a budget would fill with copies.
CONVERGED_REPEATS = 10


class SlotLoop:
    """`Search`'s scheduling methods, apart: a mixin whose methods work on the search itself
    (its study, settings, runners and objectives, `_finish`, `_tell`, `_candidates`,
    `_confirm_costs`, `_interrupt`, `_step_over`, `_halted`); not imported from search.py, to
    keep the package free of import cycles."""

    def _search(self, slots: Slots[optuna.Trial, Outcome], deadline: float | None) -> None:
        """Keep every slot busy while the budget lasts; tell each trial as it ends."""
        try:
            while True:
                if not self._halted():
                    self._fill(slots, deadline)
                ended = slots.wait()
                if not ended:
                    break
                for job, future in ended:
                    self._finish(job, future.result(), slots)
        except BaseException:
            self._interrupt("the search stopped")  # the other slots' trials too
            raise
        finally:
            for job in slots.parked:  # never ran: it says nothing about its config
                self._tell(job.item, TrialResult(
                    status=Status.INTERRUPTED, ran=False, reason="not run: the search stopped "
                    "while its config ran on another slot"), budget_cut=True)
            for beat in self._beats.values():  # trials an exception left untold
                beat.close()
            self._beats.clear()

    def _fill(self, slots: Slots[optuna.Trial, Outcome], deadline: float | None) -> None:
        s = self.settings
        while (slot := slots.free()) is not None and not self._halted():
            limit, grace = s.trial_timeout, 0.0
            if deadline is not None:
                # Keep what confirming the current leaders will take.
                first, later, gap = self._confirm_costs()
                reserve = estimate_seconds(self._candidates(), s.confirm_repeats,
                                           measure_gap_seconds=gap, start_seconds=first,
                                           later_start_seconds=later)
                if s.timeout is not None:  # the search keeps most of the budget; confirmation
                    reserve = min(reserve, CONFIRM_SHARE * s.timeout)  # adapts to what is left
                remaining = deadline - self.clock() - reserve
                if remaining < MIN_TRIAL_SECONDS:
                    return
                limit = min(limit, remaining)
                grace = remaining - limit  # a compile may run past the limit, not the budget
            # A parked trial whose twin ended without a result to copy runs first.
            job, twin = slots.release(), None
            if job is None:
                if self.done() + len(slots.running) + len(slots.parked) >= s.trials:
                    return
                if self._repeats >= CONVERGED_REPEATS:
                    return  # the sampler only proposes measured configs: the space is spent
                trial, config, twin = self._ask()
                mine = {j.item.number for j in (*slots.running, *slots.parked)}
                if slots.twin(config) is not None or twin in mine:
                    # Never one config on two GPUs at once: it waits for the running one.
                    slots.park(trial, config)
                    return
                job = Job(item=trial, config=config)
            self._start(slots, slot, dataclasses.replace(job, budget_cut=limit < s.trial_timeout),
                        limit, twin=twin, grace=grace)

    def _ask(self) -> tuple[optuna.Trial, TrainConfig, int | None]:
        """The next trial (its heartbeat beating until it is told), its config, and a running
        trial that measures the same config (of this search or another), if any."""
        s = self.settings
        self._step_over()
        with self.lock:  # the next guided start, queued once whichever host feeds it
            self._ladder.feed(self.study, self.space, skip=self._needless)
        trial = ask(self.study)
        self._beats[trial.number] = beat = ExitStack()
        beat.enter_context(beating(self.study, trial._trial_id))
        records.write_owner(trial)
        try:
            config = self.space.suggest(trial)
        except ValueError as exc:  # Optuna: the stored study has other distributions
            self._beats.pop(trial.number).close()
            self.study.tell(trial, state=TrialState.FAIL)
            raise InputError(
                f"study {s.study_name!r} was made with another search space ({exc}); pass another "
                "--study-name, or the space it was made with"
            ) from None
        with self.lock:  # whoever writes a config second finds the first one running it
            records.write_config(trial, config)
            twin = running_twin(self.study, trial.number, config)
        return trial, config, twin

    def _start(self, slots: Slots[optuna.Trial, Outcome], slot: int, job: Job[optuna.Trial],
               limit: float, *, twin: int | None = None, grace: float = 0.0) -> None:
        trial, config = job.item, job.config
        self.listener.trial_started(trial.number, config, limit)

        def run() -> Outcome:  # in the slot's thread
            if twin is not None:
                # Another search measures this config now: its result is this one's (the
                # objective reuses it), unless it fails, and then this one measures it, in
                # its role.
                wait_finished(self.study, [twin], timeout=limit, recover=self._step_over,
                              stop=self._halted)
                take_over(self.study, self.lock, trial, twin)
            # The starts (baseline, recipe, follow-ups) are measured to the end: every ratio
            # and the search's direction depend on them.
            runner = self.runners[slot]
            report = report_windows(trial, runner.prune if runner.prunes
                                    and prunable(records.read_role(trial)) else None)

            def on_event(event: TrialEvent) -> None:
                self.listener.trial_event(trial.number, event)
                report(event)

            return self.objectives[slot](trial.number, config, limit=limit, on_event=on_event,
                                         budget_cut=job.budget_cut, compile_grace=grace,
                                         prunable=prunable(records.read_role(trial)))

        slots.start(slot, job, run)
