"""A ResNet-18-style CNN fed by per-sample Python augmentation: the input-bound case (unit: images).

Synthetic uint8 images sit in memory; every read crops at a random scale and resizes, flips, jitters brightness and contrast,
blurs and normalizes one image in Python on the CPU, the way a torchvision-style pipeline does.
On a GPU the model consumes images far faster than one process can prepare them, so the
DataLoader knobs decide the speed. Constants can be overridden by environment variables of the
same name (e.g. RESNET_IMAGES=512) for quick runs. RESNET_AUGMENT=0 hands over a fixed center
crop instead: the model is then the limit, the case for the kernel knobs (`channels_last` under
AMP is in search_spaces/full.yaml and in benchmarks/measurement/knobs.py).
"""

from __future__ import annotations

import os

import torch
from torch import nn
from torch.nn import functional as F

import autotune


def _const(name: str, default: int) -> int:
    return int(os.environ.get(name, default))


RESNET_IMAGES = _const("RESNET_IMAGES", 4096)  # images held in memory
RESNET_STORED = _const("RESNET_STORED", 144)  # stored side length
RESNET_CROP = _const("RESNET_CROP", 128)  # training crop
RESNET_CLASSES = _const("RESNET_CLASSES", 100)
RESNET_BATCH = _const("RESNET_BATCH", 256)
RESNET_WIDTH = _const("RESNET_WIDTH", 64)  # channels of the first stage
RESNET_AUGMENT = _const("RESNET_AUGMENT", 1)  # 0: a fixed crop, no augmentation (model-bound)

# ImageNet's per-channel statistics, the usual normalization constants.
MEAN = torch.tensor([0.485, 0.456, 0.406]).view(3, 1, 1)
STD = torch.tensor([0.229, 0.224, 0.225]).view(3, 1, 1)
BLUR = torch.tensor([1.0, 2.0, 1.0]) / 4  # separable 3-tap binomial kernel


class AugmentedImages(torch.utils.data.Dataset):
    def __init__(self) -> None:
        g = torch.Generator().manual_seed(0)
        shape = (RESNET_IMAGES, 3, RESNET_STORED, RESNET_STORED)
        self.images = torch.randint(256, shape, generator=g, dtype=torch.uint8)
        self.labels = torch.randint(RESNET_CLASSES, (RESNET_IMAGES,), generator=g)

    def __len__(self) -> int:
        return RESNET_IMAGES

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        if not RESNET_AUGMENT:
            img = self.images[i, :, :RESNET_CROP, :RESNET_CROP].float().div_(255)
            return (img - MEAN) / STD, self.labels[i]
        # Random-resized crop: a random square of 50-100% of the side, resized to the crop size.
        # torch's RNG: DataLoader seeds it differently in every worker.
        side = int(RESNET_STORED * (0.5 + 0.5 * torch.rand(()).item()))
        top, left = torch.randint(RESNET_STORED - side + 1, (2,)).tolist()
        img = self.images[i, :, top : top + side, left : left + side].float().div_(255)
        img = F.interpolate(img.unsqueeze(0), size=(RESNET_CROP, RESNET_CROP), mode="bilinear",
                            antialias=True, align_corners=False).squeeze(0)
        if torch.rand(()) < 0.5:
            img = img.flip(-1)
        brightness, contrast = (0.8 + 0.4 * torch.rand(2)).tolist()
        mean = img.mean()
        img = ((img - mean) * contrast + mean * brightness).clamp_(0, 1)
        img = F.conv2d(img.unsqueeze(1), BLUR.view(1, 1, 1, 3), padding=(0, 1))
        img = F.conv2d(img, BLUR.view(1, 1, 3, 1), padding=(1, 0)).squeeze(1)
        return (img - MEAN) / STD, self.labels[i]


class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + (x if self.down is None else self.down(x)))


class ResNet(nn.Module):
    """ResNet-18's layout: a stem, then four stages of two basic blocks."""

    def __init__(self) -> None:
        super().__init__()
        w = RESNET_WIDTH
        self.stem = nn.Sequential(
            nn.Conv2d(3, w, 7, 2, 3, bias=False), nn.BatchNorm2d(w), nn.ReLU(),
            nn.MaxPool2d(3, 2, 1),
        )
        widths = [w, 2 * w, 4 * w, 8 * w]
        layers, cin = [], w
        for i, cout in enumerate(widths):
            for j in range(2):
                layers.append(BasicBlock(cin, cout, 2 if j == 0 and i > 0 else 1))
                cin = cout
        self.layers = nn.ModuleList(layers)
        self.fc = nn.Linear(cin, RESNET_CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        for layer in self.layers:
            x = layer(x)
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class ResNetAdapter(autotune.Adapter):
    unit = "images"
    batch_size = RESNET_BATCH

    def dataset(self) -> torch.utils.data.Dataset:
        return AugmentedImages()

    def model(self) -> nn.Module:
        return ResNet()

    def optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        return torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-5)

    def loss(self, model: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        x, y = batch
        return F.cross_entropy(model(x), y)

    def blocks(self, model: ResNet) -> list[nn.Module]:
        return list(model.layers)
