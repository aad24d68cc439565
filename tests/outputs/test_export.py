"""`autotune export`: best.yaml as TrainingArguments, Trainer + DataLoader arguments, or shell
exports; the real `transformers.TrainingArguments` and `lightning.Trainer` accept them."""

from __future__ import annotations

import importlib
import json
import subprocess
import warnings
from pathlib import Path
from typing import Any

import pytest
import yaml

from autotune import InputError, TrainConfig
from autotune.outputs.export import Best, env_lines, export_text, loader_kwargs, to_hf, to_lightning

# What a CPU search finds: workers, bf16 and compile (the knobs the cpu space turns).
CPU_TUNED = TrainConfig(batch_size=16, grad_accum=2, num_workers=2, prefetch_factor=4,
                        persistent_workers=True, amp_dtype="bf16", compile="default")
CUDA_TUNED = TrainConfig(batch_size=64, num_workers=8, prefetch_factor=2, pin_memory=True,
                         persistent_workers=True, amp_dtype="fp16", compile="reduce-overhead",
                         checkpoint=0.5, expandable_segments=True, max_split_size_mb=512)
KERNELS = TrainConfig(batch_size=32, optimizer_impl="fused", memory_format="channels_last",
                      sdpa_backend="flash", cudnn_benchmark=True)
CONFIGS = [TrainConfig(batch_size=32), CPU_TUNED, CUDA_TUNED,
           TrainConfig(batch_size=8, grad_accum=4, amp_dtype="tf32", checkpoint=1.0), KERNELS]


def write_best(tmp_path: Path, config: TrainConfig, device: str | None = "cpu",
               **extra: Any) -> Path:
    doc: dict[str, Any] = {"config": config.to_dict(), **extra}
    if device is not None:
        doc["provenance"] = {"device_kind": device}
    path = tmp_path / "best.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def exported(tmp_path: Path, config: TrainConfig, target: str, device: str | None = "cpu",
             **extra: Any) -> dict[str, Any]:
    return yaml.safe_load(export_text(write_best(tmp_path, config, device, **extra), target))


def need(module: str) -> Any:
    """The module, or a clean skip saying which extra installs it."""
    extra = {"transformers": "hf", "accelerate": "hf", "lightning": "lightning"}[module]
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        pytest.skip(f"{module} is not installed ({exc}); pip install -e '.[{extra}]'")


# -- Hugging Face -------------------------------------------------------------------------------------


def test_hf_arguments_of_a_cpu_search(tmp_path: Path) -> None:
    doc = exported(tmp_path, CPU_TUNED, "hf")
    assert doc["training_arguments"] == {
        "per_device_train_batch_size": 16, "gradient_accumulation_steps": 2,
        "bf16": True, "fp16": False, "torch_compile": True, "torch_compile_mode": "default",
        "gradient_checkpointing": False, "dataloader_num_workers": 2,
        "dataloader_pin_memory": False, "dataloader_persistent_workers": True,
        "dataloader_prefetch_factor": 4, "use_cpu": True,
    }
    # Every measured process on the CPU held the heap thresholds: so must production.
    assert doc["env"] == {"MALLOC_MMAP_THRESHOLD_": str(32 << 20),
                          "MALLOC_TRIM_THRESHOLD_": str(256 << 20)}
    assert len(doc["notes"]) == 1 and "MALLOC_TRIM_THRESHOLD_" in doc["notes"][0]
    assert exported(tmp_path, CPU_TUNED, "hf", device="cuda")["env"] == {}


