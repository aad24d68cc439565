"""Token sequences padded batch by batch to a new length each time (9, 10, ... 40 tokens, in
turn), through a model whose code needs the length as a plain number (a Python list as long as
the sequence): compiled, it specializes the varying length, so every new length would compile
again."""

from __future__ import annotations

import itertools
import sys
from pathlib import Path
from typing import Any

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
    lengths: tuple[int, ...] = tuple(range(9, 41))
    """The padded length of each batch, in turn."""

    def loader_args(self) -> dict[str, Any]:
        turn = itertools.cycle(self.lengths)

        def pad_in_turn(seqs: list[torch.Tensor]) -> dict[str, torch.Tensor]:
            length = next(turn)
            ids = torch.zeros(len(seqs), length, dtype=torch.long)
            mask = torch.zeros(len(seqs), length, dtype=torch.bool)
            for i, s in enumerate(seqs):
                ids[i, :min(len(s), length)] = s[:length]
                mask[i, :min(len(s), length)] = True
            return {"input_ids": ids, "mask": mask}

        return {"collate_fn": pad_in_turn}

    def model(self) -> nn.Module:
        return LengthTable()
