"""A small CNN on CIFAR-sized images augmented per sample in NumPy: the input-bound case on a CPU
(unit: images). The README's quick start uses it.

Seeded uint8 images (HWC, as an image decoder returns them) sit in memory; every read crops a
random square, turns it and resizes it bilinearly, flips, jitters brightness, contrast and
saturation, erases a random patch and normalizes one image in NumPy, as a CIFAR training
pipeline does on the CPU. Preparing an image costs a few times what the model's step on it
does, so with the loader in the training process (PyTorch's default, `num_workers=0`) the step
waits for it, and the loader's knobs decide the speed even on two cores. The batch is large
enough that the step's own threads, which loader workers take cores from, stay a small share of
the time. Constants can be overridden by environment variables of the same name (e.g.
AUGMENT_IMAGES=512).
"""

from __future__ import annotations

import os

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

import autotune


def _const(name: str, default: int) -> int:
    return int(os.environ.get(name, default))


# Images held in memory (79 MB at 40 px): 64 steps an epoch at batch 256. Each epoch's start
# waits for the workers' first batches (69 ms against 18-42 ms a step on 2 CPUs): with 4096
# images an epoch was 16 steps and that wait a share of every window CIFAR-10's 195 steps an
# epoch do not have.
AUGMENT_IMAGES = _const("AUGMENT_IMAGES", 16384)
AUGMENT_STORED = _const("AUGMENT_STORED", 40)  # stored side length
AUGMENT_CROP = _const("AUGMENT_CROP", 32)  # training crop, CIFAR's size
AUGMENT_CLASSES = _const("AUGMENT_CLASSES", 10)
AUGMENT_BATCH = _const("AUGMENT_BATCH", 256)
AUGMENT_WIDTH = _const("AUGMENT_WIDTH", 16)  # channels of the first stage

# CIFAR-10's per-channel statistics, the usual normalization constants.
MEAN = np.array([0.4914, 0.4822, 0.4465], dtype=np.float32)
STD = np.array([0.2470, 0.2435, 0.2616], dtype=np.float32)
LUMA = np.array([0.299, 0.587, 0.114], dtype=np.float32)  # ITU-R 601 grey, as PIL's convert("L")


def _uniform(low: float, high: float, n: int) -> list[float]:
    # torch's RNG, not NumPy's: DataLoader seeds it differently in every worker.
    return (low + (high - low) * torch.rand(n)).tolist()


def random_affine(image: np.ndarray) -> np.ndarray:
    """A random square of 50-100% of the side, anywhere in the image and turned by up to 15
    degrees, resampled bilinearly to the crop size (float32 in [0, 1]): torchvision's random
    resized crop and random rotation in one warp."""
    (scale,), (turn,) = _uniform(0.5, 1.0, 1), _uniform(-15.0, 15.0, 1)
    dy, dx = _uniform(-1.0, 1.0, 2)
    side = AUGMENT_STORED * scale
    room = (AUGMENT_STORED - side) / 2  # how far the square's centre may move and stay inside
    cy, cx = (AUGMENT_STORED - 1) / 2 + room * dy, (AUGMENT_STORED - 1) / 2 + room * dx
    # Where each output pixel's centre falls in the stored image: scaled, turned, moved.
    grid = (np.arange(AUGMENT_CROP, dtype=np.float32) + 0.5) * np.float32(side / AUGMENT_CROP)
    grid -= np.float32(side / 2)
    cos, sin = np.float32(np.cos(np.radians(turn))), np.float32(np.sin(np.radians(turn)))
    y = np.float32(cy) + cos * grid[:, None] - sin * grid[None, :]
    x = np.float32(cx) + sin * grid[:, None] + cos * grid[None, :]
    y0 = np.clip(np.floor(y), 0, AUGMENT_STORED - 2).astype(np.intp)
    x0 = np.clip(np.floor(x), 0, AUGMENT_STORED - 2).astype(np.intp)
    wy = np.clip(y - y0, 0, 1).astype(np.float32)[..., None]
    wx = np.clip(x - x0, 0, 1).astype(np.float32)[..., None]
    img = image.astype(np.float32) * np.float32(1 / 255)
    top = img[y0, x0] * (1 - wx) + img[y0, x0 + 1] * wx
    bottom = img[y0 + 1, x0] * (1 - wx) + img[y0 + 1, x0 + 1] * wx
    return top * (1 - wy) + bottom * wy


