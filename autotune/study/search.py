"""The study: Optuna ask/tell over the space, one fresh process per trial, outputs after each.

With several GPU slots (`layout`), one trial runs on each at once: the sampler's constant liar
keeps concurrent proposals apart, and a config asked while the same one runs on another slot
waits for that trial's result instead of running twice (`parallel`, `slots`).

Trial 0 is the baseline (PyTorch's defaults at the adapter's batch size). How each outcome is
told to Optuna is `policy.telling`'s; the confirmation of the leaders after the budget is
`confirmation.phase`'s. Re-running the same command continues the same study.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Sequence

import optuna
from optuna.trial import TrialState

from autotune.adapter import Adapter
from autotune.contract.config import TrainConfig
from autotune.contract.errors import ContractError
from autotune.contract.host import available_cpus
from autotune.contract.result import Status
from autotune.study.confirmation.phase import ConfirmPhase
from autotune.study.confirmation.winner import Winner, best_and_baseline, pick_winner
from autotune.study.execution.protocol import Runner
from autotune.study.execution.slots import GangRunner, Job
from autotune.study.policy.eager import compiled_dtypes, gains_of
from autotune.study.policy.host_bound import graphs_after_default
from autotune.study.policy.scan import DtypeStage
from autotune.study.policy.one_shape import OneShapeStage
from autotune.study.explore import exploration
from autotune.study.interrupts import Interrupted, on_signals
from autotune.study.objective import Objective, Outcome
from autotune.study.opening import open_study
from autotune.study.parallel import CONVERGED_REPEATS, LoopState, SlotLoop, TrialSlots
from autotune.study.policy.pruning import report_copy
from autotune.study.policy.starts import EXPLORE, diagnosed_recipe, follow_ups, initial_starts
from autotune.study.settings import SearchListener, SearchSettings
from autotune.study.space.bound import SearchSpace
from autotune.study.store import records, study_attrs
from autotune.study.store.claim import Claim, StudyLock, enqueue
from autotune.study.store.recovery import recover_stale

__all__ = ["Interrupted", "Search", "SearchListener", "SearchSettings"]

class Search:
    """The loop: ask, run the objective, tell; after the budget, confirm the leaders.

    Its parts are objects of their own, built here with what each reads: `loop` (the slots,
    asking and starting trials), `confirmation` (the last phase), and `state`, what they share.
    `on_change` is called with the study after every finished trial and at the end (the CLI
    writes the outputs there); the search itself writes nothing but the study.
    """

    def __init__(
        self,
        settings: SearchSettings,
        space: SearchSpace,
        adapter: type[Adapter],
        *,
        runner: Runner | None = None,
        runners: Sequence[Runner] = (),
        listener: SearchListener,
        on_change: Callable[[optuna.Study], None] | None = None,
        confirm_runner: Runner | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self.layout = settings.trial_layout
        self.runners = list(runners) or ([runner] if runner is not None else [])
        """One per slot of the layout: slot i's trials run through runners[i]."""
        if len(self.runners) != self.layout.concurrent:
            raise ValueError(f"need one runner per slot: {len(self.runners)} runner(s) for "
                             f"{self.layout.concurrent} slot(s)")
        self.runner = self.runners[0]
        self.confirm_runner = confirm_runner or (
            self.runner if len(self.runners) == 1 else
            GangRunner(self.runners, [slot.name for slot in self.layout.slots]))
        """Confirmation always runs in fresh processes: give a SubprocessRunner here when
        `runner` forks its trials from a server (a GangRunner of them for several slots)."""
        self.space = space
        self.adapter = adapter
        self.listener = listener
        self.on_change = on_change or (lambda study: None)
        self.clock = clock
        """Measures the study's budget (a simulated clock in the replay benchmark)."""
        self.state = LoopState()
        self._contract: ContractError | None = None
        """Set when the baseline failed in the adapter's own code: run() raises it."""
        self._dtypes = DtypeStage(space, device=settings.device)
        """On a GPU, every amp dtype measured eagerly before the ladder compiles."""
        self._one_shape = OneShapeStage(space, device=settings.device)
        """An adapter knob that keeps the batches one shape: dtypes again, then CUDA graphs."""
        self._recipe: TrainConfig | None = None
        """The hand recipe while it waits for the baseline's diagnosis (one slot)."""
        self.study = open_study(settings, adapter, space, self.layout)
        self.lock = StudyLock(self.study, settings.storage)
        """Excludes the other searches of this study (other hosts) from check-then-write steps."""
        self.objectives = [Objective(
            adapter=settings.adapter, device=settings.device, out=settings.out, runner=r,
            measure=settings.measure,
            # Pruned trials too: a config clearly below the best is not measured again.
            finished=lambda: [r for r in records.read_records(
                self.study, [TrialState.COMPLETE, TrialState.PRUNED]) if r.search],
            infer_slow=settings.prune, loader_only=space.loader_only)
            for r in self.runners]
        self.objective = self.objectives[0]
        self.confirmation = ConfirmPhase(
            settings=settings, study=self.study, lock=self.lock, space=space, listener=listener,
            search_runner=self.runner, confirm_runner=self.confirm_runner, clock=clock,
            signalled=lambda: self.state.signal is not None)
        self.loop = SlotLoop(
            settings=settings, study=self.study, lock=self.lock, space=space,
            runners=self.runners, objectives=self.objectives, listener=listener,
            state=self.state, confirmation=self.confirmation, interrupt=self._interrupt,
            clock=clock)

    @property
    def confirmed_by(self) -> Claim | None:
        """Set when another search confirms (or confirmed) the leaders instead of this one."""
        return self.confirmation.confirmed_by

    # -- the loop ----------------------------------------------------------------------------

    def done(self) -> int:
        """Finished trials: measured to the end, or pruned after their first windows."""
        return records.count_finished(self.study)

    def winner(self) -> Winner | None:
        return pick_winner(records.read_records(self.study),
                           study_attrs.read_confirmation(self.study))

    def run(self) -> Winner | None:
        """Search, then confirm the top configs; returns the winner best.yaml reports."""
        s = self.settings
        s.out.mkdir(parents=True, exist_ok=True)
        recover_stale(self.study)
        starts = initial_starts(self.space, self.adapter, device=s.device,
                                cpus=s.cpus or available_cpus())
        # One trial at a time: the recipe waits for the baseline's diagnosis, which points it
        # (`diagnosed_recipe`); with several slots it runs beside the baseline as it is.
        self._recipe = dict(starts).get(records.RECIPE) if s.guided and len(self.runners) == 1 \
            else None
        with self.lock:  # two hosts starting together enqueue the baseline once
            enqueue(self.study, self.space,
                    starts if s.guided and self._recipe is None else starts[:1])
        self._queue_recipe()  # a continued study whose baseline ran already
        deadline = None if s.timeout is None else self.clock() + s.timeout
        self.listener.started(s, self.done(), self.adapter.unit)
        with on_signals(self._on_signal):
            with TrialSlots(len(self.runners)) as slots:
                self.loop.run(slots, deadline, self._finish)
            if not self.state.halted:
                self.confirmation.run(deadline)
        self.on_change(self.study)
        winner = self.winner()
        self.listener.finished(winner, interrupted=self.state.signal is not None)
        if self.state.signal is not None:
            raise Interrupted(self.state.signal)
        if self._contract is not None:
            raise self._contract
        return winner

    def stop(self) -> None:
        """End the search after the running trial, without confirming (for callers that have
        seen enough, such as the replay benchmark)."""
        self.state.stopped = True

    def _explore(self, after: int, *, left: float | None = None) -> None:
        """Queue an exploration (`explore.exploration`) after trial `after`: a copy, a config
        implied slow, or one too slow to start in the `left` seconds it had. Its draws are
        seeded by that trial's number: by the count of trials measured, a row of configs too
        slow to start (told FAIL, not counted) drew the same configs each time."""
        s = self.settings
        fresh = exploration(self.objective, self.space, self.state.ladder, device=s.device,
                            seed=None if s.seed is None else s.seed + after,
                            left=left, no_compile_fits=bool(self.state.unaffordable))
        if fresh is not None:
            self.state.ladder.add([(f"{EXPLORE}: {fresh.describe()}", fresh)], new_best=False)
        elif left is not None:  # nothing new fits in what is left: the confirmation has it
            self.state.repeats = CONVERGED_REPEATS

    def _queue_recipe(self) -> None:
        """Once the baseline has a result, queue the recipe its diagnosis points (first)."""
        if self._recipe is None:
            return
        if records.role_taken(self.study, records.RECIPE):
            self._recipe = None
            return
        baseline = next((r for r in records.read_records(self.study, [TrialState.COMPLETE])
                         if r.baseline and r.result is not None), None)
        if baseline is None:
            return
        recipe = diagnosed_recipe(self.space, self._recipe, baseline, device=self.settings.device,
                                  cpus=self.settings.cpus)
        self.state.ladder.add([(records.RECIPE, recipe)], new_best=True)
        self._recipe = None

    def _finish(self, job: Job[optuna.Trial], outcome: Outcome, slots: TrialSlots) -> None:
        s, trial = self.settings, job.item
        result = outcome.result
        # Copies, configs too slow to start in what is left, and configs a measured trial
        # implies slow, in a row: the space is spent.
        idle = outcome.duplicate_of is not None or outcome.unaffordable is not None \
            or outcome.ceiling is not None
        self.state.repeats = self.state.repeats + 1 if idle else 0
        if outcome.unaffordable is not None:
            self.state.unaffordable[job.config] = outcome.unaffordable
        if outcome.duplicate_of is not None:
            records.write_duplicate(trial, outcome.duplicate_of)
            if result.status is Status.PRUNED:
                report_copy(trial, result.window_throughputs, result.throughput)
        if outcome.ceiling is not None:  # what it could read at most: the sampler learns that
            report_copy(trial, (outcome.ceiling,))
        if idle and s.guided:
            self._explore(trial.number, left=None if outcome.unaffordable is None
                          else job.limit or outcome.unaffordable)
        if result.fingerprint is not None and study_attrs.read_fingerprint(self.study) is None:
            study_attrs.write_fingerprint(self.study, result.fingerprint)
        role = records.read_role(trial)
        # A baseline failing in the adapter's own code fails alike in every config: told as
        # FAIL (it says nothing about the config, and a fixed adapter re-runs it), then stop.
        broken = bool(result.contract_error) and role == records.BASELINE
        if result.status is Status.OK and result.throughput and outcome.duplicate_of is None:
            gains = gains_of(job.config, result.throughput, self.objective.finished())
            if gains:  # what compiling bought this step, for later proposals (`cannot_win`)
                records.write_compile_gains(trial, gains)
        self.loop.tell(trial, result, budget_cut=job.budget_cut, says_nothing=broken)
        if study_attrs.read_confirmation(self.study) is not None:
            study_attrs.write_confirmation(self.study, None)  # stale: the study has a new trial
        if role == records.BASELINE:
            self._queue_recipe()
        if role != records.BASELINE and s.guided:
            recs = records.read_records(self.study)
            ladder = self.state.ladder
            if role:  # a guided trial: its follow-ups, and the eager dtypes when due
                done = next(r for r in recs if r.number == trial.number)
                best, _ = best_and_baseline(recs)
                new_best = best is not None and best.number == done.number
                if new_best:
                    ladder.supersede()
                ladder.add(follow_ups(self.space, done, best, device=s.device, cpus=s.cpus),
                           new_best=new_best)
                ladder.add(self._dtypes.due(recs, ladder.pending), new_best=True)
            # Any trial, TPE's too, may be a compiled best whose compile bought so much that
            # the eager dtype order says little (`compiled_dtypes`), a compile that bought
            # nothing (`host_bound`), or the one that kept the batches one shape.
            ladder.add(compiled_dtypes(self.space, recs, device=s.device), new_best=True)
            ladder.add(graphs_after_default(self.space, recs, device=s.device), new_best=True,
                       urgent=True)  # a `default` compile that bought nothing: host-bound
            eager, compiled = self._one_shape.due(recs, ladder.pending)
            ladder.add(eager, new_best=True)
            ladder.add(compiled, new_best=True, urgent=True)
        self.on_change(self.study)
        if outcome.duplicate_of is not None:
            # For the display only; the study keeps the copy.
            note = f"same config as trial {outcome.duplicate_of}: not re-run" + (
                f" ({result.reason})" if result.reason else "")
            result = result.replace(reason=note)
        self.listener.trial_finished(trial.number, result, self.winner())
        if broken:
            self.state.stopped = True
            self._contract = ContractError.in_baseline(
                trial.number, part=result.contract_error, reason=result.reason, log=result.log)
        # Trials that waited for this config copy its result now (no process needed); when
        # it left none to copy, the next free slot runs one of them.
        earlier = self.objective.measured_before(job.config)
        if earlier is not None and earlier.result is not None:
            waiting = [j for j in slots.parked if j.config == job.config]
            for other in waiting:
                slots.parked.remove(other)
            for other in waiting:
                self.listener.trial_started(other.item.number, other.config, 0.0)
                self._finish(other, Outcome(result=earlier.result, duplicate_of=earlier.number),
                             slots)

    def _interrupt(self, reason: str) -> None:
        """Stop every running trial (each slot's, and a confirmation run) as `interrupted`."""
        for runner in {id(r): r for r in (*self.runners, self.confirm_runner)}.values():
            runner.interrupt(reason)

    def _on_signal(self, signum: int) -> None:
        """SIGINT/SIGTERM: stop the running trial (and its children), then stop the search."""
        self.state.signal = signum
        self._interrupt(f"stopped by {signal.Signals(signum).name}")
