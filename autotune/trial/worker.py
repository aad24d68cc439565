"""The trial process: compose the user's step with one config, measure it, report JSON.

Run as `python -m autotune.trial.worker TRIAL_DIR`. The parent has already set the allocator
environment (it is read when CUDA starts, so it cannot be set from here in time) and reads
`TRIAL_DIR/result.json` when this process ends; window results stream to `events.jsonl`.
Every outcome the trial can name (ok, oom, nan, error) is a result, not a crash.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import resource
import sys
import time
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autotune.contract.allocator import ALLOC_ENV
from autotune.contract.config import TrainConfig
from autotune.contract.host import pin_to_share
from autotune.contract.phases import Phase
from autotune.contract.request import LAUNCH_ENV, MeasureSettings, TrialRequest
from autotune.contract.result import Status, TrialResult
from autotune.trial import noiseprobe
from autotune.trial.heap import hold_host_heap
from autotune.trial.hostcpu import CpuTimes, cpu_usage, read_cpu_times
from autotune.trial.lifetime import die_with_parent
from autotune.trial.measure import NonFiniteLoss, Window
from autotune.trial.spare import pause_spare

if TYPE_CHECKING:
    from autotune.trial.rank import Rank

__all__ = ["Preloaded", "main", "run_trial", "serve", "settings_for"]

REPORT_RESERVE = 5.0
"""Seconds before the trial's time limit at which its timed windows stop, converged or not:
what follows (compile artifacts, the result) must fit. A confirmation run on an H100 was killed
at its 32-s limit after 22 windows of a launch-bound step, and all 22 were lost."""

DIAGNOSIS_RESERVE = 15.0
"""Seconds that must be left of the trial's time limit to start the diagnosis (it took 1.5-12 s
on an H100): a GPT-2 trial on an H200 was killed 1 s into it, its windows measured and lost."""


def _time_left(request: TrialRequest, phases: _Phases) -> float | None:
    """Seconds until the parent kills this trial (None: no limit): from the runner's deadline
    when it sent one, else from the time limit and this process's own start."""
    if request.deadline is not None:
        return request.deadline - time.time()
    if request.time_limit is not None:
        return request.time_limit - phases.elapsed()
    return None


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


