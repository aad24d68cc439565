"""Where trials run: one slot per GPU, each with its share of the host's CPUs.

`--gpus all|0,1,...` runs one trial per GPU at once. Each slot's trials see only their GPU
(`CUDA_VISIBLE_DEVICES`, added to the inherited environment) and are pinned to their own CPUs
(`$AUTOTUNE_CPUS`, applied by the trial itself before torch starts; DataLoader workers inherit
it), so an input-bound trial cannot take the cores its neighbour loads with. The share is the
host's CPUs split evenly, or `--cpus-per-trial`: what each rank will have in production.

A result holds for the layout it was measured in: a config found with 1/N of the cores is the
one for an N-rank job on this host, not for one GPU with every core.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
from collections.abc import Sequence
from typing import Any

from autotune.contract.errors import InputError
from autotune.contract.host import CPUS_ENV, cpu_ids, format_cpus

__all__ = ["EMULATE_ENV", "Layout", "Slot", "plan_layout", "visible_gpus"]

EMULATE_ENV = "AUTOTUNE_EMULATE_GPUS"
"""For tests and CI without GPUs: this many emulated GPUs ("0", "1", ...) are visible, and
`--gpus` may run with `--device cpu` (each slot still gets its CUDA_VISIBLE_DEVICES and CPUs)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Slot:
    """Where one of the concurrent trials runs."""

    index: int
    gpu: str | None = None
    """Its `CUDA_VISIBLE_DEVICES` (an index or a UUID); None: the inherited environment's."""
    cpus: tuple[int, ...] = ()
    """The CPUs it is pinned to; empty: not pinned (all this process may use)."""

    def env(self) -> dict[str, str]:
        """What the slot adds to a trial's (or a fork server's) inherited environment."""
        env = {}
        if self.gpu is not None:
            env["CUDA_VISIBLE_DEVICES"] = self.gpu
        if self.cpus:
            env[CPUS_ENV] = format_cpus(self.cpus)
        return env

    @property
    def name(self) -> str:
        return f"gpu{self.gpu}" if self.gpu is not None else f"slot{self.index}"


@dataclasses.dataclass(frozen=True, kw_only=True)
class Layout:
    """The slots a search runs its trials in, and what its results hold for."""

    slots: tuple[Slot, ...]
    cpus_per_trial: int
    """CPUs each trial may use: the `num_workers` range and the hand recipe follow it."""
    host_cpus: int
    """CPUs the search process may use (its affinity mask)."""

    def __post_init__(self) -> None:
        if not self.slots:
            raise ValueError(f"a layout needs at least one slot, got {self.slots=}")
        if self.cpus_per_trial < 1:
            raise ValueError(f"cpus_per_trial must be at least 1, got {self.cpus_per_trial=}")

    @classmethod
    def single(cls, cpus: int | None = None) -> Layout:
        """One trial at a time with every CPU of this process, unpinned: the default."""
        host = len(cpu_ids())
        return cls(slots=(Slot(index=0),), cpus_per_trial=cpus or host, host_cpus=host)

    @property
    def concurrent(self) -> int:
        return len(self.slots)

    @property
    def gpus(self) -> list[str]:
        return [s.gpu for s in self.slots if s.gpu is not None]

    def describe(self, *, ranks: int = 1, device: str = "cuda") -> dict[str, Any]:
        """best.yaml's `layout` block: where the trials ran and what the result holds for
        (`ranks`: DDP ranks per trial, each with `cpus_per_trial` CPUs; `device`: the trials',
        a CPU search's result holding for no GPU)."""
        n, k = self.concurrent, self.cpus_per_trial
        cpus = f"{k} CPU" + ("s" if k > 1 else "")
        if ranks > 1:
            holds = (f"a DDP job of {ranks} ranks on this host, each rank with {cpus}, as "
                     "each trial ran")
            confirmed = "each confirmation run as the same DDP job"
        elif n > 1:
            holds = (f"a DDP job of {n} ranks on this host (or {n} one-GPU jobs side by side), "
                     f"each rank pinned to {cpus}; a one-GPU run with all {self.host_cpus} CPUs "
                     f"needs a search of its own: --gpus 0 --cpus-per-trial {self.host_cpus}")
            confirmed = (f"each confirmation run used all {n} GPUs at once, the same config on "
                         f"each with its {cpus}; its rate is the slowest GPU's, which sets the "
                         "pace of a synchronized job")
        else:
            gpu = " on one GPU" if device == "cuda" else ""
            holds = (f"one process{gpu} with {cpus}" if k < self.host_cpus else
                     f"one process{gpu} with all {cpus} of this host" + (
                         "; for a job of N ranks search with --gpus (1/N of the CPUs each) or "
                         "--cpus-per-trial" if gpu else ""))
            confirmed = "each confirmation run alone, in the same layout"
        return {
            "trials_at_once": n,
            "gpus": self.gpus or None,
            "cpus_per_trial": k,
            "host_cpus": self.host_cpus,
            "pinned": [format_cpus(s.cpus) for s in self.slots] if self.slots[0].cpus else None,
            "holds_for": holds,
            "confirmation": confirmed,
        }


