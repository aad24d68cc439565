"""Held-out, compute-bound with two variable shapes: a transformers T5-small (built from a
`T5Config`, nothing downloaded) trained as seq2seq on sources of 64-512 and targets of 8-128
tokens, each padded per batch by the collate function (labels -100 at padding), batch 32,
transformers' Adafactor (T5's own optimizer, not a `torch.optim` class), the model's own loss;
throughput in real source and target tokens. HF_T5_* override the sizes."""

from __future__ import annotations

import os
from typing import Any

import torch
from torch import nn
from transformers import T5Config, T5ForConditionalGeneration
from transformers.optimization import Adafactor

import autotune

LAYERS = int(os.environ.get("HF_T5_LAYERS", 6))
WIDTH = int(os.environ.get("HF_T5_WIDTH", 512))
BATCH = int(os.environ.get("HF_T5_BATCH", 32))
SRC = (64, int(os.environ.get("HF_T5_MAX_SRC", 512)))
TGT = (8, int(os.environ.get("HF_T5_MAX_TGT", 128)))
VOCAB, PAD, EOS = 32128, 0, 1


class Pairs(torch.utils.data.Dataset):
    def __init__(self) -> None:
        g = torch.Generator().manual_seed(5)
        self.src = torch.randint(SRC[0], SRC[1] + 1, (8192,), generator=g).tolist()
        self.tgt = torch.randint(TGT[0], TGT[1] + 1, (8192,), generator=g).tolist()

    def __len__(self) -> int:
        return len(self.src)

    def __getitem__(self, i: int) -> dict[str, list[int]]:
        g = torch.Generator().manual_seed(i)
        src = torch.randint(3, VOCAB, (self.src[i] - 1,), generator=g).tolist() + [EOS]
        tgt = torch.randint(3, VOCAB, (self.tgt[i] - 1,), generator=g).tolist() + [EOS]
        return {"source": src, "target": tgt}


def pad(rows: list[list[int]], value: int) -> torch.Tensor:
    out = torch.full((len(rows), max(len(r) for r in rows)), value, dtype=torch.long)
    for k, r in enumerate(rows):
        out[k, :len(r)] = torch.tensor(r)
    return out


def seq2seq_collate(samples: list[dict[str, list[int]]]) -> dict[str, torch.Tensor]:
    ids = pad([s["source"] for s in samples], PAD)
    return {"input_ids": ids, "attention_mask": (ids != PAD).long(),
            "labels": pad([s["target"] for s in samples], -100)}


class HFT5Adapter(autotune.Adapter):
    unit = "tokens"
    batch_size = BATCH

    def dataset(self) -> torch.utils.data.Dataset:
        return Pairs()

    def loader_args(self) -> dict[str, Any]:
        return {"collate_fn": seq2seq_collate, "shuffle": True, "drop_last": True}

    def model(self) -> nn.Module:
        return T5ForConditionalGeneration(T5Config(
            vocab_size=VOCAB, d_model=WIDTH, d_kv=64, d_ff=4 * WIDTH, num_layers=LAYERS,
            num_heads=WIDTH // 64, decoder_start_token_id=PAD, pad_token_id=PAD,
            eos_token_id=EOS))

    def optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        return Adafactor(model.parameters(), lr=1e-3, scale_parameter=False,
                         relative_step=False, warmup_init=False)

    def loss(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return model(**batch).loss

    def items(self, batch: dict[str, torch.Tensor]) -> int:
        return int(batch["attention_mask"].sum() + (batch["labels"] != -100).sum())
