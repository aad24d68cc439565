"""A tiny adapter whose dataset hangs forever inside DataLoader worker processes.

Every process records its pid in `$AUTOTUNE_TEST_PID_DIR` (see base.py: "main-<pid>" for the
trial process, "worker-<pid>" for a DataLoader worker), so a test can check that a timed-out
trial left none of them alive.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))  # tests/adapters: the shared base
from base import Samples, SmallAdapter, record_pid  # noqa: E402


class HangingDataset(Samples):
    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        if torch.utils.data.get_worker_info() is not None:
            record_pid("worker")
            while True:  # a stuck read (a dead network mount, a deadlock): never returns
                time.sleep(60)
        return super().__getitem__(i)


class HangWorkerAdapter(SmallAdapter):
    batch_size = 4
    samples = 256

    def dataset(self) -> torch.utils.data.Dataset:
        return HangingDataset(self.samples, self.features, self.classes)
