"""`autotune export`: best.yaml as the arguments of Hugging Face's `TrainingArguments`, of
Lightning's `Trainer` (with the DataLoader's), or as shell `export` lines of the allocator.

A knob with no counterpart in the target is not dropped silently: a note says what to do
instead (a checkpointed fraction of blocks, `torch.compile` in Lightning, the allocator's
environment). YAML or JSON for hf and lightning, shell lines for env, on stdout.
"""

from __future__ import annotations

import dataclasses
import json
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from autotune.contract.allocator import ALLOC_ENV, OTHER_ALLOC_ENVS, host_heap_env
from autotune.contract.config import TrainConfig, read_config
from autotune.contract.errors import InputError

__all__ = ["TARGETS", "Best", "Export", "env_lines", "export_text", "loader_kwargs", "read_best",
           "to_hf", "to_lightning"]

TARGETS = ("hf", "lightning", "env")

_SDPA_ENUM = {"flash": "FLASH_ATTENTION", "efficient": "EFFICIENT_ATTENTION",
              "cudnn": "CUDNN_ATTENTION", "math": "MATH"}
_LIGHTNING_PRECISION = {"fp32": "32-true", "tf32": "32-true", "bf16": "bf16-mixed",
                        "fp16": "16-mixed"}


@dataclasses.dataclass(frozen=True, kw_only=True)
class Best:
    """What export reads from best.yaml (or from a YAML of knobs alone)."""

    config: TrainConfig
    device: str | None = None
    """"cuda" or "cpu" as measured (provenance.device_kind); None for a YAML of knobs."""
    batch_note: str | None = None
    """best.yaml's note on a changed effective batch and the learning rate."""

    @property
    def env(self) -> dict[str, str]:
        """What the training process's environment needs at its start: the CUDA allocator's
        settings, and on a CPU the host heap's thresholds every measured process held."""
        return {**self.config.env, **host_heap_env(self.device)}


@dataclasses.dataclass(frozen=True, kw_only=True)
class Export:
    """The arguments for one target and what they cannot say."""

    arguments: dict[str, Any]
    """Keyword arguments of TrainingArguments (hf) or Trainer (lightning)."""
    dataloader: dict[str, Any] | None = None
    """Keyword arguments of the DataLoader (lightning: you build the loaders)."""
    env: dict[str, str] = dataclasses.field(default_factory=dict)
    """Environment to set before the training process starts CUDA."""
    notes: tuple[str, ...] = ()
    """One line per knob with no counterpart, and what to do instead."""


def read_best(path: Path) -> Best:
    config = read_config(path)  # validates, and names the file in every error
    doc = yaml.safe_load(path.read_text())  # read_config has parsed it already
    provenance = doc.get("provenance") if isinstance(doc, Mapping) else None
    device = provenance.get("device_kind") if isinstance(provenance, Mapping) else None
    batch = doc.get("effective_batch") if isinstance(doc, Mapping) else None
    note = batch.get("note") if isinstance(batch, Mapping) else None
    return Best(config=config, device=device if device in ("cuda", "cpu") else None,
                batch_note=note if isinstance(note, str) else None)


def loader_kwargs(config: TrainConfig) -> dict[str, Any]:
    """The DataLoader arguments of the loader knobs, as `TunedConfig.dataloader_kwargs()`
    gives them (without importing torch): prefetching and persistence only with workers."""
    kwargs: dict[str, Any] = {"batch_size": config.batch_size, "num_workers": config.num_workers,
                              "pin_memory": config.pin_memory}
    if config.num_workers > 0:
        kwargs["persistent_workers"] = config.persistent_workers
        if config.prefetch_factor is not None:
            kwargs["prefetch_factor"] = config.prefetch_factor
    return kwargs


