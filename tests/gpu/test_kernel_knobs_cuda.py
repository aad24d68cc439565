"""The kernel knobs on CUDA: the fused optimizer, channels_last, a forced attention kernel (one
that cannot run is the config's error), cuDNN's benchmark mode (KNOB lines printed with -s).

Run on a GPU machine: `python -m pytest tests/gpu -s -v`. Skipped where there is no CUDA.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch
from torch import nn

import autotune
from autotune.contract.config import TrainConfig
from autotune.trial.compose import TrainStep

pytestmark = pytest.mark.requires_cuda

CUDA = torch.device("cuda")


class Images(autotune.Adapter):
    """A small CNN on random images: what channels_last and cuDNN's benchmark act on."""

    unit = "images"
    batch_size = 32

    def dataset(self) -> torch.utils.data.Dataset:
        g = torch.Generator().manual_seed(0)
        return torch.utils.data.TensorDataset(torch.randn(256, 3, 32, 32, generator=g),
                                              torch.randint(10, (256,), generator=g))

    def model(self) -> nn.Module:
        return nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                             nn.Flatten(), nn.Linear(32, 10))

    def optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        return torch.optim.AdamW(model.parameters(), lr=1e-3)

    def loss(self, model: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        x, y = batch
        return nn.functional.cross_entropy(model(x).float(), y)


class Attention(Images):
    """One attention layer of 4 heads of 64 over 16 tokens."""

    def dataset(self) -> torch.utils.data.Dataset:
        g = torch.Generator().manual_seed(0)
        return torch.utils.data.TensorDataset(torch.randn(256, 16, 256, generator=g))

    def model(self) -> nn.Module:
        return nn.MultiheadAttention(256, 4, batch_first=True)

    def loss(self, model: nn.Module, batch: tuple[torch.Tensor]) -> torch.Tensor:
        (x,) = batch
        return model(x, x, x, need_weights=False)[0].float().square().mean()


@pytest.fixture
def step() -> Iterator[object]:
    made: list[TrainStep] = []

    def build(adapter: autotune.Adapter, config: TrainConfig) -> TrainStep:
        made.append(TrainStep(adapter, config, CUDA))
        return made[-1]

    yield build
    for s in made:
        s.close()
    torch.backends.cudnn.benchmark = False


def test_fused_and_channels_last_and_cudnn_benchmark_train(step: object) -> None:
    config = TrainConfig(batch_size=32, amp_dtype="bf16", optimizer_impl="fused",
                         memory_format="channels_last", cudnn_benchmark=True)
    s = step(Images(), config)  # type: ignore[operator]
    assert s.optimizer.param_groups[0]["fused"] is True and torch.backends.cudnn.benchmark
    assert s.model[0].weight.is_contiguous(memory_format=torch.channels_last)
    batch = s.to_device(s.next_batch()[0], non_blocking=False)
    assert batch[0].is_contiguous(memory_format=torch.channels_last)
    for _ in range(3):
        s()
    assert s.finite()
    print(f"\nKNOB kernels: {config.describe()} trains on {torch.cuda.get_device_name()}")


def test_a_forced_attention_kernel_that_cannot_run_is_the_configs_error(step: object) -> None:
    # Flash attention takes fp16/bf16 only: in fp32 it cannot run.
    s = step(Attention(), TrainConfig(batch_size=32, sdpa_backend="flash"))  # type: ignore[operator]
    with pytest.raises(RuntimeError, match="sdpa_backend=flash: this backend cannot run"):
        s()
    for backend in ("flash", "efficient", "math"):
        ok = step(Attention(), TrainConfig(batch_size=32, amp_dtype="bf16",  # type: ignore[operator]
                                          sdpa_backend=backend))
        ok()
        assert ok.finite()
    print("\nKNOB sdpa_backend: flash refused in fp32 as the config's error; flash, efficient, "
          "math run in bf16")
