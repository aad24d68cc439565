"""A tiny adapter whose step runs "out of memory" above a batch size, like a GPU would.

`loss` raises a real `torch.OutOfMemoryError` (the type a CUDA OOM arrives as) whenever the
micro-batch holds more than `threshold` samples, so an OOM trial is testable on a CPU.
"""

from __future__ import annotations

from typing import ClassVar

import torch
from torch import nn

import autotune


class OOMAboveAdapter(autotune.Adapter):
    unit = "samples"
    batch_size = 8
    threshold: ClassVar[int] = 16
    """Largest batch that "fits"."""

    def dataset(self) -> torch.utils.data.Dataset:
        g = torch.Generator().manual_seed(0)
        return torch.utils.data.TensorDataset(
            torch.randn(1024, 8, generator=g), torch.randint(0, 2, (1024,), generator=g)
        )

    def model(self) -> nn.Module:
        return nn.Linear(8, 2)

    def optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        return torch.optim.SGD(model.parameters(), lr=0.01)

    def loss(self, model: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        x, y = batch
        if len(x) > self.threshold:
            raise torch.OutOfMemoryError(
                f"CUDA out of memory. Tried to allocate {len(x)} samples (test adapter: the "
                f"limit is {self.threshold})"
            )
        return nn.functional.cross_entropy(model(x), y)
