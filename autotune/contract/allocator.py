"""Allocator settings that travel as environment variables.

The CUDA caching allocator's `expandable_segments` and `max_split_size_mb`: the allocator reads
its configuration once, when CUDA starts in a process, so these settings travel as an
environment variable set by the parent before the trial process starts (and by `autotune apply`
before the user's training process starts). Setting it later does nothing.

The host heap's thresholds (`HEAP_ENV`, for a CPU device): glibc's malloc gives freed memory
above its thresholds back to the kernel, and an eager CPU step then faults the same pages in
again on every step. Its thresholds move with what a process freed before (importing
`torch._inductor` raises them), so a trial forked from the fork server and a fresh process read
the same step up to 1.84x apart (benchmarks/fork_vs_fresh.py). Every measured process on a CPU
device holds them fixed (`autotune.trial.heap`), and best.yaml hands the same to production.
"""

from __future__ import annotations

__all__ = ["ALLOC_ENV", "HEAP_ENV", "OTHER_ALLOC_ENVS", "alloc_conf",
           "host_heap_env"]

ALLOC_ENV = "PYTORCH_CUDA_ALLOC_CONF"
# Newer PyTorch also reads these; a stale value in the user's shell must not override the trial's.
OTHER_ALLOC_ENVS = ("PYTORCH_ALLOC_CONF", "PYTORCH_HIP_ALLOC_CONF")

HEAP_MMAP_THRESHOLD = 32 << 20
"""Allocations below this come from the heap (glibc's largest allowed on 64-bit: 32 MiB)."""
HEAP_TRIM_THRESHOLD = 256 << 20
"""Free memory at the heap's top kept for reuse up to this, per process (a loader's workers
each keep their own)."""
HEAP_ENV = {"MALLOC_MMAP_THRESHOLD_": str(HEAP_MMAP_THRESHOLD),
            "MALLOC_TRIM_THRESHOLD_": str(HEAP_TRIM_THRESHOLD)}
"""glibc's tunables for the two thresholds, read when a process starts (mallopt(3))."""


def host_heap_env(device: str | None) -> dict[str, str]:
    """The heap thresholds a process on `device` was measured with ({} but on a CPU device)."""
    return dict(HEAP_ENV) if device == "cpu" else {}


def alloc_conf(*, expandable_segments: bool, max_split_size_mb: int | None) -> str:
    """The allocator's option string, e.g. "expandable_segments:True,max_split_size_mb:512"."""
    options = []
    if expandable_segments:
        options.append("expandable_segments:True")
    if max_split_size_mb is not None:
        options.append(f"max_split_size_mb:{max_split_size_mb}")
    return ",".join(options)
