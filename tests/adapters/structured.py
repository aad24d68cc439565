"""Real training code's loader: samples are dicts, its own `collate_fn` makes a dataclass
batch, its own `worker_init_fn` runs in each worker (it records the worker's pid as
"init-<pid>" in `$AUTOTUNE_TEST_PID_DIR`). The tool adds only its knobs and its worker guard."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Any

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))  # tests/adapters: the shared base
from base import Samples, SmallAdapter, record_pid  # noqa: E402


@dataclasses.dataclass
class Batch:
    features: torch.Tensor
    labels: torch.Tensor
    ids: list[int]


class DictSamples(Samples):
    def __getitem__(self, i: int) -> dict[str, Any]:  # type: ignore[override]
        x, y = super().__getitem__(i)
        return {"features": x, "labels": y, "id": i}


def collate(samples: list[dict[str, Any]]) -> Batch:
    return Batch(features=torch.stack([s["features"] for s in samples]),
                 labels=torch.stack([s["labels"] for s in samples]),
                 ids=[s["id"] for s in samples])


def init_worker(worker_id: int) -> None:
    record_pid("init")


class StructuredAdapter(SmallAdapter):
    def dataset(self) -> torch.utils.data.Dataset:
        return DictSamples(self.samples, self.features, self.classes)

    def loader_args(self) -> dict[str, Any]:
        return {"collate_fn": collate, "worker_init_fn": init_worker}

    def loss(self, model: nn.Module, batch: Batch) -> torch.Tensor:
        return nn.functional.cross_entropy(model(batch.features), batch.labels)
