"""Steps paced `STEP_SECONDS` apart, each made longer by `$AUTOTUNE_TEST_SLOWDOWN` (0.15: 15%):
the same adapter before and after a change that slows training, for `autotune check`'s tests.

The pace is a schedule: each step is due `STEP_SECONDS` after the one before, and sleeps until
then; a step that starts late (the process was descheduled, a sleep overslept) does not sleep and
the next ones catch up. The rate is then set by the pace (batch 8 / 50 ms = 160 samples/s), not
by the load of the machine running the tests, as long as a step's own work takes less than the
period on average. A stall of half a second restarts the schedule (no burst of catching up after
a pause). 50 ms, not 20: on a 2-core machine loaded 3 deep, 20-ms windows read 330 to 470/s.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))  # tests/adapters: the shared base
from base import SmallAdapter  # noqa: E402

STEP_SECONDS = 0.05
SLOWDOWN_ENV = "AUTOTUNE_TEST_SLOWDOWN"
CATCH_UP = 25
"""Periods a step may start late and still be caught up on."""


class PacedAdapter(SmallAdapter):
    samples = 512

    def loss(self, model: nn.Module, batch: Any) -> torch.Tensor:
        period = STEP_SECONDS * (1 + float(os.environ.get(SLOWDOWN_ENV) or 0))
        now = time.perf_counter()
        due = getattr(model, "_due", None)
        if due is None or now - due > CATCH_UP * period:
            due = now  # the first step, or after a stall: start the schedule here
        time.sleep(max(0.0, due - now))
        model._due = due + period  # type: ignore[assignment]  # one model per run
        return super().loss(model, batch)
