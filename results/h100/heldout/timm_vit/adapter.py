"""Held-out, from timm: ViT-S/16 trained the way timm's train.py does it, on images in memory.

- The loader: timm's own training transform (`create_transform(224, is_training=True)`: random
  resized crop, flip, colour jitter, to float, normalize) on PIL images made from uint8 arrays
  held in memory (256x256). The workers hand over float32 batches (600 KB an image).
- The model: `timm.create_model("vit_small_patch16_224", num_classes=100)`, trained from scratch.
- The optimizer: `timm.optim.create_optimizer_v2(model, "adamw", ...)` with layer-wise decay:
  one param group per depth, each with its own `lr_scale`, weight decay off for biases and norms.
- The loss: timm's Mixup/CutMix on the batch (on the device), then SoftTargetCrossEntropy.
- `blocks`: the transformer's 12 blocks, for activation checkpointing.

Needs timm and torchvision (the GPU machine carries timm as a wheel). TIMM_IMAGES and TIMM_BATCH
override the sizes; the image count is a multiple of every batch tried (Mixup needs even
batches, and the last batch of an epoch is not dropped)."""

from __future__ import annotations

import os

import numpy as np
import timm
import torch
from PIL import Image
from timm.data import Mixup, create_transform
from timm.loss import SoftTargetCrossEntropy
from timm.optim import create_optimizer_v2
from torch import nn

import autotune

IMAGES = int(os.environ.get("TIMM_IMAGES", 4096))
BATCH = int(os.environ.get("TIMM_BATCH", 128))
CLASSES = 100


class Images(torch.utils.data.Dataset):
    def __init__(self) -> None:
        rng = np.random.default_rng(0)
        small = rng.integers(0, 256, (IMAGES, 16, 16, 3), dtype=np.uint8)
        # Smooth images (upsampled noise), so crops and jitter work on image-like content.
        self.images = np.repeat(np.repeat(small, 16, axis=1), 16, axis=2)
        self.labels = rng.integers(0, CLASSES, IMAGES)
        self.transform = create_transform(224, is_training=True)

    def __len__(self) -> int:
        return IMAGES

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        return self.transform(Image.fromarray(self.images[i])), int(self.labels[i])


class TimmVitAdapter(autotune.Adapter):
    unit = "images"
    batch_size = BATCH

    def __init__(self) -> None:
        super().__init__()
        self.mixup = Mixup(mixup_alpha=0.8, cutmix_alpha=1.0, label_smoothing=0.1,
                           num_classes=CLASSES)
        self.criterion = SoftTargetCrossEntropy()

    def dataset(self) -> torch.utils.data.Dataset:
        return Images()

    def model(self) -> nn.Module:
        return timm.create_model("vit_small_patch16_224", num_classes=CLASSES, drop_path_rate=0.1)

    def optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        return create_optimizer_v2(model, "adamw", lr=1e-3, weight_decay=0.05, layer_decay=0.75)

    def loss(self, model: nn.Module, batch: list) -> torch.Tensor:
        images, labels = batch
        images, targets = self.mixup(images, labels)
        return self.criterion(model(images), targets)

    def blocks(self, model: nn.Module) -> list[nn.Module]:
        return list(model.blocks)

    def items(self, batch: list) -> int:
        return batch[0].shape[0]
