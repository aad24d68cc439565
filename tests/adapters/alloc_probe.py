"""A small adapter that prints, once CUDA has started in the trial process, what the caching
allocator was configured with: the proof that a forked trial's allocator settings took effect."""

from __future__ import annotations

import json
import os

import torch
from torch import nn

import autotune


class AllocProbe(autotune.Adapter):
    batch_size = 8

    def dataset(self) -> torch.utils.data.Dataset:
        return torch.utils.data.TensorDataset(torch.randn(256, 16), torch.randint(4, (256,)))

    def model(self) -> nn.Module:
        return nn.Linear(16, 4)

    def optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        # The model is on the device by now: CUDA has started, and with it the allocator.
        probe = torch.empty(64 * 2**20, dtype=torch.uint8, device="cuda")
        segments = torch.cuda.memory._snapshot()["segments"]
        print("ALLOC " + json.dumps({
            "env": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
            "expandable_segments": sum(bool(s.get("is_expandable")) for s in segments),
            "max_split_size": torch.cuda.memory_stats().get("max_split_size"),
        }), flush=True)
        del probe
        return torch.optim.SGD(model.parameters(), lr=0.1)

    def loss(self, model: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        x, y = batch
        return nn.functional.cross_entropy(model(x), y)
