"""The host heap's thresholds: held alike in every measured process on a CPU device."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_worker import request_for

from autotune import Status, TrainConfig
from autotune.contract.allocator import HEAP_ENV
from autotune.trial import steps, worker

# Touch 20 MiB from malloc (above glibc's starting mmap threshold of 128 KiB, below the held
# 32 MiB), free it, and print how much of it the process still holds.
FREED = """
import ctypes, sys
sys.path.insert(0, {root!r})
if {hold}:
    from autotune.trial.heap import hold_host_heap
    assert hold_host_heap()
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
page = 4096
def resident():
    return int(open("/proc/self/statm").read().split()[1]) * page
size = 20 << 20
block = libc.malloc(size)
ctypes.memset(block, 1, size)
before = resident()
libc.free(block)
print((resident() - before + size) / size)
"""

ROOT = str(Path(__file__).resolve().parents[2])


def kept_after_free(hold: bool) -> float:
    # glibc's own thresholds at the start, whatever an earlier trial in this process set.
    env = {k: v for k, v in os.environ.items() if k not in HEAP_ENV}
    out = subprocess.run([sys.executable, "-c", FREED.format(root=ROOT, hold=hold)],
                         capture_output=True, text=True, check=True, env=env)
    return float(out.stdout)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_held_thresholds_keep_freed_memory_in_the_process() -> None:
    # Without them, the 20-MiB block was mapped on its own and goes back to the kernel when
    # freed (to be faulted in again on the next step); held, it stays for the next malloc.
    assert kept_after_free(hold=False) < 0.1
    assert kept_after_free(hold=True) > 0.9


def test_held_thresholds_reach_spawned_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    # A loader's workers started by spawn or forkserver read the environment, not mallopt.
    environ = {k: v for k, v in os.environ.items() if k not in HEAP_ENV}
    monkeypatch.setattr(os, "environ", environ)  # this test's own: the process's stays as it was
    from autotune.trial.heap import hold_host_heap

    hold_host_heap()
    assert {name: environ.get(name) for name in HEAP_ENV} == HEAP_ENV


def test_a_cpu_trial_holds_the_heap_thresholds(tiny_adapter: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[bool] = []
    monkeypatch.setattr(steps, "hold_host_heap", lambda: calls.append(True) or True)
    result = worker.run_trial(request_for(tiny_adapter, TrainConfig(batch_size=8), diagnose=False))
    assert result.status is Status.OK, result.reason
    assert calls == [True]
