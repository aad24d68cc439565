"""The optimizer's implementation: torch.optim's per-parameter loop, `foreach` (one kernel per
op over a list of tensors) or `fused` (one kernel for the whole update).

The adapter builds its optimizer; the knob rebuilds it with the same parameter groups and
hyperparameters and the flag set. A class without the flag (RMSprop has no `fused`, a
non-torch optimizer neither) is left as built, and the reason is said: that is not a failure.
A rebuild that PyTorch refuses is (the trial's error, which the sampler learns from), and so is
one PyTorch accepts but trains wrong (`_unsound`).
"""

from __future__ import annotations

import inspect
from typing import Any

import torch

from autotune.contract.knobs import impl_failed

__all__ = ["apply_optimizer_impl", "optimizer_impls"]

_FLAGS = ("foreach", "fused")


def apply_optimizer_impl(optimizer: Any, impl: str, *, amp_dtype: str = "fp32",
                         device_type: str | None = None) -> tuple[Any, str]:
    """`optimizer` rebuilt with `impl` ("foreach" or "fused"; "default" returns it as is) and
    "", or `optimizer` itself and why it was left as built. Call it before the first step (it
    carries no state over) and before an LR scheduler or hooks are attached to it.
    `amp_dtype` and `device_type` (by default its parameters' device) say what it will step
    under: a fused SGD under fp16 on CUDA is refused (`_unsound`)."""
    if impl == "default":
        return optimizer, ""
    if impl not in _FLAGS:
        raise ValueError(f"unknown optimizer_impl {impl!r}; expected default, foreach or fused")
    cls = type(optimizer)
    why = _left_as_built(optimizer, impl)
    if why:
        return optimizer, f"optimizer_impl={impl} left at default: {why}"
    params = inspect.signature(cls.__init__).parameters
    device = device_type or next((p.device.type for group in optimizer.param_groups
                                  for p in group["params"]), "cpu")
    unsound = _unsound(cls, impl, amp_dtype, device)
    if unsound:
        raise RuntimeError(impl_failed(impl) + unsound)
    flags = {name: name == impl for name in _FLAGS if name in params}
    # Each group keeps its own hyperparameters; the constructor's arguments are the defaults.
    groups = [{**group, **flags} for group in optimizer.param_groups]
    defaults = {k: v for k, v in optimizer.defaults.items() if k in params and k != "params"}
    try:
        return cls(groups, **{**defaults, **flags}), ""
    except (RuntimeError, ValueError, TypeError) as exc:
        raise RuntimeError(f"{impl_failed(impl)}{cls.__name__}({impl}=True) refused: "
                           f"{exc}") from exc


def optimizer_impls(optimizer: Any) -> tuple[str, ...]:
    """The `optimizer_impl` values `apply_optimizer_impl` would apply to `optimizer` as built
    ("default" always): the search holds the others (`study.policy.optimizer`)."""
    return ("default", *(flag for flag in _FLAGS if not _left_as_built(optimizer, flag)))


def _left_as_built(optimizer: Any, impl: str) -> str:
    """Why `apply_optimizer_impl` leaves `optimizer` as built for the flag `impl`, else ""."""
    cls = type(optimizer)
    if not isinstance(optimizer, torch.optim.Optimizer):
        return f"{cls.__name__} is not a torch.optim.Optimizer"
    if impl not in inspect.signature(cls.__init__).parameters:
        return f"{cls.__name__}.__init__ has no {impl!r} argument"
    if optimizer.state:  # it stepped, or its constructor made state (Adagrad's sums)
        return f"{cls.__name__} already holds state: a rebuild would lose it"
    attached = _attached(optimizer)
    if attached:
        return (f"{cls.__name__} has {attached} attached: a rebuild would drop it (build the "
                "optimizer alone in optimizer())")
    return ""


def _unsound(cls: type, impl: str, amp_dtype: str, device_type: str) -> str:
    """Why PyTorch would build `cls(impl=True)` but train it wrong, else "". SGD's fused CUDA
    kernel updates its momentum and the weights on the steps fp16's GradScaler skips after an
    overflow (Adam and AdamW's fused kernels skip them): the loss is NaN within the warm-up
    (torchvision ResNet-50, fp16, fused SGD with momentum, torch 2.11 on an H100, 2026-11-26,
    twice; bf16 fused and fp16 unfused ran). A CPU's fused SGD skipped them (torch 2.13)."""
    if impl == "fused" and amp_dtype == "fp16" and device_type == "cuda" \
            and issubclass(cls, torch.optim.SGD):
        return (f"{cls.__name__}'s fused CUDA kernel steps on the "
                "overflow steps fp16's GradScaler skips (the loss turns NaN); use it with "
                "bf16, or optimizer_impl=foreach with fp16")
    return ""


def _attached(optimizer: torch.optim.Optimizer) -> str:
    """What the adapter hooked onto the optimizer that a new one would not have: an LR
    scheduler (it sets `initial_lr` in every group and wraps `step`), step hooks."""
    if any("initial_lr" in group for group in optimizer.param_groups) \
            or "step" in vars(optimizer):
        return "an LR scheduler"
    if getattr(optimizer, "_optimizer_step_pre_hooks", None) \
            or getattr(optimizer, "_optimizer_step_post_hooks", None):
        return "step hooks"
    return ""
