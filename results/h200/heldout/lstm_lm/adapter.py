"""Held out: a byte-level LSTM language model as a user writes it (nn.LSTM, cuDNN's kernel on a
GPU), on random bytes. Dynamo skips nn.LSTM (torch._dynamo.config.allow_rnn is off), so
torch.compile of this model compiles no graph.

Sizes by environment variable for a quick CPU look (LSTM_HIDDEN, LSTM_SEQ, LSTM_BATCH)."""

from __future__ import annotations

import os

import torch
from torch import nn
from torch.nn import functional as F

import autotune

HIDDEN = int(os.environ.get("LSTM_HIDDEN", 1024))
SEQ = int(os.environ.get("LSTM_SEQ", 256))
BATCH = int(os.environ.get("LSTM_BATCH", 64))


class Bytes(torch.utils.data.Dataset):
    def __init__(self) -> None:
        g = torch.Generator().manual_seed(0)
        self.data = torch.randint(256, (4096, SEQ + 1), generator=g)

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        row = self.data[i]
        return row[:-1], row[1:]


class LSTMLM(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(256, HIDDEN)
        self.lstm = nn.LSTM(HIDDEN, HIDDEN, num_layers=2, batch_first=True)
        self.head = nn.Linear(HIDDEN, 256)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.lstm(self.embed(x))
        return self.head(out)


class LSTMAdapter(autotune.Adapter):
    unit = "tokens"
    batch_size = BATCH

    def dataset(self) -> torch.utils.data.Dataset:
        return Bytes()

    def model(self) -> nn.Module:
        return LSTMLM()

    def optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        return torch.optim.AdamW(model.parameters(), lr=1e-3)

    def loss(self, model: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        x, y = batch
        return F.cross_entropy(model(x).flatten(0, 1), y.flatten())

    def items(self, batch: tuple[torch.Tensor, torch.Tensor]) -> int:
        return batch[0].numel()
