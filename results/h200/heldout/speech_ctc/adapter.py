"""Held out: a speech recognizer as a user writes it. Utterances of 4-16 s (16 kHz, synthetic
tones and noise) become log-mel features in the DataLoader's workers (torch.stft and a mel
filterbank), a collate function pads each batch to its longest utterance, and a convolutional
front end (4x subsampling) feeds a Transformer encoder with a padding mask, trained with CTC.
Every batch has a new length: compute-bound with variable shapes, outside the text domain.

Sizes by environment variable for a quick CPU look (SPEECH_LAYERS, SPEECH_WIDTH, SPEECH_BATCH,
SPEECH_SECONDS)."""

from __future__ import annotations

import math
import os

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

import autotune

LAYERS = int(os.environ.get("SPEECH_LAYERS", 12))
WIDTH = int(os.environ.get("SPEECH_WIDTH", 512))
BATCH = int(os.environ.get("SPEECH_BATCH", 32))
LONGEST = float(os.environ.get("SPEECH_SECONDS", 16))
RATE, HOP, FFT, MELS, VOCAB = 16_000, 160, 400, 80, 32


def mel_filters() -> torch.Tensor:
    """A triangular mel filterbank, (FFT // 2 + 1, MELS)."""
    mel = lambda f: 2595 * np.log10(1 + f / 700)  # noqa: E731
    edges = 700 * (10 ** (np.linspace(mel(0), mel(RATE / 2), MELS + 2) / 2595) - 1)
    freqs = np.linspace(0, RATE / 2, FFT // 2 + 1)
    bank = np.zeros((FFT // 2 + 1, MELS), dtype=np.float32)
    for m in range(MELS):
        lo, mid, hi = edges[m], edges[m + 1], edges[m + 2]
        bank[:, m] = np.clip(np.minimum((freqs - lo) / (mid - lo), (hi - freqs) / (hi - mid)), 0, None)
    return torch.from_numpy(bank)


class Utterances(torch.utils.data.Dataset):
    def __init__(self, count: int = 4096) -> None:
        rng = np.random.default_rng(0)
        self.seconds = rng.uniform(LONGEST / 4, LONGEST, count)
        self.bank = mel_filters()
        self.window = torch.hann_window(FFT)

    def __len__(self) -> int:
        return len(self.seconds)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        rng = np.random.default_rng(i)
        n = int(self.seconds[i] * RATE)
        t = np.arange(n, dtype=np.float32) / RATE
        tones = rng.uniform(100, 4000, 3).astype(np.float32)
        wave = sum(np.sin(2 * math.pi * f * t) for f in tones) + 0.1 * rng.standard_normal(n, dtype=np.float32)
        spec = torch.stft(torch.from_numpy(wave.astype(np.float32)), FFT, HOP, window=self.window,
                          return_complex=True).abs().pow(2)
        feats = torch.log(spec.T @ self.bank + 1e-6)             # (frames, MELS)
        labels = torch.from_numpy(rng.integers(1, VOCAB, max(1, feats.shape[0] // 16)))
        return feats, labels


def collate(items: list[tuple[torch.Tensor, torch.Tensor]]) -> dict[str, torch.Tensor]:
    feats, labels = zip(*items)
    return {"feats": nn.utils.rnn.pad_sequence(feats, batch_first=True),
            "feat_lens": torch.tensor([f.shape[0] for f in feats]),
            "labels": torch.cat(labels),
            "label_lens": torch.tensor([len(y) for y in labels])}


class Recognizer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.front = nn.Sequential(nn.Conv2d(1, 64, 3, stride=2, padding=1), nn.GELU(),
                                   nn.Conv2d(64, 64, 3, stride=2, padding=1), nn.GELU())
        self.proj = nn.Linear(64 * (MELS // 4), WIDTH)
        layer = nn.TransformerEncoderLayer(WIDTH, WIDTH // 64, 4 * WIDTH, dropout=0.1,
                                           batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, LAYERS)
        self.head = nn.Linear(WIDTH, VOCAB)

    def forward(self, feats: torch.Tensor, lens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = self.front(feats.unsqueeze(1))                         # (B, 64, T/4, MELS/4)
        x = self.proj(x.permute(0, 2, 1, 3).flatten(2))
        lens = (lens + 3) // 4
        pad = torch.arange(x.shape[1], device=x.device)[None, :] >= lens[:, None]
        x = self.encoder(x, src_key_padding_mask=pad)
        return self.head(x).log_softmax(-1), lens


class SpeechAdapter(autotune.Adapter):
    unit = "frames"
    batch_size = BATCH

    def dataset(self) -> torch.utils.data.Dataset:
        return Utterances()

    def loader_args(self) -> dict:
        return {"collate_fn": collate}

    def model(self) -> nn.Module:
        return Recognizer()

    def optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        return torch.optim.AdamW(model.parameters(), lr=5e-4, weight_decay=0.01)

    def loss(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        logp, lens = model(batch["feats"], batch["feat_lens"])
        return F.ctc_loss(logp.transpose(0, 1), batch["labels"], lens, batch["label_lens"],
                          zero_infinity=True)

    def items(self, batch: dict[str, torch.Tensor]) -> int:
        return int(batch["feat_lens"].sum())
