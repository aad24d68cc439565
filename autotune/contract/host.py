"""Facts about this host that both sides read, and the CPU share a trial is pinned to."""

from __future__ import annotations

import os
from collections.abc import Iterable

__all__ = ["CPUS_ENV", "available_cpus", "cpu_ids", "format_cpus", "parse_cpus", "pin_to_share"]

CPUS_ENV = "AUTOTUNE_CPUS"
"""The CPUs a trial process is pinned to ("0-7,16-23"), set by the search when trials run side
by side; the trial pins itself before it imports torch, and its DataLoader workers inherit it."""


def available_cpus() -> int:
    """CPUs this process may run on (affinity mask), which is what DataLoader workers get."""
    return len(cpu_ids())


def cpu_ids() -> list[int]:
    """The CPUs this process may run on, in order."""
    try:
        return sorted(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return list(range(os.cpu_count() or 1))


def format_cpus(cpus: Iterable[int]) -> str:
    """CPU ids as a Linux cpu list ("0-3,8"), the form taskset and cgroups read."""
    ids = sorted(set(cpus))
    parts: list[str] = []
    start = prev = None
    for cpu in [*ids, None]:
        if prev is not None and cpu == prev + 1:
            prev = cpu
            continue
        if start is not None:
            parts.append(str(start) if start == prev else f"{start}-{prev}")
        start = prev = cpu
    return ",".join(parts)


def parse_cpus(text: str) -> set[int]:
    """A Linux cpu list ("0-3,8") as a set of ids."""
    cpus: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        low, _, high = part.partition("-")
        try:
            first, last = int(low), int(high or low)
        except ValueError:
            raise ValueError(f"not a cpu list: {text=}") from None
        if first < 0 or last < first:
            raise ValueError(f"not a cpu list: {text=}")
        cpus.update(range(first, last + 1))
    return cpus


def pin_to_share() -> None:
    """Pin this process to the CPUs `$AUTOTUNE_CPUS` names (nothing when it is not set).

    Called first thing in a trial process: torch's intra-op thread pool and the DataLoader
    workers it forks follow the affinity mask, so trials running side by side keep to their own
    cores instead of stealing each other's.
    """
    text = os.environ.get(CPUS_ENV, "")
    if text and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, parse_cpus(text))
