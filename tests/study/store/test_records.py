"""The study's schema: what autotune writes into Optuna's user attributes, read back as typed
records, through a real storage (SQLite: everything goes through JSON)."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from autotune import Diagnosis, Fingerprint, HostCpu, Status, TrainConfig, TrialResult, Verdict
from autotune.study.store import records, study_attrs
from autotune.study.store.records import TrialRecord
from autotune.study.store.study_attrs import ConfirmationEntry, StudyInfo

CONFIG = TrainConfig(batch_size=16, num_workers=2, prefetch_factor=4, amp_dtype="bf16")
RESULT = TrialResult(
    status=Status.OK, throughput=1234.5, spread=0.01, window_throughputs=(1230.0, 1234.5, 1240.0),
    phases={"start": 1.0, "compose": 0.5, "warmup": 2.0, "windows": 3.0},
    diagnosis=Diagnosis(verdict=Verdict.INPUT, suggestion="more workers", throughput=1234.5,
                        loader_rate=1300.0, compute_rate=9000.0, data_wait_fraction=0.4,
                        gpu_busy_fraction=None),
    host_cpu=HostCpu(busy_fraction=0.5, steal_fraction=0.0),
    fingerprint=Fingerprint(torch="2.13.0", cpu_model="EPYC"),
)


@pytest.fixture
def study(tmp_path: Path) -> optuna.Study:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna.create_study(storage=f"sqlite:///{tmp_path / 'study.db'}", study_name="s",
                               direction="maximize")


def reopened(study: optuna.Study) -> optuna.Study:
    """The same study as another process would load it."""
    return optuna.load_study(study_name=study.study_name, storage=study._storage)


# -- trials ----------------------------------------------------------------------------------------


def test_a_told_trial_reads_back_typed(study: optuna.Study) -> None:
    trial = study.ask()
    records.write_owner(trial)
    records.write_config(trial, CONFIG)
    records.write_result(trial, RESULT)
    study.tell(trial, RESULT.throughput)

    (record,) = records.read_records(reopened(study))
    assert record == TrialRecord(number=0, state=TrialState.COMPLETE, value=1234.5,
                                 config=CONFIG, result=RESULT, role="", duplicate_of=None,
                                 owner={"host": socket.gethostname(), "pid": os.getpid()})
    assert record.ok and record.status is Status.OK and not record.baseline
    assert record.result is not None and record.result.diagnosis == RESULT.diagnosis


def test_a_duplicate_names_the_trial_it_copies(study: optuna.Study) -> None:
    for number in range(2):
        trial = study.ask()
        records.write_config(trial, CONFIG)
        records.write_result(trial, RESULT)
        if number:
            records.write_duplicate(trial, 0)
        study.tell(trial, RESULT.throughput)
    first, copy = records.read_records(study)
    assert first.duplicate_of is None and copy.duplicate_of == 0
    assert copy.result == first.result


def test_unfinished_and_foreign_trials(study: optuna.Study) -> None:
    running = study.ask()
    records.write_config(running, CONFIG)
    failed = study.ask()
    records.write_config(failed, CONFIG)
    records.write_result(failed, TrialResult(status=Status.INTERRUPTED, reason="SIGINT"))
    study.tell(failed, state=TrialState.FAIL)
    study.add_trial(optuna.trial.create_trial(value=1.0))  # told by someone else: no attributes

    by_number = {r.number: r for r in records.read_records(study)}
    assert by_number[0].state == TrialState.RUNNING and by_number[0].result is None
    assert by_number[0].value is None and by_number[0].status is None and not by_number[0].ok
    assert by_number[1].status is Status.INTERRUPTED and by_number[1].value is None
    assert not by_number[1].ok
    assert by_number[2].config is None and by_number[2].result is None and by_number[2].value == 1.0
    complete = records.read_records(study, [TrialState.COMPLETE])
    assert [r.number for r in complete] == [2]
    assert [r.number for r in records.read_records(study, [TrialState.RUNNING])] == [0]


def test_a_failed_outcome_told_as_complete_is_not_ok(study: optuna.Study) -> None:
    trial = study.ask()
    records.write_config(trial, CONFIG)
    records.write_result(trial, TrialResult(status=Status.OOM, reason="out of memory"))
    study.tell(trial, 0.0)
    (record,) = records.read_records(study)
    assert record.state == TrialState.COMPLETE and record.value == 0.0
    assert record.status is Status.OOM and not record.ok


def test_a_result_written_before_the_typed_fields_reads_typed(study: optuna.Study) -> None:
    trial = study.ask()
    trial.set_user_attr("config", CONFIG.to_dict())
    trial.set_user_attr("result", {"status": "ok", "throughput": 10.0, "extra": {
        "host_cpu": {"busy_fraction": 0.9, "steal_fraction": 0.1},
        "window_throughputs": [9.0, 10.0, 11.0]}})
    study.tell(trial, 10.0)
    (record,) = records.read_records(study)
    assert record.result is not None
    assert record.result.host_cpu == HostCpu(busy_fraction=0.9, steal_fraction=0.1)
    assert record.result.window_throughputs == (9.0, 10.0, 11.0)


# -- roles ---------------------------------------------------------------------------------------------


def test_enqueued_roles(study: optuna.Study) -> None:
    records.enqueue_config(study, {}, records.BASELINE)
    records.enqueue_config(study, {}, "recipe")
    assert records.role_taken(study, records.BASELINE)  # waiting counts
    assert not records.role_taken(study, "recipe-bs64")

    baseline = study.ask()
    assert records.read_role(baseline) == records.BASELINE
    assert baseline.user_attrs["baseline"] is True  # for users filtering in optuna-dashboard
    study.tell(baseline, 1.0)
    recipe = study.ask()
    assert records.read_role(recipe) == "recipe" and recipe.user_attrs["baseline"] is False
    study.tell(recipe, state=TrialState.FAIL)
    sampled = study.ask()
    assert records.read_role(sampled) == ""

    assert records.role_taken(study, records.BASELINE)  # complete counts
    assert not records.role_taken(study, "recipe")  # failed: to be tried again
    roles = [r.role for r in records.read_records(study)]
    assert roles == ["baseline", "recipe", ""]
    assert [r.baseline for r in records.read_records(study)] == [True, False, False]


# -- the study's own attributes ----------------------------------------------------------------------


def test_info(study: optuna.Study) -> None:
    assert study_attrs.read_info(study) is None
    study.set_user_attr("unit", "samples")  # a partial set is no info
    assert study_attrs.read_info(study) is None
    info = StudyInfo(adapter="adapters/mlp.py", unit="tokens", space="search_spaces/cpu.yaml",
                     device="cpu")
    study_attrs.write_info(study, info)
    assert study_attrs.read_info(reopened(study)) == info


def test_fingerprint(study: optuna.Study) -> None:
    assert study_attrs.read_fingerprint(study) is None
    fp = Fingerprint(torch="2.13.0", gpu="NVIDIA H100", gpu_memory_gb=79.1)
    study_attrs.write_fingerprint(study, fp)
    assert study_attrs.read_fingerprint(reopened(study)) == fp
    study.set_user_attr("fingerprint", {"torch": "2.11.0", "a_fact_dropped_since": 1})
    assert study_attrs.read_fingerprint(study) == Fingerprint(torch="2.11.0")


def test_confirmation(study: optuna.Study) -> None:
    assert study_attrs.read_confirmation(study) is None
    entries = [
        ConfirmationEntry(trial=3, baseline=False, search_throughput=300.0,
                          throughputs=(280.0, 290.0), median=285.0, spread=10 / 285,
                          statuses=("ok", "ok")),
        ConfirmationEntry(trial=0, baseline=True, search_throughput=100.0, throughputs=(),
                          median=None, spread=None, statuses=("oom", "oom")),
    ]
    study_attrs.write_confirmation(study, entries)
    assert study_attrs.read_confirmation(reopened(study)) == entries
    study_attrs.write_confirmation(study, None)  # stale: new trials ran since
    assert study_attrs.read_confirmation(study) is None


def test_confirmation_written_by_another_version(study: optuna.Study) -> None:
    study.set_user_attr("confirmation", [
        {"trial": 1, "baseline": False, "search_throughput": 5.0, "throughputs": [4.0],
         "median": 4.0, "spread": None, "statuses": ["ok"], "a_newer_field": "x"}])
    (entry,) = study_attrs.read_confirmation(study) or []
    assert entry.trial == 1 and entry.throughputs == (4.0,) and entry.statuses == ("ok",)


# -- confirmation runs and the winner as trials ------------------------------------------------


def searched(study: optuna.Study, config: TrainConfig, value: float) -> int:
    """A search trial with Optuna params, as the search leaves it; its number."""
    trial = study.ask()
    trial.suggest_int("batch_size", 8, 64)
    records.write_config(trial, config)
    records.write_result(trial, TrialResult(status=Status.OK, throughput=value))
    trial.set_constraint(records.FEASIBLE, 0.0)
    study.tell(trial, value)
    return trial.number


def test_confirmation_runs_are_trials_with_the_params_they_re_ran(study: optuna.Study) -> None:
    n = searched(study, CONFIG, 300.0)
    records.add_confirmation_run(study, n, TrialResult(status=Status.OK, throughput=290.0))
    records.add_confirmation_run(study, n, TrialResult(status=Status.OOM, reason="out of memory"))
    records.add_confirmation_run(study, n, TrialResult(status=Status.INTERRUPTED, reason="SIGINT"))
    trials = reopened(study).get_trials()
    ok, oom, stopped = trials[1:]
    assert ok.params == oom.params == trials[n].params
    assert (ok.state, ok.value, ok.constraints) == (TrialState.COMPLETE, 290.0,
                                                     {records.FEASIBLE: 0.0})
    assert (oom.state, oom.value, oom.constraints) == (TrialState.COMPLETE, 0.0,
                                                        {records.FEASIBLE: 1.0})
    assert stopped.state == TrialState.FAIL  # says nothing about the config
    recs = records.read_records(reopened(study))
    assert [(r.role, r.confirms, r.search) for r in recs] == [
        ("", None, True), ("confirm", n, False), ("confirm", n, False), ("confirm", n, False)]
    assert recs[1].config == CONFIG and recs[1].ok and recs[2].status is Status.OOM
    assert records.count_search_trials(study, [TrialState.COMPLETE]) == 1


def test_the_winner_is_the_studys_best_trial(study: optuna.Study) -> None:
    lucky = searched(study, CONFIG.replace(batch_size=32), 400.0)  # one lucky search window
    n = searched(study, CONFIG, 300.0)
    value = records.add_winner(study, n, TrialResult(status=Status.OK, throughput=310.0),
                               {"confidence": "high"})
    best = reopened(study).best_trial
    assert best.number == 2 and best.params == study.trials[n].params
    assert best.user_attrs["role"] == "winner" and best.user_attrs["confirms"] == n
    assert best.user_attrs["decision"] == {"confidence": "high"}
    # Its value is raised just past the lucky 400: the config is the winner's, the rate its own.
    assert value == best.value and 400.0 < value < 400.0 + 1e-9
    (record,) = [r for r in records.read_records(study) if r.role == records.WINNER]
    assert record.result is not None and record.result.throughput == 310.0
    assert record.confirms == n and not record.search and lucky != n
    # A winner above everything measured keeps its own rate as its value.
    assert records.add_winner(study, n, TrialResult(status=Status.OK, throughput=500.0), {}) == 500.0
    assert reopened(study).best_trial.number == 3


def test_measured_keeps_the_records_with_a_config_and_a_result_typed_so(
        study: optuna.Study) -> None:
    running = study.ask()
    records.write_config(running, CONFIG)
    told = study.ask()
    records.write_config(told, CONFIG)
    records.write_result(told, RESULT)
    study.tell(told, RESULT.throughput)
    study.add_trial(optuna.trial.create_trial(value=1.0))  # no config, no result

    (done,) = records.measured(records.read_records(study))
    assert isinstance(done, records.MeasuredRecord) and done.number == 1
    assert done.config == CONFIG and done.result == RESULT and done.rate == 1234.5
    assert records.MeasuredRecord.of(done) is done
    with pytest.raises(ValueError, match="trial 0"):
        records.MeasuredRecord.of(records.read_records(study)[0])
