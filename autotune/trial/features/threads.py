"""The training process's intra-op threads (`torch.set_num_threads`)."""

from __future__ import annotations

import torch

__all__ = ["apply_threads"]


def apply_threads(threads: int | None) -> None:
    """Set the intra-op thread count of this process; None keeps PyTorch's default. Process-wide:
    set it before the first op so the pool starts at this size (DataLoader workers set their own
    to 1, as PyTorch does in every worker)."""
    if threads is not None:
        torch.set_num_threads(threads)
