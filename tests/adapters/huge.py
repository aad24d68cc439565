"""A dataset of 2^31 samples whose `__getitem__` is cheap (computed from the index, nothing
stored): a loader that does work proportional to the dataset's length when it starts (a full
permutation: 16 GiB and about a minute) shows here."""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))  # tests/adapters: the shared base
from base import SmallAdapter  # noqa: E402

SAMPLES = 2**31


class HugeDataset(torch.utils.data.Dataset):
    def __init__(self, features: int, classes: int) -> None:
        self.features = features
        self.classes = classes

    def __len__(self) -> int:
        return SAMPLES

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        if not 0 <= i < SAMPLES:
            raise IndexError(i)
        x = torch.full((self.features,), (i % 1000) / 1000.0)
        return x, torch.tensor(i % self.classes)


class HugeAdapter(SmallAdapter):
    def dataset(self) -> torch.utils.data.Dataset:
        return HugeDataset(self.features, self.classes)
