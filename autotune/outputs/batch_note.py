"""What a changed effective batch means for training: the learning rate, and how many optimizer
steps an epoch of the dataset still holds."""

from __future__ import annotations

import math
from typing import Any

from autotune.contract.config import TrainConfig
from autotune.contract.fmt import rounded

__all__ = ["MIN_EPOCH_STEPS", "batch_change", "effective_batch"]

MIN_EPOCH_STEPS = 8
"""Fewer optimizer steps than this in an epoch, at an effective batch the search changed, and
the note says so: a held-out search on 500 images picked 256 x 4, one step every two epochs
(2-CPU VM, 2026-11-28), and nothing told the user."""


def effective_batch(config: TrainConfig, adapter_batch: int | None,
                    epoch_batches: int | None = None) -> dict[str, Any]:
    """`batch_size x grad_accum` of `config` beside the adapter's; when they differ (only when
    the search was asked to vary it), the factor and what it means for the learning rate and,
    with `epoch_batches` (the winner's loader's batches an epoch), for the steps an epoch."""
    doc: dict[str, Any] = {"value": config.effective_batch, "adapter": adapter_batch}
    note = batch_change(config, adapter_batch, epoch_batches)
    if note is not None and adapter_batch is not None:  # a note says the batch changed
        doc["factor"] = rounded(config.effective_batch / adapter_batch)
        doc["note"] = note
    return doc


def batch_change(config: TrainConfig, adapter_batch: int | None,
                 epoch_batches: int | None = None) -> str | None:
    """One line on a changed effective batch and the learning rate, or None when unchanged."""
    if adapter_batch is None or config.effective_batch == adapter_batch:
        return None
    factor = config.effective_batch / adapter_batch
    # Linear scaling for SGD (Goyal et al. 2017, "Accurate, Large Minibatch SGD"); square-root
    # scaling for Adam-like optimizers (Malladi et al. 2022, "On the SDEs and Scaling Rules for
    # Adaptive Gradient Algorithms"). Both are starting points, not guarantees.
    text = (f"the effective batch (batch_size x grad_accum = {config.effective_batch}) is "
            f"{factor:.3g}x the adapter's {adapter_batch}: scale the learning rate (linear, "
            f"lr x {factor:.3g}, for SGD-like optimizers; square root, lr x "
            f"{math.sqrt(factor):.3g}, for Adam-like ones) or re-tune it")
    steps = epoch_batches / config.grad_accum if epoch_batches else None
    if steps is not None and steps < MIN_EPOCH_STEPS and factor > 1:  # fewer steps than before
        samples = epoch_batches * config.batch_size
        text += (f". An epoch of the dataset is about {samples} samples: {steps:.3g} optimizer "
                 f"steps at this batch against {samples / adapter_batch:.3g} at the adapter's. "
                 "With so few steps an epoch it may need more epochs to train as far")
    return text
