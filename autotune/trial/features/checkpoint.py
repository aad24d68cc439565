"""Activation checkpointing of a fraction of the model's repeated blocks."""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any

import torch
from torch.utils.checkpoint import checkpoint

__all__ = ["apply_checkpoint", "chosen_blocks", "disable_kv_cache"]


def chosen_blocks(n_blocks: int, fraction: float) -> list[int]:
    """Indices of the blocks to checkpoint: `round(fraction * n)` of them, spread evenly.

    Spreading (rather than taking the first k) keeps the saved activations' peak low wherever it
    falls in the network.
    """
    k = round(fraction * n_blocks)
    if k <= 0:
        return []
    return sorted({math.floor(i * n_blocks / k) for i in range(k)})


def apply_checkpoint(blocks: Sequence[torch.nn.Module], fraction: float) -> int:
    """Wrap the chosen blocks' forward in non-reentrant `torch.utils.checkpoint`.

    Non-reentrant checkpointing is PyTorch's recommended mode (the reentrant one is being
    deprecated) and composes with `torch.compile`. Returns how many blocks were wrapped.
    """
    indices = chosen_blocks(len(blocks), fraction)
    for i in indices:
        block = blocks[i]
        if getattr(block, "_autotune_checkpointed", False):
            continue
        # torch types Module attributes as methods, tensors or modules: a wrapped forward and
        # a flag are neither, so both assignments need the checker's leave.
        block.forward = functools.partial(_checkpointed, block.forward)  # type: ignore[method-assign]
        block._autotune_checkpointed = True  # type: ignore[assignment]
    return len(indices)


def _checkpointed(forward: Any, *args: Any, **kwargs: Any) -> Any:
    return checkpoint(forward, *args, use_reentrant=False, **kwargs)


def disable_kv_cache(model: torch.nn.Module) -> bool:
    """Turn off a transformers model's key/value cache (`config.use_cache`), as its own
    `gradient_checkpointing_enable` does: a checkpointed block run again in the backward appends
    its keys to the cache a second time, and attention then sees twice the sequence (GPT-2:
    "size of tensor a (78) must match ... (39)"). Training reads no cache, so nothing it computes
    changes. Returns whether a cache was turned off."""
    config = getattr(model, "config", None)
    if config is None or getattr(config, "use_cache", False) is not True:
        return False
    config.use_cache = False
    return True
