"""The model-side knobs applied in the one right order, for the trials and for production."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from autotune.trial.features.amp import set_matmul_precision
from autotune.trial.features.checkpoint import apply_checkpoint, disable_kv_cache
from autotune.trial.features.compile import apply_compile
from autotune.trial.features.cudnn import apply_cudnn_benchmark
from autotune.trial.features.memory_format import apply_memory_format

__all__ = ["apply_model_features"]


def apply_model_features(
    model: torch.nn.Module,
    blocks: Sequence[torch.nn.Module],
    *,
    amp_dtype: str,
    checkpoint: float,
    compile: str,
    compile_scope: str = "model",
    ddp: Callable[[torch.nn.Module], torch.nn.Module] | None = None,
    memory_format: str = "contiguous",
    cudnn_benchmark: bool = False,
) -> tuple[torch.nn.Module, int]:
    """Apply the model-side knobs in the one right order; return the module to call in
    training and how many blocks were checkpointed. The trials and production
    (`TunedConfig.wrap_model`) both come through here, so what was measured is what runs.
    `compile_scope` "loss" leaves the model uncompiled: `compile_loss` compiles the loss that
    calls it. `ddp` wraps the model for data-parallel training (`features.ddp.apply_ddp` with
    the DDP knobs), or None in a single process.
    """
    # 0. The memory format first: DDP's buckets and compile's graph take the parameters'
    #    strides as they find them. In place: an optimizer built before keeps its parameters.
    model = apply_memory_format(model, memory_format)
    # 1. Precision first: compile bakes the fp32 matmul precision into its kernels (and cuDNN's
    #    benchmark mode, process-wide as well, beside it).
    set_matmul_precision(amp_dtype)
    apply_cudnn_benchmark(cudnn_benchmark)
    # 2. Checkpoint before compile, so the compiled graph is the checkpointed one (compiling
    #    first would capture the unwrapped forward and save every activation).
    wrapped = apply_checkpoint(blocks, checkpoint)
    if wrapped:
        disable_kv_cache(model)  # a recomputed block must not append to a KV cache again
    # 3. DDP around the checkpointed model, inside compile: compiling the DDP module lets
    #    Dynamo's DDPOptimizer split the graph at bucket boundaries, so each bucket's all-reduce
    #    overlaps the rest of the backward (torch/_dynamo/backends/distributed.py).
    if ddp is not None:
        model = ddp(model)
    # 4. Compile last: it wraps everything above. Lazy: it happens on the first forward. With
    #    `compile_scope` "loss" the loss function is compiled instead, the model inside it
    #    (`features.compile.compile_loss`).
    return apply_compile(model, compile if compile_scope == "model" else "none"), wrapped
