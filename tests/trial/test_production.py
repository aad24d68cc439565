"""`autotune.load_config` in production code: a `TunedConfig` whose helpers apply the config the
way the trials measured it, on the device it was tuned on (CPU here)."""

from __future__ import annotations

import copy
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml

import autotune.trial.features.amp as amp_module
from autotune import InputError, TrainConfig, TunedConfig, load_config
from helpers import in_one_gloo_rank

CPU_BF16 = TunedConfig(config=TrainConfig(batch_size=8, amp_dtype="bf16"), device="cpu")


@pytest.fixture(autouse=True)
def _keep_matmul_precision() -> Iterator[None]:
    """wrap_model sets the process-wide matmul precision: put PyTorch's default back."""
    before = torch.get_float32_matmul_precision()
    yield
    torch.set_float32_matmul_precision(before)


def best_yaml(tmp_path: Path, config: TrainConfig, device_kind: Any = "cpu") -> Path:
    path = tmp_path / "best.yaml"
    doc: dict[str, Any] = {"config": config.to_dict(), "throughput": {"value": 1.0}}
    if device_kind is not None:
        doc["provenance"] = {"device": "cpu: EPYC", "device_kind": device_kind}
    path.write_text(yaml.safe_dump(doc))
    return path


# -- load_config ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_load_config_reads_the_device_it_was_tuned_on(tmp_path: Path, device: str) -> None:
    config = TrainConfig(batch_size=16, num_workers=2, amp_dtype="bf16")
    tuned = load_config(best_yaml(tmp_path, config, device))
    assert tuned == TunedConfig(config=config, device=device)


@pytest.mark.parametrize("cuda", [True, False])
@pytest.mark.parametrize("device_kind", [None, "tpu", 3])
def test_load_config_without_a_known_device_takes_this_machines(
        tmp_path: Path, device_kind: Any, cuda: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    # A held-out user's knobs-only YAML on a CPU machine crashed in to_device (2026-11-28).
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    tuned = load_config(best_yaml(tmp_path, TrainConfig(batch_size=8), device_kind))
    assert tuned.device == ("cuda" if cuda else "cpu")


def test_load_config_of_knobs_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    path = tmp_path / "knobs.yaml"
    path.write_text(yaml.safe_dump({"batch_size": 16, "amp_dtype": "bf16"}))
    tuned = load_config(path)
    assert tuned.config == TrainConfig(batch_size=16, amp_dtype="bf16")
    assert tuned.device == "cuda"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert load_config(path).device == "cpu"


def test_load_config_errors_name_the_file(tmp_path: Path) -> None:
    path = tmp_path / "best.yaml"
    path.write_text("config: {batch_size: 8, num_worker: 2}\n")
    with pytest.raises(InputError, match="num_worker") as excinfo:
        load_config(path)
    assert str(path) in str(excinfo.value)
    with pytest.raises(InputError, match="not found|cannot read"):
        load_config(tmp_path / "missing.yaml")


# -- the knobs read through ------------------------------------------------------------------------


def test_knobs_and_config_helpers_read_through() -> None:
    config = TrainConfig(batch_size=64, grad_accum=2, num_workers=3, pin_memory=True,
                         expandable_segments=True)
    tuned = TunedConfig(config=config)
    assert tuned.batch_size == 64 and tuned.grad_accum == 2 and tuned.pin_memory is True
    assert tuned.effective_batch == 128
    assert tuned.alloc_conf == "expandable_segments:True"
    assert tuned.env == {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
    assert tuned.describe() == config.describe()
    with pytest.raises(AttributeError):
        tuned.no_such_knob  # noqa: B018
    with pytest.raises(AttributeError):
        tuned.batch_size = 1  # type: ignore[misc]  # frozen like the config


def test_tuned_config_copies_and_compares() -> None:
    assert copy.deepcopy(CPU_BF16) == CPU_BF16
    assert CPU_BF16 != CPU_BF16.config  # a TunedConfig is not the bare config


# -- the DataLoader ------------------------------------------------------------------------------------


def test_dataloader_kwargs_without_workers() -> None:
    kwargs = TunedConfig(config=TrainConfig(batch_size=8), device="cpu").dataloader_kwargs()
    assert kwargs == {"batch_size": 8, "num_workers": 0, "pin_memory": False}
    torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.zeros(16, 2)), **kwargs)


