"""The examples: adapters/augment.py (the quick start's: per-sample NumPy augmentation, torch
only), adapters/hf_text.py (transformers, a padding collate through `loader_args`),
adapters/lightning_example.py (the Lightning bridge) and adapters/vision.py (torchvision,
per-sample v2 augmentation in the workers). Each runs a trial step here and a 3-trial search as
a real subprocess; each skips, saying what to install, without its package.
torchvision does not import with a CPU-only torch from PyPI, so the vision input path (uint8
images cropped and flipped per sample in the workers) is also run with a torch-only transform."""

from __future__ import annotations

import importlib
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import optuna
import pytest
import torch
from helpers import REPO_ROOT, run_autotune
from torch import nn

from autotune import Status, TrainConfig, load_adapter
from autotune.study.store.records import read_records
from autotune.trial.compose import compose

# Small enough that a trial takes seconds on two cores.
SMALL = {
    "augment": {"AUGMENT_IMAGES": "256", "AUGMENT_STORED": "24", "AUGMENT_CROP": "16",
                "AUGMENT_CLASSES": "10", "AUGMENT_BATCH": "16", "AUGMENT_WIDTH": "4"},
    "hf_text": {"HF_TEXT_SAMPLES": "256", "HF_TEXT_MAX_LEN": "32", "HF_TEXT_VOCAB": "2048",
                "HF_TEXT_HIDDEN": "32", "HF_TEXT_LAYERS": "1", "HF_TEXT_BATCH": "16"},
    "lightning_example": {"LIT_IMAGES": "256", "LIT_SIZE": "16", "LIT_WIDTH": "8",
                          "LIT_BATCH": "16"},
    "vision": {"VISION_IMAGES": "256", "VISION_STORED": "40", "VISION_CROP": "32",
               "VISION_CLASSES": "10", "VISION_BATCH": "16"},
}
NEEDS = {"hf_text": ("transformers", "hf"), "lightning_example": ("lightning", "lightning"),
         "vision": ("torchvision", "vision")}

# The cpu space without compile: compiling these models takes 20-45 s a trial on two cores,
# which three searches in the suite cannot afford (tests/bridges covers the compiled bridge).
SEARCH_SPACE = """\
num_workers: {low: 0, high: cores}
prefetch_factor: {choices: [2, 4]}
persistent_workers: {choices: [false, true]}
batch_size: {factors: [0.5, 1, 2, 4, 8]}
amp_dtype: {choices: [fp32, bf16]}
"""

# adapters/vision.py with a torch-only transform and model: the same dataset and input path.
TORCH_VISION = f"""\
import importlib.util

import torch
from torch import nn

spec = importlib.util.spec_from_file_location("vision_example", {str(REPO_ROOT / "adapters" / "vision.py")!r})
vision = importlib.util.module_from_spec(spec)
spec.loader.exec_module(vision)


def crop_flip(image):
    \"\"\"One uint8 CHW image: a random crop and flip, scaled to floats (torch only).\"\"\"
    assert image.dtype == torch.uint8
    _, h, w = image.shape
    top = int(torch.randint(0, h - vision.VISION_CROP + 1, ()))
    left = int(torch.randint(0, w - vision.VISION_CROP + 1, ()))
    out = image[:, top:top + vision.VISION_CROP, left:left + vision.VISION_CROP]
    if torch.rand(()) < 0.5:
        out = out.flip(-1)
    info = torch.utils.data.get_worker_info()
    return (out.float() / 255 - 0.5) / 0.25, -1 if info is None else info.id


class Images(vision.UInt8Images):
    def __getitem__(self, i):
        (image, worker), label = self.transform(self.images[i]), self.labels[i]
        return image, label, torch.tensor(worker)


class TorchVisionAdapter(vision.VisionAdapter):
    def dataset(self):
        return Images(crop_flip)

    def model(self):
        return nn.Sequential(nn.Conv2d(3, 8, 3, stride=2), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                             nn.Flatten(), nn.Linear(8, vision.VISION_CLASSES))

    def loss(self, model, batch):
        x, y, _ = batch
        return nn.functional.cross_entropy(model(x), y)

    def blocks(self, model):
        return [model[0]]
"""


