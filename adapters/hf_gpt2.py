"""A transformers causal LM (GPT-2 small, built from its config) on variable-length sequences
padded per batch: the compute-bound class with shapes that change from batch to batch.

`GPT2LMHeadModel` is built from a `GPT2Config` (124M parameters at the defaults: 12 layers, 768
wide, 12 heads, context 1024), so nothing is downloaded. The dataset yields token-id lists of
HF_GPT2_MIN_LEN to HF_GPT2_MAX_LEN tokens, as a tokenized corpus cut into documents does;
`collate` pads each batch to its longest sequence (what `DataCollatorForLanguageModeling` does
with a tokenizer), so nearly every batch has a new length. The loss is the model's own, with
padding labelled -100 (ignored); throughput is counted in real (non-padding) tokens.

Knobs of its own (`knobs`) are searched with the tool's: `pad_to_multiple_of` (as in
transformers' `DataCollatorWithPadding`; null pads per batch, 1024 gives every batch one shape,
so compile and CUDA graphs keep one graph, at the price of padding), `attn_implementation`
(transformers' own argument: "sdpa" or "eager"), `padding_mask` ("drop" leaves the attention
mask out: with right padding and causal attention it changes no real token's output, and lets
SDPA use its causal flash kernel) and `vocab_multiple_of` (64 rounds the embedding and the LM
head up from 50,257 rows to 50,304, as nanoGPT does: the extra ids are never labels). The
padding is masked and labelled -100, so
the loss is the same up to rounding; that padding may change what you train on is your call. Needs
transformers: pip install -e ".[hf]". Constants can be overridden by environment variables of
the same name (e.g. HF_GPT2_LAYERS=2).
"""

from __future__ import annotations

import functools
import os
from typing import Any

import torch
from torch import nn

import autotune

try:
    from transformers import GPT2Config, GPT2LMHeadModel
except ImportError as exc:  # say how to get it, not only that it is missing
    raise ImportError(f"adapters/hf_gpt2.py needs transformers: pip install -e '.[hf]' ({exc})"
                      ) from exc


def _const(name: str, default: int) -> int:
    return int(os.environ.get(name, default))


HF_GPT2_SAMPLES = _const("HF_GPT2_SAMPLES", 4096)
HF_GPT2_MIN_LEN = _const("HF_GPT2_MIN_LEN", 512)
HF_GPT2_MAX_LEN = _const("HF_GPT2_MAX_LEN", 1024)
HF_GPT2_VOCAB = _const("HF_GPT2_VOCAB", 50257)
HF_GPT2_WIDTH = _const("HF_GPT2_WIDTH", 768)
HF_GPT2_LAYERS = _const("HF_GPT2_LAYERS", 12)
HF_GPT2_HEADS = _const("HF_GPT2_HEADS", 12)
HF_GPT2_BATCH = _const("HF_GPT2_BATCH", 8)

PAD_ID = HF_GPT2_VOCAB - 1  # the last id, as GPT-2's <|endoftext|> (50256), its usual pad token


class TokenizedDocuments(torch.utils.data.Dataset):
    """Seeded "tokenized" documents: each sample an input_ids list of HF_GPT2_MIN_LEN to
    HF_GPT2_MAX_LEN token ids. The ids are drawn once, in the parent, so workers only index."""

    def __init__(self) -> None:
        g = torch.Generator().manual_seed(0)
        lengths = torch.randint(HF_GPT2_MIN_LEN, HF_GPT2_MAX_LEN + 1, (HF_GPT2_SAMPLES,), generator=g)
        tokens = torch.randint(0, HF_GPT2_VOCAB - 1, (int(lengths.sum()),), generator=g)
        self.docs = list(torch.split(tokens, lengths.tolist()))

    def __len__(self) -> int:
        return len(self.docs)

    def __getitem__(self, i: int) -> dict[str, Any]:
        return {"input_ids": self.docs[i].tolist()}


def collate(samples: list[dict[str, Any]], multiple: int | None = None, mask: bool = True
            ) -> dict[str, torch.Tensor]:
    """Pad to the batch's longest sequence, rounded up to a multiple of `multiple` when given:
    input_ids, attention_mask (unless `mask` is False), and labels that ignore the padding
    (-100)."""
    longest = max(len(s["input_ids"]) for s in samples)
    if multiple:
        longest = -(-longest // multiple) * multiple
    input_ids = torch.full((len(samples), longest), PAD_ID, dtype=torch.long)
    attention_mask = torch.zeros((len(samples), longest), dtype=torch.long)
    for row, sample in enumerate(samples):
        ids = sample["input_ids"]
        input_ids[row, :len(ids)] = torch.tensor(ids)
        attention_mask[row, :len(ids)] = 1
    labels = input_ids.masked_fill(attention_mask == 0, -100)
    if not mask:
        return {"input_ids": input_ids, "labels": labels}
    return {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}


class HFGPT2Adapter(autotune.Adapter):
    unit = "tokens"
    batch_size = HF_GPT2_BATCH
    knobs = {
        # null first: the default pads per batch, as before the knob existed. The padded
        # length is the model's input shape: it moves the compiled graph too ("both").
        "pad_to_multiple_of": {"choices": [None, 64, 1024], "affects": "both"},
        "attn_implementation": {"choices": ["sdpa", "eager"], "affects": "model"},
        # The padding is on the right and attention is causal: no real token attends to it,
        # and its labels are -100. Without the mask SDPA may take its causal flash kernel; a
        # padding mask keeps it on the slower masked ones.
        "padding_mask": {"choices": ["keep", "drop"], "affects": "both"},
        # GPT-2's 50,257 ids make the LM head's matmul an odd size; rows up to a multiple of 64
        # (nanoGPT's 50,304) are never a label, and train towards never being predicted.
        "vocab_multiple_of": {"choices": [None, 64], "affects": "model"},
    }

    def dataset(self) -> torch.utils.data.Dataset:
        return TokenizedDocuments()

    def loader_args(self) -> dict[str, Any]:
        pad = functools.partial(collate, multiple=self.params["pad_to_multiple_of"],
                                mask=self.params["padding_mask"] == "keep")
        return {"collate_fn": pad, "shuffle": True}

    def model(self) -> nn.Module:
        config = GPT2Config(vocab_size=HF_GPT2_VOCAB, n_positions=max(1024, HF_GPT2_MAX_LEN),
                            n_embd=HF_GPT2_WIDTH, n_layer=HF_GPT2_LAYERS, n_head=HF_GPT2_HEADS,
                            bos_token_id=PAD_ID, eos_token_id=PAD_ID,
                            pad_token_id=PAD_ID,
                            attn_implementation=self.params["attn_implementation"])
        model = GPT2LMHeadModel(config)
        if self.params["vocab_multiple_of"]:  # the embedding and the tied head grow together
            model.resize_token_embeddings(HF_GPT2_VOCAB,
                                          pad_to_multiple_of=self.params["vocab_multiple_of"],
                                          mean_resizing=False)
        return model

    def optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        return torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)

    def loss(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return model(**batch).loss  # the model shifts the labels and ignores -100

    def blocks(self, model: GPT2LMHeadModel) -> list[nn.Module]:
        return list(model.transformer.h)

    def items(self, batch: dict[str, torch.Tensor]) -> int:
        return int((batch["labels"] != -100).sum())  # real tokens, padding not counted
