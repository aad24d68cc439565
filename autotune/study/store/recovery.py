"""Trials a dead search left RUNNING: found, failed with a result that says why, and the starts
among them measured again.

A search that dies (killed, or its host went down) leaves its running trials RUNNING for ever.
It is known dead in two ways: on this host, its process is gone (`recover_stale`, when a search
starts); on a server database, its heartbeat stopped (`fail_stale`, before each trial is asked
and while a search waits for others). A start among its trials (the baseline, the recipe, a
follow-up) is queued again, or taken over by a trial waiting for the same config (`step_over`,
`take_over`): the study needs it measured.
"""

from __future__ import annotations

import socket

import optuna
from optuna.storages import RDBStorage
from optuna.trial import TrialState

from autotune.contract.result import Status, TrialResult
from autotune.study.execution.processes import alive
from autotune.study.space.bound import SearchSpace
from autotune.study.store import records
from autotune.study.store.claim import StudyLock, enqueue, running_same
from autotune.study.store.storage import backend

__all__ = ["fail", "fail_stale", "recover_stale", "step_over", "take_over"]


def fail(study: optuna.Study, trial_id: int, result: TrialResult) -> None:
    """Record `result` on a trial some other (dead) process left RUNNING, and fail it: the
    result first, as Optuna refuses user attributes on a finished trial."""
    records.write_result_of(study, trial_id, result)
    study._storage.set_trial_state_values(trial_id, TrialState.FAIL)


def recover_stale(study: optuna.Study) -> None:
    """Trials left RUNNING by a process on this host that is gone become FAIL (interrupted)."""
    host = socket.gethostname()
    for record in records.read_records(study, [TrialState.RUNNING]):
        owner = record.owner or {}
        if owner.get("host") == host and not alive(owner.get("pid", -1)):
            result = TrialResult(status=Status.INTERRUPTED,
                                 reason="the process running it stopped before it finished")
            try:
                fail(study, records.trial_id(study, record.number), result)
            except optuna.exceptions.UpdateFinishedTrialError:
                pass  # finished meanwhile by someone else


def fail_stale(study: optuna.Study) -> list[records.TrialRecord]:
    """Fail the running trials whose heartbeat stopped, each with an `interrupted` result that
    says why; returns them as they were (role and config).

    What `optuna.storages.fail_stale_trials` does, in the other order: Optuna refuses user
    attributes on a finished trial, so the result is written first, then the state.
    """
    storage = backend(study)
    interval = storage.get_heartbeat_interval() if isinstance(storage, RDBStorage) else None
    if interval is None:
        return []
    grace = storage.grace_period or 2 * interval  # Optuna's default
    failed = []
    for trial_id in storage._get_stale_trial_ids(study._study_id):
        record = records.TrialRecord.from_trial(storage.get_trial(trial_id))
        owner = record.owner or {}
        result = TrialResult(status=Status.INTERRUPTED, reason=(
            f"its search (host {owner.get('host', '?')}, pid {owner.get('pid', '?')}) stopped "
            f"sending heartbeats for over {grace} s, found by "
            f"{socket.gethostname()}: killed, or its host went down"))
        try:
            fail(study, trial_id, result)
        except optuna.exceptions.UpdateFinishedTrialError:
            continue  # another search failed it first, or it finished meanwhile
        failed.append(record)
    return failed


def step_over(study: optuna.Study, lock: StudyLock, space: SearchSpace) -> None:
    """Fail the trials of searches that died (their heartbeat stopped); a start among them (the
    baseline, the recipe, a follow-up) is queued again, once: the study needs it measured. A
    trial without a role waiting for the failed one takes the role over instead (`take_over`).

    Under the lock: a trial running the same config then wrote it (under the lock too) while
    the failed one ran, so it is one waiting for it (`claim.running_twin`)."""
    with lock:
        for record in fail_stale(study):
            if record.role and record.config is not None:
                waiting = running_same(study, record.number, record.config)
                if waiting is None or waiting.role:
                    enqueue(study, space, [(record.role, record.config)])


def take_over(study: optuna.Study, lock: StudyLock, trial: optuna.Trial, twin: int) -> None:
    """After waiting for its twin: if the twin failed (its search died) holding a start's role,
    `trial`, about to measure the same config, takes the role, so that the start (the baseline)
    is a measured trial rather than a later copy of this one."""
    failed = next((r for r in records.read_records(study, [TrialState.FAIL])
                   if r.number == twin), None)
    if failed is None or not failed.role or records.read_role(trial):
        return
    with lock:
        if not records.role_taken(study, failed.role):
            records.write_role(trial, failed.role)