def need(example: str) -> None:
    if example not in NEEDS:
        return  # torch and NumPy only
    module, extra = NEEDS[example]
    try:
        importlib.import_module(module)
    except Exception as exc:  # torchvision built for another torch fails with more than ImportError
        pytest.skip(f"adapters/{example}.py needs {module}, which does not import here "
                    f"({type(exc).__name__}: {str(exc)[:200]}); pip install -e '.[{extra}]'")


@pytest.fixture
def small(monkeypatch: pytest.MonkeyPatch) -> Any:
    def set_sizes(example: str) -> None:
        for name, value in SMALL[example].items():
            monkeypatch.setenv(name, value)  # read when the adapter is imported, here or in a trial
    return set_sizes


def one_step(adapter_path: Path, config: TrainConfig) -> Any:
    adapter = load_adapter(adapter_path)()
    step = compose(adapter, config, torch.device("cpu"))
    try:
        result = step()
        assert step.finite()
        return result
    finally:
        step.close()


# -- a trial step of each example, in this process -------------------------------------------------


def test_augment_example_augments_each_read_in_the_workers(small: Any) -> None:
    small("augment")
    path = REPO_ROOT / "adapters" / "augment.py"
    module = importlib.import_module(load_adapter(path).__module__)
    dataset = module.AugmentedImages()
    assert dataset.images.dtype == np.uint8 and dataset.images.shape == (256, 24, 24, 3)
    assert np.array_equal(dataset.images, module.AugmentedImages().images)  # seeded
    torch.manual_seed(0)
    (a, label), (b, again) = dataset[3], dataset[3]
    assert a.dtype == torch.float32 and a.shape == (3, 16, 16) and label == again
    assert not torch.equal(a, b)  # a fresh augmentation on every read
    assert torch.isfinite(a).all()
    result = one_step(path, TrainConfig(batch_size=8, grad_accum=2, num_workers=2,
                                        prefetch_factor=2, persistent_workers=True))
    assert result.items == 16


def test_hf_text_pads_each_batch_and_counts_real_tokens(small: Any) -> None:
    need("hf_text")
    small("hf_text")
    path = REPO_ROOT / "adapters" / "hf_text.py"
    cls = load_adapter(path)
    module = importlib.import_module(cls.__module__)
    samples = [module.TokenizedTexts()[i] for i in range(4)]
    assert len({len(s["input_ids"]) for s in samples}) > 1  # lengths vary
    batch = module.collate(samples)
    longest = max(len(s["input_ids"]) for s in samples)
    assert batch["input_ids"].shape == batch["attention_mask"].shape == (4, longest)
    assert cls().items(batch) == sum(len(s["input_ids"]) for s in samples)
    assert cls().loader_args() == {"collate_fn": module.collate}
    result = one_step(path, TrainConfig(batch_size=8, grad_accum=2, amp_dtype="bf16",
                                        checkpoint=1.0))
    assert 0 < result.items <= 16 * 32


def test_lightning_example_trains_through_the_bridge(small: Any) -> None:
    need("lightning_example")
    small("lightning_example")
    path = REPO_ROOT / "adapters" / "lightning_example.py"
    assert load_adapter(path).batch_size == 16  # the datamodule's default
    assert one_step(path, TrainConfig(batch_size=8, grad_accum=2, checkpoint=0.5)).items == 16


def test_vision_example_with_torchvision(small: Any) -> None:
    need("vision")
    small("vision")
    result = one_step(REPO_ROOT / "adapters" / "vision.py",
                      TrainConfig(batch_size=8, num_workers=2, prefetch_factor=2))
    assert result.items == 8


