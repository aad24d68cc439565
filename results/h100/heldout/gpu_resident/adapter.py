"""Held-out: a CIFAR-size dataset kept on the GPU, the way small-data training often does it.

The whole dataset (uint8 NCHW images and int64 labels) is moved to the device once, wrapped in a
TensorDataset and read through a plain DataLoader: every batch is already on the GPU, so workers
and pinned memory cannot run (a forked worker cannot touch CUDA; a CUDA tensor cannot be pinned).
The model is torchvision's ResNet-18 for 10 classes, its stem changed for 32-pixel images, the
images normalized and flipped at random on the device. On a machine without CUDA the data stays
in host memory and a small CNN stands in when torchvision is missing.

RESIDENT_IMAGES and RESIDENT_BATCH override the sizes."""

from __future__ import annotations

import os

import torch
from torch import nn
from torch.nn import functional as F

import autotune

IMAGES = int(os.environ.get("RESIDENT_IMAGES", 50_000))
BATCH = int(os.environ.get("RESIDENT_BATCH", 512))
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def _body() -> nn.Module:
    try:
        import torchvision
    except ImportError:
        return nn.Sequential(nn.Conv2d(3, 32, 3, 1, 1), nn.ReLU(), nn.Conv2d(32, 64, 3, 2, 1),
                             nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10))
    net = torchvision.models.resnet18(num_classes=10)
    net.conv1 = nn.Conv2d(3, 64, 3, 1, 1, bias=False)
    net.maxpool = nn.Identity()
    return net


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = _body()
        self.register_buffer("mean", torch.tensor([125.3, 123.0, 113.9]).view(1, 3, 1, 1))
        self.register_buffer("std", torch.tensor([63.0, 62.1, 66.7]).view(1, 3, 1, 1))

    def forward(self, pixels: torch.Tensor) -> torch.Tensor:
        x = (pixels.float() - self.mean) / self.std
        if self.training:
            flip = torch.rand(x.shape[0], 1, 1, 1, device=x.device) < 0.5
            x = torch.where(flip, x.flip(3), x)
        return self.body(x)


class GpuResidentAdapter(autotune.Adapter):
    unit = "images"
    batch_size = BATCH

    def dataset(self) -> torch.utils.data.Dataset:
        g = torch.Generator().manual_seed(0)
        images = torch.randint(0, 256, (IMAGES, 3, 32, 32), dtype=torch.uint8, generator=g)
        labels = torch.randint(0, 10, (IMAGES,), generator=g)
        return torch.utils.data.TensorDataset(images.to(DEVICE), labels.to(DEVICE))

    def model(self) -> nn.Module:
        return Net()

    def optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        return torch.optim.SGD(model.parameters(), lr=0.2, momentum=0.9, nesterov=True,
                               weight_decay=5e-4)

    def loss(self, model: nn.Module, batch: list[torch.Tensor]) -> torch.Tensor:
        pixels, labels = batch
        return F.cross_entropy(model(pixels), labels, label_smoothing=0.2)

    def items(self, batch: list[torch.Tensor]) -> int:
        return batch[1].shape[0]
