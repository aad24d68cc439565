"""`sdpa_backend` and `cudnn_benchmark`: the attention kernel forced around forward and
backward, one that cannot run the step an `error` of the config (never the adapter's, never a
crash); cuDNN's benchmark mode set with the model's features (CPU only)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from helpers import TEST_ADAPTERS
from torch.nn.functional import scaled_dot_product_attention

from autotune import MeasureSettings, Status, TrainConfig
from autotune.contract.request import TrialRequest
from autotune.study.execution.runner import InProcessRunner
from autotune.trial.blame import blame, blamed
from autotune.trial.compose import apply_model_features
from autotune.trial.features.sdpa import Sdpa, apply_sdpa

QUICK = MeasureSettings(window_seconds=0.02, budget_seconds=0.2, max_windows=3)
QKV = torch.randn(2, 1, 4, 8)


def enabled() -> tuple[bool, ...]:
    b = torch.backends.cuda
    return (b.flash_sdp_enabled(), b.mem_efficient_sdp_enabled(), b.math_sdp_enabled(),
            b.cudnn_sdp_enabled())


def test_a_backend_is_enabled_alone_inside_and_restored_after() -> None:
    before = enabled()
    kernels = apply_sdpa("math")
    for _ in range(2):  # the step enters the same context every micro-step
        with kernels:
            assert enabled() == (False, False, True, False)
            scaled_dot_product_attention(QKV, QKV, QKV)
        assert enabled() == before


def test_default_leaves_pytorchs_choice() -> None:
    with apply_sdpa("default"):
        assert enabled() == (True, True, True, True)


def test_a_backend_that_cannot_run_is_named_and_not_blamed_on_the_adapter() -> None:
    with pytest.raises(RuntimeError, match="sdpa_backend=efficient: this backend cannot run") as info:
        with Sdpa("efficient"):  # no memory-efficient kernel on a CPU (torch 2.13)
            try:
                scaled_dot_product_attention(QKV, QKV, QKV)
            except Exception as exc:
                blame(exc, "loss(model, batch)")  # as the step marks what the loss raised
                raise
    assert blamed(info.value) == ""  # a config's error: the baseline never sees it
    assert blamed(info.value.__cause__) == "loss(model, batch)"


def run(tmp_path: Path, config: TrainConfig) -> tuple[Status, str, str]:
    request = TrialRequest(adapter=str(TEST_ADAPTERS / "attention.py"), config=config,
                           device="cpu", measure=QUICK, diagnose=False, check_env=False)
    result = InProcessRunner().run(request, tmp_path, timeout=60)
    return result.status, result.reason, result.contract_error


def test_a_trial_whose_backend_cannot_run_is_an_error_the_sampler_learns_from(
        tmp_path: Path) -> None:
    status, reason, part = run(tmp_path / "efficient", TrainConfig(batch_size=8,
                                                                 sdpa_backend="efficient"))
    assert status is Status.ERROR and part == ""
    assert reason.startswith("RuntimeError: sdpa_backend=efficient: this backend cannot run")
    assert run(tmp_path / "math", TrainConfig(batch_size=8, sdpa_backend="math"))[:2] == \
        (Status.OK, "")


@pytest.fixture
def _keep_cudnn_benchmark() -> Iterator[None]:
    before = torch.backends.cudnn.benchmark
    yield
    torch.backends.cudnn.benchmark = before


@pytest.mark.usefixtures("_keep_cudnn_benchmark")
def test_cudnn_benchmark_is_set_with_the_models_features() -> None:
    model = torch.nn.Linear(2, 2)
    torch.backends.cudnn.benchmark = False
    apply_model_features(model, [], amp_dtype="fp32", checkpoint=0.0, compile="none",
                         cudnn_benchmark=True)
    assert torch.backends.cudnn.benchmark is True
    # False leaves the process's own setting: a user's True survives a config that did not
    # search the knob (review, 2026-11-25).
    apply_model_features(model, [], amp_dtype="fp32", checkpoint=0.0, compile="none",
                         cudnn_benchmark=False)
    assert torch.backends.cudnn.benchmark is True
