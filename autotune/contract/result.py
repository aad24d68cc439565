"""What one trial produced: an explicit outcome status, its measurements, and typed facts
(where it ran, what limits it, how busy the CPUs were) instead of an untyped bag."""

from __future__ import annotations

import dataclasses
import enum
import json
from pathlib import Path
from typing import Any

from autotune.contract.files import atomic_write_text
from autotune.contract.noise import Noise

__all__ = ["NO_BATCH", "NOT_RUN", "RECOMPILING", "Diagnosis", "Fingerprint", "HostCpu", "Status",
           "TrialResult", "Verdict"]

NOT_RUN = "not run"
"""How the reason of a result that did not run begins (`TrialResult.ran`)."""

NO_BATCH = "the loader yielded no batch"
"""In the reason of an error whose loader gave no full batch (`trial.compose`)."""

RECOMPILING = "compiling does not settle"
"""How the reason of an error begins when a compiled step kept recompiling in warm-up
(`trial.warmup.RecompileStorm`): every compile mode would trace the same shapes."""


class Status(str, enum.Enum):
    OK = "ok"
    OOM = "oom"
    """Ran out of memory: the config does not fit."""
    NAN = "nan"
    """The loss was not finite: broken, not fast."""
    ERROR = "error"
    """An exception; `reason` holds its type and message, the log its traceback."""
    TIMEOUT = "timeout"
    """Killed at the trial's time limit (compile counts)."""
    CRASHED = "crashed"
    """The trial process died without a result (a signal, or exit without reporting)."""
    INTERRUPTED = "interrupted"
    """Stopped by the user (Ctrl-C, SIGTERM): says nothing about the config."""
    PRUNED = "pruned"
    """Stopped after its first windows: clearly slower than the best so far. `throughput`
    holds the partial rate (told to Optuna as PRUNED with its intermediate values)."""

    @property
    def says_something(self) -> bool:
        """Whether the outcome is a property of the config (the sampler should learn from it)."""
        return self is not Status.INTERRUPTED


class Verdict(str, enum.Enum):
    """What limits a step's rate."""

    INPUT = "input-bound"
    """The DataLoader delivers less than the model consumes."""
    COMPUTE = "compute-bound"
    """The model's own kernels are the limit."""
    OVERHEAD = "overhead-bound"
    """Launches and host work: the GPU idles between many small kernels."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Fingerprint:
    """Where a measurement was taken: numbers mean little without it."""

    date: str | None = None
    hostname: str | None = None
    python: str | None = None
    torch: str | None = None
    cuda: str | None = None
    cudnn: int | None = None
    cpu_count: int | None = None
    cpus_available: int | None = None
    """CPUs this process may run on (its affinity mask)."""
    cpu_model: str | None = None
    cgroup_cpu_limit: float | None = None
    """CPUs allowed by the cgroup; None when unlimited."""
    gpu: str | None = None
    gpu_memory_gb: float | None = None
    gpu_capability: str | None = None
    gpu_multiprocessors: int | None = None
    driver: str | None = None
    torch_threads: int | None = None
    """PyTorch's intra-op threads before the trial set its own: what `intra_op_threads` null runs."""

    @property
    def device(self) -> str:
        """The device in words: the GPU's name, else the CPU's."""
        return self.gpu or f"cpu: {self.cpu_model}"


@dataclasses.dataclass(frozen=True, kw_only=True)
class HostCpu:
    """How busy the machine's CPUs were while the trial was timed (`/proc/stat`)."""

    busy_fraction: float
    """Share of all CPU time spent working."""
    steal_fraction: float
    """Share the hypervisor ran someone else while this VM's CPUs were ready."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Diagnosis:
    verdict: Verdict
    suggestion: str
    throughput: float
    """The trial's measured rate (units/s), loader and model together."""
    loader_rate: float | None
    """Units/s the DataLoader delivers alone."""
    compute_rate: float | None
    """Units/s the step runs with its batch already on the device."""
    data_wait_fraction: float
    gpu_busy_fraction: float | None
    """Share of a compute step's wall time with a kernel running (CUDA only)."""
    cpu_busy_fraction: float | None = None
    """Share of all CPU time spent working during the timed windows (Linux only)."""
    unreliable: str = ""
    """The rates that contradict the end-to-end rate, in words (a model alone slower than
    model and loader together; a loader slower than the step that never waited for it): they
    were re-measured once, still disagreed, and are not used for the verdict. "" when the
    rates agree."""
    step_ops: int | None = None
    """ATen calls of one eager forward and backward (`trial.opcount`): with `distinct_ops`, the
    search's prior on a first compile's seconds. None for a compiled or DDP step."""
    distinct_ops: int | None = None
    """Of those, the distinct ones (operator, argument shapes and dtypes)."""

    def __post_init__(self) -> None:
        if not isinstance(self.verdict, Verdict):
            object.__setattr__(self, "verdict", Verdict(self.verdict))


