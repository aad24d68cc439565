"""The study: Optuna ask/tell over the space, one fresh process per trial, outputs after each.

With several GPU slots (`layout`), one trial runs on each at once: the sampler's constant liar
keeps concurrent proposals apart, and a config asked while the same one runs on another slot
waits for that trial's result instead of running twice (`slots`).

Trial 0 is the baseline (PyTorch's defaults at the adapter's batch size). Outcomes that are a
property of the config (oom, nan, error, timeout, crashed) are told as COMPLETE but infeasible
(`trial.set_constraint`), so TPE learns to avoid them; interruptions and trials cut short by the
study's own budget say nothing about the config and are told as FAIL. Re-running the same
command continues the same study.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import socket
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from typing import Any

import optuna
from optuna.trial import TrialState

from autotune.adapter import Adapter
from autotune.contract.config import TrainConfig
from autotune.contract.errors import ContractError, InputError
from autotune.contract.host import available_cpus
from autotune.contract.result import Status, TrialResult
from autotune.study import records
from autotune.study.claim import (
    Claim,
    StudyLock,
    claim_confirmation,
    end_confirmation,
    running_twin,
    step_over,
    take_over,
    wait_finished,
)
from autotune.study.confirm import (
    FRESH_PROCESS_SECONDS,
    Candidate,
    candidates,
    estimate_seconds,
    record_confirmation,
    run_confirmation,
)
from autotune.study.layout import Layout
from autotune.study.objective import Objective, Outcome
from autotune.study.pruning import IncumbentPruner, report_windows
from autotune.study.runner import Runner
from autotune.study.searchspace import SearchSpace
from autotune.study.settings import SearchListener, SearchSettings
from autotune.study.slots import GangRunner, Job, Slots
from autotune.study.starts import Ladder, enqueue, follow_ups, initial_starts
from autotune.study.storage import ask, beating, open_storage
from autotune.study.winner import Winner, best_and_baseline, pick_winner

__all__ = ["Interrupted", "Search", "SearchListener", "SearchSettings"]

# Constraint key: > 0 means the trial did not produce a usable measurement.
FEASIBLE = records.FEASIBLE
# A trial is not started with less than this left of the study's budget.
MIN_TRIAL_SECONDS = 10.0


class Interrupted(Exception):
    """The search was stopped by a signal; outputs for the finished trials are written."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"interrupted by {signal.Signals(signum).name}")
        self.signum = signum


