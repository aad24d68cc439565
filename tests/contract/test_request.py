"""What the parent asks of a trial process: the request file, and combinations refused before
any process starts."""

from __future__ import annotations

import json
from pathlib import Path

from autotune import MeasureSettings, TrainConfig
from autotune.contract.request import TrialRequest, known_incompatible


def test_trial_request_round_trip(tiny_adapter: Path) -> None:
    request = TrialRequest(
        adapter=str(tiny_adapter),
        config=TrainConfig(batch_size=16, num_workers=2, prefetch_factor=4, amp_dtype="bf16"),
        device="cpu", measure=MeasureSettings(window_seconds=0.02, budget_seconds=0.2),
        number=7, diagnose=False, check_env=False, nproc_per_node=2, collective_timeout=5.0,
        compile_grace=30.0,
    )
    data = json.loads(json.dumps(request.to_dict()))  # what request.json holds
    assert TrialRequest.from_dict(data) == request


def test_trial_request_defaults() -> None:
    request = TrialRequest(adapter="a.py", config=TrainConfig(batch_size=8), device="cuda")
    assert request.measure == MeasureSettings()
    assert request.diagnose and request.check_env and request.number == 0
    assert request.nproc_per_node == 1  # one process, no DDP


def test_trial_request_of_an_older_version_runs_one_process(tiny_adapter: Path) -> None:
    data = TrialRequest(adapter="a.py", config=TrainConfig(batch_size=8), device="cpu").to_dict()
    del data["nproc_per_node"], data["collective_timeout"], data["compile_grace"]
    assert TrialRequest.from_dict(data).nproc_per_node == 1
    assert TrialRequest.from_dict(data).compile_grace == 0.0


def test_known_incompatible_only_refuses_cuda_graphs_with_accumulation() -> None:
    graphs = TrainConfig(batch_size=8, grad_accum=2, compile="reduce-overhead")
    assert "grad_accum=2" in (known_incompatible(graphs, "cuda") or "")
    assert known_incompatible(graphs, "cpu") is None  # no CUDA graphs on a CPU
    assert known_incompatible(graphs.replace(grad_accum=1), "cuda") is None
    assert known_incompatible(graphs.replace(compile="default"), "cuda") is None
    assert known_incompatible(graphs.replace(compile="max-autotune"), "cuda") is not None
