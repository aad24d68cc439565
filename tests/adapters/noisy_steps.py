"""A step of a fixed cost, inflated between runs when asked: a machine shared with something busy.

Steps are paced `STEP_SECONDS` apart (a sleep that takes up what the step's own work left of
the period: the rate is set by the pace, not by the load of the machine running the tests, as
long as a step's work takes less; a larger batch is faster by its size). With `$AUTOTUNE_TEST_NOISE_DIR` set, every other run of each batch size sleeps
`INFLATION` times longer: the worst case of a random inflation, as two runs of one config then
always contradict each other. Runs are counted per batch size in a file in that folder.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))  # tests/adapters: the shared base
from base import SmallAdapter  # noqa: E402

STEP_SECONDS = 0.04
INFLATION = 4.0
NOISE_ENV = "AUTOTUNE_TEST_NOISE_DIR"


class NoisyStepsAdapter(SmallAdapter):
    samples = 256

    def loss(self, model: nn.Module, batch: Any) -> torch.Tensor:
        factor = getattr(model, "_inflation", None)
        if factor is None:  # the run's first step: is this run an inflated one?
            factor = _inflation(len(batch[0]))
            model._inflation = factor  # type: ignore[assignment]  # one model per run
        last = getattr(model, "_last_step", None)
        done = 0.0 if last is None else time.perf_counter() - last
        time.sleep(max(0.0, STEP_SECONDS * factor - done))
        model._last_step = time.perf_counter()  # type: ignore[assignment]
        return super().loss(model, batch)


def _inflation(batch_size: int) -> float:
    folder = os.environ.get(NOISE_ENV)
    if not folder:
        return 1.0
    counts_file = Path(folder) / "runs.json"
    counts = json.loads(counts_file.read_text()) if counts_file.is_file() else {}
    n = counts.get(str(batch_size), 0)
    counts[str(batch_size)] = n + 1
    counts_file.write_text(json.dumps(counts))
    return INFLATION if n % 2 else 1.0
