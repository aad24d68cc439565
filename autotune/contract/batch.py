"""What a batch holds, read without knowing its type: the default count of `Adapter.items`."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

__all__ = ["first_length"]


def first_length(batch: Any) -> int | None:
    """The first tensor's leading dimension, depth first; else its first field's length."""
    shape = getattr(batch, "shape", None)
    if shape is not None and not isinstance(batch, type) and len(shape) > 0:
        return int(shape[0])
    if isinstance(batch, Mapping):
        fields: list[Any] = list(batch.values())
    elif dataclasses.is_dataclass(batch) and not isinstance(batch, type):
        fields = [getattr(batch, f.name) for f in dataclasses.fields(batch)]
    elif isinstance(batch, (tuple, list)):
        fields = list(batch)
    else:
        return None
    for value in fields:
        n = first_length(value)
        if n is not None:
            return n
    first = fields[0] if fields else None
    if isinstance(first, (tuple, list)):
        return len(first)  # e.g. a list of strings, or of tensors of different lengths
    return None
