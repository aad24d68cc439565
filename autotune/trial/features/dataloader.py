"""DataLoader knobs: workers, prefetching, pinning, persistence, batch size."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch.utils.data import DataLoader, Dataset, IterableDataset

__all__ = ["apply_dataloader", "dataloader_kwargs", "to_device"]


def dataloader_kwargs(
    *,
    batch_size: int,
    num_workers: int,
    prefetch_factor: int | None,
    pin_memory: bool,
    persistent_workers: bool,
) -> dict[str, Any]:
    """The DataLoader arguments of the loader knobs (the "how fast", not the "what")."""
    kwargs: dict[str, Any] = {
        "batch_size": batch_size,
        "num_workers": num_workers,
        "pin_memory": pin_memory,
    }
    if num_workers > 0:
        # PyTorch raises if either is given without workers.
        kwargs["persistent_workers"] = persistent_workers
        if prefetch_factor is not None:
            kwargs["prefetch_factor"] = prefetch_factor
    return kwargs


def apply_dataloader(
    dataset: Dataset[Any], knobs: dict[str, Any], *, worker_init_fn: Any = None
) -> DataLoader[Any]:
    """A training DataLoader over `dataset` with the loader knobs `knobs`
    (`dataloader_kwargs`'s result): shuffled when map-style, full batches only."""
    shuffle = not isinstance(dataset, IterableDataset)
    return DataLoader(dataset, shuffle=shuffle, drop_last=True, worker_init_fn=worker_init_fn,
                      **knobs)


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
