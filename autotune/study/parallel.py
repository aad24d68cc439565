"""The search loop's scheduling: keep every slot busy while the budget lasts.

`SlotLoop` fills free slots (a parked trial first, then a new one asked of the sampler), starts
each trial's objective on its slot's thread, and hands each trial that ends to the search (its
`finish`). A trial asked while its config runs on another slot of this search is parked, never
started twice; one whose config runs in another search (another host) waits for that one in
its slot and copies its result. `LoopState` is what the loop and the search share and change.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from typing import Any

import optuna
from optuna.trial import TrialState

from autotune.contract.config import TrainConfig
from autotune.contract.errors import InputError
from autotune.contract.events import TrialEvent
from autotune.contract.result import Status, TrialResult
from autotune.study.confirmation.phase import ConfirmPhase
from autotune.study.confirmation.budget import reserve_seconds
from autotune.study.execution.protocol import Runner
from autotune.study.execution.slots import Job, Slots
from autotune.study.objective import Objective, Outcome
from autotune.study.policy.batching import ON_DEVICE, batch_held, loader_on_device
from autotune.study.policy.eager import cannot_win, recompiling
from autotune.study.policy.pruning import report_windows
from autotune.study.policy.refused import refused
from autotune.study.policy.ladder import Ladder
from autotune.study.policy.start_cost import quickest_seconds
from autotune.study.policy.starts import prunable, stoppable
from autotune.study.policy.sampler import held, holding
from autotune.study.policy.telling import tell
from autotune.study.settings import SearchListener, SearchSettings
from autotune.study.space.bound import SearchSpace
from autotune.study.store import records
from autotune.study.store.claim import StudyLock, running_twin, wait_finished
from autotune.study.store.recovery import step_over, take_over
from autotune.study.store.records import TrialRecord
from autotune.study.store.storage import ask, beating

__all__ = ["CONVERGED_REPEATS", "MIN_TRIAL_SECONDS", "Finish", "LoopState", "SlotLoop", "TrialSlots"]

# A trial is not started with less than this left of the study's budget.
MIN_TRIAL_SECONDS = 10.0
# The search ends once this many trials in a row were configs measured before: the sampler
# has nothing new to propose (a small space, spent), and a budget would fill with copies.
CONVERGED_REPEATS = 10

TrialSlots = Slots[optuna.Trial, Outcome]
Finish = Callable[[Job[optuna.Trial], Outcome, TrialSlots], None]
"""What the search does with a trial that ended (tell it, queue what it points to)."""


@dataclasses.dataclass(kw_only=True)
class LoopState:
    """What the loop and the search share and change while it runs (mutable on purpose)."""

    signal: int | None = None
    """The signal (SIGINT, SIGTERM) that stopped the search, if one did."""
    stopped: bool = False
    """Ends the search after the running trials, without confirming."""
    repeats: int = 0
    """Trials in a row that copied an earlier trial's result (see CONVERGED_REPEATS)."""
    ladder: Ladder = dataclasses.field(default_factory=Ladder)
    """The guided follow-ups not yet run, the newest best's first."""
    beats: dict[int, ExitStack] = dataclasses.field(default_factory=dict)
    """The heartbeat of each trial asked and not yet told (a server database only)."""
    unaffordable: dict[TrainConfig, float] = dataclasses.field(default_factory=dict)
    """Configs whose compile could not finish in the time left, with the seconds it would have
    taken (`Outcome.unaffordable`, `SlotLoop._cannot_fit`). One not started is told as FAIL,
    its role free again: none is offered as a guided start again (a held-out ViT's follow-up
    came back after each of 5 explorations, 2-CPU VM, 2026-11-27)."""

    @property
    def halted(self) -> bool:
        return self.signal is not None or self.stopped


