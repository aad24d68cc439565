"""Which part of the adapter a trial's exception came from.

The trial marks an exception at the place it calls the adapter's code (its methods, its dataset
and collate function through the loader); the result carries the mark as `contract_error`, and
a baseline trial with one stops the search: no configuration fixes the adapter's own bug.
"""

from __future__ import annotations

import contextlib
import os
import re
import traceback
from collections.abc import Iterator
from typing import Any

import torch

from autotune.trial.oom import is_oom_error

__all__ = ["blame", "blamed", "blaming", "check_loss", "where_in"]

_ATTR = "_autotune_adapter_part"


def blame(exc: BaseException, part: str) -> None:
    """Mark `exc` as raised by the adapter's `part` ("loss(model, batch)"), unless a config can
    explain it: running out of memory, or the compiler failing. The innermost mark stands."""
    if getattr(exc, _ATTR, None) or is_oom_error(exc) or _from_compiler(exc):
        return
    try:
        setattr(exc, _ATTR, part)
    except AttributeError:  # an exception type without a __dict__: left unmarked
        pass


@contextlib.contextmanager
def blaming(part: str) -> Iterator[None]:
    """Mark an exception raised inside as the adapter's `part` (not for the hot loop: a
    generator-based context costs a microsecond)."""
    try:
        yield
    except Exception as exc:
        blame(exc, part)
        raise


def blamed(exc: BaseException) -> str:
    """The adapter part `exc` was marked with, "" when none."""
    return str(getattr(exc, _ATTR, "") or "")


_FILE_LINE = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')


def where_in(exc: BaseException, adapter: str) -> str:
    """The innermost line of the adapter file `adapter` that `exc` passed through, as
    "my_adapter.py, line 47, in dataset" ("" when none): from its traceback, else from the
    traceback text a DataLoader worker's error carries in its message."""
    target = os.path.realpath(adapter)
    found = [(f.filename, f.lineno, f.name) for f in traceback.extract_tb(exc.__traceback__)]
    found += [(name, int(line), func) for name, line, func in _FILE_LINE.findall(str(exc))]
    mine = [f for f in found if os.path.realpath(f[0]) == target]
    if not mine:
        return ""
    name, line, func = mine[-1]
    return f"{os.path.basename(name)}, line {line}, in {func}"


def check_loss(loss: Any) -> None:
    """The contract: a scalar tensor that backward can start from."""
    if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
        raise TypeError(
            f"adapter.loss must return a scalar tensor, got {type(loss).__name__}"
            + (f" of shape {tuple(loss.shape)}" if isinstance(loss, torch.Tensor) else "")
            + _where_the_loss_is(loss)
        )
    if not loss.requires_grad:
        raise TypeError("adapter.loss returned a tensor that does not require grad: compute "
                        "it from the model's output, outside torch.no_grad()")


def _where_the_loss_is(output: Any) -> str:
    """A hint for the usual slip, returning the model's whole output (a transformers
    `ModelOutput`, a dict or a dataclass) instead of its loss."""
    try:  # a property or __getattr__ may raise anything: then no hint, the TypeError stands
        inner = output.get("loss") if isinstance(output, dict) else getattr(output, "loss", None)
    except Exception:
        return ""
    if isinstance(inner, torch.Tensor) and inner.numel() == 1:
        how = '["loss"]' if isinstance(output, dict) and not hasattr(output, "loss") else ".loss"
        return f" holding a scalar loss: return its {how}"
    if isinstance(output, (tuple, list)) and output and isinstance(output[0], torch.Tensor) \
            and output[0].numel() == 1:
        return " whose first item is a scalar tensor: return that item, if it is the loss"
    return ""


def _from_compiler(exc: BaseException) -> bool:
    module = type(exc).__module__ or ""
    return module.startswith(("torch._dynamo", "torch._inductor"))