def run_trial(request: TrialRequest, events: Path | None = None,
              started: float | None = None, preloaded: Preloaded | None = None,
              rank: Rank | None = None) -> TrialResult:
    """Compose and measure one config; return its outcome (never raises for trial failures).

    `started` is the `perf_counter` time the process (or fork) began: what came before this
    call is the trial's start phase. An exception from the adapter's own code is marked in
    the result (`contract_error`) with the part of the adapter it came from. `rank`: this
    process is one rank of a DDP trial (`autotune.trial.rank`); it measures in lockstep
    with the others and skips the diagnosis (its steps would have to run on every rank)."""
    phases = _Phases(events, started)
    phases.enter(Phase.IMPORT)
    import torch

    from autotune.adapter import load_adapter
    from autotune.trial.blame import blame, blamed
    from autotune.trial.compose import compose
    from autotune.trial.features.compile import CompileWatch
    from autotune.trial.fingerprint import fingerprint
    from autotune.trial.measure import measure
    from autotune.trial.oom import is_oom_error

    config = request.config
    device = torch.device(request.device) if rank is None else rank.device(request.device)
    unit = "samples"
    step = None
    facts: dict[str, Any] = {}

    def on_window(w: Window) -> None:
        phases.emit({"event": "window", "throughput": w.throughput, "seconds": w.seconds,
                     "steps": w.steps, "data_wait": w.data_wait})

    try:
        if device.type == "cpu":
            hold_host_heap()  # forked, fresh or production: the same heap (trial.heap)
        if request.check_env and os.environ.get(ALLOC_ENV, "") != config.alloc_conf:
            raise RuntimeError(
                f"{ALLOC_ENV}={os.environ.get(ALLOC_ENV, '')!r} in the trial process, expected "
                f"{config.alloc_conf!r}: the allocator settings did not reach it"
            )
        if preloaded is not None and preloaded.adapter_path == request.adapter:
            adapter_cls, dataset = preloaded.adapter_cls, preloaded.dataset
        else:
            try:
                adapter_cls, dataset = load_adapter(request.adapter), None
            except Exception as exc:
                blame(exc, "the adapter file")
                raise
        unit = adapter_cls.unit
        # Starting the device (CUDA's first call takes seconds) is a phase of its own.
        phases.enter(Phase.DEVICE)
        if rank is not None:
            rank.setup()  # the process groups (NCCL starts here, with CUDA)
        facts["fingerprint"] = fingerprint(device)
        if device.type == "cuda":
            torch.empty(1, device=device)  # the context itself is made at the first allocation
            torch.cuda.reset_peak_memory_stats(device)
        try:
            adapter = adapter_cls()
        except Exception as exc:
            blame(exc, "the adapter's __init__")
            raise
        step = compose(adapter, config, device, dataset=dataset, on_phase=phases.enter,
                       ddp=None if rank is None else rank.wrap)
        facts["blocks_checkpointed"] = step.blocks_checkpointed
        phases.emit({"event": "composed"})
        phases.enter(Phase.FIRST_BATCH)
        step.start_loader()
        phases.enter(Phase.WARMUP)
        settings = settings_for(config, request.measure)
        cpu_start: list[CpuTimes | None] = []
        noise_start: list[noiseprobe.Probe] = []

        def timed_start() -> None:
            paused = pause_spare()
            if paused is not None:
                phases.emit({"event": "spare_paused", "pid": paused})
            phases.enter(Phase.WINDOWS)
            cpu_start.append(read_cpu_times())
            if rank is None:  # a DDP rank's peers, in their own groups, would read as noise
                noise_start.append(noiseprobe.start())

        watch = CompileWatch()
        grace = request.compile_grace if config.compile != "none" else 0.0
        compiled_for: list[float] = []  # what the limit grew by: the first step, up to grace

        def first_step(seconds: float) -> None:  # past it, a slow warm-up is not compiling
            watch.first_step_done()
            compiled_for.append(min(grace, seconds))
            phases.emit({"event": "first_step", "seconds": seconds})

        left = _time_left(request, phases)
        stop = None if left is None else time.perf_counter() + left - REPORT_RESERVE
        m = measure(step, sync=step.sync, settings=settings,
                    finite=step.finite if rank is None else rank.agreed(step.finite),
                    gather=None if rank is None else rank.gather,
                    on_window=on_window, on_timed_start=timed_start, on_first_step=first_step,
                    stop_at=lambda: None if stop is None else stop + sum(compiled_for),
                    skip=step.skip_queued, varying=lambda: step.shapes.vary)
        facts.update(step.shapes.facts())
        facts["host_cpu"] = cpu_usage(cpu_start[0] if cpu_start else None, read_cpu_times())
        if noise_start:
            facts["noise"] = noiseprobe.finish(noise_start[0], gpu_uuid=noiseprobe.gpu_uuid(device))
        if config.compile != "none":
            facts.update(watch.facts(dynamic_shapes=step.dynamic_shapes))
            facts.update(_compile_cache_counts())
            if request.save_compile_artifacts and events is not None:
                facts["compile_artifacts"] = _save_compile_artifacts(events.parent)
        # Never near the time limit: a trial killed in its diagnosis would lose its measurement.
        left = _time_left(request, phases)
        in_time = left is None or left + sum(compiled_for) >= DIAGNOSIS_RESERVE
        if request.diagnose and rank is None and in_time \
                and m.throughput >= (request.diagnose_from or 0.0):
            phases.enter(Phase.DIAGNOSIS)
            facts.update(_diagnose(step, m, settings.prefetch_batches,
                                   cpu_busy_fraction=getattr(facts["host_cpu"], "busy_fraction",
                                                             None)))
        phases.enter("")
        result = TrialResult(
            status=Status.OK, unit=unit, throughput=m.throughput, spread=m.spread,
            uncertainty=m.uncertainty if math.isfinite(m.uncertainty) else None,
            step_seconds=m.step_seconds, data_wait_fraction=m.data_wait_fraction,
            warmup_steps=m.warmup_steps, warmup_seconds=m.warmup_seconds,
            compile_seconds=m.compile_seconds, windows=len(m.windows), converged=m.converged,
            settled=m.settled, window_throughputs=tuple(w.throughput for w in m.windows),
            **_memory(device), **facts)
    except NonFiniteLoss as exc:
        result = TrialResult(status=Status.NAN, reason=str(exc), unit=unit, **_memory(device),
                             **facts)
    except Exception as exc:  # the trial's outcome: classified, with its traceback in the log
        traceback.print_exc()
        if rank is not None:
            rank.failed(exc)
        reason = _one_line(exc)
        status = Status.OOM if is_oom_error(exc) else Status.ERROR
        result = TrialResult(status=status, reason=reason, unit=unit,
                             contract_error=blamed(exc), **_memory(device), **facts)
    finally:
        if step is not None:
            step.close()
    phases.enter("")
    return result.replace(phases=phases.seconds)


