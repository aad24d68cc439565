"""What the test adapters share: a small linear classifier on seeded random samples.

Each adapter in this folder and in faults/ subclasses `SmallAdapter` and overrides only the
method where its fault (or its slowness) lives. `load_adapter` takes the one Adapter subclass
*defined in* the adapter's file, so this base, imported there, is never taken for the adapter;
an adapter file puts this folder on `sys.path` before importing it:

    sys.path.insert(0, str(Path(__file__).resolve().parent))  # faults/: .parents[1]
    from base import SmallAdapter  # noqa: E402

Processes record themselves when `$AUTOTUNE_TEST_PID_DIR` is set, as empty files named
"<kind>-<pid>" in that folder: "main" for each trial process (from `optimizer`, which every trial
calls once: the dataset may have been built once in a fork server), "worker" for each DataLoader
worker that reads a sample. A test can then check that none of them outlived the search.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, ClassVar

import torch
from torch import nn

import autotune

PID_DIR_ENV = "AUTOTUNE_TEST_PID_DIR"


def record_pid(kind: str) -> None:
    """Leave "<kind>-<pid>" in `$AUTOTUNE_TEST_PID_DIR` (nothing when it is not set)."""
    folder = os.environ.get(PID_DIR_ENV)
    if folder:
        (Path(folder) / f"{kind}-{os.getpid()}").touch()


class Samples(torch.utils.data.Dataset):
    """`n` seeded random samples of `features` floats and a class label; a DataLoader worker
    that reads one records its pid."""

    def __init__(self, n: int, features: int, classes: int) -> None:
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(n, features, generator=g)
        self.y = torch.randint(0, classes, (n,), generator=g)

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        if torch.utils.data.get_worker_info() is not None:
            record_pid("worker")
        return self.x[i], self.y[i]


class SmallAdapter(autotune.Adapter):
    """A linear classifier trained with SGD on `samples` random samples (trials take seconds)."""

    unit = "samples"
    batch_size = 8
    # The searches of these tests climb to larger batches (faults at batch 32, the OOM wall), so
    # they let the search change the effective batch, as a real adapter must ask to.
    vary_global_batch = True
    features: ClassVar[int] = 4
    classes: ClassVar[int] = 2
    samples: ClassVar[int] = 64

    def dataset(self) -> torch.utils.data.Dataset:
        return Samples(self.samples, self.features, self.classes)

    def model(self) -> nn.Module:
        return nn.Linear(self.features, self.classes)

    def optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        record_pid("main")
        return torch.optim.SGD(model.parameters(), lr=0.01)

    def loss(self, model: nn.Module, batch: Any) -> torch.Tensor:
        x, y = batch
        return nn.functional.cross_entropy(model(x), y)
