"""A tiny adapter whose dataset hangs forever inside DataLoader worker processes.

Every process that touches the dataset records its pid as an empty file named after it in the
folder `$AUTOTUNE_TEST_PID_DIR` ("main-<pid>" for the trial process, "worker-<pid>" for a
DataLoader worker), so a test can check that a timed-out trial left none of them alive.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import torch
from torch import nn

import autotune

PID_DIR_ENV = "AUTOTUNE_TEST_PID_DIR"


def _record(kind: str) -> None:
    folder = Path(os.environ[PID_DIR_ENV])
    (folder / f"{kind}-{os.getpid()}").touch()


class HangingDataset(torch.utils.data.Dataset):
    def __len__(self) -> int:
        return 256

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        if torch.utils.data.get_worker_info() is not None:
            _record("worker")
            while True:  # a stuck read (a dead network mount, a deadlock): never returns
                time.sleep(60)
        return torch.zeros(4), torch.tensor(0)


class HangWorkerAdapter(autotune.Adapter):
    batch_size = 4

    def dataset(self) -> torch.utils.data.Dataset:
        _record("main")
        return HangingDataset()

    def model(self) -> nn.Module:
        return nn.Linear(4, 2)

    def optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        return torch.optim.SGD(model.parameters(), lr=0.01)

    def loss(self, model: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        x, y = batch
        return nn.functional.cross_entropy(model(x), y)
