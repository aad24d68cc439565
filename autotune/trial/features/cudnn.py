"""cuDNN's benchmark mode: each convolution times cuDNN's algorithms at its first input shape
and keeps the fastest (a first step slower by the timing; a step with shapes that keep changing
pays it again for every new shape). Process-wide, like the matmul precision."""

from __future__ import annotations

import torch

__all__ = ["apply_cudnn_benchmark"]


def apply_cudnn_benchmark(enabled: bool) -> None:
    """Turn `torch.backends.cudnn.benchmark` on when the config says so. False leaves it as the
    process has it: PyTorch's default (off) in a trial, the user's own choice in production (a
    space that does not search the knob writes False)."""
    if enabled:
        torch.backends.cudnn.benchmark = True
