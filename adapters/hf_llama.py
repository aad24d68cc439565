"""A transformers Llama-style causal LM (about 110M parameters, built from a `LlamaConfig`) on
documents of varying length padded per batch, written as a user would bring it: no knobs of its
own, no `blocks`, the model's own loss.

The compute-bound class with shapes that change from batch to batch, in another model family
than `hf_gpt2.py` (rotary positions, RMSNorm, SwiGLU, no biases, an untied LM head). The
dataset yields `input_ids` tensors of HF_LLAMA_MIN_LEN to HF_LLAMA_MAX_LEN tokens; `collate`
pads each batch to its longest sequence with an attention mask and labels of -100 on the
padding. Throughput is counted in real (non-padding) tokens. Nothing is downloaded. Needs
transformers: pip install -e ".[hf]". Constants can be overridden by environment variables of
the same name (e.g. HF_LLAMA_LAYERS=2).
"""

from __future__ import annotations

import os
from typing import Any

import torch
from torch import nn

import autotune

try:
    from transformers import LlamaConfig, LlamaForCausalLM
except ImportError as exc:  # say how to get it, not only that it is missing
    raise ImportError(f"adapters/hf_llama.py needs transformers: pip install -e '.[hf]' ({exc})"
                      ) from exc


def _const(name: str, default: int) -> int:
    return int(os.environ.get(name, default))


HF_LLAMA_SAMPLES = _const("HF_LLAMA_SAMPLES", 4096)
HF_LLAMA_MIN_LEN = _const("HF_LLAMA_MIN_LEN", 256)
HF_LLAMA_MAX_LEN = _const("HF_LLAMA_MAX_LEN", 1024)
HF_LLAMA_VOCAB = _const("HF_LLAMA_VOCAB", 32000)
HF_LLAMA_WIDTH = _const("HF_LLAMA_WIDTH", 768)
HF_LLAMA_FFN = _const("HF_LLAMA_FFN", 2048)
HF_LLAMA_LAYERS = _const("HF_LLAMA_LAYERS", 12)
HF_LLAMA_HEADS = _const("HF_LLAMA_HEADS", 12)
HF_LLAMA_BATCH = _const("HF_LLAMA_BATCH", 8)

PAD_ID = 0


class Documents(torch.utils.data.Dataset):
    """Seeded documents of random token ids, one int64 tensor each."""

    def __init__(self) -> None:
        g = torch.Generator().manual_seed(1)
        lengths = torch.randint(HF_LLAMA_MIN_LEN, HF_LLAMA_MAX_LEN + 1, (HF_LLAMA_SAMPLES,),
                                generator=g)
        tokens = torch.randint(1, HF_LLAMA_VOCAB, (int(lengths.sum()),), generator=g)
        self.docs = torch.split(tokens, lengths.tolist())

    def __len__(self) -> int:
        return len(self.docs)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.docs[i]}


def collate(samples: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """Right-pad to the batch's longest document: input_ids, attention_mask, labels (-100 on the
    padding)."""
    longest = max(len(s["input_ids"]) for s in samples)
    input_ids = torch.full((len(samples), longest), PAD_ID, dtype=torch.long)
    attention_mask = torch.zeros((len(samples), longest), dtype=torch.long)
    for row, sample in enumerate(samples):
        n = len(sample["input_ids"])
        input_ids[row, :n] = sample["input_ids"]
        attention_mask[row, :n] = 1
    labels = input_ids.masked_fill(attention_mask == 0, -100)
    return {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}


class HFLlamaAdapter(autotune.Adapter):
    unit = "tokens"
    batch_size = HF_LLAMA_BATCH

    def dataset(self) -> torch.utils.data.Dataset:
        return Documents()

    def loader_args(self) -> dict[str, Any]:
        return {"collate_fn": collate, "shuffle": True}

    def model(self) -> nn.Module:
        return LlamaForCausalLM(LlamaConfig(
            vocab_size=HF_LLAMA_VOCAB, hidden_size=HF_LLAMA_WIDTH,
            intermediate_size=HF_LLAMA_FFN, num_hidden_layers=HF_LLAMA_LAYERS,
            num_attention_heads=HF_LLAMA_HEADS, num_key_value_heads=HF_LLAMA_HEADS,
            max_position_embeddings=max(1024, HF_LLAMA_MAX_LEN), pad_token_id=PAD_ID,
            bos_token_id=1, eos_token_id=2, tie_word_embeddings=False))

    def optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        return torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)

    def loss(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return model(**batch).loss

    def items(self, batch: dict[str, torch.Tensor]) -> int:
        return int((batch["labels"] != -100).sum())
