"""The study: Optuna ask/tell over the space, one fresh process per trial, outputs after each.

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
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

import optuna
from optuna.trial import FrozenTrial, TrialState

from autotune.adapter import Adapter
from autotune.compose import known_incompatible
from autotune.config import TrainConfig
from autotune.errors import InputError
from autotune.measure import MeasureSettings
from autotune.confirm import Candidate, candidates, estimate_seconds, run_confirmation
from autotune.report import Winner, write_outputs
from autotune.result import Status, TrialResult
from autotune.runner import Runner
from autotune.space import SearchSpace, available_cpus
from autotune.starts import enqueue, follow_ups, initial_starts
from autotune.storage import absolute_storage, open_storage
from autotune.worker import TrialRequest

__all__ = ["Interrupted", "Search", "SearchListener", "SearchSettings", "trial_result"]

# Constraint key: > 0 means the trial did not produce a usable measurement.
FEASIBLE = "usable"
# A trial is not started with less than this left of the study's budget.
MIN_TRIAL_SECONDS = 10.0


class Interrupted(Exception):
    """The search was stopped by a signal; outputs for the finished trials are written."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"interrupted by {signal.Signals(signum).name}")
        self.signum = signum


@dataclasses.dataclass(frozen=True, kw_only=True)
class SearchSettings:
    adapter: Path
    """The adapter file."""
    space_source: str
    """The space file (recorded in the study)."""
    device: str
    """"cuda" or "cpu"."""
    out: Path
    """Output folder: best.yaml, trials.csv, throughput.png, trials/<n>/."""
    storage: str
    """Optuna storage URL or file."""
    study_name: str
    trials: int = 20
    """Stop once the study holds this many finished trials (resumed runs count earlier ones)."""
    timeout: float | None = None
    """Seconds for this invocation; no trial starts after, a running one is cut at the deadline."""
    trial_timeout: float = 300.0
    """Seconds one trial may take, start-up and compile included."""
    seed: int | None = None
    measure: MeasureSettings = MeasureSettings()
    confirm: int = 3
    """After the search, re-run this many top configs (and the baseline); 0 skips it."""
    confirm_repeats: int = 2
    """Runs of each confirmed config, in shuffled order."""

    def __post_init__(self) -> None:
        # One name for the storage whatever the working directory (study.yaml records it).
        object.__setattr__(self, "storage", absolute_storage(self.storage))
        if self.confirm < 0 or self.confirm_repeats < 1:
            raise ValueError(f"need confirm >= 0 and confirm_repeats >= 1, got {self.confirm=}, "
                             f"{self.confirm_repeats=}")
        if self.trials < 1:
            raise ValueError(f"trials must be at least 1, got {self.trials=}")
        if self.timeout is not None and self.timeout <= 0:
            raise ValueError(f"timeout must be positive, got {self.timeout=}")
        if self.trial_timeout <= 0:
            raise ValueError(f"trial_timeout must be positive, got {self.trial_timeout=}")
        if self.device not in ("cuda", "cpu"):
            raise ValueError(f"device must be cuda or cpu, got {self.device=}")


class SearchListener(Protocol):
    """Progress reporting (the rich display, or nothing in tests)."""

    def started(self, settings: SearchSettings, done: int, unit: str) -> None: ...
    def trial_started(self, number: int, config: TrainConfig, limit: float) -> None: ...
    def trial_event(self, number: int, event: dict[str, Any]) -> None: ...
    def trial_finished(self, number: int, result: TrialResult, winner: Winner | None) -> None: ...
    def confirm_started(self, cands: list[Candidate], repeats: int) -> None: ...
    def confirm_result(self, cand: Candidate, result: TrialResult) -> None: ...
    def finished(self, winner: Winner | None) -> None: ...


def trial_result(trial: FrozenTrial) -> TrialResult | None:
    """The result stored with a finished trial (None for trials not told by autotune)."""
    data = trial.user_attrs.get("result")
    return TrialResult.from_dict(data) if data else None


