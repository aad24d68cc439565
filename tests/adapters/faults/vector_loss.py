"""A tiny adapter whose loss is one value per sample instead of a scalar: it breaks the adapter
contract in every config, so the search must stop after the baseline instead of running the
same failure again for each config."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/adapters: the shared base
from base import SmallAdapter  # noqa: E402


class VectorLossAdapter(SmallAdapter):
    def loss(self, model: nn.Module, batch: Any) -> torch.Tensor:
        x, y = batch
        return nn.functional.cross_entropy(model(x), y, reduction="none")  # forgot the mean