def to_hf(best: Best) -> Export:
    c = best.config
    args: dict[str, Any] = {
        "per_device_train_batch_size": c.batch_size,
        "gradient_accumulation_steps": c.grad_accum,
        "bf16": c.amp_dtype == "bf16",
        "fp16": c.amp_dtype == "fp16",  # the Trainer adds the GradScaler fp16 needs
        "torch_compile": c.compile != "none",
        "gradient_checkpointing": c.checkpoint > 0,
        "dataloader_num_workers": c.num_workers,
        "dataloader_pin_memory": c.pin_memory,
        "dataloader_persistent_workers": c.persistent_workers,
    }
    if c.amp_dtype == "tf32":
        args["tf32"] = True  # None (the default) leaves PyTorch's fp32 matmuls, as fp32 measured
    if c.compile != "none":
        args["torch_compile_mode"] = c.compile
    if c.checkpoint > 0:
        # autotune measured non-reentrant checkpointing (torch.utils.checkpoint's recommendation).
        args["gradient_checkpointing_kwargs"] = {"use_reentrant": False}
    if c.prefetch_factor is not None:
        args["dataloader_prefetch_factor"] = c.prefetch_factor  # only with workers: HF raises
    if best.device == "cpu":
        args["use_cpu"] = True  # measured on a CPU (bf16 there needs it too)
    if c.optimizer_impl == "fused":
        args["optim"] = "adamw_torch_fused"  # the Trainer's own AdamW, fused
    notes = []
    if 0 < c.checkpoint < 1:
        notes.append(
            f"checkpoint={c.checkpoint:g}: autotune checkpointed that fraction of the blocks; "
            "gradient_checkpointing is all or nothing, so every layer is checkpointed here (less "
            "memory, slower than measured). For the fraction, leave gradient_checkpointing off "
            "and wrap the model with autotune.load_config('best.yaml').wrap_model(model, "
            "blocks=...)")
    return Export(arguments=args, env=best.env,
                  notes=(*notes, *_kernel_notes(c, "hf"), *_common(best)))


def to_lightning(best: Best) -> Export:
    c = best.config
    args: dict[str, Any] = {"precision": _LIGHTNING_PRECISION[c.amp_dtype],
                            "accumulate_grad_batches": c.grad_accum}
    if best.device == "cpu":
        args["accelerator"] = "cpu"  # measured on a CPU; elsewhere Lightning's "auto" finds the GPU
    if c.cudnn_benchmark:
        args["benchmark"] = True  # the Trainer sets torch.backends.cudnn.benchmark
    notes = []
    if c.amp_dtype == "tf32":
        notes.append("amp_dtype=tf32: Lightning has no TF32 precision; call "
                     "torch.set_float32_matmul_precision('high') before trainer.fit")
    if c.compile != "none":
        notes.append(f"compile={c.compile}: the Trainer has no compile flag; compile the module "
                     f"before fitting: model = torch.compile(model, mode={c.compile!r})")
    if c.checkpoint > 0:
        notes.append(f"checkpoint={c.checkpoint:g}: the Trainer has no activation-checkpointing "
                     "flag; wrap the blocks in configure_model, e.g. with autotune.load_config("
                     "'best.yaml').wrap_model(self, blocks=...) (it compiles too: then skip "
                     "torch.compile)")
    notes.append("dataloader: pass these to the DataLoaders your train_dataloader() builds, "
                 "beside your dataset, sampler or shuffle and collate_fn")
    return Export(arguments=args, dataloader=loader_kwargs(c), env=best.env,
                  notes=(*notes, *_kernel_notes(c, "lightning"), *_common(best)))


def _kernel_notes(c: TrainConfig, target: str) -> list[str]:
    """What to do for the kernel knobs the target has no argument for."""
    notes = []
    if c.optimizer_impl == "fused" and target == "hf":
        notes.append("optimizer_impl=fused: optim=adamw_torch_fused is the Trainer's AdamW; an "
                     "optimizer of your own: build it with fused=True")
    elif c.optimizer_impl != "default":
        notes.append(f"optimizer_impl={c.optimizer_impl}: build your torch.optim optimizer with "
                     f"{c.optimizer_impl}=True"
                     + (" in configure_optimizers" if target == "lightning" else
                        " and pass it as optimizers=(optimizer, None)"))
    if c.memory_format == "channels_last":
        where = "the LightningModule's on_after_batch_transfer" if target == "lightning" \
            else "a data collator"
        notes.append("memory_format=channels_last: model = model.to(memory_format="
                     "torch.channels_last), and each 4-D input x.contiguous(memory_format="
                     f"torch.channels_last) on the device (in {where})")
    if c.sdpa_backend != "default":
        notes.append(f"sdpa_backend={c.sdpa_backend}: run the training steps inside "
                     "torch.nn.attention.sdpa_kernel(SDPBackend."
                     f"{_SDPA_ENUM[c.sdpa_backend]}) (autotune.load_config('best.yaml')."
                     "sdpa_kernel()), or enable only it process-wide before training with "
                     "torch.backends.cuda.enable_{flash,mem_efficient,cudnn,math}_sdp")
    if c.compile_scope == "loss":
        where = ("the Trainer compiles the model, whose forward computes the loss when the batch "
                 "has labels: that is one graph; a compute_loss of your own: compile it"
                 if target == "hf" else
                 "a module compiled before fitting has its training_step compiled by Lightning "
                 "too: where training_step computes the loss, that is one graph")
        notes.append(f"compile_scope=loss: the loss was compiled with the model, in one graph "
                     f"({where}; autotune.load_config('best.yaml').wrap_loss(fn) does it)")
    if c.cudnn_benchmark and target == "hf":
        notes.append("cudnn_benchmark: set torch.backends.cudnn.benchmark = True before "
                     "trainer.train()")
    return notes


