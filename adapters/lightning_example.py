"""A Lightning project, tuned unchanged: the LightningModule and LightningDataModule below are
ordinary Lightning code (a small CNN on synthetic 32x32 images with a per-sample flip); the
adapter is the three lines at the end (`autotune.bridges.lightning`).

Needs Lightning: pip install -e ".[lightning]". Constants can be overridden by environment
variables of the same name (e.g. LIT_IMAGES=512).
"""

from __future__ import annotations

import os

import lightning as L
import torch
from torch import nn
from torch.nn import functional as F

from autotune.bridges.lightning import LightningAdapter


def _const(name: str, default: int) -> int:
    return int(os.environ.get(name, default))


LIT_IMAGES = _const("LIT_IMAGES", 4096)
LIT_SIZE = _const("LIT_SIZE", 32)
LIT_CLASSES = _const("LIT_CLASSES", 10)
LIT_WIDTH = _const("LIT_WIDTH", 32)
LIT_BATCH = _const("LIT_BATCH", 64)


class FlippedImages(torch.utils.data.Dataset):
    """Synthetic uint8 images held in memory; each read flips at random and scales to [0, 1]."""

    def __init__(self) -> None:
        g = torch.Generator().manual_seed(0)
        self.images = torch.randint(0, 256, (LIT_IMAGES, 3, LIT_SIZE, LIT_SIZE), generator=g,
                                    dtype=torch.uint8)
        self.labels = torch.randint(0, LIT_CLASSES, (LIT_IMAGES,), generator=g)

    def __len__(self) -> int:
        return LIT_IMAGES

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        image = self.images[i]
        if torch.rand(()) < 0.5:
            image = image.flip(-1)
        return image.float() / 255.0, self.labels[i]


class ImageData(L.LightningDataModule):
    def __init__(self, batch_size: int = LIT_BATCH) -> None:
        super().__init__()
        self.batch_size = batch_size

    def setup(self, stage: str) -> None:
        self.train = FlippedImages()

    def train_dataloader(self) -> torch.utils.data.DataLoader:
        return torch.utils.data.DataLoader(self.train, batch_size=self.batch_size, shuffle=True,
                                           drop_last=True)


class LitCNN(L.LightningModule):
    def __init__(self, lr: float = 1e-3) -> None:
        super().__init__()
        self.save_hyperparameters()
        w = LIT_WIDTH
        self.features = nn.Sequential(
            nn.Sequential(nn.Conv2d(3, w, 3, padding=1), nn.BatchNorm2d(w), nn.ReLU()),
            nn.Sequential(nn.Conv2d(w, 2 * w, 3, stride=2, padding=1), nn.BatchNorm2d(2 * w),
                          nn.ReLU()),
            nn.Sequential(nn.Conv2d(2 * w, 4 * w, 3, stride=2, padding=1), nn.BatchNorm2d(4 * w),
                          nn.ReLU()),
        )
        self.head = nn.Linear(4 * w, LIT_CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(F.adaptive_avg_pool2d(self.features(x), 1).flatten(1))

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> torch.Tensor:
        x, y = batch
        loss = F.cross_entropy(self(x), y)
        self.log("train_loss", loss)
        return loss

    def configure_optimizers(self) -> dict[str, object]:
        optimizer = torch.optim.AdamW(self.parameters(), lr=self.hparams.lr)
        scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=1000)
        return {"optimizer": optimizer, "lr_scheduler": scheduler}


class LitCNNAdapter(LightningAdapter):
    module = LitCNN
    datamodule = ImageData
    unit = "images"

    def blocks(self, model: LitCNN) -> list[nn.Module]:  # optional: what checkpointing may wrap
        return list(model.features)
