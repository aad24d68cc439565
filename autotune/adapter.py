"""The contract users implement, and `load_adapter`, which checks it before any trial runs."""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from autotune.contract.errors import InputError

__all__ = ["Adapter", "load_adapter"]

_REQUIRED = ("dataset", "model", "optimizer", "loss")


class Adapter:
    """Subclass this in a Python file and pass the file to `autotune search --adapter`.

    The tool builds the DataLoader, moves the model to the device, applies the precision,
    checkpointing and compile settings, and times `loss` + backward + `optimizer.step()`.
    """

    unit: ClassVar[str] = "samples"
    """What `items(batch)` counts: throughput is reported in these per second."""
    batch_size: ClassVar[int] = 32
    """The micro-batch size you train with today: the baseline trial uses it."""
    global_batch_size: ClassVar[int | None] = None
    """When set, only configs with `batch_size * grad_accum == global_batch_size` are tried, so
    tuning never changes what an optimizer step computes."""

    def dataset(self) -> Any:
        """A CPU-side map-style or iterable dataset yielding samples (the tool batches them)."""
        raise NotImplementedError

    def model(self) -> Any:
        """A fresh `torch.nn.Module` on the CPU (the tool moves it to the device)."""
        raise NotImplementedError

    def optimizer(self, model: Any) -> Any:
        """An optimizer over `model`'s parameters (already on the device)."""
        raise NotImplementedError

    def loss(self, model: Any, batch: Any) -> Any:
        """Forward one micro-batch (already on the device) and return a scalar loss tensor.

        Call `model(...)` here: that is the module the tool has checkpointed and compiled.
        """
        raise NotImplementedError

    def blocks(self, model: Any) -> Sequence[Any]:
        """Repeated submodules (e.g. transformer layers) that activation checkpointing may wrap."""
        return ()

    def items(self, batch: Any) -> int:
        """How many `unit`s a (CPU-side) batch holds; by default its first tensor's length."""
        return len(batch[0])

    def flops_per_item(self) -> float | None:
        """Optional: training FLOPs per unit (forward + backward), for MFU in `autotune lab`."""
        return None


def load_adapter(path: str | Path) -> type[Adapter]:
    """Import `path` and return its one `Adapter` subclass, or raise `InputError` saying why not."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: adapter file not found; pass a Python file to --adapter")
    digest = hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:12]
    module_name = f"_autotune_adapter_{digest}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise InputError(f"{path}: cannot be imported as Python; the adapter must be a .py file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # dataclasses and pickling look modules up by name
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # any error in user code: report it with its traceback
        del sys.modules[module_name]
        tb = "".join(traceback.format_exception(exc))
        raise InputError(f"{path}: importing the adapter failed:\n{tb}") from None

    found = [
        obj
        for obj in vars(module).values()
        if inspect.isclass(obj) and issubclass(obj, Adapter) and obj is not Adapter
        and obj.__module__ == module_name
    ]
    if not found:
        raise InputError(
            f"{path}: no subclass of autotune.Adapter defined in this file; "
            "define one: `class MyAdapter(autotune.Adapter): ...`"
        )
    if len(found) > 1:
        names = ", ".join(sorted(cls.__name__ for cls in found))
        raise InputError(f"{path}: {len(found)} Adapter subclasses ({names}); keep exactly one")
    cls = found[0]
    missing = [name for name in _REQUIRED if getattr(cls, name) is getattr(Adapter, name)]
    if missing:
        raise InputError(
            f"{path}: {cls.__name__} does not define {', '.join(missing)}; "
            f"an adapter must define {', '.join(_REQUIRED)}"
        )
    _check_sizes(path, cls)
    return cls


def _check_sizes(path: Path, cls: type[Adapter]) -> None:
    bs, gbs = cls.batch_size, cls.global_batch_size
    if not isinstance(cls.unit, str) or not cls.unit:
        raise InputError(f"{path}: {cls.__name__}.unit must be a non-empty string, got {cls.unit!r}")
    if isinstance(bs, bool) or not isinstance(bs, int) or bs < 1:
        raise InputError(f"{path}: {cls.__name__}.batch_size must be a positive integer, got {bs!r}")
    if gbs is None:
        return
    if isinstance(gbs, bool) or not isinstance(gbs, int) or gbs < 1:
        raise InputError(
            f"{path}: {cls.__name__}.global_batch_size must be a positive integer or None, got {gbs!r}"
        )
    if gbs % bs:
        raise InputError(
            f"{path}: {cls.__name__}.global_batch_size={gbs} is not a multiple of batch_size={bs}; "
            "the baseline needs batch_size * grad_accum == global_batch_size"
        )
