"""A torchvision ResNet-18 over uint8 images augmented per sample with `torchvision.transforms.v2`
(random resized crop and horizontal flip, then scaling and normalization) in the DataLoader's
workers: the usual image-classification input path.

Needs torchvision built for your torch: pip install -e ".[vision]" (PyPI's torchvision wheels
pin a CUDA build of torch; with a CPU-only torch, install the matching torchvision from
PyTorch's CPU index). torchvision is imported when the model or the transform is built, so the
dataset itself works without it. Constants can be overridden by environment variables of the
same name (e.g. VISION_IMAGES=512).

VISION_AUGMENT=0 makes it compute-bound, the case for the kernel knobs (`channels_last` under
AMP): the loader hands over a fixed center crop as uint8, and the model's first layer scales and
normalizes the batch on the device. VISION_MODEL names the torchvision model (resnet18 by
default; VISION_MODEL=resnet50 VISION_CROP=224 is the usual ImageNet training step).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

import autotune


def _const(name: str, default: int) -> int:
    return int(os.environ.get(name, default))


VISION_IMAGES = _const("VISION_IMAGES", 4096)  # images held in memory
VISION_STORED = _const("VISION_STORED", 160)  # stored side length
VISION_CROP = _const("VISION_CROP", 128)  # training crop
VISION_CLASSES = _const("VISION_CLASSES", 100)
VISION_BATCH = _const("VISION_BATCH", 128)
VISION_AUGMENT = _const("VISION_AUGMENT", 1)  # 0: a fixed uint8 crop, normalized on the device
VISION_MODEL = os.environ.get("VISION_MODEL", "resnet18")

# ImageNet's channel statistics, as torchvision's reference training scripts use.
MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def torchvision() -> Any:
    try:
        import torchvision as tv
        import torchvision.transforms.v2  # a subpackage: `import torchvision` does not load it
    except Exception as exc:  # ImportError, or a torchvision built for another torch
        raise ImportError(
            "adapters/vision.py needs torchvision built for this torch "
            f"({torch.__version__}): pip install -e '.[vision]' ({type(exc).__name__}: {exc})"
        ) from exc
    return tv


def train_transform() -> Callable[[torch.Tensor], torch.Tensor]:
    """torchvision's v2 training augmentation on one uint8 CHW image."""
    v2 = torchvision().transforms.v2
    return v2.Compose([
        v2.RandomResizedCrop(VISION_CROP, antialias=True),
        v2.RandomHorizontalFlip(),
        v2.ToDtype(torch.float32, scale=True),
        v2.Normalize(MEAN, STD),
    ])


def center_crop(image: torch.Tensor) -> torch.Tensor:
    """The central CROP x CROP square of one uint8 CHW image, still uint8 (a quarter of the
    bytes of float32 through the loader's queues and the copy to the device)."""
    if image.shape[-1] < VISION_CROP or image.shape[-2] < VISION_CROP:
        raise ValueError(f"VISION_CROP={VISION_CROP} is larger than the stored images "
                         f"({tuple(image.shape[-2:])}): raise VISION_STORED to at least it")
    top = (image.shape[-1] - VISION_CROP) // 2
    return image[:, top:top + VISION_CROP, top:top + VISION_CROP].contiguous()


class Normalize(nn.Module):
    """uint8 images to normalized floats on the device: the first layer when the loader hands
    over uint8 (`VISION_AUGMENT=0`)."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("mean", torch.tensor(MEAN).view(1, 3, 1, 1) * 255)
        self.register_buffer("std", torch.tensor(STD).view(1, 3, 1, 1) * 255)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x.float() - self.mean) / self.std


class UInt8Images(torch.utils.data.Dataset):
    """Seeded uint8 images (3 x STORED x STORED) and labels in memory; each read transforms one
    image: in the DataLoader's worker processes when there are workers."""

    def __init__(self, transform: Callable[[torch.Tensor], torch.Tensor]) -> None:
        g = torch.Generator().manual_seed(0)
        self.images = torch.randint(0, 256, (VISION_IMAGES, 3, VISION_STORED, VISION_STORED),
                                    generator=g, dtype=torch.uint8)
        self.labels = torch.randint(0, VISION_CLASSES, (VISION_IMAGES,), generator=g)
        self.transform = transform

    def __len__(self) -> int:
        return VISION_IMAGES

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.transform(self.images[i]), self.labels[i]


class VisionAdapter(autotune.Adapter):
    unit = "images"
    batch_size = VISION_BATCH

    def transform(self) -> Callable[[torch.Tensor], torch.Tensor]:
        return train_transform() if VISION_AUGMENT else center_crop

    def dataset(self) -> torch.utils.data.Dataset:
        return UInt8Images(self.transform())

    def model(self) -> nn.Module:
        net = getattr(torchvision().models, VISION_MODEL)(num_classes=VISION_CLASSES)
        return net if VISION_AUGMENT else nn.Sequential(Normalize(), net)

    def optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        return torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)

    def loss(self, model: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        x, y = batch
        return F.cross_entropy(model(x), y)

    def blocks(self, model: nn.Module) -> list[nn.Module]:
        net = model[1] if isinstance(model, nn.Sequential) else model  # after Normalize
        # A ResNet's four stages; another torchvision model (VISION_MODEL) is not checkpointed.
        names = ("layer1", "layer2", "layer3", "layer4")
        return [getattr(net, n) for n in names] if all(hasattr(net, n) for n in names) else []
