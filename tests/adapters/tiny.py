"""The smallest useful adapter: a two-layer classifier on 512 random samples (trials take
seconds), with two blocks activation checkpointing can wrap."""

from __future__ import annotations

import sys
from pathlib import Path

from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))  # tests/adapters: the shared base
from base import SmallAdapter  # noqa: E402


class TinyAdapter(SmallAdapter):
    features = 8
    samples = 512

    def model(self) -> nn.Module:
        return nn.Sequential(nn.Linear(self.features, 16), nn.ReLU(), nn.Linear(16, self.classes))

    def blocks(self, model: nn.Module) -> list[nn.Module]:
        return [model[0], model[2]]