def test_dataloader_kwargs_with_workers() -> None:
    config = TrainConfig(batch_size=8, num_workers=2, prefetch_factor=4, persistent_workers=True)
    kwargs = TunedConfig(config=config, device="cpu").dataloader_kwargs()
    assert kwargs == {"batch_size": 8, "num_workers": 2, "pin_memory": False,
                      "persistent_workers": True, "prefetch_factor": 4}
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.zeros(16, 2)), **kwargs)
    assert loader.prefetch_factor == 4 and loader.persistent_workers


def test_dataloader_kwargs_workers_default_prefetch() -> None:
    config = TrainConfig(batch_size=8, num_workers=1)
    kwargs = TunedConfig(config=config, device="cpu").dataloader_kwargs()
    assert "prefetch_factor" not in kwargs
    assert kwargs["persistent_workers"] is False


# -- precision -----------------------------------------------------------------------------------------


def test_autocast_follows_the_tuned_device() -> None:
    with CPU_BF16.autocast():  # tuned on the CPU: CPU autocast, no device argument needed
        out = torch.nn.Linear(4, 4)(torch.randn(2, 4))
    assert out.dtype == torch.bfloat16
    with TunedConfig(config=TrainConfig(batch_size=8), device="cpu").autocast():
        out = torch.nn.Linear(4, 4)(torch.randn(2, 4))
    assert out.dtype == torch.float32


def test_autocast_device_defaults_to_the_tuned_one_and_can_be_overridden(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[tuple[str, str]] = []

    def fake_autocast(amp_dtype: str, device_type: str) -> Any:
        calls.append((amp_dtype, device_type))
        return amp_module.contextlib.nullcontext()

    monkeypatch.setattr(amp_module, "autocast", fake_autocast)
    on_gpu = TunedConfig(config=TrainConfig(batch_size=8, amp_dtype="bf16"), device="cuda")
    with on_gpu.autocast():
        pass
    with on_gpu.autocast("cpu"):
        pass
    with CPU_BF16.autocast():
        pass
    assert calls == [("bf16", "cuda"), ("bf16", "cpu"), ("bf16", "cpu")]


def test_grad_scaler_only_for_fp16() -> None:
    assert not CPU_BF16.grad_scaler().is_enabled()
    fp16 = TunedConfig(config=TrainConfig(batch_size=8, amp_dtype="fp16"), device="cpu")
    assert fp16.grad_scaler().is_enabled()
    assert fp16.grad_scaler("cpu").is_enabled()


# -- the model -----------------------------------------------------------------------------------------


def test_wrap_model_checkpoints_blocks() -> None:
    model = torch.nn.Sequential(*(torch.nn.Linear(4, 4) for _ in range(4)))
    tuned = TunedConfig(config=TrainConfig(batch_size=8, checkpoint=0.5), device="cpu")
    wrapped = tuned.wrap_model(model, list(model))
    assert wrapped is model  # compile "none": the model itself
    assert [bool(getattr(b, "_autotune_checkpointed", False)) for b in model] == [
        True, False, True, False]  # half of them, spread evenly
    x = torch.randn(3, 4, requires_grad=True)
    wrapped(x).sum().backward()
    assert x.grad is not None


def test_wrap_model_without_blocks_checkpoints_nothing() -> None:
    model = torch.nn.Linear(4, 4)
    tuned = TunedConfig(config=TrainConfig(batch_size=8, checkpoint=1.0), device="cpu")
    assert tuned.wrap_model(model) is model
    assert not getattr(model, "_autotune_checkpointed", False)


@pytest.mark.parametrize(("amp_dtype", "precision"), [("tf32", "high"), ("bf16", "highest")])
def test_wrap_model_sets_the_matmul_precision(amp_dtype: str, precision: str) -> None:
    torch.set_float32_matmul_precision("medium")
    TunedConfig(config=TrainConfig(batch_size=8, amp_dtype=amp_dtype), device="cpu").wrap_model(
        torch.nn.Linear(2, 2))
    assert torch.get_float32_matmul_precision() == precision


def test_wrap_model_compiles_last(monkeypatch: pytest.MonkeyPatch) -> None:
    import autotune.trial.model_features as model_features

    seen: list[bool] = []

    def fake_compile(model: torch.nn.Module, mode: str) -> torch.nn.Module:
        seen.append(all(getattr(b, "_autotune_checkpointed", False) for b in model))
        return torch.nn.Identity()

    monkeypatch.setattr(model_features, "apply_compile", fake_compile)
    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Linear(2, 2))
    tuned = TunedConfig(config=TrainConfig(batch_size=8, checkpoint=1.0, compile="default"),
                        device="cpu")
    assert isinstance(tuned.wrap_model(model, list(model)), torch.nn.Identity)
    assert seen == [True]  # compile saw the blocks already checkpointed