# Nested typed fields, rebuilt from JSON by `TrialResult.from_dict`.
_NESTED: dict[str, type] = {"fingerprint": Fingerprint, "diagnosis": Diagnosis,
                            "host_cpu": HostCpu, "noise": Noise}


@dataclasses.dataclass(frozen=True, kw_only=True)
class TrialResult:
    status: Status
    reason: str = ""
    """One line: why the trial ended as it did ("" when ok)."""
    ran: bool = True
    """False for a config the search refused without a process: known to fail, implied by a
    measured trial, too slow to start in what was left, or never started (`reason`, for
    humans, then begins with "not run")."""
    contract_error: str = ""
    """The part of the adapter the failure came from ("loss(model, batch)", "dataset()", "the
    loader (dataset, collate_fn, sampler)", ...), "" when it did not come from the adapter. In
    the baseline trial (PyTorch's defaults) no configuration can fix such a failure, and the
    search stops; in another trial it may still be that config's (a worker-only error)."""
    throughput: float | None = None
    """Median units/s over the timed windows."""
    unit: str = "samples"
    spread: float | None = None
    """(max - min) / median of the last timed windows."""
    uncertainty: float | None = None
    """Half-width of the median's 95% confidence interval, relative to the median."""
    step_seconds: float | None = None
    compile_seconds: float | None = None
    warmup_seconds: float | None = None
    warmup_steps: int | None = None
    settled: bool | None = None
    """Whether warm-up saw step times settle (False: it hit its step limit)."""
    data_wait_fraction: float | None = None
    windows: int | None = None
    window_throughputs: tuple[float, ...] = ()
    """Each timed window's rate, in order."""
    converged: bool | None = None
    rising_windows: int | None = None
    """Early timed windows dropped because the rate was still climbing when the measuring
    budget or the window count's cap ended them (`trial.trend`): a warm-up that went on."""
    new_shape_windows: int | None = None
    """Timed windows set apart and timed again, or counted without the known extra seconds,
    because a batch shape ran there first: a one-off cost a long run pays once per shape."""
    peak_allocated_mb: float | None = None  # peak device memory in live tensors (CUDA only)
    peak_reserved_mb: float | None = None  # ... held by PyTorch's caching allocator (CUDA only)
    peak_rss_mb: float | None = None
    """Peak resident host memory of the trial process (its DataLoader workers not counted)."""
    duration_seconds: float | None = None
    """Wall time of the whole trial process, start-up and compile included."""
    phases: dict[str, float] = dataclasses.field(default_factory=dict)
    """Seconds spent in each phase of the trial process (start, compose, warmup, ...)."""
    blocks_checkpointed: int | None = None
    conv_weights: int | None = None
    """The model's 4-D weights (2-D convolutions), where `memory_format` acts; None where the
    model was not built."""
    optimizer_impls: tuple[str, ...] | None = None
    """The `optimizer_impl` values the adapter's optimizer takes (its class's flags), where it
    was built: the others leave it as built, so the search holds them back."""
    compile_cache_hits: int | None = None
    """Graphs its compile found in the persistent cache (FX graph, AOTAutograd); None: none."""
    compile_cache_misses: int | None = None
    dynamic_shapes: bool | None = None
    """Whether the model was compiled with dynamic shapes from the start (the first batches'
    shapes differed); None without compile."""
    compiled_graphs: int | None = None
    """Graphs Dynamo compiled in the first step; 0: the compile compiled nothing, the model ran
    eagerly (Dynamo skips `nn.GRU`/`nn.LSTM` unless `allow_rnn`). None without compile."""
    recompiles: int | None = None
    """Graphs Dynamo compiled after the first step (new shapes, new paths), by its own counters;
    None without compile or when the counters could not be read."""
    recompile_seconds: float | None = None
    """Seconds compiling after the first step (Dynamo's and Inductor's timers): compile time
    inside warm-up and the windows, apart from `compile_seconds`' first step."""
    recompile_reason: str = ""
    """The guards whose failure compiled again after the first step, joined by
    `contract.recompiles.SEPARATOR`, the latest last (`divisor` reads the padding from them)."""
    shapes_vary: bool | None = None
    """Whether the batches' tensor shapes differed from batch to batch (None: not measured)."""
    shape_range: str | None = None
    """Each varying dimension's smallest and largest size ("input_ids[1] 512-1024")."""
    shape_count: int | None = None
    """Distinct batch shapes seen: under `reduce-overhead`, one CUDA graph each."""
    shape_count_padded: int | None = None
    """Distinct batch shapes left of those seen once each varying length is padded to its
    `contract.shapes.pad_multiple` (None: no length varied, or not measured)."""
    epoch_batches: int | None = None
    """Batches in one epoch of the trial's loader (None: it has no length)."""
    batch_items: float | None = None
    """Items (`Adapter.items`) per micro-batch, the mean over the batches the trial pulled: what
    its batch_size bought. A loader that makes its own batches pulls as many at any batch_size
    (`study.policy.batching`)."""
    batch_numel: float | None = None
    """Tensor elements per micro-batch, the mean over the batches pulled (None: none held a
    tensor, such as a batch of strings tokenized in `loss`)."""
    batch_device: str | None = None
    """The device type ("cuda") of a batch the loader handed over already there, None for
    host memory: DataLoader workers and pinned memory cannot serve such a dataset
    (`study.policy.batching.loader_on_device`)."""
    compile_artifacts: str = ""
    """Path of the compiled artifacts this run saved (`torch.compiler.save_cache_artifacts`)."""
    log: str = ""
    """Path of the trial's log (its stdout and stderr)."""
    fingerprint: Fingerprint | None = None
    diagnosis: Diagnosis | None = None
    diagnosis_error: str = ""
    """Why the diagnosis could not be made (the trial itself still counts)."""
    host_cpu: HostCpu | None = None
    noise: Noise | None = None
    """What else ran on the trial's CPUs and GPU while it was timed, and whether clocks were
    held back: the measured causes of run-to-run spread."""

    def __post_init__(self) -> None:
        if not isinstance(self.status, Status):
            object.__setattr__(self, "status", Status(self.status))
        object.__setattr__(self, "window_throughputs", tuple(self.window_throughputs))
        if self.optimizer_impls is not None:
            object.__setattr__(self, "optimizer_impls", tuple(self.optimizer_impls))
        if self.status is Status.OK and self.throughput is None:
            raise ValueError(f"an ok trial needs a throughput, got {self.throughput=}")

    @property
    def fixed_seconds(self) -> float | None:
        """What the trial cost besides compiling, warming up and timing: process start,
        imports, building the model, dataset and loader, the first batch, the diagnosis,
        handing the result back."""
        if self.duration_seconds is None or not self.phases:
            return None
        measured = self.phases.get("warmup", 0.0) + self.phases.get("windows", 0.0)
        return max(0.0, self.duration_seconds - measured)

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["status"] = self.status.value
        data["window_throughputs"] = list(self.window_throughputs)
        if self.diagnosis is not None:
            data["diagnosis"]["verdict"] = self.diagnosis.verdict.value
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrialResult:
        data = dict(data)
        legacy = data.pop("extra", None) or {}  # results written before the typed fields
        for key in ("fingerprint", "diagnosis", "host_cpu", "window_throughputs", "settled",
                    "warmup_steps", "blocks_checkpointed", "diagnosis_error"):
            if key in legacy and data.get(key) is None:
                data[key] = legacy[key]
        if "ran" not in data:  # stored before the field: the reason said it
            data["ran"] = not str(data.get("reason") or "").startswith(NOT_RUN)
        known = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        for key, kind in _NESTED.items():
            if isinstance(values.get(key), dict):
                fields = {f.name for f in dataclasses.fields(kind)}
                values[key] = kind(**{k: v for k, v in values[key].items() if k in fields})
        return cls(**values)

    def replace(self, **changes: Any) -> TrialResult:
        return dataclasses.replace(self, **changes)

    def save(self, path: Path) -> None:
        atomic_write_text(path, json.dumps(self.to_dict(), indent=2))

    @classmethod
    def load(cls, path: Path) -> TrialResult:
        return cls.from_dict(json.loads(path.read_text()))