def visible_gpus() -> list[str]:
    """The GPUs this process may use, as `CUDA_VISIBLE_DEVICES` entries.

    Read without starting CUDA (the search process runs no torch): the inherited
    `CUDA_VISIBLE_DEVICES` when set, else `nvidia-smi`'s list; none without either.
    """
    emulated = os.environ.get(EMULATE_ENV)
    if emulated:
        return [str(i) for i in range(int(emulated))]
    inherited = os.environ.get("CUDA_VISIBLE_DEVICES")
    if inherited is not None:
        return [g.strip() for g in inherited.split(",") if g.strip()]
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return []
    try:
        listed = subprocess.run([smi, "--query-gpu=index", "--format=csv,noheader"],
                                capture_output=True, text=True, timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [line.strip() for line in listed.splitlines() if line.strip()]


def plan_layout(gpus: str | None, cpus_per_trial: int | None, *, device: str,
                host_cpus: Sequence[int] | None = None,
                visible: Sequence[str] | None = None) -> Layout:
    """The layout `--gpus` and `--cpus-per-trial` ask for, or an `InputError` naming the flag.

    Without `--gpus`: one trial at a time (pinned to `--cpus-per-trial` CPUs when given). With
    it: one slot per GPU, the CPUs split into equal contiguous shares (or `--cpus-per-trial`
    each), never overlapping.
    """
    cpus = list(cpu_ids() if host_cpus is None else host_cpus)
    if cpus_per_trial is not None and cpus_per_trial > len(cpus):
        raise InputError(f"--cpus-per-trial {cpus_per_trial}: this process may use "
                         f"{len(cpus)} CPUs ({format_cpus(cpus)})")
    if gpus is None:
        if cpus_per_trial is None:
            return Layout.single()
        return Layout(slots=(Slot(index=0, cpus=tuple(cpus[:cpus_per_trial])),),
                      cpus_per_trial=cpus_per_trial, host_cpus=len(cpus))
    if device != "cuda" and not os.environ.get(EMULATE_ENV):
        raise InputError(f"--gpus {gpus}: the search runs on {device}; --gpus places trials on "
                         "CUDA devices (use --device cuda on a host with GPUs)")
    chosen = _choose(gpus, list(visible_gpus() if visible is None else visible))
    share = cpus_per_trial or len(cpus) // len(chosen)
    if share < 1 or share * len(chosen) > len(cpus):
        why = (f"--cpus-per-trial {cpus_per_trial} for each of" if cpus_per_trial else
               "one CPU at least for each of")
        raise InputError(f"--gpus {gpus}: {why} {len(chosen)} concurrent trials needs "
                         f"{max(share, 1) * len(chosen)} CPUs, this process may use {len(cpus)} "
                         f"({format_cpus(cpus)}); concurrent trials never share CPUs: use fewer "
                         "GPUs or a smaller --cpus-per-trial")
    slots = tuple(Slot(index=i, gpu=gpu, cpus=tuple(cpus[i * share:(i + 1) * share]))
                  for i, gpu in enumerate(chosen))
    return Layout(slots=slots, cpus_per_trial=share, host_cpus=len(cpus))


def _choose(text: str, visible: list[str]) -> list[str]:
    listing = (f"the visible GPUs are {', '.join(f'{i} ({g})' for i, g in enumerate(visible))}"
               if visible else "no GPU is visible (CUDA_VISIBLE_DEVICES, nvidia-smi)")
    if text.strip() == "all":
        if not visible:
            raise InputError(f"--gpus all: {listing}")
        return visible
    try:
        indices = [int(part) for part in text.split(",")]
    except ValueError:
        raise InputError(f"--gpus {text}: expected 'all' or GPU indices such as 0,1; "
                         f"{listing}") from None
    if len(set(indices)) != len(indices):
        raise InputError(f"--gpus {text}: a GPU is named twice; {listing}")
    wrong = [i for i in indices if not 0 <= i < len(visible)]
    if wrong:
        raise InputError(f"--gpus {text}: no GPU {wrong[0]} on this host; {listing}")
    return [visible[i] for i in indices]
