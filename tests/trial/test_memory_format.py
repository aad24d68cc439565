"""`memory_format`: the model's parameters and each 4-D floating tensor of a batch in NHWC
(`channels_last`), the batch's structure kept whatever it is (CPU only)."""

from __future__ import annotations

import collections
import dataclasses
from pathlib import Path
from typing import Any

import torch
from torch import nn

from autotune import TrainConfig, load_adapter
from autotune.trial.compose import apply_model_features, compose
from autotune.trial.features.dataloader import to_device
from autotune.trial.features.memory_format import apply_memory_format, batch_format

CPU = torch.device("cpu")
NHWC = torch.channels_last


def nhwc(t: torch.Tensor) -> bool:
    return t.is_contiguous(memory_format=NHWC) and not t.is_contiguous()


@dataclasses.dataclass(frozen=True)
class Images:
    pixels: torch.Tensor
    labels: torch.Tensor


class Feature(collections.UserDict):  # what HF's BatchFeature is: a UserDict with its own .to
    def to(self, device: Any, *, non_blocking: bool = False) -> Feature:
        return self


def test_only_4d_floating_tensors_take_the_format_in_any_structure() -> None:
    image = torch.randn(2, 3, 4, 5)
    batch = {"pair": (image, torch.zeros(2, 3, 4, 5, dtype=torch.uint8)),
             "images": Images(image, torch.zeros(2)), "seq": [torch.randn(2, 3, 4)],
             "feature": Feature(pixel_values=image)}
    moved = to_device(batch, CPU, False, batch_format("channels_last"))
    assert nhwc(moved["pair"][0]) and moved["pair"][1].is_contiguous()  # integers: as they come
    assert isinstance(moved["images"], Images) and nhwc(moved["images"].pixels)
    assert moved["seq"][0].is_contiguous()  # 3-D: no such format
    assert type(moved["feature"]) is Feature and nhwc(moved["feature"]["pixel_values"])
    assert torch.equal(moved["pair"][0], image) and image.is_contiguous()  # the values, moved
    assert to_device(batch, CPU, False, batch_format("contiguous"))["pair"][0].is_contiguous()


def test_the_model_keeps_its_parameters_in_place() -> None:
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.Flatten(), nn.Linear(8, 2))
    weight = model[0].weight
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    assert apply_memory_format(model, "channels_last") is model
    assert model[0].weight is weight and nhwc(weight)  # the optimizer's parameter, converted
    assert optimizer.param_groups[0]["params"][0] is weight
    plain = nn.Conv2d(3, 4, 3)
    module, _ = apply_model_features(plain, [], amp_dtype="fp32", checkpoint=0.0, compile="none")
    assert module is plain and plain.weight.is_contiguous()  # contiguous: PyTorch's default


def test_the_step_moves_its_batches_in_the_configs_format(tiny_adapter: Path) -> None:
    step = compose(load_adapter(tiny_adapter)(), TrainConfig(batch_size=8,
                                                             memory_format="channels_last"), CPU)
    try:
        assert nhwc(step.to_device((torch.randn(2, 3, 4, 5),), non_blocking=False)[0])
        step()  # the tiny model has no 4-D tensor: the format changes nothing there
    finally:
        step.close()


def test_channels_last_converts_4d_floating_tensors_and_leaves_5d_ones() -> None:
    from autotune.trial.features.memory_format import apply_memory_format

    model = torch.nn.Sequential(torch.nn.Conv3d(2, 4, 3), torch.nn.Conv2d(2, 4, 3))
    weight2d = model[1].weight
    apply_memory_format(model, "channels_last")  # Module.to would refuse the Conv3d's weight
    assert model[1].weight is weight2d  # the same Parameter: an optimizer keeps it
    assert weight2d.is_contiguous(memory_format=torch.channels_last)
    assert model[0].weight.is_contiguous()


CONVS = """\
import torch
from torch import nn

import autotune


class Convs(autotune.Adapter):
    batch_size = 4

    def dataset(self):
        return torch.utils.data.TensorDataset(torch.randn(16, 3, 8, 8), torch.randint(0, 2, (16,)))

    def model(self):
        return nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Conv2d(4, 4, 3), nn.Flatten(),
                             nn.Linear(64, 2))

    def optimizer(self, model):
        return torch.optim.SGD(model.parameters(), lr=0.1)

    def loss(self, model, batch):
        x, y = batch
        return nn.functional.cross_entropy(model(x), y)
"""


def test_the_step_counts_the_models_convolution_weights(tiny_adapter: Path, tmp_path: Path
                                                        ) -> None:
    from autotune.outputs.best import conv_note

    path = tmp_path / "convs.py"
    path.write_text(CONVS)
    counts = {}
    for name, adapter in (("convs", path), ("tiny", tiny_adapter)):
        step = compose(load_adapter(adapter)(), TrainConfig(batch_size=4), CPU)
        try:
            counts[name] = step.conv_weights
        finally:
            step.close()
    assert counts == {"convs": 2, "tiny": 0}
    # The note at the end of a search: convolutions, and a space without the memory format.
    from autotune import Status
    from autotune.contract.result import TrialResult

    convs = TrialResult(status=Status.OK, throughput=1.0, conv_weights=2)
    note = conv_note(convs, ("contiguous",))
    assert note is not None and "2 convolution weights" in note and "the default space does" in note
    assert conv_note(convs, ("contiguous", "channels_last")) is None  # searched already
    assert conv_note(TrialResult(status=Status.OK, throughput=1.0, conv_weights=0), ("contiguous",)) is None
    assert conv_note(None, ("contiguous",)) is None
