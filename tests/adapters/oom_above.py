"""A tiny adapter whose step runs "out of memory" above a batch size, like a GPU would.

`loss` raises a real `torch.OutOfMemoryError` (the type a CUDA OOM arrives as) whenever the
micro-batch holds more than `threshold` samples, so an OOM trial is testable on a CPU.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, ClassVar

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))  # tests/adapters: the shared base
from base import SmallAdapter  # noqa: E402


class OOMAboveAdapter(SmallAdapter):
    features = 8
    samples = 1024
    threshold: ClassVar[int] = 16
    """Largest batch that "fits"."""

    def loss(self, model: torch.nn.Module, batch: Any) -> torch.Tensor:
        x, _ = batch
        if len(x) > self.threshold:
            raise torch.OutOfMemoryError(
                f"CUDA out of memory. Tried to allocate {len(x)} samples (test adapter: the "
                f"limit is {self.threshold})"
            )
        return super().loss(model, batch)
