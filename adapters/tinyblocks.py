"""Many tiny residual blocks at a small batch: the launch-bound (overhead-bound) case.

Each step launches hundreds of small kernels (48 blocks of LayerNorm, two narrow Linear layers
and a GELU, forward and backward, plus AdamW over ~200 parameter tensors) on a batch of 32:
the GPU waits on the host between launches. CUDA graphs (`reduce-overhead`) and larger batches
are what help; more DataLoader workers do not. Constants can be overridden by environment
variables of the same name (e.g. TINY_BLOCKS=8).
"""

from __future__ import annotations

import os

import torch
from torch import nn

import autotune


def _const(name: str, default: int) -> int:
    return int(os.environ.get(name, default))


TINY_BLOCKS = _const("TINY_BLOCKS", 48)
TINY_WIDTH = _const("TINY_WIDTH", 64)
TINY_FEATURES = _const("TINY_FEATURES", 64)
TINY_CLASSES = _const("TINY_CLASSES", 10)
TINY_SAMPLES = _const("TINY_SAMPLES", 65536)
TINY_BATCH = _const("TINY_BATCH", 32)


class Features(torch.utils.data.Dataset):
    """Fixed random features with labels from a random linear teacher; reads are cheap."""

    def __init__(self) -> None:
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(TINY_SAMPLES, TINY_FEATURES, generator=g)
        self.y = (self.x @ torch.randn(TINY_FEATURES, TINY_CLASSES, generator=g)).argmax(dim=1)

    def __len__(self) -> int:
        return TINY_SAMPLES

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.x[i], self.y[i]


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(TINY_WIDTH)
        self.up = nn.Linear(TINY_WIDTH, 2 * TINY_WIDTH)
        self.down = nn.Linear(2 * TINY_WIDTH, TINY_WIDTH)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(nn.functional.gelu(self.up(self.norm(x))))


class TinyBlocks(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inp = nn.Linear(TINY_FEATURES, TINY_WIDTH)
        self.blocks = nn.ModuleList(Block() for _ in range(TINY_BLOCKS))
        self.out = nn.Linear(TINY_WIDTH, TINY_CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.inp(x)
        for block in self.blocks:
            h = block(h)
        return self.out(h)


class TinyBlocksAdapter(autotune.Adapter):
    unit = "samples"
    batch_size = TINY_BATCH
    # The launch-bound case is about larger batches: let the search change the effective batch
    # (best.yaml then says by how much and how to scale the learning rate).
    vary_global_batch = True

    def dataset(self) -> torch.utils.data.Dataset:
        return Features()

    def model(self) -> nn.Module:
        return TinyBlocks()

    def optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        return torch.optim.AdamW(model.parameters(), lr=1e-3)

    def loss(self, model: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        x, y = batch
        return nn.functional.cross_entropy(model(x), y)

    def blocks(self, model: TinyBlocks) -> list[nn.Module]:
        return list(model.blocks)