def color_jitter(img: np.ndarray) -> np.ndarray:
    """Brightness, contrast and saturation each scaled by a random factor in [0.6, 1.4]."""
    brightness, contrast, saturation = _uniform(0.6, 1.4, 3)
    img = img * brightness
    grey = img @ LUMA
    img = (img - grey.mean()) * contrast + grey.mean()
    grey = (img @ LUMA)[..., None]
    img = (img - grey) * saturation + grey
    return np.clip(img, 0.0, 1.0, out=img)


def erase(img: np.ndarray) -> np.ndarray:
    """Random erasing: half the time, a rectangle of up to a quarter of each side is zeroed."""
    if torch.rand(()) < 0.5:
        h, w = torch.randint(1, AUGMENT_CROP // 4 + 1, (2,)).tolist()
        top, left = torch.randint(AUGMENT_CROP - max(h, w) + 1, (2,)).tolist()
        img[top:top + h, left:left + w] = 0.0
    return img


class AugmentedImages(torch.utils.data.Dataset):
    """Seeded uint8 images (STORED x STORED x 3) and labels in memory, each image its class's
    colour under noise (so that the loss can fall); each read augments one."""

    def __init__(self) -> None:
        rng = np.random.default_rng(0)
        self.labels = rng.integers(0, AUGMENT_CLASSES, AUGMENT_IMAGES)
        colours = rng.integers(0, 128, (AUGMENT_CLASSES, 1, 1, 3), dtype=np.uint8)
        shape = (AUGMENT_IMAGES, AUGMENT_STORED, AUGMENT_STORED, 3)
        self.images = rng.integers(0, 128, shape, dtype=np.uint8) + colours[self.labels]

    def __len__(self) -> int:
        return AUGMENT_IMAGES

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        img = random_affine(self.images[i])
        if torch.rand(()) < 0.5:
            img = img[:, ::-1]
        img = erase(color_jitter(img))
        img = (img - MEAN) / STD
        return torch.from_numpy(np.ascontiguousarray(img.transpose(2, 0, 1))), int(self.labels[i])


def stage(cin: int, cout: int) -> nn.Sequential:
    """A 3x3 convolution with batch norm, then a 2x2 max pool (halves the side)."""
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout),
                         nn.ReLU(), nn.MaxPool2d(2))


class SmallCNN(nn.Module):
    """A patchifying stem (4x4, stride 4: 32 x 32 to 8 x 8), two stages each doubling the width
    and halving the side, a linear head."""

    def __init__(self) -> None:
        super().__init__()
        w = AUGMENT_WIDTH
        self.stem = nn.Sequential(nn.Conv2d(3, w, 4, stride=4, bias=False), nn.BatchNorm2d(w),
                                  nn.ReLU())
        self.stages = nn.ModuleList([stage(w, 2 * w), stage(2 * w, 4 * w)])
        self.fc = nn.Linear(4 * w, AUGMENT_CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        for s in self.stages:
            x = s(x)
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class AugmentAdapter(autotune.Adapter):
    unit = "images"
    batch_size = AUGMENT_BATCH

    def dataset(self) -> torch.utils.data.Dataset:
        return AugmentedImages()

    def model(self) -> nn.Module:
        return SmallCNN()

    def optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        return torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4,
                               nesterov=True)

    def loss(self, model: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        x, y = batch
        return F.cross_entropy(model(x), y, label_smoothing=0.1)

    def blocks(self, model: SmallCNN) -> list[nn.Module]:
        return list(model.stages)
