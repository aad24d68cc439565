"""Held-out, input-bound: JPEG files decoded with PIL in the loader's workers, the ImageNet way
(open, random resized crop, flip), then EfficientNet-B0 from torchvision. Batches are dicts
{"pixels": uint8 NCHW, "label": int64}; the model normalizes on the device. The JPEGs are made
once (smooth random images, 256x256, quality 90) and held as bytes in memory.

Without torchvision (the CPU VM) a small CNN stands in, so the adapter's loader can be tried
there. JPEG_IMAGES, JPEG_CROP, JPEG_BATCH override the sizes."""

from __future__ import annotations

import io
import os

import numpy as np
import torch
from PIL import Image
from torch import nn
from torch.nn import functional as F

import autotune

IMAGES = int(os.environ.get("JPEG_IMAGES", 2048))
CROP = int(os.environ.get("JPEG_CROP", 192))
BATCH = int(os.environ.get("JPEG_BATCH", 128))
CLASSES = 1000


def _jpegs(n: int) -> list[bytes]:
    rng = np.random.default_rng(0)
    out = []
    for _ in range(n):
        small = rng.integers(0, 256, (16, 16, 3), dtype=np.uint8)
        img = Image.fromarray(small).resize((256, 256), Image.BICUBIC)
        noise = rng.integers(-12, 13, (256, 256, 3))
        arr = np.clip(np.asarray(img, dtype=np.int16) + noise, 0, 255).astype(np.uint8)
        buf = io.BytesIO()
        Image.fromarray(arr).save(buf, format="JPEG", quality=90)
        out.append(buf.getvalue())
    return out


def _cached(n: int) -> list[bytes]:
    """The files, made once per machine (8 s for 2048) and read back from a temp file after."""
    import pickle
    import tempfile
    path = os.path.join(tempfile.gettempdir(), f"jpeg_effnet-{n}.pkl")
    if os.path.exists(path):
        with open(path, "rb") as f:
            return pickle.load(f)
    files = _jpegs(n)
    with open(path + ".part", "wb") as f:
        pickle.dump(files, f)
    os.replace(path + ".part", path)
    return files


class Jpegs(torch.utils.data.Dataset):
    def __init__(self) -> None:
        self.files = _cached(IMAGES)

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        img = Image.open(io.BytesIO(self.files[i])).convert("RGB")
        w, h = img.size
        area, ratio = (0.08 + 0.92 * torch.rand(1).item()) * w * h, np.exp(
            np.log(3 / 4) + (np.log(4 / 3) - np.log(3 / 4)) * torch.rand(1).item())
        cw = int(min(w, round((area * ratio) ** 0.5)))
        ch = int(min(h, round((area / ratio) ** 0.5)))
        x0, y0 = int(torch.randint(0, w - cw + 1, ()).item()), int(torch.randint(0, h - ch + 1, ()).item())
        img = img.resize((CROP, CROP), Image.BILINEAR, box=(x0, y0, x0 + cw, y0 + ch))
        if torch.rand(1).item() < 0.5:
            img = img.transpose(Image.FLIP_LEFT_RIGHT)
        pixels = torch.from_numpy(np.asarray(img).copy()).permute(2, 0, 1)
        return {"pixels": pixels, "label": torch.tensor(i % CLASSES)}


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        try:
            import torchvision
            self.body = torchvision.models.efficientnet_b0(num_classes=CLASSES)
        except ImportError:
            self.body = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1), nn.SiLU(), nn.Conv2d(16, 32, 3, 2, 1),
                                      nn.SiLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                                      nn.Linear(32, CLASSES))
        self.register_buffer("mean", torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1) * 255)
        self.register_buffer("std", torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1) * 255)

    def forward(self, pixels: torch.Tensor) -> torch.Tensor:
        return self.body((pixels.float() - self.mean) / self.std)


class JpegEffnetAdapter(autotune.Adapter):
    unit = "images"
    batch_size = BATCH

    def dataset(self) -> torch.utils.data.Dataset:
        return Jpegs()

    def model(self) -> nn.Module:
        return Net()

    def optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        return torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-5)

    def loss(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return F.cross_entropy(model(batch["pixels"]), batch["label"], label_smoothing=0.1)

    def items(self, batch: dict[str, torch.Tensor]) -> int:
        return batch["label"].shape[0]
