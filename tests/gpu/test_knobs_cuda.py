"""Every knob does what it says on CUDA, shown with a measured quantity (printed with -s).

Run on a GPU machine: `python -m pytest tests/gpu -s -v`. Skipped where there is no CUDA.
Each test prints one `KNOB ...` line with its figures; results/h100/gpu-tests/knobs.txt and
results/h200/gpu-tests/knobs.txt keep a run each.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from torch import nn

import autotune
from autotune.contract.config import TrainConfig
from autotune.contract.request import TrialRequest
from autotune.contract.result import Status
from autotune.study.execution.runner import SubprocessRunner
from autotune.trial.compose import TrainStep

pytestmark = pytest.mark.requires_cuda

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
CUDA = torch.device("cuda")


class Regression(autotune.Adapter):
    """A learnable task: y = x W + noise; the loss must fall when training works."""

    unit = "samples"
    batch_size = 256

    def dataset(self) -> torch.utils.data.Dataset:
        g = torch.Generator().manual_seed(0)
        x = torch.randn(8192, 256, generator=g)
        w = torch.randn(256, 256, generator=g) / 16
        return torch.utils.data.TensorDataset(x, x @ w + 0.01 * torch.randn(8192, 256, generator=g))

    def model(self) -> nn.Module:
        return nn.Sequential(nn.Linear(256, 1024), nn.GELU(), nn.Linear(1024, 256))

    def optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        return torch.optim.Adam(model.parameters(), lr=1e-3)

    def loss(self, model: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        x, y = batch
        return nn.functional.mse_loss(model(x).float(), y)


def _losses(step: TrainStep, n: int) -> list[float]:
    """Run n steps, reading the loss after each (fine here: nothing is timed)."""
    losses = []
    for _ in range(n):
        before = step._loss_sum.item()
        step()
        losses.append(step._loss_sum.item() - before)
    return losses


def _probe(config: TrainConfig, code: str, tmp_path: Path) -> dict[str, object]:
    """Run `code` in a fresh process started by `autotune apply` (the production path) and
    return the JSON it prints last."""
    yaml_path = tmp_path / "config.yaml"
    import yaml

    yaml_path.write_text(yaml.safe_dump({"config": config.to_dict()}))
    out = subprocess.run(
        [sys.executable, "-m", "autotune", "apply", str(yaml_path), "--",
         sys.executable, "-c", code],
        cwd=REPO, capture_output=True, text=True, timeout=300, check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


# Growing allocations with a small live tensor in between: the default allocator cannot reuse a
# freed block for the next, larger request and reserves a new segment each time; expandable
# segments map more pages onto one segment instead.
FRAGMENT = """
import json, os, torch
keep = []
for i in range(24):
    big = torch.empty((100 + 4 * i) * 2**20, dtype=torch.uint8, device="cuda")
    keep.append(torch.empty(2**20 + 4096, dtype=torch.uint8, device="cuda"))
    del big
