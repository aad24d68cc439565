"""TrialResult: what one trial produced, through JSON and back, typed facts included; results
written before the typed fields (an untyped `extra` bag) still load."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autotune import Diagnosis, Fingerprint, HostCpu, Status, TrialResult, Verdict

FINGERPRINT = Fingerprint(date="2026-01-01T00:00:00+00:00", hostname="box", python="3.11.7",
                          torch="2.13.0", cuda="13.0", cudnn=91000, cpu_count=16,
                          cpus_available=16, cpu_model="EPYC", cgroup_cpu_limit=8.0,
                          gpu="NVIDIA H100", gpu_memory_gb=79.1, gpu_capability="9.0",
                          gpu_multiprocessors=132, driver="580.1")
DIAGNOSIS = Diagnosis(verdict=Verdict.INPUT, suggestion="more workers", throughput=120.0,
                      loader_rate=130.0, compute_rate=900.0, data_wait_fraction=0.4,
                      gpu_busy_fraction=0.3, cpu_busy_fraction=0.5)
FULL = TrialResult(
    status=Status.OK, throughput=12.5, unit="tokens", spread=0.01, step_seconds=0.08,
    compile_seconds=3.0, warmup_seconds=4.0, warmup_steps=12, settled=True,
    data_wait_fraction=0.4, windows=3, window_throughputs=(12.0, 12.5, 13.0), converged=True,
    peak_allocated_mb=100.0, peak_reserved_mb=120.0, peak_rss_mb=900.0, duration_seconds=9.5,
    phases={"start": 2.0, "import": 1.0, "model": 0.5, "dataset": 0.5, "first_batch": 0.25,
            "warmup": 4.0, "windows": 1.5, "diagnosis": 1.0},
    blocks_checkpointed=2, log="trials/3/log.txt", fingerprint=FINGERPRINT, diagnosis=DIAGNOSIS,
    host_cpu=HostCpu(busy_fraction=0.7, steal_fraction=0.02),
)


def through_json(result: TrialResult) -> TrialResult:
    return TrialResult.from_dict(json.loads(json.dumps(result.to_dict())))


def test_round_trip_with_every_typed_field(tmp_path: Path) -> None:
    FULL.save(tmp_path / "result.json")
    loaded = TrialResult.load(tmp_path / "result.json")
    assert loaded == FULL
    assert isinstance(loaded.fingerprint, Fingerprint)
    assert isinstance(loaded.diagnosis, Diagnosis) and loaded.diagnosis.verdict is Verdict.INPUT
    assert isinstance(loaded.host_cpu, HostCpu)
    assert loaded.window_throughputs == (12.0, 12.5, 13.0)
    assert loaded.phases["warmup"] == 4.0


def test_json_holds_plain_values() -> None:
    data = json.loads(json.dumps(FULL.to_dict()))
    assert data["status"] == "ok"
    assert data["diagnosis"]["verdict"] == "input-bound"
    assert data["window_throughputs"] == [12.0, 12.5, 13.0]
    assert data["fingerprint"]["gpu"] == "NVIDIA H100"
    assert data["host_cpu"] == {"busy_fraction": 0.7, "steal_fraction": 0.02}
    assert "extra" not in data


def test_round_trip_of_a_contract_error() -> None:
    broken = TrialResult(status=Status.ERROR, reason="TypeError: adapter.loss must return a "
                         "scalar tensor", contract_error="loss(model, batch)")
    assert through_json(broken).contract_error == "loss(model, batch)"
    assert TrialResult.from_dict({"status": "error"}).contract_error == ""  # older results


def test_round_trip_of_a_failure_without_facts() -> None:
    oom = TrialResult(status=Status.OOM, reason="torch.OutOfMemoryError: CUDA out of memory")
    loaded = through_json(oom)
    assert loaded == oom
    assert loaded.fingerprint is None and loaded.diagnosis is None and loaded.host_cpu is None
    assert loaded.phases == {} and loaded.window_throughputs == ()


def test_status_and_verdict_from_their_values() -> None:
    result = TrialResult(status="nan", reason="loss was not finite")  # type: ignore[arg-type]
    assert result.status is Status.NAN
    d = Diagnosis(verdict="compute-bound", suggestion="", throughput=1.0,  # type: ignore[arg-type]
                  loader_rate=None, compute_rate=None, data_wait_fraction=0.0,
                  gpu_busy_fraction=None)
    assert d.verdict is Verdict.COMPUTE
    with pytest.raises(ValueError):
        Verdict("memory-bound")


def test_ok_result_needs_a_throughput() -> None:
    with pytest.raises(ValueError, match="throughput"):
        TrialResult(status=Status.OK)


def test_only_an_interruption_says_nothing_about_the_config() -> None:
    assert [s for s in Status if not s.says_something] == [Status.INTERRUPTED]


def test_legacy_extra_becomes_typed_fields() -> None:
    # What result.json and the study's user attributes held before the typed fields.
    legacy = {
        "status": "ok", "throughput": 300.0, "unit": "samples", "reason": "", "log": "",
        "extra": {
            "fingerprint": {"torch": "2.11.0", "gpu": "NVIDIA H200", "cpu_model": "Xeon",
                            "some_fact_dropped_since": 1},
            "diagnosis": {"verdict": "overhead-bound", "suggestion": "try CUDA graphs",
                          "throughput": 300.0, "loader_rate": None, "compute_rate": 310.0,
                          "data_wait_fraction": 0.01, "gpu_busy_fraction": 0.4},
            "host_cpu": {"busy_fraction": 0.96, "steal_fraction": 0.12},
            "window_throughputs": [299.0, 300.0, 301.0],
            "settled": False,
            "warmup_steps": 200,
            "blocks_checkpointed": 4,
            "diagnosis_error": "",
        },
    }
    result = TrialResult.from_dict(legacy)
    assert result.fingerprint == Fingerprint(torch="2.11.0", gpu="NVIDIA H200", cpu_model="Xeon")
    assert result.fingerprint.device == "NVIDIA H200"
    assert result.diagnosis is not None and result.diagnosis.verdict is Verdict.OVERHEAD
    assert result.diagnosis.cpu_busy_fraction is None  # not recorded then: its default
    assert result.host_cpu == HostCpu(busy_fraction=0.96, steal_fraction=0.12)
    assert result.window_throughputs == (299.0, 300.0, 301.0)
    assert result.settled is False and result.warmup_steps == 200
    assert result.blocks_checkpointed == 4
    assert through_json(result) == result  # and it is written back typed


def test_typed_fields_win_over_legacy_extra() -> None:
    data = {**TrialResult(status=Status.ERROR, reason="x", warmup_steps=5).to_dict(),
            "extra": {"warmup_steps": 99, "diagnosis_error": "RuntimeError: profiler"}}
    result = TrialResult.from_dict(data)
    assert result.warmup_steps == 5
    assert result.diagnosis_error == ""  # "" is a value, not a gap to fill from extra


def test_unknown_keys_are_ignored() -> None:
    data = {**FULL.to_dict(), "written_by_a_newer_version": True}
    data["host_cpu"] = {**data["host_cpu"], "iowait_fraction": 0.1}
    assert TrialResult.from_dict(data) == FULL


def test_fingerprint_device_falls_back_to_the_cpu() -> None:
    assert Fingerprint(cpu_model="EPYC 9654").device == "cpu: EPYC 9654"
    assert FINGERPRINT.device == "NVIDIA H100"


def test_not_run_is_a_field_and_survives_a_round_trip() -> None:
    refused = TrialResult(status=Status.ERROR, ran=False, reason="not run: bf16 on this CPU")
    assert TrialResult.from_dict(json.loads(json.dumps(refused.to_dict()))).ran is False
    assert TrialResult(status=Status.OK, throughput=1.0).ran is True


def test_results_stored_before_the_field_read_it_from_the_reason() -> None:
    old = TrialResult(status=Status.PRUNED, reason="not run: at most 3/s").to_dict()
    del old["ran"]
    assert TrialResult.from_dict(old).ran is False
    ran = TrialResult(status=Status.PRUNED, reason="pruned after 2 window(s)").to_dict()
    del ran["ran"]
    assert TrialResult.from_dict(ran).ran is True
    # A copy's note mentions "not re-run" but does not begin so: it ran.
    assert TrialResult.from_dict({"status": "ok", "throughput": 2.0,
                                  "reason": "same config as trial 3: not re-run"}).ran is True
