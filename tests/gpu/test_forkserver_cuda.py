"""Trials forked from the warm server, and confirmation runs handed to a spare process, still get
their own allocator settings: neither the server nor a spare starts CUDA before its run's
environment is set."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from autotune.contract.config import TrainConfig
from autotune.contract.request import MeasureSettings, TrialRequest
from autotune.contract.result import Status
from autotune.study.execution.forkserver import ForkServerRunner
from autotune.study.execution.spare_runner import SpareRunner

pytestmark = [pytest.mark.requires_cuda, pytest.mark.slow]  # fork servers and trial processes
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)

ADAPTER = Path(__file__).resolve().parents[1] / "adapters" / "alloc_probe.py"
QUICK = MeasureSettings(window_seconds=0.05, budget_seconds=0.3, max_windows=4)


def _allocator_seen(log: Path) -> dict[str, object]:
    line = next(x for x in log.read_text().splitlines() if x.startswith("ALLOC "))
    return json.loads(line[len("ALLOC "):])


@pytest.mark.parametrize("kind", [ForkServerRunner, SpareRunner], ids=["forked", "spare"])
def test_forked_trials_get_their_own_allocator_settings(
    tmp_path: Path, kind: type[ForkServerRunner] | type[SpareRunner]
) -> None:
    runner = kind(log=tmp_path / "server.log")
    configs = [TrainConfig(batch_size=8), TrainConfig(batch_size=8, expandable_segments=True),
               TrainConfig(batch_size=8, max_split_size_mb=128), TrainConfig(batch_size=8)]
    seen = []
    try:
        for i, config in enumerate(configs):
            request = TrialRequest(adapter=str(ADAPTER), config=config, device="cuda",
                                   measure=QUICK, number=i, diagnose=False)
            result = runner.run(request, tmp_path / str(i), timeout=120)
            assert result.status is Status.OK, result.reason
            seen.append(_allocator_seen(tmp_path / str(i) / "log.txt"))
        assert runner.fallback_reason == ""  # every trial was forked (or a spare), none cold
    finally:
        runner.close()
    print(f"\nKNOB {kind.__name__} allocator settings: {seen}")
    assert seen[0]["expandable_segments"] == 0 and seen[0]["env"] == ""
    assert seen[1]["expandable_segments"] >= 1 and seen[1]["env"] == "expandable_segments:True"
    assert seen[2]["max_split_size"] == 128 * 2**20
    assert seen[3] == seen[0]  # a later trial is back to the defaults
