"""A nanoGPT-shape decoder-only transformer on random tokens (unit: tokens).

The size is set by the constants below (GPT-2 small by default); each can be overridden by an
environment variable of the same name (e.g. GPT_N_LAYER=2) for quick runs.
global_batch_size is set, so the search only tries micro-batch / accumulation splits that keep
what one optimizer step computes.
"""

from __future__ import annotations

import math
import os

import torch
from torch import nn
from torch.nn import functional as F

import autotune


def _const(name: str, default: int) -> int:
    return int(os.environ.get(name, default))


GPT_N_LAYER = _const("GPT_N_LAYER", 12)
GPT_N_HEAD = _const("GPT_N_HEAD", 12)
GPT_N_EMBD = _const("GPT_N_EMBD", 768)
GPT_VOCAB = _const("GPT_VOCAB", 50304)  # GPT-2's 50257 rounded up to a multiple of 64
GPT_BLOCK = _const("GPT_BLOCK", 1024)  # context length
GPT_BATCH = _const("GPT_BATCH", 8)  # sequences per micro-batch today
GPT_GLOBAL_BATCH = _const("GPT_GLOBAL_BATCH", 64)  # sequences per optimizer step
GPT_TOKENS = _const("GPT_TOKENS", 8_000_000)  # size of the random corpus


class RandomTokens(torch.utils.data.Dataset):
    """A fixed random corpus cut into (input, next-token target) windows."""

    def __init__(self) -> None:
        g = torch.Generator().manual_seed(0)
        self.tokens = torch.randint(GPT_VOCAB, (GPT_TOKENS + 1,), generator=g, dtype=torch.int32)

    def __len__(self) -> int:
        return GPT_TOKENS // GPT_BLOCK

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        chunk = self.tokens[i * GPT_BLOCK : (i + 1) * GPT_BLOCK + 1].long()
        return chunk[:-1], chunk[1:]


class SelfAttention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.qkv = nn.Linear(GPT_N_EMBD, 3 * GPT_N_EMBD)
        self.proj = nn.Linear(GPT_N_EMBD, GPT_N_EMBD)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        shape = (b, t, GPT_N_HEAD, c // GPT_N_HEAD)
        q, k, v = (z.view(shape).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).contiguous().view(b, t, c))


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(GPT_N_EMBD)
        self.attn = SelfAttention()
        self.ln2 = nn.LayerNorm(GPT_N_EMBD)
        self.mlp = nn.Sequential(
            nn.Linear(GPT_N_EMBD, 4 * GPT_N_EMBD), nn.GELU(), nn.Linear(4 * GPT_N_EMBD, GPT_N_EMBD)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.wte = nn.Embedding(GPT_VOCAB, GPT_N_EMBD)
        self.wpe = nn.Embedding(GPT_BLOCK, GPT_N_EMBD)
        self.blocks = nn.ModuleList(Block() for _ in range(GPT_N_LAYER))
        self.ln_f = nn.LayerNorm(GPT_N_EMBD)
        self.head = nn.Linear(GPT_N_EMBD, GPT_VOCAB, bias=False)
        self.head.weight = self.wte.weight  # tied input and output embeddings, as in GPT-2
        for name, p in self.named_parameters():
            if p.dim() == 2:
                # GPT-2's init: N(0, 0.02), residual projections scaled by 1/sqrt(2 * layers).
                std = 0.02 / math.sqrt(2 * GPT_N_LAYER) if name.endswith("proj.weight") else 0.02
                nn.init.normal_(p, std=std)
            elif name.endswith("bias"):
                nn.init.zeros_(p)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))


class GPTAdapter(autotune.Adapter):
    unit = "tokens"
    batch_size = GPT_BATCH
    global_batch_size = GPT_GLOBAL_BATCH

    def dataset(self) -> torch.utils.data.Dataset:
        return RandomTokens()

    def model(self) -> nn.Module:
        return GPT()

    def optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        # nanoGPT's settings; the fused kernel where the parameters are on a GPU.
        fused = next(model.parameters()).is_cuda
        return torch.optim.AdamW(model.parameters(), lr=6e-4, betas=(0.9, 0.95),
                                 weight_decay=0.1, fused=fused)

    def loss(self, model: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        x, y = batch
        logits = model(x)
        return F.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1))

    def blocks(self, model: GPT) -> list[nn.Module]:
        return list(model.blocks)

    def items(self, batch: tuple[torch.Tensor, torch.Tensor]) -> int:
        return batch[0].numel()

    def flops_per_item(self) -> float:
        """Training FLOPs per token: 6N + 12 L H Q T (PaLM, Chowdhery et al. 2022, appendix B;
        the estimate nanoGPT's estimate_mfu uses). N counts parameters without the position
        embeddings, the tied token embedding once; 12 L H Q T is attention's score and value
        matmuls, forward and backward."""
        c, layers = GPT_N_EMBD, GPT_N_LAYER
        per_block = 12 * c * c + 13 * c  # qkv, proj, 4x MLP weights and biases, two LayerNorms
        n = layers * per_block + GPT_VOCAB * c + 2 * c  # + token embedding (tied) + final norm
        q = c // GPT_N_HEAD
        return 6 * n + 12 * layers * GPT_N_HEAD * q * GPT_BLOCK
