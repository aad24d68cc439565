"""Hold the host heap's thresholds fixed in a measured process on a CPU device.

glibc reads `MALLOC_MMAP_THRESHOLD_` and `MALLOC_TRIM_THRESHOLD_` only when a process starts,
and a trial forked from the fork server started long before. `mallopt(3)` sets the same two
thresholds in a running process and stops glibc from moving them: a forked trial, a fresh
confirmation run and a production process started with best.yaml's environment then keep the
same heap (see `autotune.contract.allocator.HEAP_ENV`).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os

from autotune.contract.allocator import HEAP_ENV, HEAP_MMAP_THRESHOLD, HEAP_TRIM_THRESHOLD

__all__ = ["hold_host_heap"]

# mallopt(3) parameter numbers (glibc's malloc.h).
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3


def hold_host_heap() -> bool:
    """Set the heap thresholds in this process (forked loader workers inherit them) and in its
    environment (workers started by spawn or forkserver read it, as production's do under
    `autotune apply`). False where the C library has no `mallopt` (not glibc): there the
    thresholds stay the library's own, in search and production alike."""
    os.environ.update(HEAP_ENV)
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return (mallopt(M_MMAP_THRESHOLD, HEAP_MMAP_THRESHOLD) == 1
            and mallopt(M_TRIM_THRESHOLD, HEAP_TRIM_THRESHOLD) == 1)
