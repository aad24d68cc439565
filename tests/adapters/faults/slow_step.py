"""A tiny adapter whose step sleeps `$AUTOTUNE_TEST_STEP_SLEEP` seconds above batch size 8.

For interrupting a search while a trial runs: with the variable set, a trial above batch 8 is
stuck in its step; without it (a resumed run), every trial trains normally. Batch 8 (the
baseline) never sleeps. Each process records its pid as an empty file in
`$AUTOTUNE_TEST_PID_DIR` (when set): "main-<pid>" for the trial process, "worker-<pid>" for a
DataLoader worker, and "step-<pid>" once a trial is stuck in its step (the test waits for it).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import torch
from torch import nn

import autotune

PID_DIR_ENV = "AUTOTUNE_TEST_PID_DIR"
SLEEP_ENV = "AUTOTUNE_TEST_STEP_SLEEP"
THRESHOLD = 8


def _record(kind: str) -> None:
    folder = os.environ.get(PID_DIR_ENV)
    if folder:
        (Path(folder) / f"{kind}-{os.getpid()}").touch()


class RecordingDataset(torch.utils.data.Dataset):
    def __init__(self) -> None:
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(64, 4, generator=g)
        self.y = torch.randint(0, 2, (64,), generator=g)

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        if torch.utils.data.get_worker_info() is not None:
            _record("worker")
        return self.x[i], self.y[i]


class SlowStepAdapter(autotune.Adapter):
    batch_size = 8

    def dataset(self) -> torch.utils.data.Dataset:
        _record("main")
        return RecordingDataset()

    def model(self) -> nn.Module:
        return nn.Linear(4, 2)

    def optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        return torch.optim.SGD(model.parameters(), lr=0.01)

    def loss(self, model: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        x, y = batch
        seconds = float(os.environ.get(SLEEP_ENV, "0"))
        if len(x) > THRESHOLD and seconds > 0:
            _record("step")
            time.sleep(seconds)
        return nn.functional.cross_entropy(model(x), y)
