"""Held-out, compute-bound with fixed shapes and a dict batch: semantic segmentation with
torchvision's DeepLabV3 (ResNet-50 backbone, auxiliary FCN head), as a user writes it.

Images and their masks live in memory as uint8 (masks hold class ids, 255 = ignore). The
loader's workers crop both at one random place, flip both half the time, and normalize the
image; a sample is a dict {"image": float32 CxHxW, "mask": int64 HxW}. The model returns an
OrderedDict {"out", "aux"}; the loss is the usual 1.0 x out + 0.5 x aux cross-entropy.

Without torchvision (the CPU VM) a small conv net stands in, returning the same dict. SEG_IMAGES,
SEG_STORED, SEG_CROP, SEG_BATCH override the sizes."""

from __future__ import annotations

import os
from collections import OrderedDict

import torch
from torch import nn
from torch.nn import functional as F

import autotune

IMAGES = int(os.environ.get("SEG_IMAGES", 512))
STORED = int(os.environ.get("SEG_STORED", 448))
CROP = int(os.environ.get("SEG_CROP", 384))
BATCH = int(os.environ.get("SEG_BATCH", 8))
CLASSES = 21
IGNORE = 255
MEAN = torch.tensor([0.485, 0.456, 0.406]).view(3, 1, 1)
STD = torch.tensor([0.229, 0.224, 0.225]).view(3, 1, 1)


class Scenes(torch.utils.data.Dataset):
    """Seeded blobby scenes: coarse random class maps upsampled to STORED, the image a colour
    per class plus noise, a border of ignore pixels around each region."""

    def __init__(self) -> None:
        g = torch.Generator().manual_seed(0)
        coarse = torch.randint(0, CLASSES, (IMAGES, 1, 14, 14), generator=g).float()
        masks = F.interpolate(coarse, size=(STORED, STORED), mode="nearest")[:, 0].to(torch.uint8)
        edge = masks != torch.roll(masks, 1, dims=-1)
        masks[edge] = IGNORE
        colours = torch.randint(0, 256, (CLASSES + 1, 3), generator=g, dtype=torch.uint8)
        ids = masks.long().clamp(max=CLASSES)
        self.images = colours[ids].permute(0, 3, 1, 2).contiguous()  # N x 3 x S x S uint8
        self.masks = masks

    def __len__(self) -> int:
        return IMAGES

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        y = int(torch.randint(0, STORED - CROP + 1, ()))
        x = int(torch.randint(0, STORED - CROP + 1, ()))
        image = self.images[i, :, y:y + CROP, x:x + CROP].float() / 255.0
        mask = self.masks[i, y:y + CROP, x:x + CROP].long()
        if torch.rand(()) < 0.5:
            image, mask = image.flip(-1), mask.flip(-1)
        image = image + 0.05 * torch.randn_like(image)
        return {"image": (image - MEAN) / STD, "mask": mask}


class _Small(nn.Module):
    """The CPU stand-in: two strided convs, a classifier and an aux head, upsampled back."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1), nn.BatchNorm2d(16), nn.ReLU(),
                                  nn.Conv2d(16, 32, 3, 2, 1), nn.BatchNorm2d(32), nn.ReLU())
        self.head, self.aux = nn.Conv2d(32, CLASSES, 1), nn.Conv2d(32, CLASSES, 1)

    def forward(self, x: torch.Tensor) -> OrderedDict[str, torch.Tensor]:
        f = self.body(x)
        size = x.shape[-2:]
        return OrderedDict(out=F.interpolate(self.head(f), size=size, mode="bilinear"),
                           aux=F.interpolate(self.aux(f), size=size, mode="bilinear"))


def _model() -> nn.Module:
    try:
        from torchvision.models.segmentation import deeplabv3_resnet50
    except ImportError:
        return _Small()
    return deeplabv3_resnet50(weights=None, weights_backbone=None, num_classes=CLASSES,
                              aux_loss=True)


class DeepLabAdapter(autotune.Adapter):
    unit = "images"
    batch_size = BATCH

    def dataset(self) -> torch.utils.data.Dataset:
        return Scenes()

    def model(self) -> nn.Module:
        return _model()

    def optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        backbone = [p for n, p in model.named_parameters() if n.startswith(("backbone", "body"))]
        heads = [p for n, p in model.named_parameters()
                 if not n.startswith(("backbone", "body"))]
        return torch.optim.SGD([{"params": backbone, "lr": 0.01},
                                {"params": heads, "lr": 0.1}],
                               momentum=0.9, weight_decay=1e-4)

    def loss(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        out = model(batch["image"])
        mask = batch["mask"]
        return (F.cross_entropy(out["out"], mask, ignore_index=IGNORE)
                + 0.5 * F.cross_entropy(out["aux"], mask, ignore_index=IGNORE))
