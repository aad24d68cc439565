"""The seconds a study's first compile will likely take, before any trial of it has compiled.

Until one compile is timed, the search knows nothing of what a compile costs here, and a
compiled config started with too little time left is cut while compiling: a held-out
transformers BERT's first compile was killed at its 56-s limit, still in its first step (H100,
2026-11-27). Its eager trials do know the size of what a compile must trace: the ATen calls of
one forward and backward (`trial.opcount`, counted in the diagnosis).

Measured cold compiles on the H100 host (16 CPUs, torch 2.11, `default` and `reduce-overhead`),
against the ATen calls of one eager forward and backward and the distinct ones among them
(counted on the CPU VM; `trial.opcount`):

| workload | calls | distinct | cold compile | estimate |
|---|---|---|---|---|
| nanoGPT GPT-2 small | 1,237 | 80 | 22-30 s | 20 s |
| 48 tiny residual blocks | 1,565 | 43 | 22-29 s | 17 s |
| tabular ResMLP | 458 | 53 | 12-15 s | 13 s |
| a small audio CNN | 85 | 63 | 7-10 s | 12 s |
| transformers text classifier | 483 | 138 | 24 s | 23 s |
| a GRU cell stepped in a Python loop | 3,930 | 63 | 18-35 s | 31 s |
| transformers GPT-2, padded to fixed lengths | 2,159 | 151 | 27-41 s | 33 s |
| transformers Llama-style 110M, dynamic shapes | 2,762 | 116 | 107-126 s | 95 s |
| transformers BERT-base, dynamic shapes | 2,416 | 132 | past 54 s, in its first step | 96 s |

Dynamo traces every call (`COMPILE_SECONDS_PER_OP`); Inductor generates a kernel per distinct
one, at most (`COMPILE_SECONDS_PER_DISTINCT`): the loop's 3,930 calls compiled as fast as
GPT-2's 1,237. Shapes that vary (compiled dynamic from the start) took about three times the
static estimate (`DYNAMIC_FACTOR`). The estimate is meant low: a compile it refuses would have
been cut, one it lets through may still be. Only CUDA: compiles on a CPU generate C++ at another
rate, and no CPU compile was timed so. Once a trial of the study has compiled, its measured time
replaces this (`Objective.cold_compile`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from autotune.study.store.records import TrialRecord, measured

__all__ = ["COMPILE_SECONDS_PER_DISTINCT", "COMPILE_SECONDS_PER_OP", "COMPILE_START_SECONDS",
           "DYNAMIC_FACTOR", "Prior", "first_compile"]

COMPILE_START_SECONDS = 4.0
COMPILE_SECONDS_PER_OP = 0.005
COMPILE_SECONDS_PER_DISTINCT = 0.12
DYNAMIC_FACTOR = 3.0


@dataclasses.dataclass(frozen=True)
class Prior:
    seconds: float
    """The compile alone, estimated."""
    trial: int
    """The eager trial whose count it came from."""
    ops: int
    distinct: int
    dynamic: bool
    """Whether the batches' shapes varied (the compile is dynamic from the start)."""

    def describe(self) -> str:
        dynamic = f", x{DYNAMIC_FACTOR:g} with shapes that vary" if self.dynamic else ""
        return (f"no trial compiled here yet; trial {self.trial}'s eager step dispatched "
                f"{self.ops:,} operations, {self.distinct} distinct, at the rate of compiles "
                f"timed on an H100 host{dynamic}")


def first_compile(records: Sequence[TrialRecord], device_type: str) -> Prior | None:
    """The prior on a first compile from the largest count an eager trial's diagnosis made
    (autocast adds casts), without activation checkpointing where one ran so; None off CUDA or
    while no trial counted."""
    if device_type != "cuda":
        return None
    counts = [(r, d) for r in measured(records)
              if (d := r.result.diagnosis) is not None and d.step_ops and d.distinct_ops]
    # Checkpointing counts the forward it recomputes too, which a compile traces once.
    plain = [c for c in counts if not c[0].config.checkpoint] or counts
    counted = [(r.number, d.step_ops, d.distinct_ops) for r, d in plain]
    if not counted:
        return None
    trial, ops, distinct = max(counted, key=lambda c: COMPILE_SECONDS_PER_OP * c[1]
                               + COMPILE_SECONDS_PER_DISTINCT * c[2])
    dynamic = any(r.result.shapes_vary for r in measured(records))
    seconds = (COMPILE_START_SECONDS + COMPILE_SECONDS_PER_OP * ops
               + COMPILE_SECONDS_PER_DISTINCT * distinct) * (DYNAMIC_FACTOR if dynamic else 1.0)
    return Prior(seconds=seconds, trial=trial, ops=ops, distinct=distinct, dynamic=dynamic)
