"""adapters/hf_gpt2.py: a transformers GPT-2 on sequences padded per batch (the compute-bound
class with variable shapes). A trial step runs here at a tiny size; skips without transformers."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
import torch
from helpers import REPO_ROOT, check_padded_per_batch, tiny_transformers_example

from autotune import TrainConfig, load_adapter
from autotune.trial.compose import compose

PATH = REPO_ROOT / "adapters" / "hf_gpt2.py"
TINY = {"HF_GPT2_SAMPLES": "64", "HF_GPT2_MIN_LEN": "8", "HF_GPT2_MAX_LEN": "40",
        "HF_GPT2_VOCAB": "500", "HF_GPT2_WIDTH": "32", "HF_GPT2_LAYERS": "1",
        "HF_GPT2_HEADS": "2", "HF_GPT2_BATCH": "4"}


@pytest.fixture
def tiny(monkeypatch: pytest.MonkeyPatch) -> Path:
    return tiny_transformers_example(monkeypatch, PATH, TINY)


def test_batches_are_padded_per_batch_and_count_real_tokens(tiny: Path) -> None:
    cls = load_adapter(tiny)
    module = importlib.import_module(cls.__module__)
    data = module.TokenizedDocuments()
    check_padded_per_batch(cls(), [data[i] for i in range(4)], module.collate,
                           shortest=8, longest=40)


def test_a_trial_step_trains_on_real_tokens(tiny: Path) -> None:
    step = compose(load_adapter(tiny)(), TrainConfig(batch_size=4, amp_dtype="bf16",
                                                     checkpoint=1.0), torch.device("cpu"))
    try:
        result = step()
        assert step.finite()
        assert 4 * 8 <= result.items <= 4 * 40
    finally:
        step.close()


def test_sizes_are_constants_overridable_by_environment() -> None:
    text = PATH.read_text()
    for name in TINY:
        assert f'_const("{name}"' in text, name


def test_its_knobs_pad_to_fixed_shapes_and_pick_the_attention(tiny: Path) -> None:
    from autotune.contract.params import instantiate

    cls = load_adapter(tiny)
    assert cls().params == {"pad_to_multiple_of": None, "attn_implementation": "sdpa",
                            "padding_mask": "keep", "vocab_multiple_of": None}
    adapter = instantiate(cls, {"pad_to_multiple_of": 64, "attn_implementation": "eager"})
    collate = adapter.loader_args()["collate_fn"]
    data = adapter.dataset()
    widths = {collate([data[i] for i in range(j, j + 4)])["input_ids"].shape[1]
              for j in range(0, 32, 4)}
    assert widths == {64}  # one shape: lengths 8-40 padded to a multiple of 64
    assert adapter.model().config._attn_implementation == "eager"
    step = compose(adapter, TrainConfig(batch_size=4), torch.device("cpu"))
    try:
        result = step()
        assert step.finite() and 4 * 8 <= result.items <= 4 * 40  # real tokens, not padding
    finally:
        step.close()


def test_dropping_the_padding_mask_changes_no_real_tokens_loss(tiny: Path) -> None:
    """Right padding under causal attention: no real token attends to the padding after it, and
    the padding's labels are -100. The loss with the mask and without it is the same."""
    from autotune.contract.params import instantiate

    cls = load_adapter(tiny)
    keep, drop = (instantiate(cls, {"padding_mask": v}) for v in ("keep", "drop"))
    data = keep.dataset()
    samples = [data[i] for i in range(4)]
    masked = keep.loader_args()["collate_fn"](samples)
    bare = drop.loader_args()["collate_fn"](samples)
    assert "attention_mask" not in bare and keep.items(masked) == drop.items(bare)
    torch.manual_seed(0)
    model = keep.model().eval()
    with torch.no_grad():
        assert torch.allclose(keep.loss(model, masked), drop.loss(model, bare), atol=1e-5)


def test_the_vocab_knob_rounds_the_embedding_and_its_tied_head_up(tiny: Path) -> None:
    from autotune.contract.params import instantiate

    cls = load_adapter(tiny)
    module = importlib.import_module(cls.__module__)
    vocab = module.HF_GPT2_VOCAB
    assert cls().params["vocab_multiple_of"] is None
    assert cls().model().get_input_embeddings().num_embeddings == vocab
    adapter = instantiate(cls, {"vocab_multiple_of": 64})
    model = adapter.model()
    rows = -(-vocab // 64) * 64
    assert rows > vocab  # the tiny vocab is not a multiple of 64 already
    assert model.get_input_embeddings().num_embeddings == rows
    assert model.get_output_embeddings().weight is model.get_input_embeddings().weight  # tied
    step = compose(adapter, TrainConfig(batch_size=4), torch.device("cpu"))
    try:
        assert step().items > 0 and step.finite()
    finally:
        step.close()
