"""The study's schema for its trials: the only reader and writer of their user attributes.

Optuna stores what autotune knows about a trial (its config, its result, its role) as user
attributes, JSON underneath. Everything else reads them here, as typed records; nothing else
touches `user_attrs` by key (the study's own attributes are `study_attrs`').
"""

from __future__ import annotations

import dataclasses
import math
import os
import socket
from collections.abc import Iterable, Sequence
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState, create_trial

from autotune.contract.config import TrainConfig
from autotune.contract.result import Status, TrialResult, Verdict

__all__ = [
    "BASELINE", "CONFIRM", "FEASIBLE", "RECIPE", "WINNER", "MeasuredRecord", "TrialRecord",
    "add_confirmation_run", "measured",
    "add_winner", "count_finished", "count_search_trials", "enqueue_config", "read_records", "read_role",
    "read_warm_rate", "role_taken", "trial_id", "write_compile_gains", "write_config",
    "write_duplicate", "write_owner", "write_result", "write_result_of", "write_role",
    "write_warm_rate",
]

BASELINE = "baseline"
"""The role of trial 0: PyTorch's defaults at the adapter's batch size."""
RECIPE = "recipe"
"""The role of the hand recipe: what an expert sets first, pointed by the baseline's diagnosis."""
CONFIRM = "confirm"
"""The role of a confirmation run: a search trial's config re-run in a fresh process."""
WINNER = "winner"
"""The role of the trial that records the confirmed winner (Optuna's best trial)."""
FEASIBLE = "usable"
"""Constraint key: > 0 means the trial did not produce a usable measurement."""

_CONFIG, _RESULT, _ROLE, _DUPLICATE, _OWNER = "config", "result", "role", "duplicate_of", "owner"
_CONFIRMS, _DECISION, _GAINS, _WARM = "confirms", "decision", "compile_gains", "warm_rate"


@dataclasses.dataclass(frozen=True, kw_only=True)
class TrialRecord:
    """One trial of the study as autotune sees it."""

    number: int
    state: TrialState
    value: float | None
    """What Optuna was told: the throughput when ok, 0.0 when infeasible."""
    config: TrainConfig | None
    """None for a trial that never got as far as a config."""
    result: TrialResult | None
    """None while running, or for a trial autotune did not tell."""
    role: str = ""
    """"baseline", "recipe", a follow-up's name ("recipe-bs64"), or "" for the sampler's."""
    duplicate_of: int | None = None
    """The earlier trial with the same config whose result this one copies."""
    owner: dict[str, Any] | None = None
    """{host, pid} of the process that ran it (to recover trials of a dead process)."""
    confirms: int | None = None
    """For a confirmation run or the winner: the search trial whose config it re-ran."""
    compile_gains: dict[str, float] = dataclasses.field(default_factory=dict, hash=False)
    """Per compile mode, compiled rate / eager rate (same config) of the pair this trial ended."""

    @property
    def baseline(self) -> bool:
        return self.role == BASELINE

    @property
    def search(self) -> bool:
        """A trial of the search (not a confirmation run nor the winner's record)."""
        return self.role not in (CONFIRM, WINNER)

    @property
    def status(self) -> Status | None:
        return self.result.status if self.result is not None else None

    @property
    def verdict(self) -> Verdict | None:
        """What its diagnosis found limiting the step (None: not diagnosed)."""
        diagnosis = self.result.diagnosis if self.result is not None else None
        return diagnosis.verdict if diagnosis is not None else None

    @property
    def ok(self) -> bool:
        """Finished with a measurement."""
        return self.state == TrialState.COMPLETE and self.status is Status.OK

    @property
    def rate(self) -> float:
        """`value` as a number: 0.0 when Optuna was told none (running, failed)."""
        return self.value if self.value is not None else 0.0

    @classmethod
    def from_trial(cls, trial: FrozenTrial) -> TrialRecord:
        attrs = trial.user_attrs
        config = attrs.get(_CONFIG)
        result = attrs.get(_RESULT)
        return cls(
            number=trial.number,
            state=trial.state,
            value=trial.value if trial.state == TrialState.COMPLETE else None,
            config=TrainConfig(**config) if config else None,
            result=TrialResult.from_dict(result) if result else None,
            role=str(attrs.get(_ROLE) or ""),
            duplicate_of=attrs.get(_DUPLICATE),
            owner=attrs.get(_OWNER),
            confirms=attrs.get(_CONFIRMS),
            compile_gains=dict(attrs.get(_GAINS) or {}),
        )


@dataclasses.dataclass(frozen=True, kw_only=True)
class MeasuredRecord(TrialRecord):
    """A trial whose config and result are both recorded: it ended (measured, or refused
    without a process), as the search's policies read them."""

    config: TrainConfig
    result: TrialResult

    @classmethod
    def of(cls, record: TrialRecord) -> MeasuredRecord:
        if isinstance(record, MeasuredRecord):
            return record
        if record.config is None or record.result is None:
            raise ValueError(f"trial {record.number} has no config or no result")
        fields = {f.name: getattr(record, f.name) for f in dataclasses.fields(record)}
        return cls(**fields)


def measured(records: Iterable[TrialRecord]) -> list[MeasuredRecord]:
    """The records with a config and a result, typed so (the policies' view), in order."""
    return [MeasuredRecord.of(r) for r in records if r.config is not None and r.result is not None]


def read_records(study: optuna.Study, states: Sequence[TrialState] | None = None
                 ) -> list[TrialRecord]:
    return [TrialRecord.from_trial(t)
            for t in study.get_trials(deepcopy=False, states=None if states is None else
                                      tuple(states))]


