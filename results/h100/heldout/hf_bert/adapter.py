"""Held-out, compute-bound with variable shapes: a transformers BERT-base masked LM (built from
a `BertConfig`, nothing downloaded) on sentences of 32-512 tokens padded per batch, masked
15% the BERT way (80% [MASK], 10% random, 10% kept) in the collate function, batch 32, AdamW,
the model's own loss; throughput in real tokens. HF_BERT_LAYERS etc. override the sizes."""

from __future__ import annotations

import os
from typing import Any

import torch
from torch import nn
from transformers import BertConfig, BertForMaskedLM

import autotune

LAYERS = int(os.environ.get("HF_BERT_LAYERS", 12))
WIDTH = int(os.environ.get("HF_BERT_WIDTH", 768))
BATCH = int(os.environ.get("HF_BERT_BATCH", 32))
MIN_LEN, MAX_LEN = 32, int(os.environ.get("HF_BERT_MAX_LEN", 512))
VOCAB, PAD, CLS, SEP, MASK = 30522, 0, 101, 102, 103


class Sentences(torch.utils.data.Dataset):
    def __init__(self) -> None:
        g = torch.Generator().manual_seed(3)
        self.lengths = torch.randint(MIN_LEN, MAX_LEN + 1, (8192,), generator=g).tolist()

    def __len__(self) -> int:
        return len(self.lengths)

    def __getitem__(self, i: int) -> list[int]:
        g = torch.Generator().manual_seed(i)
        body = torch.randint(1000, VOCAB, (self.lengths[i] - 2,), generator=g).tolist()
        return [CLS, *body, SEP]


def mlm_collate(samples: list[list[int]]) -> dict[str, torch.Tensor]:
    longest = max(len(s) for s in samples)
    ids = torch.full((len(samples), longest), PAD, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for row, s in enumerate(samples):
        ids[row, :len(s)] = torch.tensor(s)
        mask[row, :len(s)] = 1
    special = (ids == PAD) | (ids == CLS) | (ids == SEP)
    chosen = (torch.rand(ids.shape) < 0.15) & ~special
    labels = ids.masked_fill(~chosen, -100)
    roll = torch.rand(ids.shape)
    inputs = ids.masked_fill(chosen & (roll < 0.8), MASK)
    swap = chosen & (roll >= 0.8) & (roll < 0.9)
    inputs = torch.where(swap, torch.randint(1000, VOCAB, ids.shape), inputs)
    return {"input_ids": inputs, "attention_mask": mask, "labels": labels}


class HFBertAdapter(autotune.Adapter):
    unit = "tokens"
    batch_size = BATCH

    def dataset(self) -> torch.utils.data.Dataset:
        return Sentences()

    def loader_args(self) -> dict[str, Any]:
        return {"collate_fn": mlm_collate, "shuffle": True}

    def model(self) -> nn.Module:
        return BertForMaskedLM(BertConfig(num_hidden_layers=LAYERS, hidden_size=WIDTH,
                                          num_attention_heads=WIDTH // 64,
                                          intermediate_size=4 * WIDTH))

    def optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        return torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01)

    def loss(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return model(**batch).loss

    def items(self, batch: dict[str, torch.Tensor]) -> int:
        return int(batch["attention_mask"].sum())
