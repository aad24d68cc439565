"""A tiny adapter whose step fails in the way `$AUTOTUNE_TEST_FAULT` names.

- "nan": the loss is NaN from the first step (a broken config, not a fast one);
- "error": `loss` raises a ValueError (a bug in the user's code);
- "kill": the trial process SIGKILLs itself (what the kernel's OOM killer does).
"""

from __future__ import annotations

import os
import signal

import torch
from torch import nn

import autotune

FAULT_ENV = "AUTOTUNE_TEST_FAULT"


class FaultyAdapter(autotune.Adapter):
    batch_size = 4

    def dataset(self) -> torch.utils.data.Dataset:
        return torch.utils.data.TensorDataset(torch.randn(64, 4), torch.randint(0, 2, (64,)))

    def model(self) -> nn.Module:
        return nn.Linear(4, 2)

    def optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        return torch.optim.SGD(model.parameters(), lr=0.01)

    def loss(self, model: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        fault = os.environ[FAULT_ENV]
        x, y = batch
        if fault == "nan":
            return nn.functional.cross_entropy(model(x), y) * float("nan")
        if fault == "error":
            raise ValueError("bad batch in the user's loss")
        if fault == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        raise AssertionError(f"unknown {FAULT_ENV}={fault!r}")
