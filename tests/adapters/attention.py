"""The base classifier with one self-attention layer (`scaled_dot_product_attention`): what the
`sdpa_backend` knob acts on. On a CPU (torch 2.13) the flash and math kernels run it, the
memory-efficient one cannot."""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))  # tests/adapters: the shared base
from base import SmallAdapter  # noqa: E402


class Attention(nn.Module):
    def __init__(self, features: int, classes: int) -> None:
        super().__init__()
        self.qkv = nn.Linear(features, 3 * 8)
        self.out = nn.Linear(8, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(x).view(len(x), 3, 1, 2, 4).unbind(1)  # 1 head, 2 tokens of 4
        return self.out(nn.functional.scaled_dot_product_attention(q, k, v).flatten(1))


class AttentionAdapter(SmallAdapter):
    def model(self) -> nn.Module:
        return Attention(self.features, self.classes)
