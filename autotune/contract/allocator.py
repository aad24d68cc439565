"""CUDA caching-allocator settings: `expandable_segments` and `max_split_size_mb`.

The allocator reads its configuration once, when CUDA starts in a process, so these settings
travel as an environment variable set by the parent before the trial process starts (and by
`autotune apply` before the user's training process starts). Setting it later does nothing.
"""

from __future__ import annotations

__all__ = ["ALLOC_ENV", "OTHER_ALLOC_ENVS", "alloc_conf"]

ALLOC_ENV = "PYTORCH_CUDA_ALLOC_CONF"
# Newer PyTorch also reads these; a stale value in the user's shell must not override the trial's.
OTHER_ALLOC_ENVS = ("PYTORCH_ALLOC_CONF", "PYTORCH_HIP_ALLOC_CONF")


def alloc_conf(*, expandable_segments: bool, max_split_size_mb: int | None) -> str:
    """The allocator's option string, e.g. "expandable_segments:True,max_split_size_mb:512"."""
    options = []
    if expandable_segments:
        options.append("expandable_segments:True")
    if max_split_size_mb is not None:
        options.append(f"max_split_size_mb:{max_split_size_mb}")
    return ",".join(options)
