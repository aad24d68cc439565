"""Catch an iterable dataset that every DataLoader worker replays whole.

Each worker gets its own copy of an `IterableDataset`; unless the dataset splits its items by
`torch.utils.data.get_worker_info()`, every worker yields all of them, and N workers deliver
each item N times (PyTorch's `IterableDataset` docs say so). The rate then counts duplicates:
a held-out stream on the 2-CPU VM (2026-11-28) "won" at 2 workers, 1.13x, on twice the items.

A DataLoader hands an iterable dataset's batches over in turn, one from each worker. With W
workers, batch 0 and batch 1 come from workers 0 and 1, and batch W is worker 0's second. A
replayed stream shows batch 1 equal to batch 0 and batch W different from it (a stream of one
constant batch, where all three are equal, duplicates nothing that matters). Generated data
shows it too when each worker's NumPy generator starts from the same seed.
"""

from __future__ import annotations

import hashlib
from typing import Any

import torch
from torch.utils.data import DataLoader, IterableDataset

from autotune.trial.blame import blame
from autotune.trial.shapes import leaves

__all__ = ["ReplayedStream", "ReplicaCheck"]


class ReplayedStream(RuntimeError):
    """The dataset's workers each yield every item."""


def _digest(batch: Any) -> bytes:
    """The bytes of every tensor in `batch` (and its shapes), hashed."""
    h = hashlib.blake2b(digest_size=16)
    for path, shape, leaf in leaves(batch):
        h.update(f"{path}{shape}".encode())
        if isinstance(leaf, torch.Tensor):
            flat = leaf.detach().cpu().contiguous().reshape(-1)
            h.update(flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b"")
        else:  # a NumPy array, or another object with a shape
            h.update(repr(leaf).encode())
    return h.digest()


class ReplicaCheck:
    """Fed each batch a step pulls; raises `ReplayedStream` once the first W + 1 show the
    pattern. Does nothing unless the loader is a DataLoader over an IterableDataset with two
    workers or more."""

    def __init__(self, loader: Any) -> None:
        workers = getattr(loader, "num_workers", 0) if isinstance(loader, DataLoader) else 0
        stream = isinstance(getattr(loader, "dataset", None), IterableDataset)
        self.workers = workers if stream and workers >= 2 else 0
        self._seen: list[bytes] = []

    def add(self, batch: Any) -> None:
        if not self.workers or len(self._seen) > self.workers:
            return
        self._seen.append(_digest(batch))
        if len(self._seen) == self.workers + 1:
            first, second, again = self._seen[0], self._seen[1], self._seen[-1]
            self._seen.append(b"")  # checked: nothing more is hashed
            if first == second and first != again:
                exc = ReplayedStream(
                    f"every DataLoader worker yields the whole dataset: with num_workers="
                    f"{self.workers}, the first two batches (from workers 0 and 1) are the same, "
                    f"so each item arrives {self.workers} times and the rate counts duplicates. "
                    f"Split the items by worker in the IterableDataset's __iter__ "
                    f"(torch.utils.data.get_worker_info(): its id and num_workers), or, for "
                    f"generated data, seed its NumPy or random generator by that id")
                blame(exc, "dataset()")  # the adapter's to fix, whatever the config
                raise exc
