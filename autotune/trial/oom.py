"""The one predicate that says whether an exception is an out-of-memory error."""

from __future__ import annotations

__all__ = ["is_oom_error"]

# Messages of OOMs that do not arrive as torch.OutOfMemoryError: cuBLAS/cuDNN workspace
# failures, a raw CUDA error, and the CPU allocator.
_OOM_MESSAGES = (
    "out of memory",
    "CUBLAS_STATUS_ALLOC_FAILED",
    "CUDNN_STATUS_ALLOC_FAILED",
    "can't allocate memory",
)


def is_oom_error(exc: BaseException) -> bool:
    """True for `torch.OutOfMemoryError`, for known OOM messages, and for errors caused by one.

    `torch.compile` wraps errors raised while compiling (an OOM during autotuning arrives as a
    `BackendCompilerFailed`), so the cause chain is followed too.
    """
    import torch

    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, torch.OutOfMemoryError):
            return True
        if isinstance(current, (RuntimeError, MemoryError)) and (
            isinstance(current, MemoryError)
            or any(m in str(current) for m in _OOM_MESSAGES)
        ):
            return True
        current = current.__cause__ or current.__context__
    return False
