"""`load_config`: a tuned config back in production code, with the helpers that apply it.

The helpers call the very functions the trials measured with (`model_features.apply_model_features`,
the loader knobs, the autocast and scaler of `features.amp`): what was measured is what runs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from autotune.contract.config import TrainConfig, read_config
from autotune.contract.errors import InputError

if TYPE_CHECKING:
    import torch

    from autotune.trial.features.compile import Loss

__all__ = ["TunedConfig", "load_config"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class TunedConfig:
    """A `TrainConfig` and the device it was tuned on. Knob values read through:
    `cfg.batch_size`, `cfg.pin_memory`, `cfg.grad_accum`, ..."""

    config: TrainConfig
    device: str = "cuda"
    """"cuda" or "cpu": where it was measured, and what the helpers default to."""
    compile_artifacts: Path | None = None
    """Compiled artifacts of the winner saved by the search (best.yaml's `compile_artifacts`)."""

    def __getattr__(self, name: str) -> Any:
        # Only reached for names the dataclass itself lacks: the knobs and TrainConfig's helpers.
        if name.startswith("__") or name == "config":
            raise AttributeError(name)
        return getattr(self.config, name)

    def dataloader_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for `torch.utils.data.DataLoader` (add your dataset, sampler or
        shuffle, collate_fn: what is loaded stays yours)."""
        from autotune.trial.features.dataloader import loader_knobs

        return loader_knobs(self.config)

    def autocast(self, device_type: str | None = None) -> contextlib.AbstractContextManager[Any]:
        """The autocast context for forward and loss (a no-op for fp32 and tf32), on the
        device the config was tuned on unless told otherwise."""
        from autotune.trial.features.amp import autocast

        return autocast(self.config.amp_dtype, device_type or self.device)

    def grad_scaler(self, device_type: str | None = None) -> torch.amp.GradScaler:
        """A GradScaler, enabled only for fp16."""
        from autotune.trial.features.amp import grad_scaler

        return grad_scaler(self.config.amp_dtype, device_type or self.device)

    def sdpa_kernel(self) -> contextlib.AbstractContextManager[Any]:
        """The attention-kernel context to run forward and backward in (`sdpa_backend`; a no-op
        for PyTorch's own choice)."""
        from autotune.trial.features.sdpa import apply_sdpa

        return apply_sdpa(self.config.sdpa_backend)

    def optimizer(self, optimizer: Any) -> Any:
        """Your optimizer rebuilt as measured (`optimizer_impl`: foreach or fused, the same
        groups); call it before the first step and before attaching an LR scheduler. A class
        without the flag comes back as built, with a warning saying why."""
        from autotune.trial.features.optimizer import apply_optimizer_impl

        rebuilt, note = apply_optimizer_impl(optimizer, self.config.optimizer_impl,
                                             amp_dtype=self.config.amp_dtype)
        if note:
            warnings.warn(f"autotune: {note}", stacklevel=2)
        return rebuilt

    def to_device(self, batch: Any, device: str | torch.device | None = None) -> Any:
        """A CPU batch moved as the trials moved it: `non_blocking` when pinned, its 4-D
        floating tensors in the measured memory format (any nesting of tensors, mappings,
        tuples, lists, dataclasses, or objects with `.to`)."""
        import torch

        from autotune.trial.features.dataloader import to_device
        from autotune.trial.features.memory_format import batch_format

        return to_device(batch, torch.device(device or self.device), self.config.pin_memory,
                         batch_format(self.config.memory_format))

    def load_compile_artifacts(self) -> bool:
        """Load the search's compiled artifacts (`torch.compiler.load_cache_artifacts`), so the
        first production step does not compile from scratch; call before the first forward.
        Returns whether there were any to load."""
        if self.compile_artifacts is None or not self.compile_artifacts.is_file():
            return False
        import torch

        torch.compiler.load_cache_artifacts(self.compile_artifacts.read_bytes())
        return True

    def ddp_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for `torch.nn.parallel.DistributedDataParallel`: the DDP knobs."""
        from autotune.trial.features.ddp import ddp_kwargs

        c = self.config
        return ddp_kwargs(bucket_cap_mb=c.bucket_cap_mb, static_graph=c.static_graph,
                          gradient_as_bucket_view=c.gradient_as_bucket_view)

    def wrap_model(
        self, model: torch.nn.Module, blocks: Sequence[torch.nn.Module] = (), *,
        ddp: bool = False,
    ) -> torch.nn.Module:
        """Put the model in the measured memory format, set the matmul precision and cuDNN's
        benchmark mode, checkpoint `blocks`, wrap in DDP (`ddp=True`: over the initialized
        process group, with the DDP knobs, the model already on this rank's device), then
        compile: returns the module to call in training, built in the same order the trials
        measured. With `compile_scope: loss` the model comes back uncompiled: compile your loss
        function with `wrap_loss`, which calls it."""
        from autotune.trial.model_features import apply_model_features
        from autotune.trial.features.ddp import apply_ddp

        def wrap(module: torch.nn.Module) -> torch.nn.Module:
            device = next(module.parameters()).device
            return apply_ddp(module, device, **self.ddp_kwargs())

        wrapped, _ = apply_model_features(
            model, blocks, amp_dtype=self.config.amp_dtype, checkpoint=self.config.checkpoint,
            compile=self.config.compile, compile_scope=self.config.compile_scope,
            ddp=wrap if ddp else None,
            memory_format=self.config.memory_format, cudnn_benchmark=self.config.cudnn_benchmark)
        return wrapped

    def wrap_loss(self, loss: Loss) -> Loss:
        """Your loss function as measured: with `compile_scope: loss`, compiled whole, the model
        it calls (from `wrap_model`, uncompiled then) traced into the same graph, so the loss
        fuses with the model's last ops; otherwise `loss` itself (the model is what compiles).
        Call the result as you called `loss`."""
        from autotune.trial.features.compile import compile_loss

        return compile_loss(loss, self.config.compile, self.config.compile_scope) or loss


def load_config(path: str | Path) -> TunedConfig:
    """Read `best.yaml` (or a YAML of knobs alone) with the device it was tuned on. Tuned on a
    CPU, this process holds the host heap's thresholds from here on, as every measured process
    did (`autotune.trial.heap`; `autotune apply` sets them at the start instead). A config with
    `intra_op_threads` sets this process's thread count here, as the trial did before its model
    was built: call it before the model's first op."""
    import torch

    config = read_config(path)
    # A YAML of knobs alone says no device: this machine's (a held-out user's knobs-only file on
    # a CPU machine crashed in to_device, "Torch not compiled with CUDA enabled").
    device = "cuda" if torch.cuda.is_available() else "cpu"
    artifacts = None
    try:
        doc = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as exc:  # read_config succeeded: should not happen
        raise InputError(f"{path}: cannot read it again ({exc})") from None
    if isinstance(doc, Mapping):
        provenance = doc.get("provenance")
        if isinstance(provenance, Mapping) and provenance.get("device_kind") in ("cuda", "cpu"):
            device = str(provenance["device_kind"])
        if isinstance(doc.get("compile_artifacts"), str):
            artifacts = Path(path).parent / doc["compile_artifacts"]
    if device == "cpu":
        from autotune.trial.heap import hold_host_heap

        hold_host_heap()
    if config.intra_op_threads is not None:
        from autotune.trial.features.threads import apply_threads

        apply_threads(config.intra_op_threads)
    return TunedConfig(config=config, device=device, compile_artifacts=artifacts)
