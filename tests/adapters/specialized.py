"""The padded sequences of `padded.py`, through a model whose code needs the length as a plain
number (a Python list as long as the sequence): compiled, it specializes the varying length, so
every new length would compile again."""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))  # tests/adapters
from padded import VOCAB, PaddedAdapter  # noqa: E402


class LengthTable(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed, self.out = nn.Embedding(VOCAB, 16), nn.Linear(16, VOCAB)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        weights = torch.tensor([1.0] * ids.shape[1])  # a list needs a concrete length
        return self.out(self.embed(ids) * weights[None, :, None])


class SpecializedAdapter(PaddedAdapter):
    def model(self) -> nn.Module:
        return LengthTable()
