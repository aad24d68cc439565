"""DDP knobs: gradient bucket size, gradients as bucket views, a static graph.

Each is an argument of `torch.nn.parallel.DistributedDataParallel` itself, passed as is: the
trial measures PyTorch's own DDP, and production wraps its model with the same call.
"""

from __future__ import annotations

import contextlib
from typing import Any

import torch
from torch.nn.parallel import DistributedDataParallel

__all__ = ["apply_ddp", "ddp_kwargs", "no_sync"]


def ddp_kwargs(*, bucket_cap_mb: int, gradient_as_bucket_view: bool,
               static_graph: bool) -> dict[str, Any]:
    """The `DistributedDataParallel` keyword arguments of the DDP knobs."""
    return {"bucket_cap_mb": bucket_cap_mb, "gradient_as_bucket_view": gradient_as_bucket_view,
            "static_graph": static_graph}


def apply_ddp(model: torch.nn.Module, device: torch.device, **knobs: Any) -> torch.nn.Module:
    """`model` (on `device`) wrapped in DDP over the default process group, with the DDP
    knobs `knobs` (`ddp_kwargs`'s result). On CUDA each rank drives one GPU (`device_ids`)."""
    if not torch.distributed.is_initialized():
        raise RuntimeError("DDP needs an initialized process group (torch.distributed."
                           "init_process_group), as torchrun's ranks have")
    device_ids = [device] if device.type == "cuda" else None
    return DistributedDataParallel(model, device_ids=device_ids, **knobs)


def no_sync(model: torch.nn.Module | None) -> contextlib.AbstractContextManager[Any]:
    """Skip the gradient all-reduce of a micro-batch that is not the last of its optimizer
    step (`DistributedDataParallel.no_sync`: grads accumulate locally and are reduced once, as
    accumulating DDP jobs do); a no-op for a model that is not DDP."""
    if isinstance(model, DistributedDataParallel):
        return model.no_sync()
    return contextlib.nullcontext()
