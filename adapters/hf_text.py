"""A Hugging Face transformers classifier on token ids of varying length, padded per batch.

The model is built from a config (`BertConfig` -> `BertForSequenceClassification`), so nothing is
downloaded; the dataset yields dicts of token-id lists of different lengths, as a tokenized text
dataset does, and `collate` pads each batch to its longest sequence (what `DataCollatorWithPadding`
does with a tokenizer), handed to the tool through `loader_args`. Throughput is counted in real
(non-padding) tokens. Needs transformers: pip install -e ".[hf]". Constants can be overridden by
environment variables of the same name (e.g. HF_TEXT_LAYERS=1).
"""

from __future__ import annotations

import os
from typing import Any

import torch
from torch import nn

import autotune

try:
    from transformers import BertConfig, BertForSequenceClassification
except ImportError as exc:  # say how to get it, not only that it is missing
    raise ImportError(f"adapters/hf_text.py needs transformers: pip install -e '.[hf]' ({exc})"
                      ) from exc


def _const(name: str, default: int) -> int:
    return int(os.environ.get(name, default))


HF_TEXT_SAMPLES = _const("HF_TEXT_SAMPLES", 4096)
HF_TEXT_MIN_LEN = _const("HF_TEXT_MIN_LEN", 16)
HF_TEXT_MAX_LEN = _const("HF_TEXT_MAX_LEN", 128)
HF_TEXT_VOCAB = _const("HF_TEXT_VOCAB", 8192)
HF_TEXT_HIDDEN = _const("HF_TEXT_HIDDEN", 128)
HF_TEXT_LAYERS = _const("HF_TEXT_LAYERS", 2)
HF_TEXT_HEADS = _const("HF_TEXT_HEADS", 2)
HF_TEXT_LABELS = _const("HF_TEXT_LABELS", 2)
HF_TEXT_BATCH = _const("HF_TEXT_BATCH", 32)

PAD_ID = 0


class TokenizedTexts(torch.utils.data.Dataset):
    """Seeded "tokenized" texts: each sample a dict of an input_ids list (length between
    HF_TEXT_MIN_LEN and HF_TEXT_MAX_LEN, starting with [CLS]=101) and a label."""

    def __init__(self) -> None:
        g = torch.Generator().manual_seed(0)
        lengths = torch.randint(HF_TEXT_MIN_LEN, HF_TEXT_MAX_LEN + 1, (HF_TEXT_SAMPLES,), generator=g)
        self.texts = [[101, *torch.randint(1000, HF_TEXT_VOCAB, (int(n) - 1,), generator=g).tolist()]
                      for n in lengths]
        self.labels = torch.randint(0, HF_TEXT_LABELS, (HF_TEXT_SAMPLES,), generator=g).tolist()

    def __len__(self) -> int:
        return len(self.texts)

    def __getitem__(self, i: int) -> dict[str, Any]:
        return {"input_ids": self.texts[i], "label": self.labels[i]}


def collate(samples: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
    """Pad to the batch's longest sequence: input_ids, attention_mask and labels tensors."""
    longest = max(len(s["input_ids"]) for s in samples)
    input_ids = torch.full((len(samples), longest), PAD_ID, dtype=torch.long)
    attention_mask = torch.zeros((len(samples), longest), dtype=torch.long)
    for row, sample in enumerate(samples):
        ids = sample["input_ids"]
        input_ids[row, :len(ids)] = torch.tensor(ids)
        attention_mask[row, :len(ids)] = 1
    labels = torch.tensor([s["label"] for s in samples])
    return {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}


class HFTextAdapter(autotune.Adapter):
    unit = "tokens"
    batch_size = HF_TEXT_BATCH

    def dataset(self) -> torch.utils.data.Dataset:
        return TokenizedTexts()

    def loader_args(self) -> dict[str, Any]:
        return {"collate_fn": collate}

    def model(self) -> nn.Module:
        config = BertConfig(vocab_size=HF_TEXT_VOCAB, hidden_size=HF_TEXT_HIDDEN,
                            num_hidden_layers=HF_TEXT_LAYERS, num_attention_heads=HF_TEXT_HEADS,
                            intermediate_size=4 * HF_TEXT_HIDDEN,
                            max_position_embeddings=max(512, HF_TEXT_MAX_LEN),
                            num_labels=HF_TEXT_LABELS, pad_token_id=PAD_ID)
        return BertForSequenceClassification(config)

    def optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        return torch.optim.AdamW(model.parameters(), lr=5e-5)

    def loss(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return model(**batch).loss  # the model computes the loss from `labels`

    def blocks(self, model: BertForSequenceClassification) -> list[nn.Module]:
        return list(model.bert.encoder.layer)

    def items(self, batch: dict[str, torch.Tensor]) -> int:
        return int(batch["attention_mask"].sum())  # real tokens, padding not counted
