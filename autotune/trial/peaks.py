"""The trial process's memory peaks, read at its end whatever the outcome."""

from __future__ import annotations

import dataclasses
import resource
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

__all__ = ["Memory", "memory"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class Memory:
    """The trial process's memory peaks."""

    peak_rss_mb: float
    """Peak resident host memory (its DataLoader workers not counted)."""
    peak_allocated_mb: float | None = None
    """Peak device memory in live tensors (CUDA only)."""
    peak_reserved_mb: float | None = None
    """Peak device memory held by PyTorch's caching allocator (CUDA only)."""


def memory(device: torch.device) -> Memory:
    import torch

    # ru_maxrss is in KiB on Linux: the process's peak resident host memory.
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if device.type == "cuda" and torch.cuda.is_initialized():
        return Memory(peak_rss_mb=rss,
                      peak_allocated_mb=torch.cuda.max_memory_allocated(device) / 2**20,
                      peak_reserved_mb=torch.cuda.max_memory_reserved(device) / 2**20)
    return Memory(peak_rss_mb=rss)
