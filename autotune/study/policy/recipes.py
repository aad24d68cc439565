"""Configurations every tuning guide starts from: PyTorch's defaults and the usual hand recipe.

The search measures the defaults as its baseline (trial 0) and the hand recipe next (trial 1,
when the space holds it), so the tuner starts from what a careful engineer would try; `autotune
lab` runs them side by side with a tuned YAML.
"""

from __future__ import annotations

from autotune.adapter import Adapter
from autotune.contract.config import TrainConfig

__all__ = ["bf16", "bf16_compile", "hand_recipe", "pytorch_defaults"]


def pytorch_defaults(adapter: type[Adapter]) -> TrainConfig:
    """No workers, fp32, no compile, no checkpointing, default allocator, at the adapter's batch."""
    return TrainConfig.baseline(adapter.batch_size, adapter.global_batch_size)


def bf16(adapter: type[Adapter]) -> TrainConfig:
    return pytorch_defaults(adapter).replace(amp_dtype="bf16")


def bf16_compile(adapter: type[Adapter]) -> TrainConfig:
    return bf16(adapter).replace(compile="default")


def hand_recipe(adapter: type[Adapter], *, device: str, cpus: int) -> TrainConfig:
    """The common recipe: half the cores as workers, pinned memory (on CUDA), persistent
    workers, prefetch_factor 4, bf16 autocast and torch.compile."""
    return bf16_compile(adapter).replace(
        num_workers=max(1, cpus // 2),
        pin_memory=device == "cuda",
        persistent_workers=True,
        prefetch_factor=4,
    )
