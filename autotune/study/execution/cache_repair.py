"""Repair the shared compile cache after a trial was killed while it wrote to it.

Inductor builds a CPU graph's C++ kernels with the system compiler straight into the cache
(`<cache>/<xx>/<key>.main.so`), and builds only when that file does not exist. A trial killed
while the compiler wrote (a timeout, a pruned trial, Ctrl-C) leaves the library cut short, and
every later compile of the same graph loads it and fails: a search interrupted during a bf16
compile on a 2-CPU VM left a 0-byte `.so`, and on resuming, that config's trial failed with
"ImportError: ...main.so: file too short", recorded as the config's own error (2026-11-28).
Triton's kernels and Inductor's Python and FX-graph entries are written to a temporary file
and renamed, so they are whole or absent.

`repair` deletes the cache's ELF files (`.so`, `.o`) that end before their own section
table ends (or are empty, or not ELF at all), each under the lock Inductor takes to build it
(`<cache>/locks/<key>.lock`), so a build in progress in a parallel trial is left alone. The
next compile builds them again.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import struct
import time
from collections.abc import Iterator
from pathlib import Path

__all__ = ["cut_short", "repair"]

_SUFFIXES = (".so", ".o")
_LOCK_WAIT_SECONDS = 2.0
"""How long to wait for a build's lock before leaving its file to the builder."""


def cut_short(path: Path) -> bool:
    """Whether the ELF file `path` is incomplete: empty, not ELF, or shorter than the end of
    its section header table (which the linker writes last, at the end)."""
    try:
        size = path.stat().st_size
        with path.open("rb") as f:
            head = f.read(64)
    except OSError:
        return False  # gone, or unreadable: nothing to repair here
    if size == 0 or len(head) < 52 or head[:4] != b"\x7fELF":
        return True
    order = "<" if head[5] == 1 else ">"
    if head[4] == 2:  # 64-bit: e_shoff at 0x28, e_shentsize and e_shnum at 0x3A
        if len(head) < 64:
            return True
        (shoff,) = struct.unpack_from(order + "Q", head, 0x28)
        entsize, count = struct.unpack_from(order + "HH", head, 0x3A)
    else:  # 32-bit: e_shoff at 0x20, e_shentsize and e_shnum at 0x2E
        (shoff,) = struct.unpack_from(order + "I", head, 0x20)
        entsize, count = struct.unpack_from(order + "HH", head, 0x2E)
    return shoff > 0 and size < shoff + entsize * count


def repair(cache_dir: Path | None) -> list[Path]:
    """Delete the incomplete builds under `cache_dir` (see the module's doc); returns them."""
    if cache_dir is None or not cache_dir.is_dir():
        return []
    removed = []
    for path in sorted(p for suffix in _SUFFIXES for p in cache_dir.rglob(f"*{suffix}")):
        if not cut_short(path):
            continue
        with _build_lock(cache_dir, path.name.split(".", 1)[0]) as held:
            if held and cut_short(path):  # a builder may have finished it meanwhile
                path.unlink(missing_ok=True)
                removed.append(path)
    return removed


@contextlib.contextmanager
def _build_lock(cache_dir: Path, key: str) -> Iterator[bool]:
    """Inductor's build lock of `key` (an flock on `<cache>/locks/<key>.lock`, as its FileLock
    takes it), held for the block when it could be taken within _LOCK_WAIT_SECONDS; yields
    whether it was. No lock file: no build ever took it, nothing to wait for."""
    try:
        fd = os.open(cache_dir / "locks" / f"{key}.lock", os.O_RDWR)
    except OSError:
        yield True
        return
    try:
        deadline = time.monotonic() + _LOCK_WAIT_SECONDS
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError:
                if time.monotonic() > deadline:
                    yield False
                    return
                time.sleep(0.05)
        yield True
    finally:
        os.close(fd)  # closing it releases the flock
