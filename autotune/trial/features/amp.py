"""Numeric precision: fp32, TF32 matmuls, or bf16/fp16 autocast (fp16 with a GradScaler)."""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any

import torch

__all__ = ["Amp", "apply_amp", "autocast", "grad_scaler", "set_matmul_precision"]

_AUTOCAST_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def set_matmul_precision(amp_dtype: str) -> None:
    """"highest" is PyTorch's default (true fp32 matmuls); "high" lets cuBLAS use TF32 tensor
    cores. Process-wide, so set it before compiling: compiled kernels bake it in."""
    torch.set_float32_matmul_precision("high" if amp_dtype == "tf32" else "highest")


def autocast(amp_dtype: str, device_type: str) -> contextlib.AbstractContextManager[Any]:
    """The forward/loss context: bf16 or fp16 autocast, a no-op for fp32 and tf32."""
    dtype = _AUTOCAST_DTYPES.get(amp_dtype)
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device_type, dtype=dtype)


def grad_scaler(amp_dtype: str, device_type: str) -> torch.amp.GradScaler:
    """Enabled for fp16 only: fp16 gradients underflow without loss scaling; bf16 has fp32's range."""
    return torch.amp.GradScaler(device_type, enabled=amp_dtype == "fp16")


@dataclasses.dataclass(frozen=True, kw_only=True)
class Amp:
    """What a training step needs for one precision setting."""

    amp_dtype: str
    """fp32, tf32, bf16 or fp16."""
    device_type: str
    """"cuda" or "cpu"."""
    scaler: torch.amp.GradScaler

    def autocast(self) -> contextlib.AbstractContextManager[Any]:
        return autocast(self.amp_dtype, self.device_type)


def apply_amp(amp_dtype: str, device_type: str) -> Amp:
    """The autocast/scaler pair (the matmul precision is set with the model's features)."""
    return Amp(amp_dtype=amp_dtype, device_type=device_type,
               scaler=grad_scaler(amp_dtype, device_type))