class _Phases:
    """Which phase the trial is in, streamed as events, and the seconds each one took."""

    def __init__(self, events: Path | None, started: float | None) -> None:
        self.events = events
        self.seconds: dict[str, float] = {}
        self.current: str = Phase.START.value
        self.since = time.perf_counter() if started is None else started
        self.began = self.since
        """When the trial's process (or fork) began: what its time limit counts from."""

    def elapsed(self) -> float:
        return time.perf_counter() - self.began

    def emit(self, event: dict[str, Any]) -> None:
        if self.events is not None:
            with self.events.open("a") as f:
                f.write(json.dumps(event) + "\n")

    def enter(self, phase: str) -> None:
        """Leave the current phase for `phase` ("": the trial is over)."""
        phase = getattr(phase, "value", phase)  # a Phase, or "" at the end
        if phase == self.current:
            return
        now = time.perf_counter()
        if self.current:
            self.seconds[self.current] = self.seconds.get(self.current, 0.0) + now - self.since
        self.current, self.since = phase, now
        if phase:
            self.emit({"event": "phase", "phase": phase, "time": time.time()})


def _compile_cache_counts() -> dict[str, int]:
    """Hits and misses of the persistent FX-graph and AOTAutograd caches in this process."""
    from torch._dynamo.utils import counters

    hits = counters["inductor"]["fxgraph_cache_hit"] + counters["aot_autograd"]["autograd_cache_hit"]
    misses = (counters["inductor"]["fxgraph_cache_miss"]
              + counters["aot_autograd"]["autograd_cache_miss"])
    return {"compile_cache_hits": int(hits), "compile_cache_misses": int(misses)}


def _save_compile_artifacts(folder: Path) -> str:
    """`torch.compiler.save_cache_artifacts()` into `folder`: what production loads to skip the
    compile (PyTorch's "Compile Time Caching" recipe). "" when there is nothing to save."""
    import torch

    saved = torch.compiler.save_cache_artifacts()
    if saved is None:
        return ""
    path = folder / "compile_artifacts.bin"
    path.write_bytes(saved[0])
    return str(path)


def _diagnose(step: Any, m: Any, prefetch_batches: int, *,
              cpu_busy_fraction: float | None) -> dict[str, Any]:
    """The bottleneck diagnosis; a failure here is noted, never turns an ok trial into an error."""
    from autotune.trial.diagnose import diagnose

    try:
        d = diagnose(step, throughput=m.throughput, data_wait_fraction=m.data_wait_fraction,
                     prefetch_batches=prefetch_batches, cpu_busy_fraction=cpu_busy_fraction,
                     step_seconds=m.step_seconds)
    except Exception as exc:  # recorded with its traceback in the log
        traceback.print_exc()
        return {"diagnosis_error": _one_line(exc)}
    return {"diagnosis": d}


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


@dataclasses.dataclass(frozen=True)
class Preloaded:
    """What a fork server built once before forking trials: the adapter class and its dataset."""

    adapter_path: str
    adapter_cls: type[Any]
    dataset: Any = None
    """None: each trial builds its own (the adapter's dataset() failed or was not built)."""


def serve(trial_dir: Path, *, started: float, preloaded: Preloaded | None = None) -> int:
    """Run the trial whose request is in `trial_dir`; write its result there."""
    request = TrialRequest.from_dict(json.loads((trial_dir / "request.json").read_text()))
    result = run_trial(request, events=trial_dir / "events.jsonl", started=started,
                       preloaded=preloaded)
    result = result.replace(duration_seconds=time.perf_counter() - started)
    result.save(trial_dir / "result.json")
    print(f"autotune trial {request.number}: {result.status.value} {result.reason}".rstrip())
    return 0


def main(argv: list[str] | None = None) -> int:
    # The parent stamps when it launched this process: start-up (interpreter, imports) counts
    # as the trial's "start" phase.
    launched = float(os.environ.get(LAUNCH_ENV) or time.time())
    started = time.perf_counter() - max(0.0, time.time() - launched)
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m autotune.trial.worker TRIAL_DIR", file=sys.stderr)
        return 2
    die_with_parent()
    pin_to_share()  # before torch starts its thread pool
    return serve(Path(args[0]), started=started)


if __name__ == "__main__":
    sys.exit(main())
