"""Numeric precision: fp32, TF32 matmuls, or bf16/fp16 autocast (fp16 with a GradScaler)."""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any

import torch

__all__ = ["Amp", "apply_amp"]

_AUTOCAST_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


@dataclasses.dataclass(frozen=True, kw_only=True)
class Amp:
    """What a training step needs for one precision setting."""

    amp_dtype: str
    """fp32, tf32, bf16 or fp16."""
    device_type: str
    """"cuda" or "cpu"."""
    scaler: torch.amp.GradScaler
    """Enabled for fp16 only: fp16 gradients underflow without loss scaling; bf16 has fp32's range."""

    def autocast(self) -> contextlib.AbstractContextManager[Any]:
        dtype = _AUTOCAST_DTYPES.get(self.amp_dtype)
        if dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device_type, dtype=dtype)


def apply_amp(amp_dtype: str, device_type: str) -> Amp:
    """Set the process's fp32 matmul precision and return the autocast/scaler pair.

    "highest" is PyTorch's default (true fp32 matmuls); "high" lets cuBLAS use TF32 tensor cores.
    """
    torch.set_float32_matmul_precision("high" if amp_dtype == "tf32" else "highest")
    scaler = torch.amp.GradScaler(device_type, enabled=amp_dtype == "fp16")
    return Amp(amp_dtype=amp_dtype, device_type=device_type, scaler=scaler)
