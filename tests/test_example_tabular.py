"""adapters/tabular.py: a ResMLP on dict batches, written as a user would bring it (no knobs).
A trial step runs here at a tiny size: the dict batch reaches the loss, rows are counted by its
first tensor, and activation checkpointing finds the blocks."""

from __future__ import annotations

import pytest
import torch
from helpers import REPO_ROOT, tiny_example

from autotune import TrainConfig, load_adapter
from autotune.trial.compose import compose

PATH = REPO_ROOT / "adapters" / "tabular.py"
TINY = {"TAB_ROWS": "64", "TAB_LEVELS": "10", "TAB_WIDTH": "8", "TAB_DEPTH": "2",
        "TAB_BATCH": "4"}


@pytest.fixture
def tiny(monkeypatch: pytest.MonkeyPatch) -> type:
    return load_adapter(tiny_example(monkeypatch, PATH, TINY))


def test_a_trial_step_trains_on_dict_batches(tiny: type) -> None:
    config = TrainConfig(batch_size=8, num_workers=1, prefetch_factor=2, checkpoint=1.0)
    step = compose(tiny(), config, torch.device("cpu"))
    try:
        result = step()
        assert step.finite()
        assert result.items == 8  # rows: the first tensor of the dict, "cat"
        assert step.blocks_checkpointed == 2
    finally:
        step.close()