def test_hf_notes_the_knobs_it_cannot_say(tmp_path: Path) -> None:
    doc = exported(tmp_path, CUDA_TUNED, "hf", device="cuda",
                   effective_batch={"value": 64, "adapter": 32, "factor": 2.0,
                                    "note": "the effective batch ... is 2x the adapter's 32"})
    args = doc["training_arguments"]
    assert args["fp16"] is True and args["bf16"] is False and "use_cpu" not in args
    assert args["torch_compile_mode"] == "reduce-overhead"
    assert args["gradient_checkpointing"] is True  # all or nothing: the safe side of 0.5
    assert args["gradient_checkpointing_kwargs"] == {"use_reentrant": False}
    assert doc["env"] == {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True,max_split_size_mb:512"}
    notes = "\n".join(doc["notes"])
    assert "checkpoint=0.5" in notes and "all or nothing" in notes and "wrap_model" in notes
    assert "PYTORCH_CUDA_ALLOC_CONF" in notes and "autotune export --to env" in notes
    assert "2x the adapter's 32" in notes


def test_hf_tf32_and_prefetching_only_with_workers() -> None:
    args = to_hf(Best(config=TrainConfig(batch_size=8, amp_dtype="tf32"))).arguments
    assert args["tf32"] is True and not args["bf16"] and not args["fp16"]
    assert "dataloader_prefetch_factor" not in args  # HF raises for it without workers
    assert "tf32" not in to_hf(Best(config=TrainConfig(batch_size=8))).arguments


@pytest.mark.parametrize("config", CONFIGS, ids=["baseline", "cpu", "cuda", "tf32", "kernels"])
def test_training_arguments_accept_the_export(tmp_path: Path, config: TrainConfig) -> None:
    transformers = need("transformers")
    need("accelerate")  # TrainingArguments needs it with PyTorch
    args = to_hf(Best(config=config, device="cpu")).arguments
    if config.amp_dtype == "tf32":
        args["tf32"] = False  # TF32 needs an Ampere GPU, which this CPU test has not
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # transformers' own deprecations are not ours
        made = transformers.TrainingArguments(**args, output_dir=str(tmp_path / "hf"))
    assert made.per_device_train_batch_size == config.batch_size
    assert made.gradient_accumulation_steps == config.grad_accum
    assert made.bf16 == (config.amp_dtype == "bf16") and made.fp16 == (config.amp_dtype == "fp16")
    assert made.dataloader_num_workers == config.num_workers
    assert made.dataloader_prefetch_factor == config.prefetch_factor
    assert made.gradient_checkpointing == (config.checkpoint > 0)
    assert made.torch_compile == (config.compile != "none")
    if config.optimizer_impl == "fused":
        assert made.optim.value == "adamw_torch_fused"


# -- Lightning --------------------------------------------------------------------------------------


def test_lightning_arguments_and_dataloader(tmp_path: Path) -> None:
    doc = exported(tmp_path, CPU_TUNED, "lightning")
    assert doc["trainer"] == {"precision": "bf16-mixed", "accumulate_grad_batches": 2,
                              "accelerator": "cpu"}
    assert doc["dataloader"] == {"batch_size": 16, "num_workers": 2, "pin_memory": False,
                                 "persistent_workers": True, "prefetch_factor": 4}
    notes = "\n".join(doc["notes"])
    assert "torch.compile(model, mode='default')" in notes


@pytest.mark.parametrize(("amp", "precision"), [("fp32", "32-true"), ("tf32", "32-true"),
                                                 ("bf16", "bf16-mixed"), ("fp16", "16-mixed")])
def test_lightning_precision(amp: str, precision: str) -> None:
    out = to_lightning(Best(config=TrainConfig(batch_size=8, amp_dtype=amp), device="cuda"))
    assert out.arguments == {"precision": precision, "accumulate_grad_batches": 1}
    assert ("set_float32_matmul_precision('high')" in "\n".join(out.notes)) == (amp == "tf32")


@pytest.mark.parametrize("config", CONFIGS, ids=["baseline", "cpu", "cuda", "tf32", "kernels"])
def test_lightning_trainer_and_dataloader_accept_the_export(config: TrainConfig) -> None:
    lightning = need("lightning")
    import torch

    device = "cpu" if config.amp_dtype != "fp16" else "cuda"  # fp16 AMP is CUDA's
    out = to_lightning(Best(config=config, device=device))
    args = dict(out.arguments)
    if device == "cuda":
        args["accelerator"] = "cpu"  # this test's machine; the export leaves "auto"
        args["precision"] = "32-true"  # Lightning swaps fp16 AMP for bf16 on a CPU, warning
    trainer = lightning.Trainer(**args, logger=False, enable_checkpointing=False,
                                enable_progress_bar=False, enable_model_summary=False)
    assert trainer.accumulate_grad_batches == config.grad_accum
    assert trainer.precision == args["precision"]
    assert args.get("benchmark", False) == config.cudnn_benchmark
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "This DataLoader will create")  # 8 workers, 2 cores
        loader = torch.utils.data.DataLoader(list(range(64)), **(out.dataloader or {}))
    assert loader.batch_size == config.batch_size and loader.num_workers == config.num_workers