class Search:
    def __init__(
        self,
        settings: SearchSettings,
        space: SearchSpace,
        adapter: type[Adapter],
        *,
        runner: Runner,
        listener: SearchListener,
    ) -> None:
        self.settings = settings
        self.space = space
        self.adapter = adapter
        self.runner = runner
        self.listener = listener
        self._signal: int | None = None
        self.study = self._open_study()

    # -- setup -----------------------------------------------------------------------------

    def _open_study(self) -> optuna.Study:
        s = self.settings
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
            storage=open_storage(s.storage),
            study_name=s.study_name,
            direction="maximize",
            sampler=sampler,
            load_if_exists=True,
        )
        attrs = study.user_attrs
        if "adapter" not in attrs:
            study.set_user_attr("adapter", str(s.adapter))
            study.set_user_attr("unit", self.adapter.unit)
            study.set_user_attr("space", self.space.source)
            study.set_user_attr("device", s.device)
        elif attrs.get("unit") != self.adapter.unit:
            raise InputError(
                f"study {s.study_name!r} in {s.storage} measures {attrs.get('unit')}, this adapter "
                f"{self.adapter.unit}; pass another --study-name for a new study"
            )
        elif attrs.get("device") != s.device:
            raise InputError(
                f"study {s.study_name!r} in {s.storage} was measured on {attrs.get('device')}, this "
                f"run is on {s.device}: their throughputs cannot be ranked together; pass "
                f"--device {attrs.get('device')} or another --study-name"
            )
        return study

    def _recover_stale(self) -> None:
        """Trials left RUNNING by a process on this host that is gone become FAIL (interrupted)."""
        host = socket.gethostname()
        for t in self.study.get_trials(deepcopy=False, states=[TrialState.RUNNING]):
            owner = t.user_attrs.get("owner") or {}
            if owner.get("host") == host and not _alive(owner.get("pid", -1)):
                result = TrialResult(status=Status.INTERRUPTED,
                                     reason="the process running it stopped before it finished")
                try:
                    self.study._storage.set_trial_user_attr(t._trial_id, "result", result.to_dict())
                    self.study._storage.set_trial_state_values(t._trial_id, TrialState.FAIL)
                except optuna.exceptions.UpdateFinishedTrialError:
                    pass  # finished meanwhile by someone else

    # -- the loop ----------------------------------------------------------------------------

    def done(self) -> int:
        return sum(1 for t in self.study.get_trials(deepcopy=False) if t.state == TrialState.COMPLETE)

    def run(self) -> Winner | None:
        """Search, then confirm the top configs; returns the winner best.yaml reports."""
        s = self.settings
        s.out.mkdir(parents=True, exist_ok=True)
        self._recover_stale()
        enqueue(self.study, self.space, initial_starts(
            self.space, self.adapter, device=s.device, cpus=available_cpus()))
        self.study.set_user_attr("confirmation", None)  # stale once new trials run
        deadline = None if s.timeout is None else time.monotonic() + s.timeout
        self.listener.started(s, self.done(), self.adapter.unit)
        with self._signals():
            while self.done() < s.trials and self._signal is None:
                limit = s.trial_timeout
                if deadline is not None:
                    # Keep what confirming the current leaders will take.
                    reserve = estimate_seconds(self._candidates(), s.confirm_repeats)
                    remaining = deadline - time.monotonic() - reserve
                    if remaining < MIN_TRIAL_SECONDS:
                        break
                    limit = min(limit, remaining)
                self._one_trial(limit, budget_cut=limit < s.trial_timeout)
            if self._signal is None:
                self._confirm()
        winner = write_outputs(self.study, s)
        self.listener.finished(winner)
        if self._signal is not None:
            raise Interrupted(self._signal)
        return winner

    def _candidates(self) -> list[Candidate]:
        if self.settings.confirm == 0:
            return []
        return candidates(self.study.get_trials(deepcopy=False), self.settings.confirm)

    def _confirm(self) -> None:
        s = self.settings
        cands = self._candidates()
        if not any(not c.baseline for c in cands):
            return  # nothing but the baseline ran ok: nothing to confirm
        self.listener.confirm_started(cands, s.confirm_repeats)
        summary = run_confirmation(
            cands, adapter=s.adapter, device=s.device, runner=self.runner, out=s.out,
            repeats=s.confirm_repeats, trial_timeout=s.trial_timeout, measure=s.measure,
            seed=s.seed, on_result=self.listener.confirm_result,
        )
        if self._signal is None:
            self.study.set_user_attr("confirmation", summary)

    def _one_trial(self, limit: float, *, budget_cut: bool) -> None:
        s = self.settings
        trial = self.study.ask()
        trial.set_user_attr("owner", {"host": socket.gethostname(), "pid": os.getpid()})
        try:
            config = self.space.suggest(trial)
        except ValueError as exc:  # Optuna: the stored study has other distributions
            self.study.tell(trial, state=TrialState.FAIL)
            raise InputError(
                f"study {s.study_name!r} was made with another search space ({exc}); pass another "
                "--study-name, or the space it was made with"
            ) from None
        trial.set_user_attr("config", config.to_dict())
        self.listener.trial_started(trial.number, config, limit)

        impossible = known_incompatible(config, s.device)
        duplicate = None if impossible is not None else self._measured_before(config)
        if impossible is not None:
            # Never launched; told as infeasible so the sampler learns the combination.
            result = TrialResult(status=Status.ERROR, reason=f"not run: {impossible}")
        elif duplicate is not None:
            result = trial_result(duplicate)
            assert result is not None  # _measured_before only returns told trials
            trial.set_user_attr("duplicate_of", duplicate.number)
            note = f"same config as trial {duplicate.number}: not re-run" + (
                f" ({result.reason})" if result.reason else "")
        else:
            request = TrialRequest(
                adapter=str(s.adapter), config=config, device=s.device,
                measure=s.measure, number=trial.number,
            )
            result = self.runner.run(
                request,
                s.out / "trials" / str(trial.number),
                timeout=limit,
                on_event=lambda e: self.listener.trial_event(trial.number, e),
            )
        fingerprint = result.extra.get("fingerprint")
        if fingerprint and "fingerprint" not in self.study.user_attrs:
            self.study.set_user_attr("fingerprint", fingerprint)
        self._tell(trial, result, budget_cut=budget_cut)
        if trial.user_attrs.get("role") == "recipe" and result.status is Status.OK:
            verdict = (result.extra.get("diagnosis") or {}).get("verdict")
            enqueue(self.study, self.space, follow_ups(self.space, config, verdict))
        winner = write_outputs(self.study, s)
        if duplicate is not None:
            result = result.replace(reason=note)  # for the display only; the study keeps the copy
        self.listener.trial_finished(trial.number, result, winner)

    def _tell(self, trial: optuna.Trial, result: TrialResult, *, budget_cut: bool) -> None:
        trial.set_user_attr("result", result.to_dict())
        if result.status is Status.OK:
            trial.set_constraint(FEASIBLE, 0.0)
            self.study.tell(trial, result.throughput)
        elif result.status.says_something and not (budget_cut and result.status is Status.TIMEOUT):
            trial.set_constraint(FEASIBLE, 1.0)
            self.study.tell(trial, 0.0)
        else:
            self.study.tell(trial, state=TrialState.FAIL)

    def _measured_before(self, config: TrainConfig) -> FrozenTrial | None:
        wanted = config.to_dict()
        for t in self.study.get_trials(deepcopy=False, states=[TrialState.COMPLETE]):
            if t.user_attrs.get("config") == wanted and "result" in t.user_attrs:
                return t
        return None

    @contextmanager
    def _signals(self) -> Iterator[None]:
        """SIGINT/SIGTERM: stop the running trial (and its children), then stop the search."""

        def handler(signum: int, frame: Any) -> None:
            self._signal = signum
            interrupt = getattr(self.runner, "interrupt", None)
            if interrupt is not None:
                interrupt(f"stopped by {signal.Signals(signum).name}")

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
