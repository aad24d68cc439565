"""The phases a trial process goes through, and how to say where one was stuck.

The trial streams each phase as it enters it (`events.jsonl`, with a wall-clock time) and
reports the seconds each took; the parent names the phase a trial was killed in, and for how
long it had been there ("no batch from the DataLoader after 55 s").
"""

from __future__ import annotations

import enum

__all__ = ["MEASURED", "PHASES", "Phase", "stalled"]


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

MEASURED = "measured.json"
"""The trial's result as its windows ended, written in its folder before it diagnoses: a trial
killed at its limit while diagnosing keeps its measurement (the runner reads this file)."""


SLOW_WARMUP = 10
"""Fewer steps than this after the first in a warm-up the limit cut: the steps are slow, not
unsettled (a GRU on a loaded 2-CPU VM: a 27-s first step, then 4 and 13 s)."""


STUCK_STEP = 10.0
"""Seconds of a warm-up step still running past which a cut warm-up is said to be stuck in it
(and three times the slowest step so far), not slow."""


def stalled(phase: str, seconds: float, *, compiling: bool = False, stepped: bool = False,
            windows: int = 0, first_step: float | None = None,
            later_steps: tuple[int, float] | None = None, before: float | None = None) -> str:
    """What a trial killed in `phase` after `seconds` there was doing, in words.

    `compiling`: the config compiles; `stepped`: a warm-up step had finished (`first_step`:
    its seconds); `windows`: timed windows so far; `later_steps`: the warm-up steps after the
    first that compiled nothing, and their seconds (None: not known, or they recompiled);
    `before`: the trial's seconds before this phase, said of a trial cut while measuring (a
    held-out user read "still measuring after 1 s" of a trial that had warmed up for 27).
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
        if stepped and later_steps is not None and later_steps[0] < SLOW_WARMUP:
            return _slow_warmup(seconds, first_step, *later_steps)
        if stepped:
            return f"still warming up after {s} (step times had not settled)"
        if compiling:
            return f"still compiling after {s} (the first step had not finished)"
        return f"the first step had not finished after {s}"
    if phase == Phase.WINDOWS:
        ahead = f", {before:.0f} s starting and warming up before" if before else ""
        return f"still measuring after {s} ({windows} timed window(s)){ahead}"
    if phase == Phase.DIAGNOSIS:
        return f"still diagnosing (loader alone, model alone) after {s}"
    raise ValueError(f"unknown trial phase {phase=}")


def _slow_warmup(seconds: float, first: float | None, steps: int, spent: float) -> str:
    """A warm-up cut after a few slow steps (`steps` after the first, `spent` seconds): what
    they took, and what makes room; or, when most of the time went to a step still running,
    that it had not finished."""
    s = f"{seconds:.0f} s"
    took = "" if first is None else f", the first {first:.0f} s"
    if steps:
        took += f", then {spent / steps:.1f} s each"
    running = seconds - (first or 0.0) - spent
    if running > max(STUCK_STEP, 3 * max(first or 0.0, spent / steps if steps else 0.0)):
        return (f"still warming up after {s}: {1 + steps} step(s) done{took}, and the next had "
                f"not finished after {running:.0f} s (a stuck DataLoader worker, or a step far "
                "slower than the others)")
    return (f"still warming up after {s}: {1 + steps} step(s){took}. Steps this slow need a "
            "longer --trial-timeout (or --timeout) to settle, or a smaller batch")
