"""What one trial produced: an explicit outcome status and its measurements."""

from __future__ import annotations

import dataclasses
import enum
import json
from pathlib import Path
from typing import Any

from autotune.files import atomic_write_text

__all__ = ["Status", "TrialResult"]


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

    @property
    def says_something(self) -> bool:
        """Whether the outcome is a property of the config (the sampler should learn from it)."""
        return self is not Status.INTERRUPTED


@dataclasses.dataclass(frozen=True, kw_only=True)
class TrialResult:
    status: Status
    reason: str = ""
    """One line: why the trial ended as it did ("" when ok)."""
    throughput: float | None = None
    """Median units/s over the timed windows."""
    unit: str = "samples"
    spread: float | None = None
    step_seconds: float | None = None
    compile_seconds: float | None = None
    warmup_seconds: float | None = None
    data_wait_fraction: float | None = None
    windows: int | None = None
    converged: bool | None = None
    peak_allocated_mb: float | None = None
    """Peak device memory in live tensors (CUDA only)."""
    peak_reserved_mb: float | None = None
    """Peak device memory held by PyTorch's caching allocator (CUDA only)."""
    peak_rss_mb: float | None = None
    """Peak resident host memory of the trial process (its DataLoader workers not counted)."""
    duration_seconds: float | None = None
    """Wall time of the whole trial process, start-up and compile included."""
    log: str = ""
    """Path of the trial's log (its stdout and stderr)."""
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)
    """Diagnosis and environment facts gathered in the trial process."""

    def __post_init__(self) -> None:
        if not isinstance(self.status, Status):
            object.__setattr__(self, "status", Status(self.status))
        if self.status is Status.OK and self.throughput is None:
            raise ValueError(f"an ok trial needs a throughput, got {self.throughput=}")

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["status"] = self.status.value
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrialResult:
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})

    def replace(self, **changes: Any) -> TrialResult:
        return dataclasses.replace(self, **changes)

    def save(self, path: Path) -> None:
        atomic_write_text(path, json.dumps(self.to_dict(), indent=2))

    @classmethod
    def load(cls, path: Path) -> TrialResult:
        return cls.from_dict(json.loads(path.read_text()))
