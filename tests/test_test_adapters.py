"""The test adapters themselves: each is its own subclass of the shared base (tests/adapters/
base.py), overrides only where its fault lives, and still gets its fault (the ones that can run
in this process are run here; the segfault and the hangs run in tests/test_faults.py)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from helpers import PID_DIR_ENV, TEST_ADAPTERS, recorded_pids

from autotune import Adapter, InputError, MeasureSettings, Status, TrainConfig, load_adapter
from autotune.contract.request import TrialRequest
from autotune.study.execution.runner import InProcessRunner

sys.path.insert(0, str(TEST_ADAPTERS))
import base  # noqa: E402 -- the shared base, as the adapter files import it

QUICK = MeasureSettings(window_seconds=0.02, budget_seconds=0.2, max_windows=5)

# Each adapter file, and what it defines beyond the base (the methods where its fault lives).
OVERRIDES = {
    "tiny.py": {"model", "blocks"},
    "faulty.py": {"loss"},
    "hang_worker.py": {"dataset"},
    "oom_above.py": {"loss"},
    "slow_loader.py": {"dataset"},
    "slow_model.py": {"model"},
    "faults/hang_step.py": {"loss"},
    "faults/nan_loss.py": {"loss"},
    "faults/segfault.py": {"loss"},
    "faults/slow_step.py": {"dataset"},
    "faults/worker_error.py": {"dataset"},
    "faults/vector_loss.py": {"loss"},
    "faults/oom_rank1.py": {"loss"},
    "faults/hang_rank0.py": {"loss"},
    "faults/hang_diagnosis.py": {"loss"},
    "env_probe.py": {"model"},
    "huge.py": {"dataset"},
    "structured.py": {"dataset", "loader_args", "loss"},
    "faults/stuck_host.py": {"loss"},
    "slot_probe.py": {"dataset", "optimizer", "loss"},
    "noisy_steps.py": {"loss"},
    "paced.py": {"loss"},
    "padded.py": {"dataset", "model", "loader_args", "loss", "items"},
    "attention.py": {"model"},
    "gru.py": {"model"},
    "slow_knob.py": {"dataset", "model", "optimizer", "loader_args", "loss", "items"},
}
METHODS = {"dataset", "model", "optimizer", "loss", "blocks", "items", "flops_per_item",
           "loader_args", "make_loader"}


def test_every_adapter_on_the_base_is_listed() -> None:
    on_base = {str(p.relative_to(TEST_ADAPTERS)) for p in TEST_ADAPTERS.rglob("*.py")
               if p.name != "base.py" and "from base import" in p.read_text()}
    assert on_base == set(OVERRIDES)


@pytest.mark.parametrize("name", list(OVERRIDES))
def test_each_adapter_subclasses_the_base_and_overrides_only_its_fault(name: str) -> None:
    cls = load_adapter(TEST_ADAPTERS / name)
    assert issubclass(cls, base.SmallAdapter) and cls is not base.SmallAdapter
    assert cls.__module__ != base.SmallAdapter.__module__  # defined in the file itself
    assert set(vars(cls)) & METHODS == OVERRIDES[name]


def test_the_broken_adapters_still_fail_to_load() -> None:
    with pytest.raises(InputError, match="fault injected at import"):
        load_adapter(TEST_ADAPTERS / "faults" / "import_error.py")
    with pytest.raises(InputError, match="NoOptimizerAdapter does not define optimizer"):
        load_adapter(TEST_ADAPTERS / "faults" / "missing_method.py")
    assert not issubclass(load_adapter.__globals__["Adapter"], base.SmallAdapter)
    assert base.SmallAdapter.__mro__[1] is Adapter


def run(tmp_path: Path, name: str, config: TrainConfig) -> tuple[Status, str]:
    request = TrialRequest(adapter=str(TEST_ADAPTERS / name), config=config, device="cpu",
                           measure=QUICK, diagnose=False)
    result = InProcessRunner().run(request, tmp_path / "trial", timeout=60)
    return result.status, result.reason


@pytest.mark.parametrize(
    ("name", "fault", "status", "reason"),
    [
        ("faults/nan_loss.py", TrainConfig(batch_size=32), Status.NAN, "not finite"),
        ("oom_above.py", TrainConfig(batch_size=32), Status.OOM, "CUDA out of memory"),
        ("faults/worker_error.py", TrainConfig(batch_size=8, num_workers=1), Status.ERROR,
         "ValueError: bad sample 3"),
    ],
)
def test_a_fault_happens_only_where_it_should(tmp_path: Path, name: str, fault: TrainConfig,
                                              status: Status, reason: str) -> None:
    assert run(tmp_path / "fault", name, fault)[0] is status
    assert reason in run(tmp_path / "again", name, fault)[1]
    assert run(tmp_path / "base", name, TrainConfig(batch_size=8)) == (Status.OK, "")


def test_a_contract_fault_happens_in_every_config(tmp_path: Path) -> None:
    for i, config in enumerate([TrainConfig(batch_size=8), TrainConfig(batch_size=32)]):
        status, reason = run(tmp_path / str(i), "faults/vector_loss.py", config)
        assert status is Status.ERROR
        assert "adapter.loss must return a scalar tensor" in reason


def test_trial_processes_and_workers_record_their_pids(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pid_dir = tmp_path / "pids"
    pid_dir.mkdir()
    monkeypatch.setenv(PID_DIR_ENV, str(pid_dir))
    config = TrainConfig(batch_size=8, num_workers=1)
    assert run(tmp_path, "faults/slow_step.py", config)[0] is Status.OK
    assert recorded_pids(pid_dir, "main") == [os.getpid()]
    assert recorded_pids(pid_dir, "worker")  # the DataLoader worker read samples
    assert not recorded_pids(pid_dir, "step")  # not stuck: no sleep asked for
