"""A tiny adapter whose dataset raises `ValueError("bad sample 3")` inside DataLoader workers.

A corrupt sample that only a worker process reads: with `num_workers=0` (the baseline) the
same dataset loads fine, so a search over workers has good trials too. Every process that
touches the dataset records its pid as an empty file in `$AUTOTUNE_TEST_PID_DIR` (when set):
"main-<pid>" for the trial process, "worker-<pid>" for a DataLoader worker.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch
from torch import nn

import autotune

PID_DIR_ENV = "AUTOTUNE_TEST_PID_DIR"
BAD_INDEX = 3


def _record(kind: str) -> None:
    folder = os.environ.get(PID_DIR_ENV)
    if folder:
        (Path(folder) / f"{kind}-{os.getpid()}").touch()


class BadSampleDataset(torch.utils.data.Dataset):
    def __len__(self) -> int:
        return 16  # two batches of 8 per epoch: index 3 is read within the first epoch

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        if torch.utils.data.get_worker_info() is not None:
            _record("worker")
            if i == BAD_INDEX:
                raise ValueError(f"bad sample {i}")
        return torch.full((4,), float(i)), torch.tensor(i % 2)


class WorkerErrorAdapter(autotune.Adapter):
    batch_size = 8

    def dataset(self) -> torch.utils.data.Dataset:
        _record("main")
        return BadSampleDataset()

    def model(self) -> nn.Module:
        return nn.Linear(4, 2)

    def optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        return torch.optim.SGD(model.parameters(), lr=0.01)

    def loss(self, model: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        x, y = batch
        return nn.functional.cross_entropy(model(x), y)
