"""A CPU-sized example: an MLP classifier on synthetic features with a per-sample augmentation.

Small enough that `autotune search --adapter adapters/mlp.py` finishes in a few minutes on two
CPU cores; the README's quick start uses it.
"""

from __future__ import annotations

import torch
from torch import nn

import autotune

FEATURES = 128
CLASSES = 10
HIDDEN = 512
DEPTH = 3
SAMPLES = 16384


class NoisyFeatures(torch.utils.data.Dataset):
    """Fixed random features and labels; each read adds fresh noise (the augmentation)."""

    def __init__(self) -> None:
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(SAMPLES, FEATURES, generator=g)
        w = torch.randn(FEATURES, CLASSES, generator=g)
        self.y = (self.x @ w).argmax(dim=1)

    def __len__(self) -> int:
        return SAMPLES

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.x[i] + 0.1 * torch.randn(FEATURES), self.y[i]


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inp = nn.Linear(FEATURES, HIDDEN)
        self.hidden = nn.ModuleList(
            nn.Sequential(nn.LayerNorm(HIDDEN), nn.Linear(HIDDEN, HIDDEN), nn.GELU())
            for _ in range(DEPTH)
        )
        self.out = nn.Linear(HIDDEN, CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.inp(x)
        for block in self.hidden:
            h = h + block(h)
        return self.out(h)


class MLPAdapter(autotune.Adapter):
    unit = "samples"
    batch_size = 32

    def dataset(self) -> torch.utils.data.Dataset:
        return NoisyFeatures()

    def model(self) -> nn.Module:
        return MLP()

    def optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        return torch.optim.AdamW(model.parameters(), lr=1e-3)

    def loss(self, model: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        x, y = batch
        return nn.functional.cross_entropy(model(x), y)

    def blocks(self, model: MLP) -> list[nn.Module]:
        return list(model.hidden)
