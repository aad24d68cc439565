"""The trial process: compose the user's step with one config, measure it, report JSON.

Run as `python -m autotune.worker TRIAL_DIR`. The parent has already set the allocator
environment (it is read when CUDA starts, so it cannot be set from here in time) and reads
`TRIAL_DIR/result.json` when this process ends; window results stream to `events.jsonl`.
Every outcome the trial can name (ok, oom, nan, error) is a result, not a crash.
"""

from __future__ import annotations

import dataclasses
import json
import os
import resource
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from autotune.config import TrainConfig
from autotune.features.allocator import ALLOC_ENV
from autotune.hostcpu import CpuTimes, cpu_usage, read_cpu_times
from autotune.lifetime import die_with_parent
from autotune.measure import MeasureSettings, NonFiniteLoss, Window
from autotune.result import Status, TrialResult

__all__ = ["TrialRequest", "main", "run_trial"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class TrialRequest:
    """Everything a trial process needs; written by the parent as `request.json`."""

    adapter: str
    """Path of the adapter file."""
    config: TrainConfig
    device: str
    """"cuda" or "cpu"."""
    measure: MeasureSettings = MeasureSettings()
    """Base settings; the worker fills in the config-dependent fields."""
    number: int = 0
    diagnose: bool = True
    """After measuring, time the loader alone and the model alone to classify the bottleneck."""
    check_env: bool = True
    """Verify the allocator environment reached this process (off for the in-process twin)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "adapter": self.adapter,
            "config": self.config.to_dict(),
            "device": self.device,
            "measure": dataclasses.asdict(self.measure),
            "number": self.number,
            "diagnose": self.diagnose,
            "check_env": self.check_env,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrialRequest:
        return cls(
            adapter=data["adapter"],
            config=TrainConfig(**data["config"]),
            device=data["device"],
            measure=MeasureSettings(**data["measure"]),
            number=data["number"],
            diagnose=data["diagnose"],
            check_env=data["check_env"],
        )


def settings_for(config: TrainConfig, base: MeasureSettings) -> MeasureSettings:
    """Fill in what the measurement must know about the loader and accumulation."""
    # PyTorch's DataLoader holds num_workers * prefetch_factor batches ahead (default factor 2).
    prefetch = config.num_workers * (config.prefetch_factor or 2)
    return dataclasses.replace(
        base,
        num_workers=config.num_workers,
        grad_accum=config.grad_accum,
        prefetch_batches=prefetch,
    )


def run_trial(request: TrialRequest, events: Path | None = None) -> TrialResult:
    """Compose and measure one config; return its outcome (never raises for trial failures)."""
    import torch

    from autotune.adapter import load_adapter
    from autotune.compose import compose
    from autotune.fingerprint import fingerprint
    from autotune.measure import measure
    from autotune.oom import is_oom_error

    config = request.config
    device = torch.device(request.device)
    unit = "samples"
    step = None
    extra: dict[str, Any] = {}

    def emit(event: dict[str, Any]) -> None:
        if events is not None:
            with events.open("a") as f:
                f.write(json.dumps(event) + "\n")

    def on_window(w: Window) -> None:
        emit({"event": "window", "throughput": w.throughput, "seconds": w.seconds,
              "steps": w.steps, "data_wait": w.data_wait})

    try:
        if request.check_env and os.environ.get(ALLOC_ENV, "") != config.alloc_conf:
            raise RuntimeError(
                f"{ALLOC_ENV}={os.environ.get(ALLOC_ENV, '')!r} in the trial process, expected "
                f"{config.alloc_conf!r}: the allocator settings did not reach it"
            )
        adapter_cls = load_adapter(request.adapter)
        unit = adapter_cls.unit
        extra["fingerprint"] = fingerprint(device)
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        step = compose(adapter_cls(), config, device)
        extra["blocks_checkpointed"] = step.blocks_checkpointed
        emit({"event": "composed"})
        settings = settings_for(config, request.measure)
        cpu_start: list[CpuTimes | None] = []
        m = measure(step, sync=step.sync, finite=step.finite, settings=settings,
                    on_window=on_window, on_timed_start=lambda: cpu_start.append(read_cpu_times()))
        host_cpu = cpu_usage(cpu_start[0] if cpu_start else None, read_cpu_times())
        if host_cpu is not None:
            extra["host_cpu"] = host_cpu
        if request.diagnose:
            extra.update(_diagnose(step, m, settings.prefetch_batches,
                                   cpu_busy_fraction=(host_cpu or {}).get("busy_fraction")))
        summary = m.summary()
        extra["window_throughputs"] = [w.throughput for w in m.windows]
        extra["settled"] = summary.pop("settled")
        extra["warmup_steps"] = summary.pop("warmup_steps")
        result = TrialResult(status=Status.OK, unit=unit, **summary, **_memory(device), extra=extra)
    except NonFiniteLoss as exc:
        result = TrialResult(status=Status.NAN, reason=str(exc), unit=unit, **_memory(device),
                             extra=extra)
    except Exception as exc:  # the trial's outcome: classified, with its traceback in the log
        traceback.print_exc()
        reason = _one_line(exc)
        status = Status.OOM if is_oom_error(exc) else Status.ERROR
        result = TrialResult(status=status, reason=reason, unit=unit, **_memory(device), extra=extra)
    finally:
        if step is not None:
            step.close()
    return result


def _diagnose(step: Any, m: Any, prefetch_batches: int, *,
              cpu_busy_fraction: float | None) -> dict[str, Any]:
    """The bottleneck diagnosis; a failure here is noted, never turns an ok trial into an error."""
    from autotune.diagnose import diagnose

    try:
        d = diagnose(step, throughput=m.throughput, data_wait_fraction=m.data_wait_fraction,
                     prefetch_batches=prefetch_batches, cpu_busy_fraction=cpu_busy_fraction)
    except Exception as exc:  # recorded with its traceback in the log
        traceback.print_exc()
        return {"diagnosis_error": _one_line(exc)}
    return {"diagnosis": d.to_dict()}


def _one_line(exc: BaseException) -> str:
    """Type and message on one line. A multi-line message keeps its last line too: a DataLoader
    worker's exception arrives as "Caught ValueError in DataLoader worker process 0." with the
    original error ("ValueError: bad sample 3") on the last line."""
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    text = lines[0] if lines else ""
    if len(lines) > 1:
        text += f" ... {lines[-1]}"
    return f"{type(exc).__name__}: {text}"[:300]


def _memory(device: Any) -> dict[str, float | None]:
    import torch

    # ru_maxrss is in KiB on Linux: the process's peak resident host memory.
    memory: dict[str, float | None] = {
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    }
    if device.type == "cuda" and torch.cuda.is_initialized():
        memory["peak_allocated_mb"] = torch.cuda.max_memory_allocated(device) / 2**20
        memory["peak_reserved_mb"] = torch.cuda.max_memory_reserved(device) / 2**20
    return memory


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m autotune.worker TRIAL_DIR", file=sys.stderr)
        return 2
    die_with_parent()
    trial_dir = Path(args[0])
    request = TrialRequest.from_dict(json.loads((trial_dir / "request.json").read_text()))
    start = time.perf_counter()
    result = run_trial(request, events=trial_dir / "events.jsonl")
    result = result.replace(duration_seconds=time.perf_counter() - start)
    result.save(trial_dir / "result.json")
    print(f"autotune trial {request.number}: {result.status.value} {result.reason}".rstrip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
