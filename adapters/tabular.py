"""A tabular ResMLP on dict batches: categorical embeddings and numeric features (unit: rows).

Written as a user would bring it, to check the search on a workload it had not seen: a
map-style dataset of dicts ({"cat", "num", "y"}) batched by PyTorch's default collate, twelve
residual MLP blocks of width 256, AdamW, batch 256, no knobs. On an H100 its step is
launch-bound (kernels run 9% of an eager step) and, once CUDA graphs remove the launches, the
main process's batching shows (data wait 30-40% without workers). Constants can be overridden
by environment variables of the same name (e.g. TAB_DEPTH=2).
"""

from __future__ import annotations

import os

import torch
from torch import nn

import autotune


def _const(name: str, default: int) -> int:
    return int(os.environ.get(name, default))


TAB_ROWS = _const("TAB_ROWS", 65536)
TAB_CATS = _const("TAB_CATS", 8)  # categorical columns
TAB_LEVELS = _const("TAB_LEVELS", 1000)  # values of each
TAB_NUMS = _const("TAB_NUMS", 16)  # numeric columns
TAB_WIDTH = _const("TAB_WIDTH", 256)
TAB_DEPTH = _const("TAB_DEPTH", 12)
TAB_BATCH = _const("TAB_BATCH", 256)
EMBED = 16


class Rows(torch.utils.data.Dataset):
    """Seeded random rows; the label is whether the numeric columns sum above zero."""

    def __init__(self) -> None:
        g = torch.Generator().manual_seed(0)
        self.cat = torch.randint(0, TAB_LEVELS, (TAB_ROWS, TAB_CATS), generator=g)
        self.num = torch.randn(TAB_ROWS, TAB_NUMS, generator=g)
        self.y = (self.num.sum(1) > 0).float()

    def __len__(self) -> int:
        return TAB_ROWS

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"cat": self.cat[i], "num": self.num[i], "y": self.y[i]}


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.ln = nn.LayerNorm(TAB_WIDTH)
        self.fc1 = nn.Linear(TAB_WIDTH, 2 * TAB_WIDTH)
        self.fc2 = nn.Linear(2 * TAB_WIDTH, TAB_WIDTH)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.fc2(nn.functional.silu(self.fc1(self.ln(x))))


class ResMLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embeddings = nn.ModuleList(nn.Embedding(TAB_LEVELS, EMBED) for _ in range(TAB_CATS))
        self.inp = nn.Linear(TAB_CATS * EMBED + TAB_NUMS, TAB_WIDTH)
        self.blocks = nn.ModuleList(Block() for _ in range(TAB_DEPTH))
        self.out = nn.Linear(TAB_WIDTH, 1)

    def forward(self, cat: torch.Tensor, num: torch.Tensor) -> torch.Tensor:
        columns = [e(cat[:, j]) for j, e in enumerate(self.embeddings)]
        x = self.inp(torch.cat([*columns, num], dim=1))
        for block in self.blocks:
            x = block(x)
        return self.out(x).squeeze(1)


class TabularAdapter(autotune.Adapter):
    unit = "rows"
    batch_size = TAB_BATCH

    def dataset(self) -> torch.utils.data.Dataset:
        return Rows()

    def model(self) -> nn.Module:
        return ResMLP()

    def optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        return torch.optim.AdamW(model.parameters(), lr=1e-3)

    def loss(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        logits = model(batch["cat"], batch["num"])
        return nn.functional.binary_cross_entropy_with_logits(logits, batch["y"])

    def blocks(self, model: nn.Module) -> list[nn.Module]:
        return list(model.blocks)
