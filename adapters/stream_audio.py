"""Waveforms from an IterableDataset, filtered per sample in NumPy, a small 1-D CNN (unit: clips).

Written as a user would bring it, to check the search on a workload it had not seen: the
dataset has no `__len__` and shards itself by DataLoader worker (`get_worker_info`), each clip
is made and low-pass filtered through an FFT in the worker, and the model is four strided
convolutions. On an H100 the step waits for its loader: the baseline (no workers) ran 1.4k
clips/s, 15 workers about 12k. Constants can be overridden by environment variables of the
same name (e.g. AUDIO_CLIPS=256).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import numpy as np
import torch
from torch import nn

import autotune


def _const(name: str, default: int) -> int:
    return int(os.environ.get(name, default))


AUDIO_CLIPS = _const("AUDIO_CLIPS", 8192)  # an epoch, over all workers
AUDIO_LENGTH = _const("AUDIO_LENGTH", 16000)  # samples a clip (a second at 16 kHz)
AUDIO_CLASSES = _const("AUDIO_CLASSES", 10)
AUDIO_BATCH = _const("AUDIO_BATCH", 64)


class Waves(torch.utils.data.IterableDataset):
    """Noisy tones, one pitch a class, low-pass filtered and shifted at random; each worker
    yields its own share of the epoch's clips."""

    def __iter__(self) -> Iterator[tuple[torch.Tensor, int]]:
        info = torch.utils.data.get_worker_info()
        worker, workers = (info.id, info.num_workers) if info is not None else (0, 1)
        rng = np.random.default_rng(worker)
        t = np.arange(AUDIO_LENGTH, dtype=np.float32) / AUDIO_LENGTH
        for i in range(worker, AUDIO_CLIPS, workers):
            label = i % AUDIO_CLASSES
            wave = np.sin(2 * np.pi * (50 + 40 * label) * t) + 0.3 * rng.standard_normal(t.size)
            spectrum = np.fft.rfft(wave)
            spectrum[AUDIO_LENGTH // 4:] *= 0.1  # a low-pass filter, as an augmentation would
            wave = np.fft.irfft(spectrum, n=AUDIO_LENGTH).astype(np.float32)
            yield torch.from_numpy(np.roll(wave, int(rng.integers(0, AUDIO_LENGTH)))), label


class AudioAdapter(autotune.Adapter):
    unit = "clips"
    batch_size = AUDIO_BATCH

    def dataset(self) -> torch.utils.data.IterableDataset:
        return Waves()

    def model(self) -> nn.Module:
        layers: list[nn.Module] = []
        channels = 1
        for width in (32, 64, 128, 128):
            layers += [nn.Conv1d(channels, width, 9, stride=4, padding=4), nn.BatchNorm1d(width),
                       nn.ReLU()]
            channels = width
        return nn.Sequential(*layers, nn.AdaptiveAvgPool1d(1), nn.Flatten(),
                             nn.Linear(channels, AUDIO_CLASSES))

    def optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        return torch.optim.AdamW(model.parameters(), lr=1e-3)

    def loss(self, model: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        clips, labels = batch
        return nn.functional.cross_entropy(model(clips.unsqueeze(1)), labels)
