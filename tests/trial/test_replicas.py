"""An iterable dataset that every DataLoader worker replays whole is caught, with its fix."""

from __future__ import annotations

import itertools

import pytest
import torch
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

from autotune.trial.blame import blamed
from autotune.trial.replicas import ReplayedStream, ReplicaCheck


class Stream(IterableDataset):
    """16 items; `sharded`: each worker yields its share (as PyTorch's docs show)."""

    def __init__(self, sharded: bool, constant: bool = False) -> None:
        self.sharded, self.constant = sharded, constant

    def __iter__(self):
        info = get_worker_info()
        start, step = (info.id, info.num_workers) if self.sharded and info else (0, 1)
        for i in range(start, 16, step):
            yield torch.zeros(3) if self.constant else torch.full((3,), float(i))


def feed(loader: DataLoader) -> None:
    check = ReplicaCheck(loader)
    for batch in itertools.islice(loader, 6):
        check.add(batch)


def test_a_stream_every_worker_replays_is_caught_and_blamed_on_the_dataset() -> None:
    # Real workers: this also shows the order the check relies on (one batch from each in turn).
    with pytest.raises(ReplayedStream, match="Split the items by worker") as caught:
        feed(DataLoader(Stream(sharded=False), batch_size=2, num_workers=2))
    assert "num_workers=2" in str(caught.value) and "2 times" in str(caught.value)
    assert blamed(caught.value) == "dataset()"


def test_a_sharded_stream_and_a_constant_one_pass() -> None:
    feed(DataLoader(Stream(sharded=True), batch_size=2, num_workers=2))
    feed(DataLoader(Stream(sharded=False, constant=True), batch_size=2, num_workers=2))


def test_only_a_stream_with_two_workers_or_more_is_checked() -> None:
    same = [torch.ones(2), torch.ones(2), torch.zeros(2)]  # the replayed pattern, fed by hand
    for loader in (DataLoader(Stream(sharded=False), num_workers=1),
                   DataLoader(list(range(8)), num_workers=2),  # a map-style dataset
                   [torch.ones(2)]):  # an adapter's own loader
        check = ReplicaCheck(loader)
        for batch in same:
            check.add(batch)
    check = ReplicaCheck(DataLoader(Stream(sharded=False), num_workers=2))
    with pytest.raises(ReplayedStream):
        for batch in same:
            check.add(batch)
