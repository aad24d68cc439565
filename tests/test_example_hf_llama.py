"""adapters/hf_llama.py: a transformers Llama-style LM padded per batch, written as a user would
bring it (no knobs, no blocks). A trial step runs here at a tiny size; skips without
transformers."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
import torch
from helpers import REPO_ROOT, check_padded_per_batch, tiny_transformers_example

from autotune import TrainConfig, load_adapter
from autotune.trial.compose import compose

PATH = REPO_ROOT / "adapters" / "hf_llama.py"
TINY = {"HF_LLAMA_SAMPLES": "64", "HF_LLAMA_MIN_LEN": "8", "HF_LLAMA_MAX_LEN": "40",
        "HF_LLAMA_VOCAB": "500", "HF_LLAMA_WIDTH": "32", "HF_LLAMA_FFN": "64",
        "HF_LLAMA_LAYERS": "1", "HF_LLAMA_HEADS": "2", "HF_LLAMA_BATCH": "4"}


@pytest.fixture
def tiny(monkeypatch: pytest.MonkeyPatch) -> Path:
    return tiny_transformers_example(monkeypatch, PATH, TINY)


def test_batches_are_padded_per_batch_and_count_real_tokens(tiny: Path) -> None:
    cls = load_adapter(tiny)
    module = importlib.import_module(cls.__module__)
    data = module.Documents()
    check_padded_per_batch(cls(), [data[i] for i in range(4)], module.collate,
                           shortest=8, longest=40)


def test_a_trial_step_trains_on_real_tokens(tiny: Path) -> None:
    step = compose(load_adapter(tiny)(), TrainConfig(batch_size=4, amp_dtype="bf16"),
                   torch.device("cpu"))
    try:
        result = step()
        assert step.finite()
        assert 4 * 8 <= result.items <= 4 * 40
    finally:
        step.close()
