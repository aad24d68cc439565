"""Held out (not an example): torchvision's ViT-B/16 (no weights) on uint8 images kept in
memory, made float and normalized per sample; 100 classes, AdamW, batch 64."""

import torch
import torchvision

import autotune

MEAN = torch.tensor([0.485, 0.456, 0.406]).view(3, 1, 1)
STD = torch.tensor([0.229, 0.224, 0.225]).view(3, 1, 1)


class Images(torch.utils.data.Dataset):
    def __init__(self) -> None:
        g = torch.Generator().manual_seed(0)
        self.images = torch.randint(0, 256, (1024, 3, 224, 224), dtype=torch.uint8, generator=g)
        self.labels = torch.randint(0, 100, (1024,), generator=g)

    def __len__(self) -> int:
        return 8192

    def __getitem__(self, i: int):
        j = i % len(self.images)
        return (self.images[j].float() / 255 - MEAN) / STD, self.labels[j]


class VitAdapter(autotune.Adapter):
    unit = "images"
    batch_size = 64

    def dataset(self):
        return Images()

    def model(self):
        return torchvision.models.vit_b_16(weights=None, num_classes=100)

    def optimizer(self, model):
        return torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.05)

    def loss(self, model, batch):
        x, y = batch
        return torch.nn.functional.cross_entropy(model(x), y)

    def blocks(self, model):
        return list(model.encoder.layers)
