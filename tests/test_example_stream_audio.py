"""adapters/stream_audio.py: an IterableDataset with no length that shards itself by worker,
written as a user would bring it. Here at a tiny size: the shards cover the epoch once, and a
trial step with two workers trains on its batches."""

from __future__ import annotations

import importlib

import pytest
import torch
from helpers import REPO_ROOT, tiny_example

from autotune import TrainConfig, load_adapter
from autotune.trial.compose import compose

PATH = REPO_ROOT / "adapters" / "stream_audio.py"
TINY = {"AUDIO_CLIPS": "24", "AUDIO_LENGTH": "256", "AUDIO_CLASSES": "3", "AUDIO_BATCH": "4"}


@pytest.fixture
def tiny(monkeypatch: pytest.MonkeyPatch) -> type:
    return load_adapter(tiny_example(monkeypatch, PATH, TINY))


def test_the_workers_shards_cover_the_epoch_once(tiny: type) -> None:
    module = importlib.import_module(tiny.__module__)
    loader = torch.utils.data.DataLoader(module.Waves(), batch_size=4, num_workers=2)
    labels = [int(y) for _, ys in loader for y in ys]
    assert len(labels) == 24  # each clip once, not once a worker
    assert sorted(labels) == sorted(i % 3 for i in range(24))


def test_a_trial_step_trains_on_its_batches(tiny: type) -> None:
    config = TrainConfig(batch_size=4, num_workers=2, prefetch_factor=2)
    step = compose(tiny(), config, torch.device("cpu"))
    try:
        result = step()
        assert step.finite()
        assert result.items == 4
    finally:
        step.close()
