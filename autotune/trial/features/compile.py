"""`torch.compile` of the model, in one of its modes."""

from __future__ import annotations

import torch

__all__ = ["apply_compile"]


def apply_compile(model: torch.nn.Module, mode: str) -> torch.nn.Module:
    """Return the module to call: `model` itself for "none", else a compiled wrapper.

    Compilation is lazy: it happens on the first forward, which is why the measurement warms up
    until step times settle and reports that time apart from step time.
    """
    if mode == "none":
        return model
    return torch.compile(model, mode=mode)  # type: ignore[return-value]
