"""A micro-batch whose samples act on each other's loss: its size is part of what training
computes.

Accumulating gradients over two micro-batches of 32 computes what one batch of 64 does only
when each sample's loss is its own. An in-batch contrastive loss (`q @ d.T` over the batch:
31 negatives a sample at 32, 63 at 64) or BatchNorm's batch statistics depend on the samples
beside it. An adapter that says so (`Adapter.samples_interact`) keeps its micro-batch: the
search holds `batch_size` at the adapter's while the effective batch is kept, and `grad_accum`
at the adapter's own in every case (with `--vary-global-batch` the batch may still change, which
is the choice that flag makes).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING

from autotune.contract.config import TrainConfig
from autotune.study.space.bound import Knob

if TYPE_CHECKING:
    from autotune.adapter import Adapter

__all__ = ["keep_micro_batch"]


def keep_micro_batch(knobs: Sequence[Knob], adapter: type[Adapter], baseline: TrainConfig,
                     fixed: int | None) -> list[Knob]:
    """`knobs` with the micro-batch held where the adapter's samples interact (`fixed`: the
    effective batch the search keeps, None when it may vary)."""
    if not adapter.samples_interact:
        return list(knobs)
    held = {"grad_accum": baseline.grad_accum}
    if fixed is not None:
        held["batch_size"] = baseline.batch_size
    return [dataclasses.replace(k, choices=(held[k.name],), low=None, high=None)
            if k.name in held else k for k in knobs]
