"""Memory format: NCHW (`contiguous`, PyTorch's default) or NHWC (`channels_last`).

cuDNN's convolutions under AMP run fastest in NHWC; a model converted alone makes each layer
convert its NCHW input, so a batch's 4-D floating tensors are converted too, after the copy to
the device (`dataloader.to_device`, given `batch_format`). Integer images (uint8 normalized by
the model's first layer) are left as they are: the first convolution converts its input.
"""

from __future__ import annotations

import torch

__all__ = ["apply_memory_format", "batch_format", "conv_weights"]


def batch_format(name: str) -> torch.memory_format | None:
    """The format a batch's 4-D floating tensors are put in (None: left as they come)."""
    return torch.channels_last if name == "channels_last" else None


def _acts_on(tensor: torch.Tensor) -> bool:
    """Whether a format puts this parameter or buffer in NHWC: 4-D floating ones only."""
    return tensor.dim() == 4 and tensor.is_floating_point()


def conv_weights(model: torch.nn.Module) -> int:
    """The model's parameters a memory format acts on (2-D convolutions' weights)."""
    return sum(1 for w in model.parameters() if _acts_on(w))


def apply_memory_format(model: torch.nn.Module, name: str) -> torch.nn.Module:
    """The model with its 4-D floating parameters and buffers in `name`'s format, in place (the
    same Parameter objects: an optimizer built before keeps them). Only 4-D ones: `Module.to`
    would refuse a 5-D weight (a Conv3d) for channels_last."""
    fmt = batch_format(name)
    if fmt is None:
        return model
    with torch.no_grad():
        for tensor in (*model.parameters(), *model.buffers()):
            if _acts_on(tensor):
                tensor.data = tensor.data.contiguous(memory_format=fmt)
    return model