class Search:
    """The loop: ask, run the objective, tell; after the budget, confirm the leaders.

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
        self.layout: Layout = settings.layout  # type: ignore[assignment]  # set by settings
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
        self._signal: int | None = None
        self._stopped = False
        self._contract: ContractError | None = None
        """Set when the baseline failed in the adapter's own code: run() raises it."""
        self._ladder = Ladder()
        """The guided follow-ups not yet run, the newest best's first."""
        self._beats: dict[int, ExitStack] = {}
        """The heartbeat of each trial asked and not yet told (a server database only)."""
        self.study = self._open_study()
        self.lock = StudyLock(self.study, settings.storage)
        """Excludes the other searches of this study (other hosts) from check-then-write steps."""
        self.confirmed_by: Claim | None = None
        """Set when another search confirms (or confirmed) the leaders instead of this one."""
        self.objectives = [Objective(
            adapter=settings.adapter, device=settings.device, out=settings.out, runner=r,
            measure=settings.measure,
            finished=lambda: [r for r in records.read_records(self.study, [TrialState.COMPLETE])
                              if r.search])
            for r in self.runners]
        self.objective = self.objectives[0]

    # -- setup -----------------------------------------------------------------------------

    def _open_study(self) -> optuna.Study:
        s = self.settings
        sampler: optuna.samplers.BaseSampler
        if s.sampler == "random":
            sampler = optuna.samplers.RandomSampler(seed=s.seed)
        else:
            with warnings.catch_warnings():
                # multivariate/group/constant_liar are "experimental" in Optuna: chosen knowingly.
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                sampler = optuna.samplers.TPESampler(
                    seed=s.seed,
                    multivariate=True,
                    group=True,  # conditional knobs (prefetch only with workers) form groups
                    constant_liar=True,  # processes sharing a study do not propose the same config
                    n_startup_trials=5,
                )
        study = optuna.create_study(
            storage=open_storage(s.storage, s.heartbeat),
            study_name=s.study_name,
            direction="maximize",
            sampler=sampler,
            pruner=IncumbentPruner() if s.prune else optuna.pruners.NopPruner(),
            load_if_exists=True,
        )
        self._check_layout(study)
        info = records.read_info(study)
        if info is None:
            records.write_info(study, records.StudyInfo(
                adapter=str(s.adapter), unit=self.adapter.unit, space=self.space.source,
                device=s.device, nproc_per_node=s.nproc_per_node))
        elif info.unit != self.adapter.unit:
            raise InputError(
                f"study {s.study_name!r} in {s.storage} measures {info.unit}, this adapter "
                f"{self.adapter.unit}; pass another --study-name for a new study"
            )
        elif info.device != s.device:
            raise InputError(
                f"study {s.study_name!r} in {s.storage} was measured on {info.device}, this "
                f"run is on {s.device}: their throughputs cannot be ranked together; pass "
                f"--device {info.device} or another --study-name"
            )
        elif info.nproc_per_node != s.nproc_per_node:
            raise InputError(
                f"study {s.study_name!r} in {s.storage} ran {info.nproc_per_node} rank(s) per "
                f"trial, this run {s.nproc_per_node}: their throughputs cannot be ranked "
                f"together; pass --nproc-per-node {info.nproc_per_node} or another --study-name"
            )
        return study

    def _check_layout(self, study: optuna.Study) -> None:
        """Rates measured with another CPU share per trial do not rank together."""
        cpus = self.layout.cpus_per_trial
        stored = records.read_layout(study)
        if stored is None:
            records.write_layout(study, cpus_per_trial=cpus, trials_at_once=self.layout.concurrent)
        elif stored != cpus:
            raise InputError(
                f"study {self.settings.study_name!r} in {self.settings.storage} was measured with "
                f"{stored} CPUs per trial, this run gives each trial {cpus}: input-bound rates "
                f"differ; pass --cpus-per-trial {stored} or another --study-name")

    def _recover_stale(self) -> None:
        """Trials left RUNNING by a process on this host that is gone become FAIL (interrupted)."""
        host = socket.gethostname()
        for record in records.read_records(self.study, [TrialState.RUNNING]):
            owner = record.owner or {}
            if owner.get("host") == host and not _alive(owner.get("pid", -1)):
                result = TrialResult(status=Status.INTERRUPTED,
                                     reason="the process running it stopped before it finished")
                try:
                    records.fail_stale(self.study, records.trial_id(self.study, record.number),
                                       result)
                except optuna.exceptions.UpdateFinishedTrialError:
                    pass  # finished meanwhile by someone else

    # -- the loop ----------------------------------------------------------------------------

    def done(self) -> int:
        """Finished trials: measured to the end, or pruned after their first windows."""
        return records.count_search_trials(self.study, (TrialState.COMPLETE, TrialState.PRUNED))

    def winner(self) -> Winner | None:
        return pick_winner(records.read_records(self.study),
                           records.read_confirmation(self.study))

    def run(self) -> Winner | None:
        """Search, then confirm the top configs; returns the winner best.yaml reports."""
        s = self.settings
        s.out.mkdir(parents=True, exist_ok=True)
        self._recover_stale()
        starts = initial_starts(self.space, self.adapter, device=s.device,
                                cpus=s.cpus or available_cpus())
        with self.lock:  # two hosts starting together enqueue the baseline once
            enqueue(self.study, self.space, starts if s.guided else starts[:1])
        deadline = None if s.timeout is None else self.clock() + s.timeout
        self.listener.started(s, self.done(), self.adapter.unit)
        with self._signals():
            with Slots[optuna.Trial, Outcome](len(self.runners)) as slots:
                self._search(slots, deadline)
            if not self._halted():
                self._confirm(deadline)
        self.on_change(self.study)
        winner = self.winner()
        self.listener.finished(winner)
        if self._signal is not None:
            raise Interrupted(self._signal)
        if self._contract is not None:
            raise self._contract
        return winner

    def stop(self) -> None:
        """End the search after the running trial, without confirming (for callers that have
        seen enough, such as the replay benchmark)."""
        self._stopped = True

    def _candidates(self) -> list[Candidate]:
        if self.settings.confirm == 0:
            return []
        return candidates(records.read_records(self.study), self.settings.confirm)

    def _confirm(self, deadline: float | None) -> None:
        s = self.settings
        if s.confirm == 0:
            return
        # Searches sharing the study end their running trials first, and the last to end
        # confirms: a dead one's trial is failed by the heartbeat check meanwhile.
        wait = s.trial_timeout + s.heartbeat.grace + 30.0
        wait_finished(self.study, None, recover=self._step_over,
                      stop=lambda: self._signal is not None,
                      timeout=wait if deadline is None else min(wait, deadline - self.clock()))
        cands = self._candidates()
        if not any(not c.baseline for c in cands) or self._signal is not None:
            return  # nothing but the baseline ran ok: nothing to confirm
        # The longest the confirmation may take (each run's limit is at most the trial's).
        seconds = (s.confirm_max_repeats or s.confirm_repeats) * len(cands) * (
            s.trial_timeout + FRESH_PROCESS_SECONDS)
        self.confirmed_by = claim_confirmation(self.study, self.lock, done=self.done(),
                                               seconds=seconds)
        if self.confirmed_by is not None:
            return  # another search confirms these trials, or did
        finished = False
        try:
            self.listener.confirm_started(cands, s.confirm_repeats)
            runs: list[tuple[Candidate, TrialResult]] = []

            def on_result(cand: Candidate, result: TrialResult) -> None:
                runs.append((cand, result))
                self.listener.confirm_result(cand, result)

            summary = run_confirmation(
                cands, adapter=s.adapter, device=s.device, runner=self.confirm_runner,
                out=s.out, repeats=s.confirm_repeats, max_repeats=s.confirm_max_repeats,
                trial_timeout=s.trial_timeout, measure=s.confirm_measure or s.measure,
                seed=s.seed, on_result=on_result, deadline=deadline, clock=self.clock,
            )
            if self._signal is None:
                record_confirmation(self.study, summary, runs)
                finished = True
        finally:
            end_confirmation(self.study, self.lock, finished=finished)

    def _step_over(self) -> None:
        step_over(self.study, self.lock, self.space)  # trials of searches that died (hosts)

    def _halted(self) -> bool:
        return self._signal is not None or self._stopped

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
                self._tell(job.item, TrialResult(status=Status.INTERRUPTED, reason="not run: "
                           "the search stopped while its config ran on another slot"),
                           budget_cut=True)
            for beat in self._beats.values():  # trials an exception left untold
                beat.close()
            self._beats.clear()

    def _fill(self, slots: Slots[optuna.Trial, Outcome], deadline: float | None) -> None:
        s = self.settings
        while (slot := slots.free()) is not None and not self._halted():
            limit = s.trial_timeout
            if deadline is not None:
                # Keep what confirming the current leaders will take.
                confirm = s.confirm_measure or s.measure
                reserve = estimate_seconds(
                    self._candidates(), s.confirm_repeats,
                    extra_measure_seconds=max(0.0, confirm.budget_seconds
                                              - s.measure.budget_seconds) / 2)
                remaining = deadline - self.clock() - reserve
                if remaining < MIN_TRIAL_SECONDS:
                    return
                limit = min(limit, remaining)
            # A parked trial whose twin ended without a result to copy runs first.
            job, twin = slots.release(), None
            if job is None:
                if self.done() + len(slots.running) + len(slots.parked) >= s.trials:
                    return
                trial, config, twin = self._ask()
                mine = {j.item.number for j in (*slots.running, *slots.parked)}
                if slots.twin(config) is not None or twin in mine:
                    # Never one config on two GPUs at once: it waits for the running one.
                    slots.park(trial, config)
                    return
                job = Job(item=trial, config=config)
            self._start(slots, slot, dataclasses.replace(job, budget_cut=limit < s.trial_timeout),
                        limit, twin=twin)

    def _ask(self) -> tuple[optuna.Trial, TrainConfig, int | None]:
        """The next trial (its heartbeat beating until it is told), its config, and a running
        trial that measures the same config (of this search or another), if any."""
        s = self.settings
        self._step_over()
        with self.lock:  # the next guided start, queued once whichever host feeds it
            self._ladder.feed(self.study, self.space)
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
               limit: float, *, twin: int | None = None) -> None:
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
            prune = getattr(self.runners[slot], "prune", None)
            report = report_windows(trial, prune if records.read_role(trial) == "" else None)

            def on_event(event: dict[str, Any]) -> None:
                self.listener.trial_event(trial.number, event)
                report(event)

            return self.objectives[slot](trial.number, config, limit=limit, on_event=on_event)

        slots.start(slot, job, run)

    def _finish(self, job: Job[optuna.Trial], outcome: Outcome,
                slots: Slots[optuna.Trial, Outcome]) -> None:
        s, trial = self.settings, job.item
        result = outcome.result
        if outcome.duplicate_of is not None:
            records.write_duplicate(trial, outcome.duplicate_of)
        if result.fingerprint is not None and records.read_fingerprint(self.study) is None:
            records.write_fingerprint(self.study, result.fingerprint)
        role = records.read_role(trial)
        # A baseline failing in the adapter's own code fails alike in every config: told as
        # FAIL (it says nothing about the config, and a fixed adapter re-runs it), then stop.
        broken = bool(result.contract_error) and role == records.BASELINE
        self._tell(trial, result, budget_cut=job.budget_cut, says_nothing=broken)
        if records.read_confirmation(self.study) is not None:
            records.write_confirmation(self.study, None)  # stale: the study has a new trial
        if role and role != records.BASELINE and s.guided:
            recs = records.read_records(self.study)
            done = next(r for r in recs if r.number == trial.number)
            best, _ = best_and_baseline(recs)
            self._ladder.add(follow_ups(self.space, done, best, device=s.device),
                             new_best=best is not None and best.number == done.number)
        self.on_change(self.study)
        if outcome.duplicate_of is not None:
            # For the display only; the study keeps the copy.
            note = f"same config as trial {outcome.duplicate_of}: not re-run" + (
                f" ({result.reason})" if result.reason else "")
            result = result.replace(reason=note)
        self.listener.trial_finished(trial.number, result, self.winner())
        if broken:
            self._stopped = True
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

    def _tell(self, trial: optuna.Trial, result: TrialResult, *, budget_cut: bool,
              says_nothing: bool = False) -> None:
        beat = self._beats.pop(trial.number, None)
        if beat is not None:
            beat.close()
        try:
            records.write_result(trial, result)
        except optuna.exceptions.UpdateFinishedTrialError:
            return  # another search failed it: its heartbeat was late (a slow or cut network)
        if result.status is Status.PRUNED:
            self.study.tell(trial, state=TrialState.PRUNED)
        elif result.status is Status.OK:
            trial.set_constraint(FEASIBLE, 0.0)
            self.study.tell(trial, result.throughput)
        elif result.status.says_something and not says_nothing \
                and not (budget_cut and result.status is Status.TIMEOUT):
            trial.set_constraint(FEASIBLE, 1.0)
            self.study.tell(trial, 0.0)
        else:
            self.study.tell(trial, state=TrialState.FAIL)

    def _interrupt(self, reason: str) -> None:
        """Stop every running trial (each slot's, and a confirmation run) as `interrupted`."""
        for runner in {id(r): r for r in (*self.runners, self.confirm_runner)}.values():
            interrupt = getattr(runner, "interrupt", None)
            if interrupt is not None:
                interrupt(reason)

    @contextmanager
    def _signals(self) -> Iterator[None]:
        """SIGINT/SIGTERM: stop the running trial (and its children), then stop the search."""

        def handler(signum: int, frame: Any) -> None:
            self._signal = signum
            self._interrupt(f"stopped by {signal.Signals(signum).name}")

        try:
            previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
        except ValueError:  # not the main thread: leave signals alone
            yield
            return
        try:
            yield
        finally:
            for sig, old in previous.items():
                signal.signal(sig, old)


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