torch.cuda.synchronize()
segs = torch.cuda.memory._snapshot()["segments"]
print(json.dumps({
    "env": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
    "reserved_mb": torch.cuda.memory_reserved() / 2**20,
    "segments": len(segs),
    "expandable_segments": sum(bool(s.get("is_expandable")) for s in segs),
    "max_split_size": torch.cuda.memory_stats().get("max_split_size"),
}))
"""


@pytest.mark.slow  # `python -m autotune apply`, three times
def test_allocator_settings_reach_the_allocator(tmp_path: Path) -> None:
    default = _probe(TrainConfig(batch_size=1), FRAGMENT, tmp_path)
    expandable = _probe(TrainConfig(batch_size=1, expandable_segments=True), FRAGMENT, tmp_path)
    split = _probe(TrainConfig(batch_size=1, max_split_size_mb=128), FRAGMENT, tmp_path)
    print(f"\nKNOB allocator default: {default}")
    print(f"KNOB allocator expandable_segments: {expandable}")
    print(f"KNOB allocator max_split_size_mb=128: {split}")
    print(f"KNOB allocator reserved MB under fragmentation: default {default['reserved_mb']:.0f}, "
          f"expandable {expandable['reserved_mb']:.0f} "
          f"({expandable['reserved_mb'] / default['reserved_mb']:.2f}x)")
    assert expandable["env"] == "expandable_segments:True"
    assert expandable["expandable_segments"] >= 1 and default["expandable_segments"] == 0
    assert split["max_split_size"] == 128 * 2**20
    assert default["max_split_size"] != 128 * 2**20
    assert expandable["reserved_mb"] < 0.5 * default["reserved_mb"]


def test_fp16_uses_a_grad_scaler_and_trains() -> None:
    step = TrainStep(Regression(), TrainConfig(batch_size=256, amp_dtype="fp16"), CUDA)
    assert step.amp.scaler.is_enabled()
    losses = _losses(step, 60)
    scale = step.amp.scaler.get_scale()
    print(f"\nKNOB fp16: scale {scale:.0f}, loss {sum(losses[:5]) / 5:.4f} -> "
          f"{sum(losses[-5:]) / 5:.4f}")
    assert torch.isfinite(torch.tensor(scale)) and scale > 0
    assert sum(losses[-5:]) < 0.5 * sum(losses[:5])
    bf16 = TrainStep(Regression(), TrainConfig(batch_size=256, amp_dtype="bf16"), CUDA)
    assert not bf16.amp.scaler.is_enabled()  # bf16 has fp32's range: no scaling


def test_bf16_autocast_runs_bf16_matmuls() -> None:
    step = TrainStep(Regression(), TrainConfig(batch_size=256, amp_dtype="bf16"), CUDA)
    a = torch.randn(512, 512, device=CUDA)
    with step.amp.autocast():
        inside = (a @ a).dtype
    outside = (a @ a).dtype
    fp32 = TrainStep(Regression(), TrainConfig(batch_size=256), CUDA)
    with fp32.amp.autocast():
        plain = (a @ a).dtype
    print(f"\nKNOB bf16: matmul dtype inside autocast {inside}, outside {outside}, fp32 config {plain}")
    assert inside == torch.bfloat16 and outside == torch.float32 and plain == torch.float32


def test_tf32_switches_matmul_precision() -> None:
    TrainStep(Regression(), TrainConfig(batch_size=256, amp_dtype="tf32"), CUDA)
    tf32 = torch.get_float32_matmul_precision()
    TrainStep(Regression(), TrainConfig(batch_size=256), CUDA)
    fp32 = torch.get_float32_matmul_precision()
    print(f"\nKNOB tf32: float32 matmul precision tf32 config {tf32!r}, fp32 config {fp32!r}")
    assert (tf32, fp32) == ("high", "highest")


# Inductor warns that TF32 is off (this fp32 test keeps PyTorch's default) and the profiler
# about its event buffer; pytest's warnings-as-errors would turn either into a failure.
@pytest.mark.slow  # torch.compile
@pytest.mark.filterwarnings("ignore::UserWarning")
def test_reduce_overhead_replays_cuda_graphs() -> None:
    from torch.profiler import ProfilerActivity, profile

    counts = {}
    for mode in ("default", "reduce-overhead"):
        step = TrainStep(Regression(), TrainConfig(batch_size=256, compile=mode), CUDA)
        for _ in range(6):  # compile, then cudagraph warm-up and recording
            step()
        step.sync()
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for _ in range(3):
                step()
            step.sync()
        counts[mode] = sum(1 for e in prof.events() if e.name == "cudaGraphLaunch")
        torch._dynamo.reset()
    print(f"\nKNOB compile: cudaGraphLaunch calls in 3 steps: {counts}")
    assert counts["reduce-overhead"] >= 3
    assert counts["default"] == 0


@pytest.mark.slow  # trial processes
def test_checkpointing_lowers_peak_memory(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # A small GPT through the real trial path (fresh process, TrialResult memory fields).
    for name, value in {"GPT_N_LAYER": "8", "GPT_N_EMBD": "512", "GPT_N_HEAD": "8",
                        "GPT_BLOCK": "512", "GPT_VOCAB": "8192", "GPT_BATCH": "16",
                        "GPT_GLOBAL_BATCH": "16", "GPT_TOKENS": "400000"}.items():
        monkeypatch.setenv(name, value)
    runner = SubprocessRunner()
    peaks = {}
    for fraction in (0.0, 0.5, 1.0):
        config = TrainConfig(batch_size=16, checkpoint=fraction)
        request = TrialRequest(adapter=str(REPO / "adapters" / "gpt.py"), config=config,
                               device="cuda", diagnose=False,
                               measure=autotune.MeasureSettings(budget_seconds=2))
        result = runner.run(request, tmp_path / f"ckpt{fraction}", timeout=300)
        assert result.status is Status.OK, result.reason
        peaks[fraction] = result.peak_allocated_mb
    print(f"\nKNOB checkpoint: peak allocated MB by fraction {peaks}; full/none = "
          f"{peaks[1.0] / peaks[0.0]:.2f}")
    assert peaks[1.0] < 0.8 * peaks[0.0]
    assert peaks[1.0] < peaks[0.5] < peaks[0.0]


def test_pinned_batches_copy_without_blocking_the_host() -> None:
    config = TrainConfig(batch_size=256, num_workers=2, pin_memory=True)
    step = TrainStep(Regression(), config, CUDA)
    batch, _ = step.next_batch()
    assert all(t.is_pinned() for t in batch)
    step.close()

    def host_and_copy_ms(src: torch.Tensor) -> tuple[float, float]:
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        t0 = time.perf_counter()
        src.to(CUDA, non_blocking=True)
        host = (time.perf_counter() - t0) * 1e3
        end.record()
        torch.cuda.synchronize()
        return host, start.elapsed_time(end)

    big = torch.randn(64 * 2**20)  # 256 MiB
    host_and_copy_ms(big.pin_memory())  # warm up
    pinned = host_and_copy_ms(big.pin_memory())
    pageable = host_and_copy_ms(big)
    print(f"\nKNOB pin_memory: non_blocking copy of 256 MiB, host call / copy time (ms): "
          f"pinned {pinned[0]:.2f} / {pinned[1]:.1f}, pageable {pageable[0]:.1f} / {pageable[1]:.1f}")
    assert pinned[0] < 0.2 * pinned[1]  # the host went on while the copy ran
    assert pageable[0] > 0.5 * pageable[1]  # pageable memory: the call waits for the copy


@pytest.mark.slow  # trial processes
def test_real_cuda_oom_is_recorded_and_the_next_trial_runs(tmp_path: Path) -> None:
    runner = SubprocessRunner()
    adapter = str(HERE / "oom_adapter.py")
    settings = autotune.MeasureSettings(budget_seconds=2)
    big = runner.run(TrialRequest(adapter=adapter, config=TrainConfig(batch_size=256),
                                  device="cuda", diagnose=False, measure=settings),
                     tmp_path / "big", timeout=300)
    small = runner.run(TrialRequest(adapter=adapter, config=TrainConfig(batch_size=2),
                                    device="cuda", diagnose=False, measure=settings),
                       tmp_path / "small", timeout=300)
    print(f"\nKNOB oom: batch 256 -> {big.status.value} ({big.reason}); batch 2 -> "
          f"{small.status.value}, peak {small.peak_allocated_mb:.0f} MB")
    assert big.status is Status.OOM
    assert "out of memory" in big.reason.lower()
    assert small.status is Status.OK
