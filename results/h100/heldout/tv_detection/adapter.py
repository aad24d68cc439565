"""Held out (not an example): torchvision's Faster R-CNN (MobileNetV3-Large FPN, no weights) on
synthetic images of varying sizes; a batch is a tuple of images and a tuple of target dicts."""

import torch
import torchvision

import autotune


class Boxes(torch.utils.data.Dataset):
    def __init__(self) -> None:
        g = torch.Generator().manual_seed(0)
        self.images = []
        for _ in range(256):
            h, w = (int(v) for v in torch.randint(300, 501, (2,), generator=g))
            self.images.append(torch.randint(0, 256, (3, h, w), dtype=torch.uint8, generator=g))

    def __len__(self) -> int:
        return 4096

    def __getitem__(self, i: int):
        img = self.images[i % len(self.images)].float() / 255
        g = torch.Generator().manual_seed(i)
        n = int(torch.randint(1, 7, (1,), generator=g))
        h, w = img.shape[1:]
        xy = torch.rand(n, 2, generator=g) * torch.tensor([w - 40.0, h - 40.0])
        wh = 8 + torch.rand(n, 2, generator=g) * 30
        boxes = torch.cat([xy, xy + wh], dim=1)
        return img, {"boxes": boxes, "labels": torch.randint(1, 5, (n,), generator=g)}


def collate(batch):
    return tuple(zip(*batch))


class DetectionAdapter(autotune.Adapter):
    unit = "images"
    batch_size = 8

    def dataset(self):
        return Boxes()

    def loader_args(self):
        return {"collate_fn": collate}

    def model(self):
        from torchvision.models.detection import fasterrcnn_mobilenet_v3_large_fpn
        return fasterrcnn_mobilenet_v3_large_fpn(weights=None, weights_backbone=None,
                                                 num_classes=5)

    def optimizer(self, model):
        return torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)

    def loss(self, model, batch):
        images, targets = batch
        return sum(model(list(images), list(targets)).values())

    def items(self, batch):
        return len(batch[0])
