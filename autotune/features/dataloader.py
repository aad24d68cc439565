"""DataLoader knobs: workers, prefetching, pinning, persistence, batch size."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import torch
from torch.utils.data import DataLoader, Dataset, IterableDataset

if TYPE_CHECKING:
    from autotune.config import TrainConfig

__all__ = ["apply_dataloader", "dataloader_kwargs", "to_device"]


def dataloader_kwargs(config: TrainConfig) -> dict[str, Any]:
    """The DataLoader arguments that `config` sets."""
    kwargs: dict[str, Any] = {
        "batch_size": config.batch_size,
        "num_workers": config.num_workers,
        "pin_memory": config.pin_memory,
    }
    if config.num_workers > 0:
        # PyTorch raises if either is given without workers.
        kwargs["persistent_workers"] = config.persistent_workers
        if config.prefetch_factor is not None:
            kwargs["prefetch_factor"] = config.prefetch_factor
    return kwargs


def apply_dataloader(
    dataset: Dataset[Any], config: TrainConfig, *, worker_init_fn: Any = None
) -> DataLoader[Any]:
    """A training DataLoader over `dataset`: shuffled when map-style, full batches only."""
    shuffle = not isinstance(dataset, IterableDataset)
    return DataLoader(dataset, shuffle=shuffle, drop_last=True, worker_init_fn=worker_init_fn,
                      **dataloader_kwargs(config))


def to_device(batch: Any, device: torch.device, non_blocking: bool) -> Any:
    """Move every tensor in a (nested) batch to `device`.

    `non_blocking` only overlaps the copy with compute when the source is pinned; with pageable
    memory the copy is synchronous whatever the flag says.
    """
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=non_blocking)
    if isinstance(batch, Mapping):
        return {k: to_device(v, device, non_blocking) for k, v in batch.items()}
    if isinstance(batch, tuple):
        moved = [to_device(v, device, non_blocking) for v in batch]
        return type(batch)(*moved) if hasattr(batch, "_fields") else tuple(moved)  # namedtuple
    if isinstance(batch, list):
        return [to_device(v, device, non_blocking) for v in batch]
    return batch
