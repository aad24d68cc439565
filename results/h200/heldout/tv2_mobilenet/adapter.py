"""Held-out, input-bound with a batch that may vary: uint8 images in memory, augmented per
sample with torch ops in the loader's workers (random resized crop, flip, color jitter, a
Gaussian blur half the time, normalization to float32), then torchvision's MobileNetV3-Large.
Batches are (images, labels) tuples; the loader ships float32 images, as many pipelines do.

Without torchvision (the CPU VM) a small CNN stands in. TV2_IMAGES, TV2_STORED, TV2_CROP and
TV2_BATCH override the sizes."""

from __future__ import annotations

import math
import os

import torch
from torch import nn
from torch.nn import functional as F

import autotune

IMAGES = int(os.environ.get("TV2_IMAGES", 4096))
STORED = int(os.environ.get("TV2_STORED", 224))
CROP = int(os.environ.get("TV2_CROP", 176))
BATCH = int(os.environ.get("TV2_BATCH", 96))
CLASSES = 1000
MEAN = torch.tensor([0.485, 0.456, 0.406]).view(3, 1, 1)
STD = torch.tensor([0.229, 0.224, 0.225]).view(3, 1, 1)


def _blur_kernel(sigma: float) -> torch.Tensor:
    x = torch.arange(7, dtype=torch.float32) - 3
    k = torch.exp(-x * x / (2 * sigma * sigma))
    k = k / k.sum()
    return (k[:, None] * k[None, :]).expand(3, 1, 7, 7).contiguous()


class Images(torch.utils.data.Dataset):
    def __init__(self) -> None:
        g = torch.Generator().manual_seed(0)
        small = torch.randint(0, 256, (IMAGES, 3, 14, 14), generator=g, dtype=torch.uint8)
        self.images = torch.cat([F.interpolate(part.float(), size=(STORED, STORED),
                                               mode="bilinear", align_corners=False
                                               ).to(torch.uint8) for part in small.split(256)])

    def __len__(self) -> int:
        return IMAGES

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        img = self.images[i]
        area = STORED * STORED * (0.08 + 0.92 * torch.rand(()).item())
        ratio = math.exp(math.log(3 / 4) + math.log(16 / 9) * torch.rand(()).item())
        w = min(STORED, round(math.sqrt(area * ratio)))
        h = min(STORED, round(math.sqrt(area / ratio)))
        y = int(torch.randint(0, STORED - h + 1, ()))
        x = int(torch.randint(0, STORED - w + 1, ()))
        crop = img[:, y:y + h, x:x + w].float().unsqueeze(0)
        out = F.interpolate(crop, size=(CROP, CROP), mode="bilinear", antialias=True,
                            align_corners=False)[0] / 255.0
        if torch.rand(()) < 0.5:
            out = out.flip(-1)
        b, c, s = (0.6 + 0.8 * torch.rand(3)).tolist()  # brightness, contrast, saturation
        out = (out * b).clamp(0, 1)
        gray = (0.299 * out[0] + 0.587 * out[1] + 0.114 * out[2]).unsqueeze(0)
        out = ((out - gray.mean()) * c + gray.mean()).clamp(0, 1)
        out = (out * s + gray * (1 - s)).clamp(0, 1)
        if torch.rand(()) < 0.5:
            kernel = _blur_kernel(0.1 + 1.9 * torch.rand(()).item())
            out = F.conv2d(F.pad(out.unsqueeze(0), (3, 3, 3, 3), mode="reflect"), kernel,
                           groups=3)[0]
        return (out - MEAN) / STD, i % CLASSES


def _model() -> nn.Module:
    try:
        from torchvision.models import mobilenet_v3_large
    except ImportError:  # the CPU VM: a small CNN in its place
        return nn.Sequential(nn.Conv2d(3, 32, 3, 2, 1), nn.ReLU(), nn.Conv2d(32, 64, 3, 2, 1),
                             nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                             nn.Linear(64, CLASSES))
    return mobilenet_v3_large(num_classes=CLASSES)


class MobileNetAdapter(autotune.Adapter):
    unit = "images"
    batch_size = BATCH

    def dataset(self) -> torch.utils.data.Dataset:
        return Images()

    def model(self) -> nn.Module:
        return _model()

    def optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        return torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-5,
                               nesterov=True)

    def loss(self, model: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        images, labels = batch
        return F.cross_entropy(model(images), labels, label_smoothing=0.1)

    def items(self, batch: tuple[torch.Tensor, torch.Tensor]) -> int:
        return len(batch[1])
