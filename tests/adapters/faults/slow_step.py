"""A tiny adapter whose trials with DataLoader workers get stuck in their step while
`$AUTOTUNE_TEST_STEP_SLEEP` is set: each worker sleeps that many seconds in every sample it
reads, so the step waits for its batch.

For interrupting a search while a trial runs: with the variable set, a trial with workers is
stuck; without it (a resumed run), every trial trains normally. The baseline (no workers) never
waits. Each process records its pid in `$AUTOTUNE_TEST_PID_DIR` (see ../base.py: "main" and
"worker"), and a worker records "step-<pid>" once it holds its trial's step up (the test waits
for it).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/adapters: the shared base
from base import Samples, SmallAdapter, record_pid  # noqa: E402

SLEEP_ENV = "AUTOTUNE_TEST_STEP_SLEEP"


class SlowWorkerSamples(Samples):
    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        sample = super().__getitem__(i)  # records a worker's pid
        seconds = float(os.environ.get(SLEEP_ENV, "0"))
        if seconds > 0 and torch.utils.data.get_worker_info() is not None:
            record_pid("step")
            time.sleep(seconds)
        return sample


class SlowStepAdapter(SmallAdapter):
    def dataset(self) -> torch.utils.data.Dataset:
        return SlowWorkerSamples(self.samples, self.features, self.classes)
