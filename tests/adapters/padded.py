"""Text-like batches: token sequences of 8-40 tokens, padded per batch by its own collate
function to the batch's longest, so that almost every batch has a new length (what a
transformers causal LM on real text sees). Counts real tokens, not padding."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))  # tests/adapters: the shared base
from base import SmallAdapter  # noqa: E402

VOCAB = 16
SHORTEST, LONGEST = 8, 40


class Sequences(torch.utils.data.Dataset):
    """`n` seeded random token sequences of SHORTEST-LONGEST tokens."""

    def __init__(self, n: int) -> None:
        g = torch.Generator().manual_seed(0)
        lengths = torch.randint(SHORTEST, LONGEST + 1, (n,), generator=g)
        self.seqs = [torch.randint(0, VOCAB, (int(n),), generator=g) for n in lengths]

    def __len__(self) -> int:
        return len(self.seqs)

    def __getitem__(self, i: int) -> torch.Tensor:
        return self.seqs[i]


def pad(seqs: list[torch.Tensor]) -> dict[str, torch.Tensor]:
    """Pad to the batch's longest sequence: the batch's length is its own."""
    longest = max(len(s) for s in seqs)
    ids = torch.zeros(len(seqs), longest, dtype=torch.long)
    mask = torch.zeros(len(seqs), longest, dtype=torch.bool)
    for i, s in enumerate(seqs):
        ids[i, :len(s)] = s
        mask[i, :len(s)] = True
    return {"input_ids": ids, "mask": mask}


class PaddedAdapter(SmallAdapter):
    unit = "tokens"
    samples = 256

    def dataset(self) -> torch.utils.data.Dataset:
        return Sequences(self.samples)

    def loader_args(self) -> dict[str, Any]:
        return {"collate_fn": pad}

    def model(self) -> nn.Module:
        return nn.Sequential(nn.Embedding(VOCAB, 16), nn.Linear(16, VOCAB))

    def loss(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        # Predict each token from itself (the shape matters here, not the task); padding masked.
        logits = model(batch["input_ids"])
        per_token = nn.functional.cross_entropy(logits.transpose(1, 2), batch["input_ids"],
                                                reduction="none")
        mask = batch["mask"].float()
        return (per_token * mask).sum() / mask.sum()

    def items(self, batch: dict[str, torch.Tensor]) -> int:
        return int(batch["mask"].sum())