def test_vision_compute_bound_mode_hands_over_uint8_and_normalizes_on_the_device(
        small: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    small("vision")
    monkeypatch.setenv("VISION_AUGMENT", "0")
    path = REPO_ROOT / "adapters" / "vision.py"
    module = importlib.import_module(load_adapter(path).__module__)
    dataset = module.UInt8Images(module.center_crop)
    image, _ = dataset[5]
    assert image.dtype == torch.uint8 and image.shape == (3, 32, 32)
    assert torch.equal(image, dataset.images[5, :, 4:36, 4:36])  # (40 - 32) / 2 = 4
    batch = torch.stack([image, dataset[6][0]])
    out = module.Normalize()(batch)
    mean = torch.tensor(module.MEAN).view(1, 3, 1, 1)
    std = torch.tensor(module.STD).view(1, 3, 1, 1)
    assert out.dtype == torch.float32
    assert torch.allclose(out, (batch.float() / 255 - mean) / std, atol=1e-5)
    # The adapter in this mode, with a stand-in for torchvision's models (not installed here).
    stages = [nn.Conv2d(3, 3, 1) for _ in range(4)]

    def resnet18(num_classes: int) -> nn.Module:
        net = nn.Sequential(*stages, nn.Flatten(), nn.LazyLinear(num_classes))
        for i, stage in enumerate(stages, start=1):
            setattr(net, f"layer{i}", stage)
        return net

    monkeypatch.setattr(module, "torchvision",
                        lambda: SimpleNamespace(models=SimpleNamespace(resnet18=resnet18)))
    adapter = module.VisionAdapter()
    assert adapter.transform() is module.center_crop
    model = adapter.model()
    assert isinstance(model[0], module.Normalize)
    assert adapter.blocks(model) == stages
    monkeypatch.setattr(module, "VISION_CROP", 64)  # larger than the 40-px images
    with pytest.raises(ValueError, match="VISION_STORED"):
        module.center_crop(dataset.images[0])


def test_vision_input_path_with_a_torch_only_transform(small: Any, tmp_path: Path) -> None:
    small("vision")
    path = tmp_path / "torch_vision.py"
    path.write_text(TORCH_VISION)
    adapter = load_adapter(path)()
    step = compose(adapter, TrainConfig(batch_size=8, num_workers=2, prefetch_factor=2),
                   torch.device("cpu"))
    try:
        batches = [step.next_batch()[0] for _ in range(6)]
        assert step().items == 8 and step.finite()
    finally:
        step.close()
    x, y, workers = batches[0]
    assert x.dtype == torch.float32 and x.shape == (8, 3, 32, 32) and y.shape == (8,)
    assert {int(w) for _, _, b in batches for w in b} == {0, 1}  # transformed in both workers
    stored = adapter.dataset().images
    assert stored.dtype == torch.uint8 and stored.shape[-1] == 40


# -- a 3-trial search of each example, as a user runs it --------------------------------------------


def search_example(adapter: Path, tmp_path: Path) -> None:
    space = tmp_path / "space.yaml"
    space.write_text(SEARCH_SPACE)
    out = tmp_path / "out"
    proc = run_autotune("search", "--adapter", adapter, "--device", "cpu", "--space", space,
                        "--trials", "3", "--confirm", "0", "--measure-seconds", "1",
                        "--no-prune", "--seed", "0", "--out", out, timeout=400)
    assert proc.returncode == 0, f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    storage = f"sqlite:///{(out / 'study.db').resolve()}"
    study = optuna.load_study(study_name=adapter.stem, storage=storage)
    trials = [t for t in read_records(study) if t.result is not None]
    assert len(trials) == 3
    assert all(t.status is Status.OK for t in trials), [(t.number, t.result) for t in trials]
    configs = [t.config for t in trials if t.config is not None]
    assert any(c.num_workers > 0 for c in configs)  # the loader ran in worker processes
    # A default search keeps the effective batch: these adapters do not ask to vary it.
    assert {c.effective_batch for c in configs} == {load_adapter(adapter).batch_size}
    assert (out / "best.yaml").is_file()


@pytest.mark.slow
@pytest.mark.parametrize("example",
                         ["augment", "hf_text", "lightning_example", "vision"])
def test_example_search(example: str, small: Any, tmp_path: Path) -> None:
    need(example)
    small(example)
    search_example(REPO_ROOT / "adapters" / f"{example}.py", tmp_path)


def test_examples_are_cpu_sized_by_their_constants() -> None:
    # docs/adapters.md promises it: sizes at the top of each file, each an environment variable.
    for example, sizes in SMALL.items():
        text = (REPO_ROOT / "adapters" / f"{example}.py").read_text()
        for name in sizes:
            assert f'_const("{name}"' in text, (example, name)
