"""`TrainConfig`: one training configuration — every knob the search turns — and how to apply it.

The same object travels from the search space to the trial process and into `best.yaml`, and
`load_config` hands it back to production code, whose helpers call the very `apply_*` functions
the trial measured with: what was measured is what gets applied.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from autotune.errors import InputError

if TYPE_CHECKING:
    import contextlib

    import torch

__all__ = ["AMP_DTYPES", "COMPILE_MODES", "TrainConfig", "load_config"]

AMP_DTYPES = ("fp32", "tf32", "bf16", "fp16")
COMPILE_MODES = ("none", "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")

# The CUDA caching allocator rejects smaller values ("max_split_size_mb ... must be > 20").
MIN_SPLIT_SIZE_MB = 21


@dataclasses.dataclass(frozen=True, kw_only=True)
class TrainConfig:
    """A complete training configuration. Field defaults are PyTorch's own defaults."""

    batch_size: int
    """Micro-batch size handed to the DataLoader."""
    grad_accum: int = 1
    """Micro-batches per optimizer step."""
    num_workers: int = 0
    """DataLoader worker processes; 0 loads in the training process."""
    prefetch_factor: int | None = None
    """Batches each worker loads ahead; only with workers (PyTorch raises otherwise)."""
    pin_memory: bool = False
    """Page-locked host batches, copied to the GPU with `non_blocking=True`."""
    persistent_workers: bool = False
    """Keep workers alive between epochs; only with workers."""
    amp_dtype: str = "fp32"
    """fp32, tf32 (TF32 matmuls and convolutions), bf16 or fp16 autocast (fp16 with a GradScaler)."""
    compile: str = "none"
    """`torch.compile` mode, or "none"."""
    checkpoint: float = 0.0
    """Fraction of `adapter.blocks(model)` wrapped in non-reentrant activation checkpointing."""
    expandable_segments: bool = False
    """CUDA caching allocator: grow segments instead of allocating new ones."""
    max_split_size_mb: int | None = None
    """CUDA caching allocator: blocks larger than this are never split (None: no limit)."""

    def __post_init__(self) -> None:
        for name in ("batch_size", "grad_accum", "num_workers"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"{name} must be an integer, got {value=}")
        for name in ("pin_memory", "persistent_workers", "expandable_segments"):
            value = getattr(self, name)
            if not isinstance(value, bool):
                raise ValueError(f"{name} must be true or false, got {value=}")
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {self.batch_size=}")
        if self.grad_accum < 1:
            raise ValueError(f"grad_accum must be at least 1, got {self.grad_accum=}")
        if self.num_workers < 0:
            raise ValueError(f"num_workers must be 0 or more, got {self.num_workers=}")
        if self.num_workers == 0 and self.prefetch_factor is not None:
            raise ValueError(
                f"prefetch_factor needs num_workers > 0 (PyTorch raises otherwise), got "
                f"{self.prefetch_factor=} with {self.num_workers=}"
            )
        if self.prefetch_factor is not None and self.prefetch_factor < 1:
            raise ValueError(f"prefetch_factor must be at least 1, got {self.prefetch_factor=}")
        if self.num_workers == 0 and self.persistent_workers:
            raise ValueError(
                f"persistent_workers needs num_workers > 0, got {self.persistent_workers=} "
                f"with {self.num_workers=}"
            )
        if self.amp_dtype not in AMP_DTYPES:
            raise ValueError(f"amp_dtype must be one of {AMP_DTYPES}, got {self.amp_dtype=}")
        if self.compile not in COMPILE_MODES:
            raise ValueError(f"compile must be one of {COMPILE_MODES}, got {self.compile=}")
        if not 0.0 <= self.checkpoint <= 1.0:
            raise ValueError(f"checkpoint must be a fraction in [0, 1], got {self.checkpoint=}")
        if self.max_split_size_mb is not None and self.max_split_size_mb < MIN_SPLIT_SIZE_MB:
            raise ValueError(
                f"max_split_size_mb must be at least {MIN_SPLIT_SIZE_MB}, got {self.max_split_size_mb=}"
            )

    # -- serialization -------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, source: str = "config") -> TrainConfig:
        """Build a config from a mapping (a YAML `config:` block), naming `source` in errors."""
        if not isinstance(data, Mapping):
            raise InputError(f"{source}: expected a mapping of knobs, got {type(data).__name__}")
        fields = {f.name: f for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - set(fields))
        if unknown:
            raise InputError(
                f"{source}: unknown key(s) {unknown}; the knobs are: {', '.join(fields)}"
            )
        if "batch_size" not in data:
            raise InputError(f"{source}: key 'batch_size' is missing; add the micro-batch size")
        for key, value in data.items():
            _check_type(source, key, value, fields[key].type)
        try:
            return cls(**data)
        except ValueError as exc:
            raise InputError(f"{source}: {exc}") from None

    def replace(self, **changes: Any) -> TrainConfig:
        return dataclasses.replace(self, **changes)

    # -- what production code needs ------------------------------------------------------------

    @property
    def alloc_conf(self) -> str:
        """The `PYTORCH_CUDA_ALLOC_CONF` string ("" for the allocator's defaults)."""
        from autotune.features.allocator import alloc_conf

        return alloc_conf(self)

    @property
    def env(self) -> dict[str, str]:
        """Environment variables to set before the training process starts CUDA."""
        from autotune.features.allocator import allocator_env

        return allocator_env(self)

    def dataloader_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for `torch.utils.data.DataLoader` (add your dataset and shuffling)."""
        from autotune.features.dataloader import dataloader_kwargs

        return dataloader_kwargs(self)

    def autocast(self, device_type: str = "cuda") -> contextlib.AbstractContextManager[Any]:
        """The autocast context for forward and loss (a no-op for fp32 and tf32)."""
        from autotune.features.amp import autocast

        return autocast(self.amp_dtype, device_type)

    def grad_scaler(self, device_type: str = "cuda") -> torch.amp.GradScaler:
        """A GradScaler, enabled only for fp16."""
        from autotune.features.amp import grad_scaler

        return grad_scaler(self.amp_dtype, device_type)

    def wrap_model(
        self, model: torch.nn.Module, blocks: Sequence[torch.nn.Module] = ()
    ) -> torch.nn.Module:
        """Set the matmul precision (TF32 or not), checkpoint `blocks`, then compile: returns
        the module to call in training. The same order the trials measured (see compose.py)."""
        from autotune.features.amp import set_matmul_precision
        from autotune.features.checkpoint import apply_checkpoint
        from autotune.features.compile import apply_compile

        set_matmul_precision(self.amp_dtype)
        apply_checkpoint(blocks, self.checkpoint)
        return apply_compile(model, self.compile)


_TYPE_CHECKS: dict[str, tuple[tuple[type, ...], str]] = {
    "int": ((int,), "an integer"),
    "int | None": ((int, type(None)), "an integer or null"),
    "bool": ((bool,), "true or false"),
    "str": ((str,), "a string"),
    "float": ((int, float), "a number"),
}


def _check_type(source: str, key: str, value: Any, annotation: Any) -> None:
    types, words = _TYPE_CHECKS[str(annotation)]
    if isinstance(value, bool) and bool not in types:
        ok = False
    else:
        ok = isinstance(value, types)
    if not ok:
        raise InputError(f"{source}: key {key!r} must be {words}, got {value!r}")


def load_config(path: str | Path) -> TrainConfig:
    """Read a config from `best.yaml` (its `config:` block) or from a YAML of knobs alone."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text())
    except UnicodeDecodeError:
        raise InputError(f"{path}: not UTF-8 text; save the config as UTF-8 YAML") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read the config ({exc.strerror})") from None
    except yaml.YAMLError as exc:
        raise InputError(f"{path}: not valid YAML: {exc}") from None
    if isinstance(data, Mapping) and "config" in data:
        return TrainConfig.from_dict(data["config"], source=f"{path}: config")
    return TrainConfig.from_dict(data, source=str(path))
