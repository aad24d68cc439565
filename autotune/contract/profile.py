"""What `autotune profile` asks of its child process and what the child reports: the profiler's
schedule, the request, and the breakdown of one profiled step (`breakdown.json`)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from autotune.contract.config import TrainConfig
from autotune.contract.files import atomic_write_text
from autotune.contract.request import TrialRequest
from autotune.contract.result import Diagnosis

__all__ = ["Breakdown", "Op", "ProfileRequest", "ProfileSettings", "Region", "read_diagnosis"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class ProfileSettings:
    """`torch.profiler.schedule` in steps, after the step has been warmed up and timed."""

    wait: int = 1
    """Steps run with the profiler idle (its set-up settles)."""
    warmup: int = 2
    """Steps the profiler traces and throws away (its own start-up costs land there)."""
    active: int = 5
    """Steps traced and read: the trace and the breakdown are of these."""
    tensorboard: bool = False
    """Also write `torch.profiler.tensorboard_trace_handler`'s output under `tensorboard/`."""
    memory_snapshot: bool = True
    """On CUDA, record the allocator's history over the wait and warm-up steps (the traced
    steps when there are none) and dump it as `memory-snapshot.pickle` (PyTorch's memory viz
    reads it)."""

    def __post_init__(self) -> None:
        if self.wait < 0 or self.warmup < 0 or self.active < 1:
            raise ValueError(f"need wait >= 0, warmup >= 0 and active >= 1, got {self.wait=}, "
                             f"{self.warmup=}, {self.active=}")


@dataclasses.dataclass(frozen=True, kw_only=True)
class ProfileRequest:
    """Everything the profile process needs; written by the parent as `request.json`."""

    trial: TrialRequest
    """The adapter, config and device; its `measure` times the step before it is profiled
    (which also warms it up), and its `diagnose` says whether to diagnose it afterwards."""
    settings: ProfileSettings = ProfileSettings()
    diagnosis: Diagnosis | None = None
    """The diagnosis best.yaml recorded for this config: reported as is, not measured again."""

    def to_dict(self) -> dict[str, Any]:
        return {"trial": self.trial.to_dict(), "settings": dataclasses.asdict(self.settings),
                "diagnosis": _diagnosis_dict(self.diagnosis)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ProfileRequest:
        return cls(trial=TrialRequest.from_dict(data["trial"]),
                   settings=ProfileSettings(**data["settings"]),
                   diagnosis=read_diagnosis(data.get("diagnosis")))


@dataclasses.dataclass(frozen=True, kw_only=True)
class Region:
    """One part of the step, averaged over the profiled steps."""

    name: str
    """One of `trial.compose.REGIONS`, or "other" (the step's time in none of them)."""
    host_seconds: float
    """Wall time per step the training thread spent in it."""
    host_share: float
    """`host_seconds` over the step time; the regions' shares sum to 1."""
    gpu_seconds: float | None = None
    """Kernel time per step launched from it (CUDA only; kernels run after their launch)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Op:
    """An operator (CPU) or a kernel (CUDA) by its self time, averaged over the profiled steps."""

    name: str
    kind: str
    """"cpu" (an operator on the host) or "cuda" (a GPU kernel)."""
    self_seconds: float
    """Self time per step: the time in it, less the time in what it called."""
    calls: float
    """Calls per step."""
    share: float
    """`self_seconds` over the step time."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Breakdown:
    """Where one profiled step's time goes (`breakdown.json`)."""

    adapter: str
    config: TrainConfig
    device: str
    """The device in words (the GPU's name, else the CPU's)."""
    unit: str
    steps: int
    """Steps profiled (the schedule's active steps)."""
    step_seconds: float
    """Mean wall time of a profiled step (the profiler's own cost included)."""
    regions: tuple[Region, ...]
    top_ops: tuple[Op, ...]
    """The ten slowest operators by self time, and on CUDA the ten slowest kernels."""
    throughput: float | None = None
    """Units/s measured before profiling, with no profiler running."""
    measured_step_seconds: float | None = None
    """The step time of that measurement: what the profiler adds is the difference."""
    data_wait_fraction: float | None = None
    """Share of that measurement's time spent waiting for the loader."""
    gpu_busy_fraction: float | None = None
    """Share of the profiled steps' wall time with a kernel running (None: not CUDA)."""
    gpu_idle_seconds: float | None = None
    """Time per step with no kernel running between the first and last kernel's start and end."""
    peak_allocated_mb: float | None = None
    peak_reserved_mb: float | None = None
    peak_rss_mb: float | None = None
    """Peak resident host memory of the profile process."""
    diagnosis: Diagnosis | None = None
    diagnosis_from: str = ""
    """"best.yaml" (recorded by the search), "this run" (measured after profiling) or ""."""
    diagnosis_error: str = ""
    files: tuple[str, ...] = ()
    """What the profile wrote beside breakdown.json (trace.json, ...)."""

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["config"] = self.config.to_dict()
        data["diagnosis"] = _diagnosis_dict(self.diagnosis)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Breakdown:
        return cls(**{
            **data,
            "config": TrainConfig(**data["config"]),
            "regions": tuple(Region(**r) for r in data["regions"]),
            "top_ops": tuple(Op(**o) for o in data["top_ops"]),
            "diagnosis": read_diagnosis(data.get("diagnosis")),
            "files": tuple(data.get("files", ())),
        })

    def save(self, path: Path) -> None:
        atomic_write_text(path, json.dumps(self.to_dict(), indent=2) + "\n")

    @classmethod
    def load(cls, path: Path) -> Breakdown:
        return cls.from_dict(json.loads(path.read_text()))


def _diagnosis_dict(d: Diagnosis | None) -> dict[str, Any] | None:
    return None if d is None else {**dataclasses.asdict(d), "verdict": d.verdict.value}


def read_diagnosis(data: object) -> Diagnosis | None:
    """A diagnosis from JSON or a best.yaml block (keys it does not know are left out); None
    for none, or for a block that is not one (hand-edited, or from another version)."""
    if not isinstance(data, dict) or not data:
        return None
    known = {f.name for f in dataclasses.fields(Diagnosis)}
    try:
        return Diagnosis(**{k: v for k, v in data.items() if k in known})
    except (TypeError, ValueError):
        return None
