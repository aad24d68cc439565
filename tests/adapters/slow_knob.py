"""An adapter with a knob of its own whose default makes the step slow: `forward: slow` (the
default, first) sleeps 50 ms in the model's forward (at most 160 samples/s at batch 8, far
below the fast step even on a loaded CI machine); `fast` does not sleep. A
search must find `fast` and write it under `params:` in best.yaml. Every method records the
params it saw (`seen`), so a test can check that each read the trial's values."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))  # tests/adapters: the shared base
from base import SmallAdapter  # noqa: E402

FORWARD_SECONDS = 0.05


class SlowLinear(nn.Linear):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        time.sleep(FORWARD_SECONDS)
        return super().forward(x)


class SlowKnobAdapter(SmallAdapter):
    features = 8
    samples = 512
    knobs = {"forward": {"choices": ["slow", "fast"], "affects": "model"}}

    def __init__(self) -> None:
        self.seen: dict[str, Any] = {"__init__": dict(self.params)}

    def _saw(self, method: str) -> None:
        self.seen[method] = dict(self.params)

    def dataset(self) -> torch.utils.data.Dataset:
        self._saw("dataset")
        return super().dataset()

    def loader_args(self) -> dict[str, Any]:
        self._saw("loader_args")
        return {}

    def model(self) -> nn.Module:
        self._saw("model")
        slow = self.params["forward"] == "slow"
        return (SlowLinear if slow else nn.Linear)(self.features, self.classes)

    def optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        self._saw("optimizer")
        return super().optimizer(model)

    def loss(self, model: nn.Module, batch: Any) -> torch.Tensor:
        self._saw("loss")
        return super().loss(model, batch)

    def items(self, batch: Any) -> int:
        self._saw("items")
        return super().items(batch)
