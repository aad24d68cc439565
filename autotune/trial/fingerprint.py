"""Where a measurement was taken: GPU, driver, library versions, CPUs. Numbers mean little without it."""

from __future__ import annotations

import datetime
import functools
import os
import platform
import shutil
import subprocess
from pathlib import Path
from typing import Any

from autotune.contract.host import available_cpus
from autotune.contract.result import Fingerprint

__all__ = ["driver_version", "fingerprint"]


def fingerprint(device: Any = None) -> Fingerprint:
    """Facts about this machine and process; GPU facts only when `device` is a CUDA device."""
    import torch

    facts: dict[str, Any] = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "hostname": platform.node(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        "cpu_count": os.cpu_count(),
        "cpus_available": available_cpus(),
        "cpu_model": _cpu_model(),
        "cgroup_cpu_limit": _cgroup_cpu_limit(),
        "torch_threads": torch.get_num_threads(),
    }
    if device is not None and getattr(device, "type", device) == "cuda":
        props = torch.cuda.get_device_properties(device)
        facts.update(
            gpu=props.name,
            gpu_memory_gb=round(props.total_memory / 2**30, 1),
            gpu_capability=f"{props.major}.{props.minor}",
            gpu_multiprocessors=props.multi_processor_count,
            driver=driver_version(),
        )
    return Fingerprint(**facts)


def _cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def _cgroup_cpu_limit() -> float | None:
    """CPUs allowed by the cgroup (v2 `cpu.max`, else v1 quota/period); None when unlimited."""
    try:
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()
        return None if quota == "max" else int(quota) / int(period)
    except (OSError, ValueError):
        pass
    try:
        quota = int(Path("/sys/fs/cgroup/cpu/cpu.cfs_quota_us").read_text())
        period = int(Path("/sys/fs/cgroup/cpu/cpu.cfs_period_us").read_text())
        return None if quota <= 0 else quota / period
    except (OSError, ValueError):
        return None


@functools.cache
def driver_version() -> str | None:
    """The NVIDIA driver's version from nvidia-smi (None without it); asked once a process."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    try:
        out = subprocess.run(
            [smi, "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=10, check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return out.strip().splitlines()[0] if out.strip() else None
