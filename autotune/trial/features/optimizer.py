"""The optimizer's implementation: torch.optim's per-parameter loop, `foreach` (one kernel per
op over a list of tensors) or `fused` (one kernel for the whole update).

The adapter builds its optimizer; the knob rebuilds it with the same parameter groups and
hyperparameters and the flag set. A class without the flag (RMSprop has no `fused`, a
non-torch optimizer neither) is left as built, and the reason is said: that is not a failure.
A rebuild that PyTorch refuses is (the trial's error, which the sampler learns from).
"""

from __future__ import annotations

import inspect
from typing import Any

import torch

__all__ = ["apply_optimizer_impl"]

_FLAGS = ("foreach", "fused")


def apply_optimizer_impl(optimizer: Any, impl: str) -> tuple[Any, str]:
    """`optimizer` rebuilt with `impl` ("foreach" or "fused"; "default" returns it as is) and
    "", or `optimizer` itself and why it was left as built. Call it before the first step (it
    carries no state over) and before an LR scheduler or hooks are attached to it."""
    if impl == "default":
        return optimizer, ""
    if impl not in _FLAGS:
        raise ValueError(f"unknown optimizer_impl {impl!r}; expected default, foreach or fused")
    cls = type(optimizer)
    left = f"optimizer_impl={impl} left at default: "
    if not isinstance(optimizer, torch.optim.Optimizer):
        return optimizer, left + f"{cls.__name__} is not a torch.optim.Optimizer"
    params = inspect.signature(cls.__init__).parameters
    if impl not in params:
        return optimizer, left + f"{cls.__name__}.__init__ has no {impl!r} argument"
    if optimizer.state:  # it stepped, or its constructor made state (Adagrad's sums)
        return optimizer, left + f"{cls.__name__} already holds state: a rebuild would lose it"
    attached = _attached(optimizer)
    if attached:
        return optimizer, left + f"{cls.__name__} has {attached} attached: a rebuild would " \
                                 "drop it (build the optimizer alone in optimizer())"
    flags = {name: name == impl for name in _FLAGS if name in params}
    # Each group keeps its own hyperparameters; the constructor's arguments are the defaults.
    groups = [{**group, **flags} for group in optimizer.param_groups]
    defaults = {k: v for k, v in optimizer.defaults.items() if k in params and k != "params"}
    try:
        return cls(groups, **{**defaults, **flags}), ""
    except (RuntimeError, ValueError, TypeError) as exc:
        raise RuntimeError(f"optimizer_impl={impl}: {cls.__name__}({impl}=True) refused: "
                           f"{exc}") from exc


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
