"""Held-out, launch-bound: a byte-level language model whose GRU cell is stepped in a Python
loop over 64 positions (hand-written recurrences, as in RL and sequence models that need the
hidden state at each step), batch 64, AdamW. Eager, each of the 64 steps launches its own small
kernels forward and backward."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

import autotune

VOCAB, EMBED, HIDDEN, SEQ = 256, 128, 512, 64


class Bytes(torch.utils.data.Dataset):
    def __init__(self) -> None:
        g = torch.Generator().manual_seed(0)
        self.data = torch.randint(VOCAB, (2_000_000,), generator=g, dtype=torch.uint8)

    def __len__(self) -> int:
        return (len(self.data) - 1) // SEQ

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        chunk = self.data[i * SEQ: i * SEQ + SEQ + 1].long()
        return chunk[:-1], chunk[1:]


class GruLM(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, EMBED)
        self.cell = nn.GRUCell(EMBED, HIDDEN)
        self.head = nn.Linear(HIDDEN, VOCAB)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x.new_zeros(x.shape[0], HIDDEN, dtype=self.head.weight.dtype)
        outs = []
        e = self.embed(x)
        for t in range(x.shape[1]):
            h = self.cell(e[:, t], h)
            outs.append(h)
        return self.head(torch.stack(outs, 1))


class GruLoopAdapter(autotune.Adapter):
    unit = "tokens"
    batch_size = 64

    def dataset(self) -> torch.utils.data.Dataset:
        return Bytes()

    def model(self) -> nn.Module:
        return GruLM()

    def optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        return torch.optim.AdamW(model.parameters(), lr=1e-3)

    def loss(self, model: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        x, y = batch
        return F.cross_entropy(model(x).reshape(-1, VOCAB).float(), y.reshape(-1))

    def items(self, batch: tuple[torch.Tensor, torch.Tensor]) -> int:
        return batch[0].numel()