class SlotLoop:
    """Asks trials of the sampler and runs them on the slots (one runner and objective each)."""

    def __init__(self, *, settings: SearchSettings, study: optuna.Study, lock: StudyLock,
                 space: SearchSpace, runners: Sequence[Runner], objectives: Sequence[Objective],
                 listener: SearchListener, state: LoopState, confirmation: ConfirmPhase,
                 interrupt: Callable[[str], None],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.settings = settings
        self.study = study
        self.lock = lock
        """Excludes the other searches of this study (other hosts) from check-then-write steps."""
        self.space = space
        self.runners = list(runners)
        self.objectives = list(objectives)
        """Slot i's trials run through objectives[i] (and so runners[i])."""
        self.listener = listener
        self.state = state
        self.confirmation = confirmation
        """What confirming the current leaders will take is kept from the budget."""
        self.interrupt = interrupt
        """Stops every running trial (the search's runners and its confirmation's)."""
        self.clock = clock
        self._sampler = study.sampler
        self._held: dict[tuple[tuple[str, Any], ...], optuna.samplers.BaseSampler] = {}
        """The sampler holding each set of knobs (`policy.sampler.held`) asked for so far."""

    def run(self, slots: TrialSlots, deadline: float | None, finish: Finish) -> None:
        """Keep every slot busy while the budget lasts; `finish` each trial as it ends."""
        try:
            while True:
                if not self.state.halted:
                    self._fill(slots, deadline)
                ended = slots.wait()
                if not ended:
                    break
                for job, future in ended:
                    finish(job, future.result(), slots)
        except BaseException:
            self.interrupt("the search stopped")  # the other slots' trials too
            raise
        finally:
            for job in slots.parked:  # never ran: it says nothing about its config
                self.tell(job.item, TrialResult(
                    status=Status.INTERRUPTED, ran=False, reason="not run: the search stopped "
                    "while its config ran on another slot"), budget_cut=True)
            for beat in self.state.beats.values():  # trials an exception left untold
                beat.close()
            self.state.beats.clear()

    def tell(self, trial: optuna.Trial, result: TrialResult, *, budget_cut: bool,
             says_nothing: bool = False) -> None:
        """Tell the study how `trial` ended, its heartbeat stopped first."""
        beat = self.state.beats.pop(trial.number, None)
        if beat is not None:
            beat.close()
        tell(self.study, trial, result, budget_cut=budget_cut, says_nothing=says_nothing)

    def needless(self, config: TrainConfig, done: Sequence[TrialRecord],
                 cut: float | None = None) -> bool:
        """A guided start not worth a trial, by the finished trials `done`: measured before (it
        would copy that result), by what was measured unable to beat the best (`cannot_win`),
        ruled out by a trial's findings (`recompiling`, `refused`), or too slow to compile in
        what is left (`_cannot_fit`)."""
        return self.objectives[0].measured_before(config, done) is not None \
            or cannot_win(config, done) is not None or recompiling(config, done) is not None \
            or refused(config, done, self.settings.device) is not None \
            or self._cannot_fit(config, done, cut)

    def _cannot_fit(self, config: TrainConfig, done: Sequence[TrialRecord],
                    cut: float | None) -> bool:
        """Whether `config` was found too slow to compile in the time left, or, once one was,
        its compile would not finish in `cut`, the time a trial has now when the budget cuts it
        (as the objective judges; the first is left to the objective, whose "not run" row says
        why nothing more compiles). A refused config is not offered again: its estimate falls
        as shorter trials come in, the time left faster (a held-out nn.TransformerEncoder's
        follow-up came back at 34 s against 37)."""
        if config in self.state.unaffordable:
            return True
        cold = None if cut is None or not self.state.unaffordable \
            else self.objectives[0].too_slow_to_compile(config, cut, done)
        if cold is not None:
            self.state.unaffordable[config] = cold[0]
            return True
        return False

    def at_held_batch(self, config: TrainConfig, done: Sequence[TrialRecord]) -> TrainConfig:
        """A guided start at the adapter's batch once its loader is seen (in the finished
        trials `done`) to make its own batches (`batching.batch_held`): at another batch size
        it would measure the same; and without workers or pinning once its batches come on the
        device already (`batching.loader_on_device`): with them it would fail, and the
        intra-op threads a recipe set beside its workers go back to the baseline's."""
        batch, on_device = batch_held(done), loader_on_device(done)
        loader = {**ON_DEVICE, **({"intra_op_threads": self.space.baseline.intra_op_threads}
                                  if config.num_workers else {})} if on_device else {}
        changes = {**loader, **({} if batch is None else {"batch_size": batch})}
        if not changes:
            return config
        moved = self.space.changed(config, **changes)
        if not self.space.holds(moved) and loader:  # the batch's `when:` off: without
            moved = self.space.changed(config, **loader)  # workers still
        return moved if self.space.holds(moved) else config  # a `when:` the change turns off

    def _fill(self, slots: TrialSlots, deadline: float | None) -> None:
        s = self.settings
        while (slot := slots.free()) is not None and not self.state.halted:
            limit, grace = s.trial_timeout, 0.0
            if deadline is not None:
                # Keep what confirming the current leaders will take.
                first, later, gap = self.confirmation.costs()
                reserve = reserve_seconds(self.confirmation.candidates(), s.confirm_repeats,
                                          timeout=s.timeout, measure_gap_seconds=gap,
                                          start_seconds=first, later_start_seconds=later)
                remaining = deadline - self.clock() - reserve
                quickest = quickest_seconds(self.objectives[0].finished()) or 0.0
                if remaining < max(MIN_TRIAL_SECONDS, quickest):
                    return  # nothing would be started in what is left
                limit = min(limit, remaining)
                grace = remaining - limit  # a compile may run past the limit, not the budget
            # A parked trial whose twin ended without a result to copy runs first.
            job, twin = slots.release(), None
            if job is None:
                if records.count_finished(self.study) + len(slots.running) \
                        + len(slots.parked) >= s.trials:
                    return
                if self.state.repeats >= CONVERGED_REPEATS:
                    return  # the sampler only proposes measured configs: the space is spent
                trial, config, twin = self._ask(limit if limit < s.trial_timeout else None)
                mine = {j.item.number for j in (*slots.running, *slots.parked)}
                if slots.twin(config) is not None or twin in mine:
                    # Never one config on two GPUs at once: it waits for the running one.
                    slots.park(trial, config)
                    return
                job = Job(item=trial, config=config)
            self._start(slots, slot, dataclasses.replace(job, budget_cut=limit < s.trial_timeout,
                                                         limit=limit),
                        limit, twin=twin, grace=grace)

    def _ask(self, cut: float | None = None) -> tuple[optuna.Trial, TrainConfig, int | None]:
        """The next trial (its heartbeat beating until it is told), its config, and a running
        trial that measures the same config (of this search or another), if any. `cut`: the
        time the trial will have, when the search's budget cuts it."""
        self._step_over()
        with self.lock:  # the next guided start, queued once whichever host feeds it
            done = self.objectives[0].finished()  # read once: feeding enqueues, finishes none
            self.state.ladder.feed(self.study, self.space,
                                   skip=lambda c: self.needless(c, done, cut),
                                   project=lambda c: self.at_held_batch(c, done))
        # Guided starts (enqueued) keep their own values.
        hold = held(done, self.space.values, no_compile_fits=bool(self.state.unaffordable))
        key = tuple(sorted(hold.items()))
        if key not in self._held:
            self._held[key] = holding(self._sampler, hold)
        self.study.sampler = self._held[key]
        trial = ask(self.study)
        self.state.beats[trial.number] = beat = ExitStack()
        beat.enter_context(beating(self.study, trial._trial_id))
        records.write_owner(trial)
        try:
            config = self.space.suggest(trial)
        except ValueError as exc:  # Optuna: the stored study has other distributions
            self.state.beats.pop(trial.number).close()
            self.study.tell(trial, state=TrialState.FAIL)
            raise InputError(
                f"study {self.settings.study_name!r} was made with another search space "
                f"({exc}); pass another --study-name, or the space it was made with"
            ) from None
        with self.lock:  # whoever writes a config second finds the first one running it
            records.write_config(trial, config)
            twin = running_twin(self.study, trial.number, config)
        return trial, config, twin

    def _start(self, slots: TrialSlots, slot: int, job: Job[optuna.Trial], limit: float, *,
               twin: int | None = None, grace: float = 0.0) -> None:
        trial, config = job.item, job.config
        self.listener.trial_started(trial.number, config, limit)

        def run() -> Outcome:  # in the slot's thread
            if twin is not None:
                # Another search measures this config now: its result is this one's (the
                # objective reuses it), unless it fails, and then this one measures it, in
                # its role.
                wait_finished(self.study, [twin], timeout=limit, recover=self._step_over,
                              stop=lambda: self.state.halted)
                take_over(self.study, self.lock, trial, twin)
            # The starts (baseline, recipe, follow-ups) are measured to the end: every ratio
            # and the search's direction depend on them; any but the baseline is stopped in
            # warm-up only, when it runs at a fraction of the best.
            runner, role = self.runners[slot], records.read_role(trial)
            stop = runner.prunes and self.settings.prune and stoppable(role)  # not --no-prune
            report = report_windows(trial, runner.prune if stop else None, windows=prunable(role),
                                    eager=config.compile == "none")

            def on_event(event: TrialEvent) -> None:
                self.listener.trial_event(trial.number, event)
                report(event)

            return self.objectives[slot](trial.number, config, limit=limit, on_event=on_event,
                                         budget_cut=job.budget_cut, compile_grace=grace,
                                         prunable=prunable(role))

        slots.start(slot, job, run)

    def _step_over(self) -> None:
        step_over(self.study, self.lock, self.space)  # trials of searches that died (hosts)