def count_finished(study: optuna.Study) -> int:
    """Finished trials of the search: measured to the end, or pruned after their first
    windows."""
    return count_search_trials(study, (TrialState.COMPLETE, TrialState.PRUNED))


def count_search_trials(study: optuna.Study, states: Sequence[TrialState]) -> int:
    """Trials of the search in these states (confirmation runs and the winner not counted)."""
    return sum(1 for t in study.get_trials(deepcopy=False, states=tuple(states))
               if t.user_attrs.get(_ROLE) not in (CONFIRM, WINNER))


def write_config(trial: optuna.Trial, config: TrainConfig) -> None:
    trial.set_user_attr(_CONFIG, config.to_dict())


def write_result(trial: optuna.Trial, result: TrialResult) -> None:
    trial.set_user_attr(_RESULT, result.to_dict())


def write_compile_gains(trial: optuna.Trial, gains: dict[str, float]) -> None:
    trial.set_user_attr(_GAINS, gains)


def write_warm_rate(trial: optuna.Trial, rate: float) -> None:
    """The trial's fastest early warm-up chunk (`pruning.warm_bar`)."""
    trial.set_user_attr(_WARM, rate)


def read_warm_rate(trial: FrozenTrial) -> float | None:
    return trial.user_attrs.get(_WARM)


def write_duplicate(trial: optuna.Trial, of: int) -> None:
    trial.set_user_attr(_DUPLICATE, of)


def write_owner(trial: optuna.Trial) -> None:
    trial.set_user_attr(_OWNER, {"host": socket.gethostname(), "pid": os.getpid()})


def write_result_of(study: optuna.Study, trial_id: int, result: TrialResult) -> None:
    """Record `result` on a trial this process does not hold, by its storage id: one that a
    dead process left RUNNING (`recovery`)."""
    study._storage.set_trial_user_attr(trial_id, _RESULT, result.to_dict())


def read_role(trial: optuna.Trial | FrozenTrial) -> str:
    """The role a trial was enqueued with ("" for the sampler's own)."""
    return str(trial.user_attrs.get(_ROLE) or "")


def enqueue_config(study: optuna.Study, params: dict[str, Any], role: str) -> None:
    """Queue a trial with these Optuna params, remembered with its role."""
    # "baseline" too, so that a user filtering the study's trials (optuna-dashboard) finds it.
    study.enqueue_trial(params, user_attrs={_ROLE: role, "baseline": role == BASELINE})


def write_role(trial: optuna.Trial, role: str) -> None:
    """Give a running trial a start's role (it took over one whose search died)."""
    trial.set_user_attr(_ROLE, role)
    trial.set_user_attr("baseline", role == BASELINE)


def role_taken(study: optuna.Study, role: str) -> bool:
    """Whether a trial of `role` is done, running or waiting."""
    live = (TrialState.COMPLETE, TrialState.RUNNING, TrialState.WAITING)
    return any(t.user_attrs.get(_ROLE) == role and t.state in live
               for t in study.get_trials(deepcopy=False))


def trial_id(study: optuna.Study, number: int) -> int:
    return study.get_trials(deepcopy=False)[number]._trial_id


# -- confirmation as trials ------------------------------------------------------------------
# Each confirmation run is a finished trial of its own with the params of the search trial it
# re-runs, so Optuna, optuna-dashboard and `autotune show` list it; the winner is one more,
# whose value makes it the study's best trial. `study.add_trial` (never enqueue + ask): another
# process sharing the study must not pick these up as trials to run.


def add_confirmation_run(study: optuna.Study, of: int, result: TrialResult) -> None:
    """Record one confirmation run of search trial `of`, told as the search tells its trials:
    ok with its rate, a failure of the config as infeasible, an interruption as FAIL."""
    source = _trial(study, of)
    if result.status is Status.OK:
        state, value, usable = TrialState.COMPLETE, result.throughput, 0.0
    elif result.status.says_something:
        state, value, usable = TrialState.COMPLETE, 0.0, 1.0
    else:
        state, value, usable = TrialState.FAIL, None, None
    study.add_trial(create_trial(
        state=state, value=value, params=source.params, distributions=source.distributions,
        user_attrs={_ROLE: CONFIRM, _CONFIRMS: of, _CONFIG: source.user_attrs.get(_CONFIG),
                    _RESULT: result.to_dict()},
        constraints=None if usable is None else {FEASIBLE: usable}))


def add_winner(study: optuna.Study, of: int, result: TrialResult, decision: dict[str, Any]
               ) -> float:
    """Record the confirmed winner, search trial `of`'s config with `result` (its confirmed
    rate), as the study's best trial; returns the value told.

    Optuna and optuna-dashboard take the highest value of a complete trial as the best, and a
    study cannot lower a lucky first reading once told. The value is therefore the confirmed
    rate, or just above the study's highest value when a single search window or run read
    higher: the config is the winner either way; the measured rate is `result`'s."""
    rate = float(result.throughput or 0.0)
    top = max((t.value for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
               if t.value is not None), default=-math.inf)
    value = rate if rate > top else math.nextafter(top, math.inf)
    source = _trial(study, of)
    study.add_trial(create_trial(
        value=value, params=source.params, distributions=source.distributions,
        user_attrs={_ROLE: WINNER, _CONFIRMS: of, _CONFIG: source.user_attrs.get(_CONFIG),
                    _RESULT: result.to_dict(), _DECISION: decision},
        constraints={FEASIBLE: 0.0}))
    return value


def _trial(study: optuna.Study, number: int) -> FrozenTrial:
    trial = study.get_trials(deepcopy=False)[number]
    if trial.number != number:  # numbers are positions in a study; never otherwise so far
        raise ValueError(f"trial {number} is not at its position in study {study.study_name!r}")
    return trial
