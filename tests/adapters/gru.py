"""A GRU tagger: Dynamo skips `nn.GRU` (unless `torch._dynamo.config.allow_rnn`), so
`torch.compile` of this model compiles no graph and runs it eagerly."""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))  # tests/adapters: the shared base
from base import SmallAdapter  # noqa: E402


class Tagger(nn.Module):
    def __init__(self, features: int, classes: int) -> None:
        super().__init__()
        self.gru = nn.GRU(features, 16, batch_first=True)
        self.head = nn.Linear(16, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.gru(x.unsqueeze(1))
        return self.head(out[:, -1])


class GRUAdapter(SmallAdapter):
    features = 8
    samples = 256

    def model(self) -> nn.Module:
        return Tagger(self.features, self.classes)