def test_the_kernel_knobs_become_arguments_where_there_are_some_else_notes() -> None:
    hf, pl = to_hf(Best(config=KERNELS)), to_lightning(Best(config=KERNELS))
    assert hf.arguments["optim"] == "adamw_torch_fused" and pl.arguments["benchmark"] is True
    hf_notes, pl_notes = "\n".join(hf.notes), "\n".join(pl.notes)
    for notes in (hf_notes, pl_notes):
        assert "model.to(memory_format=torch.channels_last)" in notes
        assert "sdpa_kernel(SDPBackend.FLASH_ATTENTION)" in notes
    assert "cudnn.benchmark = True" in hf_notes and "cudnn_benchmark" not in pl_notes  # an argument
    assert "build it with fused=True" in hf_notes and "fused=True in configure_optimizers" in pl_notes
    foreach = to_hf(Best(config=TrainConfig(batch_size=8, optimizer_impl="foreach")))
    assert "optim" not in foreach.arguments and "foreach=True" in "\n".join(foreach.notes)
    plain = TrainConfig(batch_size=8)
    assert to_hf(Best(config=plain)).notes == () and to_lightning(Best(config=plain)).notes[0] \
        .startswith("dataloader:")  # nothing to say of kernels left as PyTorch's


def test_lightning_dataloader_is_what_load_config_gives() -> None:
    from autotune.trial.features.dataloader import loader_knobs

    for config in CONFIGS:
        assert loader_kwargs(config) == loader_knobs(config)


# -- env ----------------------------------------------------------------------------------------------


def test_env_lines_set_what_apply_sets(tmp_path: Path) -> None:
    script = tmp_path / "env.sh"
    script.write_text(env_lines(Best(config=CUDA_TUNED)))
    shown = subprocess.run(
        ["bash", "-c", f". {script}; echo \"$PYTORCH_CUDA_ALLOC_CONF|${{PYTORCH_ALLOC_CONF-unset}}\""],
        capture_output=True, text=True, check=True,
        env={"PATH": "/usr/bin:/bin", "PYTORCH_ALLOC_CONF": "stale"})
    assert shown.stdout.strip() == "expandable_segments:True,max_split_size_mb:512|unset"


def test_env_lines_of_a_cpu_search_set_the_heap_thresholds(tmp_path: Path) -> None:
    script = tmp_path / "env.sh"
    script.write_text(env_lines(Best(config=CPU_TUNED, device="cpu")))
    shown = subprocess.run(
        ["bash", "-c", f". {script}; echo \"$MALLOC_MMAP_THRESHOLD_ $MALLOC_TRIM_THRESHOLD_\""],
        capture_output=True, text=True, check=True, env={"PATH": "/usr/bin:/bin"})
    assert shown.stdout.split() == [str(32 << 20), str(256 << 20)]
    assert "MALLOC" not in env_lines(Best(config=CPU_TUNED, device="cuda"))


def test_env_lines_without_allocator_settings_unset_it() -> None:
    text = env_lines(Best(config=CPU_TUNED))
    assert "unset PYTORCH_CUDA_ALLOC_CONF" in text and "export" not in text.replace(
        "autotune export", "")


# -- input --------------------------------------------------------------------------------------------


def test_a_yaml_of_knobs_alone_exports_without_a_device(tmp_path: Path) -> None:
    doc = exported(tmp_path, CPU_TUNED, "hf", device=None)
    assert "use_cpu" not in doc["training_arguments"]


def test_json_format(tmp_path: Path) -> None:
    text = export_text(write_best(tmp_path, CPU_TUNED), "lightning", fmt="json")
    assert json.loads(text)["trainer"]["precision"] == "bf16-mixed"


def test_a_bad_file_names_itself(tmp_path: Path) -> None:
    path = tmp_path / "best.yaml"
    path.write_text("config: {batch_size: 8, workers: 2}\n")
    with pytest.raises(InputError, match=rf"{path}.*workers"):
        export_text(path, "hf")


@pytest.mark.parametrize("target", ["hf", "lightning"])
def test_both_exports_say_how_to_set_the_threads(tmp_path: Path, target: str) -> None:
    doc = exported(tmp_path, CPU_TUNED.replace(intra_op_threads=1), target)
    assert any("torch.set_num_threads(1)" in note for note in doc["notes"])
    assert not any("set_num_threads" in note for note in exported(tmp_path, CPU_TUNED, target)["notes"])


@pytest.mark.parametrize("target", ["hf", "lightning"])
def test_the_adapters_own_knobs_are_exported_with_a_note(tmp_path: Path, target: str) -> None:
    doc = exported(tmp_path, CPU_TUNED.replace(params={"pad_to_multiple_of": 64}), target)
    assert doc["params"] == {"pad_to_multiple_of": 64}
    assert any(note.startswith("params: ") for note in doc["notes"])
    assert "params" not in exported(tmp_path, CPU_TUNED, target)
