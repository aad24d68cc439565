"""A tiny adapter whose dataset raises `ValueError("bad sample 3")` inside DataLoader workers.

A corrupt sample that only a worker process reads: with `num_workers=0` (the baseline) the
same dataset loads fine, so a search over workers has good trials too. Every process records
its pid in `$AUTOTUNE_TEST_PID_DIR` (see ../base.py: "main" and "worker").
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/adapters: the shared base
from base import Samples, SmallAdapter  # noqa: E402

BAD_INDEX = 3


class BadSampleDataset(Samples):
    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        x, y = super().__getitem__(i)  # records a worker's pid
        if torch.utils.data.get_worker_info() is not None and i == BAD_INDEX:
            raise ValueError(f"bad sample {i}")
        return x, y


class WorkerErrorAdapter(SmallAdapter):
    samples = 16  # two batches of 8 per epoch: index 3 is read within the first epoch

    def dataset(self) -> torch.utils.data.Dataset:
        return BadSampleDataset(self.samples, self.features, self.classes)