def test_no_compile_artifacts_to_load(tmp_path: Path) -> None:
    assert CPU_BF16.load_compile_artifacts() is False
    missing = TunedConfig(config=CPU_BF16.config, device="cpu",
                          compile_artifacts=tmp_path / "nope.bin")
    assert missing.load_compile_artifacts() is False


def test_ddp_kwargs_and_a_ddp_wrapped_model() -> None:
    cfg = TunedConfig(config=TrainConfig(batch_size=8, bucket_cap_mb=50, static_graph=True),
                      device="cpu")
    assert cfg.ddp_kwargs() == {"bucket_cap_mb": 50, "gradient_as_bucket_view": False,
                                "static_graph": True}
    model = torch.nn.Linear(4, 2)
    with pytest.raises(RuntimeError, match="initialized process group"):
        cfg.wrap_model(model, ddp=True)
    # One gloo rank in a child process, over an in-memory store: no other process, no port.
    printed = in_one_gloo_rank(textwrap.dedent("""
        import torch
        from torch.nn.parallel import DistributedDataParallel
        from autotune import TrainConfig, TunedConfig
        cfg = TunedConfig(config=TrainConfig(batch_size=8, bucket_cap_mb=50, static_graph=True),
                          device="cpu")
        model = torch.nn.Linear(4, 2)
        wrapped = cfg.wrap_model(model, ddp=True)
        wrapped(torch.randn(3, 4)).sum().backward()
        print(isinstance(wrapped, DistributedDataParallel), wrapped.module is model,
              wrapped.static_graph, model.weight.grad is not None)
    """))
    assert printed.split() == ["True"] * 4


def test_load_config_sets_the_threads_the_trial_ran_with(tmp_path: Path) -> None:
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        load_config(best_yaml(tmp_path, TrainConfig(batch_size=8)))
        assert torch.get_num_threads() == 2  # not searched: PyTorch's own, untouched
        tuned = load_config(best_yaml(tmp_path, TrainConfig(batch_size=8, intra_op_threads=1)))
        assert tuned.intra_op_threads == 1 and torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)


# -- the step's kernels ----------------------------------------------------------------------------------

KERNELS = TunedConfig(config=TrainConfig(batch_size=8, optimizer_impl="fused",
                                         memory_format="channels_last", sdpa_backend="math",
                                         cudnn_benchmark=True), device="cpu")


def test_the_optimizer_is_rebuilt_as_measured_or_comes_back_with_a_warning() -> None:
    model = torch.nn.Linear(2, 2)
    fused = KERNELS.optimizer(torch.optim.AdamW(model.parameters(), lr=0.01))
    assert isinstance(fused, torch.optim.AdamW) and fused.param_groups[0]["fused"] is True
    assert fused.param_groups[0]["lr"] == 0.01
    rmsprop = torch.optim.RMSprop(model.parameters())
    with pytest.warns(UserWarning, match="RMSprop.__init__ has no 'fused' argument"):
        assert KERNELS.optimizer(rmsprop) is rmsprop


def test_the_model_batches_and_attention_as_measured() -> None:
    before = torch.backends.cudnn.benchmark
    model = torch.nn.Conv2d(3, 4, 3)
    try:
        assert KERNELS.wrap_model(model) is model and torch.backends.cudnn.benchmark
    finally:
        torch.backends.cudnn.benchmark = before
    assert model.weight.is_contiguous(memory_format=torch.channels_last)
    x, y = KERNELS.to_device((torch.randn(2, 3, 4, 4), torch.zeros(2)))
    assert x.is_contiguous(memory_format=torch.channels_last) and not x.is_contiguous()
    with KERNELS.sdpa_kernel():
        assert torch.backends.cuda.math_sdp_enabled()
        assert not torch.backends.cuda.flash_sdp_enabled()
    assert torch.backends.cuda.flash_sdp_enabled()
    plain = TunedConfig(config=TrainConfig(batch_size=8), device="cpu")
    assert plain.to_device((torch.randn(2, 3, 4, 4),))[0].is_contiguous()
