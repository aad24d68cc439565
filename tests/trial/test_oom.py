"""The one OOM predicate, with fake OOMs on the CPU."""

from __future__ import annotations

import pytest
import torch

from autotune import is_oom_error


def _raised_from(cause: BaseException) -> BaseException:
    """An error raised `from cause`, like torch.compile's BackendCompilerFailed wrapping an OOM."""
    try:
        raise RuntimeError("backend compiler failed") from cause
    except RuntimeError as exc:
        return exc


def _raised_during(context: BaseException) -> BaseException:
    """An error raised while handling `context` (implicit chaining)."""
    try:
        try:
            raise context
        except BaseException:
            raise ValueError("cleanup failed")  # noqa: B904 -- implicit chaining is the point
    except ValueError as exc:
        return exc


def test_torch_out_of_memory_error_instance() -> None:
    exc = torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
    assert is_oom_error(exc)


def test_torch_out_of_memory_error_whatever_its_message() -> None:
    assert is_oom_error(torch.OutOfMemoryError("allocation failed"))


@pytest.mark.parametrize(
    "message",
    [
        "CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 79.11 GiB total capacity)",
        "CUDA error: out of memory",
        "CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`",
        "cuDNN error: CUDNN_STATUS_ALLOC_FAILED",
        "[enforce fail at alloc_cpu.cpp:117] data. DefaultCPUAllocator: can't allocate memory: "
        "you tried to allocate 1099511627776 bytes",
    ],
)
def test_runtime_error_with_oom_message(message: str) -> None:
    assert is_oom_error(RuntimeError(message))


def test_memory_error() -> None:
    assert is_oom_error(MemoryError())


def test_error_caused_by_an_oom() -> None:
    assert is_oom_error(_raised_from(torch.OutOfMemoryError("CUDA out of memory")))
    assert is_oom_error(_raised_from(RuntimeError("CUDA out of memory")))


def test_error_raised_while_handling_an_oom() -> None:
    exc = _raised_during(torch.OutOfMemoryError("CUDA out of memory"))
    assert exc.__context__ is not None
    assert is_oom_error(exc)


@pytest.mark.parametrize(
    "exc",
    [
        ValueError("CUDA out of memory"),  # the message alone is not enough: wrong type
        ValueError("shapes do not match"),
        RuntimeError("mat1 and mat2 shapes cannot be multiplied (4x8 and 16x2)"),
        TypeError("unsupported operand"),
        KeyboardInterrupt(),
    ],
    ids=["value-error-oom-text", "value-error", "runtime-error", "type-error", "keyboard-interrupt"],
)
def test_not_oom(exc: BaseException) -> None:
    assert not is_oom_error(exc)


def test_cause_that_is_not_oom() -> None:
    assert not is_oom_error(_raised_from(ValueError("bad input")))


def test_cyclic_cause_chain_terminates() -> None:
    a = RuntimeError("a")
    b = RuntimeError("b")
    a.__cause__ = b
    b.__cause__ = a
    assert not is_oom_error(a)
