"""DDP trials on two GPUs (NCCL): a normal trial whose ranks see the parent's NVLink-multicast
settings and drive one GPU each, and an OOM on rank 1 only, which is the trial's OOM whether the
ranks agree (rank 0 raises at the collective timeout) or NCCL's watchdog ends rank 0 first (the
parent merges the rank files)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from autotune.contract.config import TrainConfig
from autotune.contract.ranks import read_pids, read_ranks
from autotune.contract.request import MeasureSettings, TrialRequest
from autotune.contract.result import Status
from autotune.study.execution.ddp_runner import DDPRunner

pytestmark = [pytest.mark.requires_cuda, pytest.mark.slow]  # launchers and ranks
if torch.cuda.device_count() < 2:
    pytest.skip("needs two CUDA GPUs", allow_module_level=True)

ADAPTERS = Path(__file__).resolve().parents[1] / "adapters"
QUICK = MeasureSettings(window_seconds=0.05, budget_seconds=0.3, max_windows=4)
MULTICAST_OFF = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
                 "NVSHMEM_DISABLE_NVLS": "1"}


def test_two_gpu_ranks_with_the_parents_environment(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in MULTICAST_OFF.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("AUTOTUNE_TEST_ENV_DIR", str(tmp_path))
    monkeypatch.setenv("AUTOTUNE_TEST_ENV_NAMES", ",".join([*MULTICAST_OFF, "LOCAL_RANK"]))
    request = TrialRequest(adapter=str(ADAPTERS / "env_probe.py"), device="cuda", measure=QUICK,
                           config=TrainConfig(batch_size=8, grad_accum=2, static_graph=True))
    result = DDPRunner(nproc_per_node=2).run(request, tmp_path / "trial", timeout=180)
    assert result.status is Status.OK, result.reason
    assert result.peak_allocated_mb is not None
    for rank in (0, 1):
        seen = json.loads((tmp_path / f"env-{rank}.json").read_text())
        assert seen == {**MULTICAST_OFF, "LOCAL_RANK": str(rank)}
    assert len(read_pids(tmp_path / "trial")) == 2


def test_an_oom_on_rank_1_is_the_trials_oom_on_nccl(tmp_path: Path) -> None:
    request = TrialRequest(adapter=str(ADAPTERS / "faults" / "oom_rank1.py"), device="cuda",
                           measure=QUICK, config=TrainConfig(batch_size=8))
    result = DDPRunner(nproc_per_node=2, collective_timeout=10).run(
        request, tmp_path / "trial", timeout=180)
    assert result.status is Status.OOM, result.reason
    assert result.reason.startswith("rank 1: OutOfMemoryError"), result.reason
    assert any(o.rank == 1 and o.result.status is Status.OOM for o in read_ranks(tmp_path / "trial"))
