"""How many ATen operations one eager forward and backward dispatches, and how many of them are
distinct: what a first compile has to trace, and to generate kernels for, known before any
compile is paid.

Counted once in an eager trial's diagnosis (`diagnose.diagnose`): one micro-step of a batch
already on the device under a `TorchDispatchMode` that counts and passes every call through.
A call is distinct by its operator and its tensor arguments' shapes and dtypes: a block
repeated 12 times, or a cell stepped in a Python loop, repeats the same ones, which Inductor
compiles once. The search turns both into a prior on the first compile's seconds
(`study.policy.compile_prior`) while no trial of the study has compiled yet.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from torch import Tensor
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

if TYPE_CHECKING:
    from autotune.trial.compose import TrainStep

__all__ = ["step_ops"]


class _Count(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.calls = 0
        self.distinct: set[tuple[object, ...]] = set()

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (),
                           kwargs: Any = None) -> Any:
        self.calls += 1
        self.distinct.add((func, *((tuple(a.shape), a.dtype) for a in pytree.tree_leaves(args)
                                   if isinstance(a, Tensor))))
        return func(*args, **(kwargs or {}))


def step_ops(step: TrainStep, batch: Any = None) -> tuple[int, int] | None:
    """The ATen calls of one eager forward and backward of `batch` (on the device already; by
    default the loader's next, moved there) and how many of them are distinct, its gradients
    dropped after. None for a compiled step (the mode would make Dynamo trace anew), a DDP step
    (its ranks would have to step together), or when pulling or counting failed (a kernel
    outside the dispatcher, say): a prior left out, never a failed trial."""
    if step.config.compile != "none" or getattr(step, "_ddp", None) is not None:
        return None
    count = _Count()
    try:
        if batch is None:
            batch = step.to_device(step.next_batch()[0], non_blocking=False)
        with count:
            step.micro_step(batch, 1)
    except Exception:  # noqa: BLE001 - the count is a hint; the trial measured what it must
        counted = None
    else:
        counted = (count.calls, len(count.distinct)) if count.calls else None
    step.optimizer.zero_grad(set_to_none=True)  # the probe's gradients go with it
    return counted