def _common(best: Best) -> list[str]:
    notes = []
    if best.config.intra_op_threads is not None:
        notes.append(f"intra_op_threads={best.config.intra_op_threads}: neither trainer has the "
                     "flag; call torch.set_num_threads("
                     f"{best.config.intra_op_threads}) before building the model (or "
                     "autotune.load_config('best.yaml'), which does)")
    if best.config.env:
        notes.append(f"{ALLOC_ENV} (the CUDA allocator) is read when CUDA starts: set it in the "
                     "environment, not in Python (autotune export --to env, or "
                     "autotune apply best.yaml -- python train.py)")
    if host_heap_env(best.device):
        notes.append("MALLOC_MMAP_THRESHOLD_ and MALLOC_TRIM_THRESHOLD_ (glibc's heap, which "
                     "every measured process held: without them an eager CPU step can run up to "
                     "2x slower) are read when the process starts: set them in the environment "
                     "(autotune export --to env, or autotune apply best.yaml -- python train.py)")
    if best.batch_note:
        notes.append(best.batch_note)
    if best.config.params:
        notes.append("params: your adapter's own knobs as the search chose them; set them where "
                     "your code reads them (autotune.load_config('best.yaml').params)")
    return notes


def env_lines(best: Best) -> str:
    """Shell lines that give a process the allocator settings `autotune apply` gives it
    (and on a CPU the heap thresholds)."""
    conf = best.config.alloc_conf
    lines = ["# autotune export --to env: source these before starting the training process "
             "(the allocator reads them when CUDA starts)"]
    # Newer PyTorch reads these too; a stale value must not override the measured one.
    lines += [f"unset {name}" for name in OTHER_ALLOC_ENVS]
    if conf:
        lines.append(f"export {ALLOC_ENV}={shlex.quote(conf)}")
    else:
        lines += ["# no allocator option was chosen: the allocator's defaults", f"unset {ALLOC_ENV}"]
    heap = host_heap_env(best.device)
    if heap:
        lines.append("# the host heap's thresholds, as every measured process held them")
        lines += [f"export {name}={value}" for name, value in heap.items()]
    return "\n".join(lines) + "\n"


def export_text(path: Path, target: str, *, fmt: str = "yaml") -> str:
    """What `autotune export PATH --to TARGET` prints."""
    if target not in TARGETS:
        raise InputError(f"--to {target}: unknown target; choose one of {', '.join(TARGETS)}")
    if fmt not in ("yaml", "json"):
        raise InputError(f"--format {fmt}: choose yaml or json")
    best = read_best(path)
    if target == "env":
        return env_lines(best)
    exported = to_hf(best) if target == "hf" else to_lightning(best)
    key = "training_arguments" if target == "hf" else "trainer"
    doc: dict[str, Any] = {key: exported.arguments}
    if exported.dataloader is not None:
        doc["dataloader"] = exported.dataloader
    doc["env"] = exported.env
    if best.config.params:  # the adapter's own knobs: the trainer has no argument for them
        doc["params"] = dict(best.config.params)
    doc["notes"] = list(exported.notes)
    if fmt == "json":
        return json.dumps(doc, indent=2) + "\n"
    usage = ("TrainingArguments(output_dir=..., **doc['training_arguments'])" if target == "hf"
             else "Trainer(**doc['trainer']), DataLoader(dataset, **doc['dataloader'])")
    return (f"# autotune export --to {target} from {path}: {usage}\n"
            + yaml.safe_dump(doc, sort_keys=False, width=10_000))  # a note per line
