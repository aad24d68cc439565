"""adapters/hf_llama.py: a transformers Llama-style LM padded per batch, written as a user would
bring it (no knobs, no blocks). A trial step runs here at a tiny size; skips without
transformers."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
import torch
from helpers import REPO_ROOT

from autotune import TrainConfig, load_adapter
from autotune.trial.compose import compose

PATH = REPO_ROOT / "adapters" / "hf_llama.py"
TINY = {"HF_LLAMA_SAMPLES": "64", "HF_LLAMA_MIN_LEN": "8", "HF_LLAMA_MAX_LEN": "40",
        "HF_LLAMA_VOCAB": "500", "HF_LLAMA_WIDTH": "32", "HF_LLAMA_FFN": "64",
        "HF_LLAMA_LAYERS": "1", "HF_LLAMA_HEADS": "2", "HF_LLAMA_BATCH": "4"}


@pytest.fixture
def tiny(monkeypatch: pytest.MonkeyPatch) -> Path:
    pytest.importorskip("transformers", reason="adapters/hf_llama.py needs pip install -e '.[hf]'")
    for name, value in TINY.items():
        monkeypatch.setenv(name, value)  # read when the adapter is imported
    return PATH


def test_batches_are_padded_per_batch_and_count_real_tokens(tiny: Path) -> None:
    cls = load_adapter(tiny)
    module = importlib.import_module(cls.__module__)
    data = module.Documents()
    samples = [data[i] for i in range(4)]
    lengths = [len(s["input_ids"]) for s in samples]
    assert len(set(lengths)) > 1 and all(8 <= n <= 40 for n in lengths)
    batch = module.collate(samples)
    assert batch["input_ids"].shape == (4, max(lengths))
    assert cls().items(batch) == sum(lengths)
    real = batch["attention_mask"].bool()
    assert bool((batch["labels"][~real] == -100).all())
    assert torch.equal(batch["labels"][real], batch["input_ids"][real])


def test_a_trial_step_trains_on_real_tokens(tiny: Path) -> None:
    step = compose(load_adapter(tiny)(), TrainConfig(batch_size=4, amp_dtype="bf16"),
                   torch.device("cpu"))
    try:
        result = step()
        assert step.finite()
        assert 4 * 8 <= result.items <= 4 * 40
    finally:
        step.close()
