"""A tiny adapter whose step kills its own process with SIGSEGV above batch size 8.

What a crash in native code (a CUDA driver fault, a bad extension) looks like from outside: the
process dies by a signal and writes no result. Batch 8 (the baseline) trains normally, so a
search over batch sizes has good trials too. The trial process records its pid as an empty file
"main-<pid>" in `$AUTOTUNE_TEST_PID_DIR` (when set), so a test can check it is gone.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import torch
from torch import nn

import autotune

PID_DIR_ENV = "AUTOTUNE_TEST_PID_DIR"
THRESHOLD = 8


def _record(kind: str) -> None:
    folder = os.environ.get(PID_DIR_ENV)
    if folder:
        (Path(folder) / f"{kind}-{os.getpid()}").touch()


class SegfaultAdapter(autotune.Adapter):
    batch_size = 8

    def dataset(self) -> torch.utils.data.Dataset:
        _record("main")
        return torch.utils.data.TensorDataset(torch.randn(64, 4), torch.randint(0, 2, (64,)))

    def model(self) -> nn.Module:
        return nn.Linear(4, 2)

    def optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        return torch.optim.SGD(model.parameters(), lr=0.01)

    def loss(self, model: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        x, y = batch
        if len(x) > THRESHOLD:
            os.kill(os.getpid(), signal.SIGSEGV)
        return nn.functional.cross_entropy(model(x), y)
