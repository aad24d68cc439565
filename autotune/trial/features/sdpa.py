"""The attention kernel: `torch.nn.attention.sdpa_kernel` around a step's forward and backward.

"default" leaves the choice to PyTorch: the first of its priority order that can run (flash,
memory-efficient, math, cuDNN on an H100 with torch 2.11, by `torch._C._get_sdp_priority_order`
on 2026-11-27). A forced backend that cannot run the step's attention (a mask keeps flash
off on CUDA, an unsupported dtype or head size) raises; `Sdpa` turns that into one clear error
of the config, not of the adapter's loss.
"""

from __future__ import annotations

import contextlib
from types import TracebackType
from typing import Any

__all__ = ["NO_KERNEL", "Sdpa", "apply_sdpa"]

NO_KERNEL = ("No available kernel", "No viable backend")
"""What PyTorch says when no enabled backend can run (CUDA, CPU; torch 2.13)."""

_BACKENDS = {"flash": "FLASH_ATTENTION", "efficient": "EFFICIENT_ATTENTION",
             "cudnn": "CUDNN_ATTENTION", "math": "MATH"}


class Sdpa:
    """A reusable context: the backend enabled alone inside, a failure to run it named."""

    def __init__(self, backend: str) -> None:
        from torch.nn.attention import SDPBackend

        if backend not in _BACKENDS:
            raise ValueError(f"unknown sdpa_backend {backend!r}; expected default or one of "
                             f"{sorted(_BACKENDS)}")
        self.backend = backend
        self._enum = getattr(SDPBackend, _BACKENDS[backend])
        self._inner: contextlib.AbstractContextManager[Any] | None = None

    def __enter__(self) -> None:
        from torch.nn.attention import sdpa_kernel

        self._inner = sdpa_kernel(self._enum)
        self._inner.__enter__()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        inner, self._inner = self._inner, None
        if inner is not None:
            inner.__exit__(kind, exc, tb)
        if isinstance(exc, Exception) and any(s in str(exc) for s in NO_KERNEL):
            raise RuntimeError(
                f"sdpa_backend={self.backend}: this backend cannot run the step's attention "
                f"(its dtype, mask, head size or device; PyTorch: {str(exc).splitlines()[0]})"
            ) from exc


def apply_sdpa(backend: str) -> contextlib.AbstractContextManager[Any]:
    """The context to run forward and backward in: `Sdpa(backend)`, or a no-op for "default"."""
    return contextlib.nullcontext() if backend == "default" else Sdpa(backend)
