"""The phases a trial process goes through, and how to say where one was stuck.

The trial streams each phase as it enters it (`events.jsonl`, with a wall-clock time) and
reports the seconds each took; the parent names the phase a trial was killed in, and for how
long it had been there ("no batch from the DataLoader after 55 s").
"""

from __future__ import annotations

import enum

__all__ = ["PHASES", "Phase", "stalled"]


class Phase(str, enum.Enum):
    START = "start"
    """The process starting: the interpreter and autotune's own modules (a fork: almost 0)."""
    IMPORT = "import"
    """Importing torch, the trial code and the adapter (a fork server's child has them)."""
    DEVICE = "device"
    """Starting the device: CUDA's context (NCCL's process groups for a DDP rank), the
    machine's fingerprint."""
    MODEL = "model"
    """Building the model, moving it to the device, its optimizer, the model-side knobs."""
    DATASET = "dataset"
    """Building the dataset (unless a fork server built it) and the loader."""
    FIRST_BATCH = "first_batch"
    """Waiting for the loader's first batch: workers starting, the sampler, the first reads."""
    WARMUP = "warmup"
    """Compiling (on the first steps) and warming up until step times settle."""
    WINDOWS = "windows"
    """Measuring: the timed windows."""
    DIAGNOSIS = "diagnosis"
    """Timing the loader alone and the model alone to name the bottleneck."""


PHASES: tuple[str, ...] = tuple(p.value for p in Phase)
"""Every phase's name, in the order a trial goes through them."""


def stalled(phase: str, seconds: float, *, compiling: bool = False, stepped: bool = False,
            windows: int = 0) -> str:
    """What a trial killed in `phase` after `seconds` there was doing, in words.

    `compiling`: the config compiles; `stepped`: a warm-up step had finished; `windows`: timed
    windows so far.
    """
    s = f"{seconds:.0f} s"
    if phase == Phase.START:
        return f"the trial process was still starting after {s}"
    if phase == Phase.IMPORT:
        return f"still importing torch and the adapter after {s}"
    if phase == Phase.DEVICE:
        return f"still starting the device (CUDA, the process group) after {s}"
    if phase == Phase.MODEL:
        return f"still building the model and optimizer (adapter.model(), optimizer()) after {s}"
    if phase == Phase.DATASET:
        return f"still building the dataset and loader (adapter.dataset()) after {s}"
    if phase == Phase.FIRST_BATCH:
        return f"no batch from the DataLoader after {s}"
    if phase == Phase.WARMUP:
        if stepped:
            return f"still warming up after {s} (step times had not settled)"
        if compiling:
            return f"still compiling after {s} (the first step had not finished)"
        return f"the first step had not finished after {s}"
    if phase == Phase.WINDOWS:
        return f"still measuring after {s} ({windows} timed window(s))"
    if phase == Phase.DIAGNOSIS:
        return f"still diagnosing (loader alone, model alone) after {s}"
    raise ValueError(f"unknown trial phase {phase=}")
