"""What the parent asks of a trial process: the request and the measurement settings."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from autotune.contract.config import TrainConfig

__all__ = ["CUDAGRAPH_MODES", "LAUNCH_ENV", "SPARE_ENV", "MeasureSettings", "TrialRequest", "compile_cache_env",
           "known_incompatible"]

LAUNCH_ENV = "AUTOTUNE_LAUNCH_TIME"
"""Set in a trial process: the wall-clock time (`time.time()`) the parent launched it."""

SPARE_ENV = "AUTOTUNE_SPARE_PID"
"""Set in a confirmation run: the pid of the spare process making its start-up for the next run
meanwhile (`study.spare`). The run stops it when its timed windows start, so nothing of it runs
while this one measures; the parent lets it go on once the run has ended."""

# Modes whose compiled graphs are replayed as CUDA graphs: their outputs live in static buffers
# that the next replay overwrites, so each iteration must be marked (torch.compiler docs).
CUDAGRAPH_MODES = ("reduce-overhead", "max-autotune")


@dataclasses.dataclass(frozen=True, kw_only=True)
class MeasureSettings:
    min_warmup_steps: int = 3
    """Steps always discarded, whatever their times say."""
    max_warmup_steps: int = 200
    """Warm-up gives up waiting for step times to settle after this many steps."""
    settle_ratio: float = 1.25
    """Compile is done when the last two warm-up steps' compute times differ by less than this."""
    prefetch_batches: int = 0
    """Batches the loader holds ahead (workers x prefetch_factor): warm-up consumes at least this
    many after compile, so timing starts with the workers running at their steady rate."""
    window_seconds: float = 1.0
    """Target length of one timed window."""
    min_window_steps: int = 3
    """Fewest steps in a window; also at least 3 rounds of all workers (design rule)."""
    num_workers: int = 0
    grad_accum: int = 1
    epoch_steps: int = 0
    """Optimizer steps after which the loader's pattern repeats: a whole number of its epochs
    (0: unknown, or no epoch). Windows of a short epoch span whole ones (`measure`)."""
    min_windows: int = 3
    """Windows always timed, even past the budget (each is capped at 2 x window_seconds)."""
    max_windows: int = 30
    agree: int = 3
    """Windows the reported spread is taken over (the last this many)."""
    tolerance: float = 0.02
    """Measuring stops (converged) once the median's 95% confidence interval is within
    +-this fraction of it."""
    budget_seconds: float = 30.0
    """Time for the timed windows; measuring stops here even if not converged."""

    def __post_init__(self) -> None:
        if self.min_windows < 1 or self.agree < 2:
            raise ValueError(f"need min_windows >= 1 and agree >= 2, got {self.min_windows=}, {self.agree=}")
        if not 0 < self.tolerance < 1:
            raise ValueError(f"tolerance must be in (0, 1), got {self.tolerance=}")
        if self.window_seconds <= 0 or self.budget_seconds <= 0:
            raise ValueError(f"times must be positive, got {self.window_seconds=}, {self.budget_seconds=}")
        if self.epoch_steps < 0:
            raise ValueError(f"epoch_steps must be 0 (unknown) or more, got {self.epoch_steps=}")



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
    diagnose_from: float | None = None
    """Diagnose only when the measured throughput reaches this (a fraction of the best so far):
    the search follows the best trial's diagnosis, and a slower trial's costs seconds."""
    time_limit: float | None = None
    """Seconds the parent lets the trial run, from its start (None: no limit): the diagnosis is
    skipped when too little is left, so that a measured trial is not killed in it."""
    deadline: float | None = None
    """When the parent kills the trial, as `time.time()` (None: from `time_limit` alone): set
    by the runner when its clock starts, before a spare's or the fork server's start-up that a
    trial's own clock does not see."""
    compile_grace: float = 0.0
    """Seconds past `deadline` the parent allows a trial for compiling: its limit counts compile
    apart from measurement. While the first step runs the parent waits up to this much longer;
    after it, the first step's seconds (at most this) are added to the deadline. 0: none."""
    check_env: bool = True
    """Verify the allocator environment reached this process (off for the in-process twin)."""
    save_compile_artifacts: bool = False
    """After measuring a compiled config, save its compiled artifacts beside the result, for
    production to load (`TunedConfig.load_compile_artifacts`)."""
    nproc_per_node: int = 1
    """Ranks of one DDP trial (`torch.distributed.run --nproc-per-node`); 1: a plain process."""
    collective_timeout: float = 60.0
    """Seconds a DDP rank waits in a collective for the others before it raises: a stuck rank
    surfaces as an error in its peers instead of a silent wait."""

    def __post_init__(self) -> None:
        if self.nproc_per_node < 1 or self.collective_timeout <= 0:
            raise ValueError(f"need nproc_per_node >= 1 and a positive collective_timeout, got "
                             f"{self.nproc_per_node=}, {self.collective_timeout=}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "adapter": self.adapter,
            "config": self.config.to_dict(),
            "device": self.device,
            "measure": dataclasses.asdict(self.measure),
            "number": self.number,
            "diagnose": self.diagnose,
            "diagnose_from": self.diagnose_from,
            "time_limit": self.time_limit,
            "deadline": self.deadline,
            "compile_grace": self.compile_grace,
            "check_env": self.check_env,
            "save_compile_artifacts": self.save_compile_artifacts,
            "nproc_per_node": self.nproc_per_node,
            "collective_timeout": self.collective_timeout,
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
            diagnose_from=data.get("diagnose_from"),
            time_limit=data.get("time_limit"),
            deadline=data.get("deadline"),
            compile_grace=data.get("compile_grace", 0.0),
            check_env=data["check_env"],
            save_compile_artifacts=data.get("save_compile_artifacts", False),
            nproc_per_node=data.get("nproc_per_node", 1),
            collective_timeout=data.get("collective_timeout", 60.0),
        )


def known_incompatible(config: TrainConfig, device_type: str) -> str | None:
    """Why `config` cannot run on `device_type`, for combinations known to fail, else None.

    CUDA graphs with gradient accumulation: the first micro-batch's gradients alias the graph's
    static output buffers, which the next replay overwrites; PyTorch stops with "accessing tensor
    output of CUDAGraphs that has been overwritten by a subsequent run" (seen on an H200 with
    torch 2.11 for GPT with reduce-overhead at accumulation 16 and ResNet at accumulation 2).
    """
    if device_type == "cuda" and config.compile in CUDAGRAPH_MODES and config.grad_accum > 1:
        return (f"compile={config.compile} replays CUDA graphs, which PyTorch cannot combine with "
                f"grad_accum={config.grad_accum} (graph outputs are overwritten between micro-batches)")
    return None


def compile_cache_env(cache_dir: Path) -> dict[str, str]:
    """Environment that makes every trial of a study share one persistent compile cache.

    Inductor's FX-graph cache and the AOTAutograd cache live under `TORCHINDUCTOR_CACHE_DIR`
    (PyTorch's "Compile Time Caching" recipe): a graph compiled by one trial costs the next
    trial seconds instead of a full compile. Triton's kernel cache goes beside them.
    """
    return {
        "TORCHINDUCTOR_CACHE_DIR": str(cache_dir),
        "TORCHINDUCTOR_FX_GRAPH_CACHE": "1",
        "TORCHINDUCTOR_AUTOGRAD_CACHE": "1",
        "TRITON_CACHE_DIR": str(cache_dir / "triton"),
    }
