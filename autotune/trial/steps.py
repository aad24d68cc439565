"""The steps of one trial, in the order `worker.run_trial` takes them: import, prepare the
process, load the adapter, start the device, build the step, time it, read what the compiler
did (`compile_facts`), diagnose, read the memory peaks (`peaks`). Each takes what it needs and
returns a typed value; an exception from one is the trial's outcome (`run_trial` classifies it).

Torch and the trial code are imported by `import_trial_code`, in the trial's import phase;
the other steps import from them again (a lookup in `sys.modules`).
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autotune.contract.allocator import ALLOC_ENV
from autotune.contract.config import TrainConfig
from autotune.contract.events import FirstStepEvent, SparePausedEvent, WindowEvent
from autotune.contract.noise import Noise
from autotune.contract.params import instantiate, same_dataset
from autotune.contract.phases import Phase
from autotune.contract.request import MeasureSettings, TrialRequest
from autotune.contract.result import Diagnosis, Fingerprint, HostCpu
from autotune.trial import noiseprobe
from autotune.trial.heap import hold_host_heap
from autotune.trial.hostcpu import CpuTimes, cpu_usage, read_cpu_times
from autotune.trial.progress import Progress, time_left
from autotune.trial.spare import pause_spare

if TYPE_CHECKING:
    import torch

    from autotune.trial.compose import TrainStep
    from autotune.trial.features.compile import Recompiles
    from autotune.trial.measure import Measurement, Window
    from autotune.trial.rank import Rank
    from autotune.trial.shapes import ShapeFacts

__all__ = ["DIAGNOSIS_RESERVE", "REPORT_RESERVE", "Diagnosed", "Preloaded",
           "Timed", "build", "diagnosed", "import_trial_code", "load",
           "one_line", "prepare", "settings_for", "start_device", "time_step", "worth_diagnosing"]

REPORT_RESERVE = 5.0
"""Seconds before the trial's time limit at which its timed windows stop, converged or not:
what follows (compile artifacts, the result) must fit. A confirmation run on an H100 was killed
at its 32-s limit after 22 windows of a launch-bound step, and all 22 were lost."""

DIAGNOSIS_RESERVE = 15.0
"""Seconds that must be left of the trial's time limit to start the diagnosis (it took 1.5-12 s
on an H100): a GPT-2 trial on an H200 was killed 1 s into it, its windows measured and lost."""


@dataclasses.dataclass(frozen=True)
class Preloaded:
    """What a fork server built once before forking trials: the adapter class and its dataset."""

    adapter_path: str
    adapter_cls: type[Any]
    dataset: Any = None
    """None: each trial builds its own (the adapter's dataset() failed or was not built); a
    `contract.params.Built` when dataset() set attributes on its adapter."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Timed:
    """The step's measurement and what the machine did meanwhile."""

    measurement: Measurement
    host_cpu: HostCpu | None
    """How busy the CPUs were during the timed windows (None: not Linux)."""
    noise: Noise | None
    """What else ran meanwhile (None for a DDP rank: its peers would read as noise)."""
    compile_grace_used: float = 0.0
    """Seconds the time limit grew by while the first step compiled (at most the request's
    `compile_grace`): the limit counts compile apart from measurement."""
    shapes: ShapeFacts
    """Whether the batches' shapes varied, and how."""
    recompiles: Recompiles | None = None
    """What Dynamo compiled after the first step (None without compile)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Diagnosed:
    """The bottleneck diagnosis (None: not asked, out of time, slower than the best, or it
    failed), or why it failed ("" when it did not)."""

    diagnosis: Diagnosis | None = None
    error: str = ""


def import_trial_code() -> None:
    """Torch and the trial modules that need it: the import phase's work."""
    import torch  # noqa: F401

    import autotune.adapter  # noqa: F401
    import autotune.trial.blame  # noqa: F401
    import autotune.trial.compose  # noqa: F401
    import autotune.trial.fingerprint  # noqa: F401
    import autotune.trial.measure  # noqa: F401
    import autotune.trial.oom  # noqa: F401


def prepare(request: TrialRequest, device: torch.device) -> None:
    """The process as the trial needs it: the host heap held as in production, and the
    allocator settings the parent set."""
    if device.type == "cpu":
        hold_host_heap()  # forked, fresh or production: the same heap (trial.heap)
    if request.check_env and os.environ.get(ALLOC_ENV, "") != request.config.alloc_conf:
        raise RuntimeError(
            f"{ALLOC_ENV}={os.environ.get(ALLOC_ENV, '')!r} in the trial process, expected "
            f"{request.config.alloc_conf!r}: the allocator settings did not reach it"
        )


def load(request: TrialRequest, preloaded: Preloaded | None) -> tuple[type[Any], Any]:
    """The adapter class and its dataset (None: the trial builds it), a fork server's when it
    preloaded this adapter."""
    from autotune.adapter import load_adapter
    from autotune.trial.blame import blame

    if preloaded is not None and preloaded.adapter_path == request.adapter:
        cls = preloaded.adapter_cls  # its dataset was built at the knobs' defaults
        return cls, (preloaded.dataset if same_dataset(cls.knobs, request.config.params) else None)
    try:
        return load_adapter(request.adapter), None
    except Exception as exc:
        blame(exc, "the adapter file")
        raise


def start_device(device: torch.device, rank: Rank | None) -> Fingerprint:
    """Start the device (CUDA's context, a DDP rank's process groups) and say where the trial
    runs."""
    import torch

    from autotune.trial.fingerprint import fingerprint

    if rank is not None:
        rank.setup()  # the process groups (NCCL starts here, with CUDA)
    facts = fingerprint(device)
    if device.type == "cuda":
        torch.empty(1, device=device)  # the context itself is made at the first allocation
        torch.cuda.reset_peak_memory_stats(device)
    return facts


def build(adapter_cls: type[Any], dataset: Any, config: TrainConfig, device: torch.device,
          progress: Progress, rank: Rank | None) -> TrainStep:
    """The user's step with `config` applied (`compose` enters the model and dataset phases)."""
    from autotune.trial.blame import blame
    from autotune.trial.compose import compose

    try:
        adapter = instantiate(adapter_cls, config.params)  # `params` set before __init__
    except Exception as exc:
        blame(exc, "the adapter's __init__")
        raise
    return compose(adapter, config, device, dataset=dataset, on_phase=progress.enter,
                   ddp=None if rank is None else rank.wrap)


def settings_for(config: TrainConfig, base: MeasureSettings, *,
                 epoch_batches: int | None = None) -> MeasureSettings:
    """Fill in what the measurement must know about the loader and accumulation
    (`epoch_batches`: the loader's batches per epoch, None when it has no length)."""
    # PyTorch's DataLoader holds num_workers * prefetch_factor batches ahead (default factor 2).
    prefetch = config.num_workers * (config.prefetch_factor or 2)
    return dataclasses.replace(
        base,
        num_workers=config.num_workers,
        grad_accum=config.grad_accum,
        prefetch_batches=prefetch,
        epoch_steps=epoch_steps(epoch_batches, config.grad_accum),
    )


def epoch_steps(epoch_batches: int | None, grad_accum: int) -> int:
    """Optimizer steps of `grad_accum` batches that end where an epoch of `epoch_batches` ends
    (several epochs when they do not divide): the loader's period; 0 when unknown."""
    if not epoch_batches or epoch_batches <= 0:
        return 0
    return math.lcm(epoch_batches, grad_accum) // grad_accum


def time_step(step: TrainStep, request: TrialRequest, settings: MeasureSettings,
              progress: Progress, rank: Rank | None, device: torch.device) -> Timed:
    """Warm the step up and time its windows (`measure`), streaming each window; the CPUs'
    use and the noise are read around the timed windows. Raises `NonFiniteLoss`."""
    from autotune.trial.features.compile import CompileWatch, compile_seconds
    from autotune.trial.measure import measure
    from autotune.trial.warmup import RecompileStorm
    from autotune.trial.warmup_rate import WarmupRate

    cpu_start: list[CpuTimes | None] = []
    noise_start: list[noiseprobe.Probe] = []
    compiles = request.config.compile != "none"
    # Only a compiled step reads Dynamo's counters: importing them costs an eager trial ~1 s.
    watch = CompileWatch() if compiles else None
    grace = request.compile_grace if compiles else 0.0
    compiled_for: list[float] = []  # what the limit grew by: the first step, up to grace

    # Streamed for the search's hopeless check; a DDP rank's items are not the trial's rate.
    # A recompile is streamed too: a trial killed in warm-up then says what kept it compiling.
    rated = WarmupRate(step, progress.emit, compiled_seconds=compile_seconds if compiles else None,
                       on_recompile=None if watch is None else lambda: progress.emit(watch.event()))

    def timed_start() -> None:
        rated.stop()
        paused = pause_spare()
        if paused is not None:
            progress.emit(SparePausedEvent(pid=paused))
        progress.enter(Phase.WINDOWS)
        cpu_start.append(read_cpu_times())
        if rank is None:  # a DDP rank's peers, in their own groups, would read as noise
            noise_start.append(noiseprobe.start())

    def first_step(seconds: float) -> None:  # past it, a slow warm-up is not compiling
        if watch is not None:
            watch.first_step_done()
        compiled_for.append(min(grace, seconds))
        progress.emit(FirstStepEvent(seconds=seconds))

    def on_window(w: Window) -> None:
        progress.emit(WindowEvent(throughput=w.throughput, seconds=w.seconds, steps=w.steps,
                                  data_wait=w.data_wait))

    left = time_left(request, progress)
    stop = None if left is None else time.perf_counter() + left - REPORT_RESERVE
    try:
        m = measure(step if rank is not None else rated, sync=step.sync, settings=settings,
                    finite=step.finite if rank is None else rank.agreed(step.finite),
                    gather=None if rank is None else rank.gather,
                    on_window=on_window, on_timed_start=timed_start, on_first_step=first_step,
                    stop_at=lambda: None if stop is None else stop + sum(compiled_for),
                    skip=step.skip_queued, varying=lambda: step.shapes.vary,
                    compiled_seconds=compile_seconds if compiles else None)
    except RecompileStorm as exc:
        exc.reasons = () if watch is None else watch.reasons()  # what kept it compiling
        raise
    host_cpu = cpu_usage(cpu_start[0] if cpu_start else None, read_cpu_times())
    noise = (noiseprobe.finish(noise_start[0], gpu_uuid=noiseprobe.gpu_uuid(device))
             if noise_start else None)
    return Timed(measurement=m, host_cpu=host_cpu, noise=noise,
                 compile_grace_used=sum(compiled_for), shapes=step.shapes.facts(),
                 recompiles=None if watch is None else watch.read())


def worth_diagnosing(request: TrialRequest, timed: Timed, progress: Progress,
                     rank: Rank | None) -> bool:
    """Whether to diagnose: asked for, not a DDP rank (its steps would have to run on every
    rank), fast enough (`diagnose_from`), and never near the time limit (a trial killed in its
    diagnosis would lose its measurement)."""
    left = time_left(request, progress)
    in_time = left is None or left + timed.compile_grace_used >= DIAGNOSIS_RESERVE
    return (request.diagnose and rank is None and in_time
            and timed.measurement.throughput >= (request.diagnose_from or 0.0))


def diagnosed(step: TrainStep, timed: Timed, prefetch_batches: int) -> Diagnosed:
    """The bottleneck diagnosis; a failure here is noted, never turns an ok trial into an error."""
    from autotune.trial.diagnose import diagnose

    m = timed.measurement
    busy = timed.host_cpu.busy_fraction if timed.host_cpu is not None else None
    try:
        d = diagnose(step, throughput=m.throughput, data_wait_fraction=m.data_wait_fraction,
                     prefetch_batches=prefetch_batches, cpu_busy_fraction=busy,
                     step_seconds=m.step_seconds)
    except Exception as exc:  # recorded with its traceback in the log
        traceback.print_exc()
        return Diagnosed(error=one_line(exc))
    return Diagnosed(diagnosis=d)


TORCH_BOILERPLATE = "Set TORCHDYNAMO_VERBOSE=1"
"""The line torch.compile's errors end with (how to get its internal stack): not the error."""


def one_line(exc: BaseException) -> str:
    """Type and message on one line. A multi-line message keeps its last line too: a DataLoader
    worker's exception arrives as "Caught ValueError in DataLoader worker process 0." with the
    original error ("ValueError: bad sample 3") on the last line."""
    lines = [line.strip() for line in str(exc).strip().splitlines()
             if line.strip() and not line.strip().startswith(TORCH_BOILERPLATE)]
    text = lines[0] if lines else ""
    if len(lines) > 1:
        text += f" ... {lines[-1]}"
    return f"{type(exc).__name__}: {text}"[:300]
