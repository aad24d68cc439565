"""What a knob is: its type, allowed values, PyTorch's default, and when it applies.

Each knob is declared once, as a field of `TrainConfig` whose metadata holds a `KnobSpec`
(see `config.py`); `KNOBS` is read from those fields. The YAML parsers, `TrainConfig`'s
validation, the CSV columns, the display and the baseline all read this one table.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["AMP_DTYPES", "COMPILE_MODES", "MIN_SPLIT_SIZE_MB", "KnobSpec", "impl_failed", "knob"]

AMP_DTYPES = ("fp32", "tf32", "bf16", "fp16")
COMPILE_MODES = ("none", "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")

# The CUDA caching allocator rejects smaller values ("max_split_size_mb ... must be > 20").
MIN_SPLIT_SIZE_MB = 21


def impl_failed(impl: str) -> str:
    """How an error's message begins when the optimizer rebuilt as `impl` cannot train: PyTorch
    refused the flag, or it would train wrong under the trial's amp dtype
    (`trial.features.optimizer`). The search runs `impl` under that dtype no more
    (`study.policy.optimizer`)."""
    return f"optimizer_impl={impl}: "


_WORDS = {int: "an integer", bool: "true or false", str: "a string", float: "a number"}


def _never(value: Any) -> bool:
    return False


@dataclasses.dataclass(frozen=True, kw_only=True)
class KnobSpec:
    """Everything the code knows about one knob."""

    name: str = ""
    """Filled in from the field's name."""
    kind: type = int
    """Filled in from the field's annotation: int, bool, str or float."""
    default: Any = None
    """PyTorch's own default (None for batch_size: the adapter's)."""
    label: str = ""
    """Short name in one-line descriptions ("bs", "workers"); "" shows the bare value."""
    allowed: tuple[Any, ...] | None = None
    """The only values it takes (None: any value of its kind within the bounds)."""
    minimum: float | None = None
    maximum: float | None = None
    nullable: bool = False
    """Whether null (None) is a value of its own (max_split_size_mb: no limit)."""
    needs_workers: bool = False
    """Only applies with DataLoader workers (PyTorch raises otherwise); else at its default."""
    needs_compile: bool = False
    """Only applies to a compiled step (`compile` not "none"); else at its default."""
    ranges: bool = True
    """Whether a space may give it as an int range (low/high)."""
    cuda_only: Callable[[Any], bool] = _never
    """Values that mean nothing on a CPU."""
    memory: bool = False
    """Whether it changes how much device memory a step needs (the OOM wall's coordinates)."""
    ddp: bool = False
    """Only means something across DDP ranks (`--nproc-per-node` > 1): a space searches it only
    then, and a single-process trial leaves it at its default."""

    @property
    def words(self) -> str:
        """What its values are, in words, for error messages."""
        base = _WORDS[self.kind]
        return f"{base} or null" if self.nullable else base

    def applies(self, values: Mapping[str, Any]) -> bool:
        """Whether this knob means something given the other knobs' values."""
        return ((not self.needs_workers or (values.get("num_workers") or 0) > 0)
                and (not self.needs_compile or values.get("compile", "none") != "none"))

    @property
    def needs(self) -> str:
        """What it needs to apply, in words, for error messages."""
        if self.needs_workers:
            return "num_workers > 0 (PyTorch raises otherwise)"
        return "compile other than none (it says what is compiled)"

    def type_ok(self, value: Any) -> bool:
        if value is None:
            return self.nullable or (self.needs_workers and self.default is None)
        if isinstance(value, bool):
            return self.kind is bool
        if self.kind is float:
            return isinstance(value, (int, float))
        return isinstance(value, self.kind)

    def problem(self, value: Any) -> str | None:
        """Why `value` is not a value of this knob, or None when it is."""
        if not self.type_ok(value):
            return f"must be {self.words}, got {value!r}"
        if value is None:
            return None
        if self.allowed is not None and value not in self.allowed:
            return f"must be one of {list(self.allowed)}, got {value!r}"
        if self.minimum is not None and value < self.minimum:
            return f"must be at least {self.minimum:g}, got {value!r}"
        if self.maximum is not None and value > self.maximum:
            return f"must be at most {self.maximum:g}, got {value!r}"
        return None


def knob(default: Any = dataclasses.MISSING, **spec: Any) -> Any:
    """A `TrainConfig` field that is a knob: its default is PyTorch's, `spec` the rest."""
    meta = {"knob": KnobSpec(default=None if default is dataclasses.MISSING else default, **spec)}
    if default is dataclasses.MISSING:
        return dataclasses.field(metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def spec_from_field(field: dataclasses.Field[Any]) -> KnobSpec:
    """The field's KnobSpec with its name and kind filled in from the declaration."""
    annotation = str(field.type)
    kind = {"int": int, "int | None": int, "bool": bool, "str": str, "float": float}[annotation]
    spec: KnobSpec = field.metadata["knob"]
    return dataclasses.replace(spec, name=field.name, kind=kind)
