"""`TrainConfig`: one training configuration, every knob the search turns, and the knob table.

The same object travels from the search space to the trial process and into `best.yaml`;
`autotune.load_config` hands it back to production code wrapped with the helpers that apply it
(`autotune.trial.production`), which call the very functions the trial measured with.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from autotune.contract.allocator import ALLOC_ENV, alloc_conf
from autotune.contract.errors import InputError
from autotune.contract.knobs import (
    AMP_DTYPES,
    COMPILE_MODES,
    MIN_SPLIT_SIZE_MB,
    KnobSpec,
    knob,
    spec_from_field,
)
from autotune.contract.params import Params

__all__ = ["KNOB", "KNOBS", "SDPA_BACKENDS", "TrainConfig", "config_of", "describe_config",
           "read_config"]

SDPA_BACKENDS = ("default", "flash", "efficient", "cudnn", "math")
"""`sdpa_backend`'s values: PyTorch's choice, or one `torch.nn.attention.SDPBackend`."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class TrainConfig:
    """A complete training configuration. Each field is a knob, declared once here: its
    metadata (`knob(...)`) says what `knobs.KnobSpec` says. Defaults are PyTorch's own."""

    batch_size: int = knob(label="bs", minimum=1, memory=True)
    """Micro-batch size handed to the DataLoader."""
    grad_accum: int = knob(1, label="accum", minimum=1)
    """Micro-batches per optimizer step."""
    num_workers: int = knob(0, label="workers", minimum=0)
    """DataLoader worker processes; 0 loads in the training process."""
    prefetch_factor: int | None = knob(None, label="prefetch", minimum=1, needs_workers=True)
    """Batches each worker loads ahead; only with workers (PyTorch raises otherwise)."""
    pin_memory: bool = knob(False, label="pin", ranges=False, cuda_only=bool)
    """Page-locked host batches, copied to the GPU with `non_blocking=True`."""
    persistent_workers: bool = knob(False, label="persistent", ranges=False, needs_workers=True)
    """Keep workers alive between epochs; only with workers."""
    intra_op_threads: int | None = knob(None, label="threads", minimum=1, nullable=True)
    """`torch.set_num_threads` in the training process (None: PyTorch's default, one per core).
    Loader workers take cores from these threads: on a 2-core host, an augmenting loader with
    two workers ran 1.3x faster with one intra-op thread than with two (2026-11-25)."""
    amp_dtype: str = knob("fp32", allowed=AMP_DTYPES, ranges=False, memory=True,
                          cuda_only=lambda v: v in ("tf32", "fp16"))
    """fp32, tf32 (TF32 matmuls and convolutions), bf16 or fp16 autocast (fp16 with a GradScaler)."""
    compile: str = knob("none", label="compile", allowed=COMPILE_MODES, ranges=False, memory=True)
    """`torch.compile` mode, or "none"."""
    compile_scope: str = knob("model", label="scope", allowed=("model", "loss"), ranges=False,
                              memory=True, needs_compile=True)
    """What `compile` compiles: the model ("model"), or the adapter's `loss(model, batch)`
    whole ("loss"): the forward and the loss in one graph. A loss computed outside the model
    (a cross-entropy over GPT-2's 50k-token vocabulary) is then fused with it, instead of run
    eagerly in fp32 over the full logits. Under DDP, Dynamo breaks the graph at DDP's forward:
    the model and the loss then compile as two graphs (the loss compiled, not fused)."""
    checkpoint: float = knob(0.0, label="ckpt", minimum=0.0, maximum=1.0, ranges=False,
                             memory=True)
    """Fraction of `adapter.blocks(model)` wrapped in non-reentrant activation checkpointing."""
    expandable_segments: bool = knob(False, label="expandable", ranges=False, cuda_only=bool,
                                     memory=True)
    """CUDA caching allocator: grow segments instead of allocating new ones."""
    max_split_size_mb: int | None = knob(None, label="split_mb", ranges=False, nullable=True,
                                         minimum=MIN_SPLIT_SIZE_MB, memory=True,
                                         cuda_only=lambda v: v is not None)
    """CUDA caching allocator: blocks larger than this are never split (None: no limit)."""
    bucket_cap_mb: int | None = knob(None, label="bucket_mb", minimum=1, nullable=True,
                                     ranges=False, ddp=True)
    """DDP: MiB of gradients all-reduced together. None: DDP's default, 25 MiB buckets after a
    first one of 1 MiB (an explicit 25 makes the first 25 MiB too)."""
    gradient_as_bucket_view: bool = knob(False, label="grad_view", ranges=False, ddp=True,
                                         memory=True)
    """DDP: gradients are views into the all-reduce buckets (one copy of the gradients less)."""
    static_graph: bool = knob(False, label="static_graph", ranges=False, ddp=True)
    """DDP: the set of used parameters and the graph never change between steps."""
    # The step's kernels, as experts turn them by hand (PyTorch's performance tuning guide).
    optimizer_impl: str = knob("default", allowed=("default", "foreach", "fused"), ranges=False,
                               memory=True)
    """The adapter's torch.optim optimizer rebuilt with `foreach=True` or `fused=True`, the same
    groups and hyperparameters ("default": as the adapter built it; a class without the flag is
    left so, with the reason in the trial's log)."""
    memory_format: str = knob("contiguous", allowed=("contiguous", "channels_last"),
                              ranges=False, memory=True)
    """The model's parameters and a batch's 4-D floating tensors in this memory format (NHWC:
    cuDNN's fast convolutions under AMP)."""
    sdpa_backend: str = knob("default", label="sdpa", allowed=SDPA_BACKENDS, ranges=False,
                             memory=True, cuda_only=lambda v: v in ("efficient", "cudnn"))
    """`torch.nn.attention.sdpa_kernel` around forward and backward ("default": PyTorch's
    choice); a backend that cannot run the step is an error. On a CPU (torch 2.13) only flash
    and math run."""
    cudnn_benchmark: bool = knob(False, label="cudnn_bench", ranges=False, cuda_only=bool,
                                 memory=True)
    """`torch.backends.cudnn.benchmark`: cuDNN times its algorithms per input shape, once."""
    params: Mapping[str, Any] = dataclasses.field(default=Params())
    """The adapter's own knobs (`Adapter.knobs`) by name, as its methods read them
    (`self.params`); {}: the adapter's defaults. Not a row of the knob table: see
    `contract.params` for why they ride on the config."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "params", Params(self.params))  # a dict from YAML or JSON
        values = dataclasses.asdict(self)
        for spec in KNOBS:
            value = values[spec.name]
            problem = spec.problem(value)
            if problem is not None:
                raise ValueError(f"{spec.name} {problem} ({spec.name}={value!r})")
            if not spec.applies(values) and value != spec.default:
                raise ValueError(
                    f"{spec.name} needs {spec.needs}, got {spec.name}={value!r} with "
                    + (f"num_workers={self.num_workers!r}" if spec.needs_workers else
                       f"compile={self.compile!r}")
                )

    @classmethod
    def baseline(cls, batch_size: int, global_batch_size: int | None = None) -> TrainConfig:
        """PyTorch's defaults at this batch size (accumulation follows a global batch size)."""
        accum = global_batch_size // batch_size if global_batch_size else 1
        return cls(batch_size=batch_size, grad_accum=accum)

    @property
    def effective_batch(self) -> int:
        """Samples per optimizer step: what one step computes."""
        return self.batch_size * self.grad_accum

    # -- serialization -------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The knobs by name, and `params` (a dict) only when the adapter has knobs: a config
        without them reads as it did before they existed (requests, records, YAML)."""
        data = dataclasses.asdict(self)
        return {**data, "params": dict(self.params)} if self.params else {
            k: v for k, v in data.items() if k != "params"}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, source: str = "config") -> TrainConfig:
        """Build a config from a mapping (a YAML `config:` block), naming `source` in errors."""
        if not isinstance(data, Mapping):
            raise InputError(f"{source}: expected a mapping of knobs, got {type(data).__name__}")
        unknown = sorted(set(data) - set(KNOB) - {"params"})
        if unknown:
            raise InputError(
                f"{source}: unknown key(s) {unknown}; the knobs are: {', '.join(KNOB)}"
            )
        if "batch_size" not in data:
            raise InputError(f"{source}: key 'batch_size' is missing; add the micro-batch size")
        if not isinstance(data.get("params", {}), Mapping):
            raise InputError(f"{source}: 'params' must be a mapping of the adapter's knobs, got "
                             f"{data['params']!r}")
        for key, value in data.items():
            if key != "params" and not KNOB[key].type_ok(value):
                raise InputError(f"{source}: key {key!r} must be {KNOB[key].words}, got {value!r}")
        try:
            return cls(**data)
        except ValueError as exc:
            raise InputError(f"{source}: {exc}") from None

    def replace(self, **changes: Any) -> TrainConfig:
        """This config with `changes`; a knob the change leaves without effect goes back to its
        default (the compile scope of a config made eager)."""
        values = {**dataclasses.asdict(self), "params": self.params, **changes}
        for spec in KNOBS:
            if spec.needs_compile and spec.name not in changes and not spec.applies(values):
                changes[spec.name] = spec.default
        return dataclasses.replace(self, **changes)

    @property
    def graph(self) -> tuple[object, ...] | None:
        """What a compiled step's graph depends on (None: nothing is compiled). Configs that
        differ only in loader or allocator knobs share one entry of the persistent compile
        cache: a graph compiled once in a study costs a cache hit after. (DDP's bucket size
        splits a compiled DDP model's graph at the buckets: it counts; so do the memory format
        and the attention kernel, traced into the graph, and the adapter's knobs, which the
        search drops when declared `affects: loader`. The optimizer is not compiled.)"""
        if self.compile == "none":
            return None
        return (self.batch_size, self.grad_accum, self.amp_dtype, self.compile,
                self.compile_scope, self.checkpoint, self.bucket_cap_mb, self.memory_format,
                self.sdpa_backend, self.params)

    @property
    def alloc_conf(self) -> str:
        """The `PYTORCH_CUDA_ALLOC_CONF` string ("" for the allocator's defaults)."""
        return alloc_conf(expandable_segments=self.expandable_segments,
                          max_split_size_mb=self.max_split_size_mb)

    @property
    def env(self) -> dict[str, str]:
        """Environment variables to set before the training process starts CUDA."""
        conf = self.alloc_conf
        return {ALLOC_ENV: conf} if conf else {}

    def describe(self) -> str:
        """One line: the batch and the dtype, then only knobs that differ from PyTorch's
        defaults ("bs=64 workers=4 prefetch=4 pin bf16 compile=default")."""
        return describe_config(self)


KNOBS: tuple[KnobSpec, ...] = tuple(spec_from_field(f) for f in dataclasses.fields(TrainConfig)
                                    if "knob" in f.metadata)
"""The knob table, in declaration order."""
KNOB = {spec.name: spec for spec in KNOBS}


def describe_config(config: TrainConfig) -> str:
    values = config.to_dict()
    parts = []
    for spec in KNOBS:
        value = values[spec.name]
        if spec.name not in ("batch_size", "amp_dtype") and value == spec.default:
            continue
        if not spec.label:
            parts.append(str(value))
        elif spec.kind is bool:
            parts.append(spec.label)
        else:
            parts.append(f"{spec.label}={value:g}" if isinstance(value, float) else
                         f"{spec.label}={value}")
    parts += [f"{name}={value}" for name, value in config.params.items()]  # the adapter's
    return " ".join(parts)


def read_config(path: str | Path) -> TrainConfig:
    """A config from `best.yaml` (its `config:` block) or from a YAML of knobs alone."""
    data = _read_yaml(Path(path))
    if isinstance(data, Mapping) and "config" in data:
        return config_of(data, source=str(path))
    return TrainConfig.from_dict(data, source=str(path))


def config_of(doc: Mapping[str, Any], *, source: str) -> TrainConfig:
    """The config of a document with a `config:` block (best.yaml, a check baseline), with the
    adapter's knobs best.yaml writes beside it (`params:`), naming `source` in errors."""
    config = doc["config"]
    if isinstance(config, Mapping) and doc.get("params"):
        if "params" in config:
            raise InputError(f"{source}: params both under config: and at the top; keep one "
                             "(best.yaml writes them at the top)")
        return TrainConfig.from_dict({**config, "params": doc["params"]},
                                     source=f"{source}: config, params")
    return TrainConfig.from_dict(config, source=f"{source}: config")


def _read_yaml(path: Path) -> Any:
    try:
        return yaml.safe_load(path.read_text())
    except UnicodeDecodeError:
        raise InputError(f"{path}: not UTF-8 text; save the config as UTF-8 YAML") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read the config ({exc.strerror})") from None
    except yaml.YAMLError as exc:
        raise InputError(f"{path}: not valid YAML: {exc}") from None
