"""The figure a check compares with: best.yaml's confirmed throughput, or a baseline file that
`autotune check --update` wrote on this machine, with where it was measured.

A baseline file has best.yaml's shape for what a check reads (`config`, `throughput`,
`provenance`) plus the runs it took, so that either file is read the same way.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from autotune.contract.config import TrainConfig, config_of
from autotune.contract.errors import InputError
from autotune.contract.files import atomic_write_text
from autotune.contract.fmt import rounded
from autotune.contract.result import Fingerprint

__all__ = ["BASELINE_KEY", "Baseline", "incomparable", "read_baseline", "write_baseline"]

BASELINE_KEY = "autotune_check_baseline"
"""The key (holding the format's version) that marks a baseline file."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Baseline:
    """A config and the rate it ran at, and where."""

    config: TrainConfig
    throughput: float
    """Units per second: the figure a check's median is divided by."""
    unit: str
    """The adapter's unit ("tokens"), without "/s"."""
    runs: tuple[float, ...] = ()
    """The fresh runs behind `throughput`, where the file has them."""
    how: str = ""
    """Where `throughput` comes from ("median of the confirmation runs", ...)."""
    device: str | None = None
    """The device in words (`Fingerprint.device`); None where the file does not say."""
    device_kind: str = "cuda"
    """"cuda" or "cpu": where the check's runs train."""
    torch: str | None = None
    nproc_per_node: int = 1
    """DDP ranks per run (the throughput is all ranks' items per second)."""
    cpus_available: int | None = None

    def __post_init__(self) -> None:
        if not (math.isfinite(self.throughput) and self.throughput > 0):
            raise ValueError(f"a baseline needs a positive throughput, got {self.throughput=}")
        if self.device_kind not in ("cuda", "cpu") or self.nproc_per_node < 1:
            raise ValueError(f"bad provenance: {self.device_kind=}, {self.nproc_per_node=}")


def read_baseline(path: Path) -> Baseline:
    """The baseline in best.yaml or in a baseline file (JSON, which YAML reads too)."""
    try:
        doc = yaml.safe_load(Path(path).read_text())
    except OSError as exc:
        raise InputError(f"--against {path}: cannot read it ({exc.strerror})") from None
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise InputError(f"--against {path}: not YAML or JSON ({exc})") from None
    if not isinstance(doc, Mapping) or "config" not in doc or "throughput" not in doc:
        raise InputError(f"--against {path}: no config and throughput in it; give the best.yaml "
                         "a search wrote, or a baseline file `autotune check --update` wrote")
    throughput = doc["throughput"]
    value = throughput.get("value") if isinstance(throughput, Mapping) else None
    unit = str(throughput.get("unit") or "") if isinstance(throughput, Mapping) else ""
    if not isinstance(value, (int, float)) or not value > 0 or not unit.endswith("/s"):
        raise InputError(f"--against {path}: throughput needs a positive value and a unit such "
                         f"as 'tokens/s', got {throughput!r}")
    prov = doc.get("provenance") if isinstance(doc.get("provenance"), Mapping) else {}
    kind = prov.get("device_kind") if prov.get("device_kind") in ("cuda", "cpu") else "cuda"
    return Baseline(
        config=config_of(doc, source=str(path)),
        throughput=float(value), unit=unit.removesuffix("/s"),
        runs=_runs(doc), how=str(throughput.get("from") or ""),
        device=prov.get("device"), device_kind=kind, torch=prov.get("torch"),
        nproc_per_node=int(prov.get("nproc_per_node") or 1),
        cpus_available=prov.get("cpus_available"),
    )


def _runs(doc: Mapping[str, Any]) -> tuple[float, ...]:
    """A baseline file's runs, or best.yaml's winner's confirmation runs (its search trial's
    entry in `confirmation`)."""
    if BASELINE_KEY in doc:
        return tuple(float(v) for v in doc.get("runs") or ())
    trial = (doc.get("measurement") or {}).get("trial")
    for entry in doc.get("confirmation") or ():
        if isinstance(entry, Mapping) and entry.get("trial") == trial and not entry.get("baseline"):
            return tuple(float(v) for v in entry.get("runs") or ())
    return ()


def write_baseline(path: Path, *, config: TrainConfig, runs: Sequence[float], unit: str,
                   median: float, fingerprint: Fingerprint | None, device_kind: str,
                   nproc_per_node: int, adapter: Path, source: Path) -> None:
    """Write a baseline file (atomically: an interrupted write leaves the previous one)."""
    fp = fingerprint or Fingerprint()
    doc = {
        BASELINE_KEY: 1,
        "config": config.to_dict(),
        "throughput": {"value": rounded(median), "unit": f"{unit}/s",
                       "from": f"median of {len(runs)} fresh run(s) (autotune check --update)"},
        "runs": [rounded(v) for v in runs],
        "provenance": {
            "device": fp.device, "device_kind": device_kind, "nproc_per_node": nproc_per_node,
            "torch": fp.torch, "cuda": fp.cuda, "driver": fp.driver,
            "cpu_model": fp.cpu_model, "cpus_available": fp.cpus_available,
            "hostname": fp.hostname,
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "adapter": str(adapter), "config_from": str(source),
        },
    }
    atomic_write_text(Path(path), json.dumps(doc, indent=1) + "\n")


def incomparable(baseline: Baseline, *, unit: str | None = None,
                 fingerprint: Fingerprint | None = None,
                 allow_torch_change: bool = False) -> str | None:
    """Why this machine's runs cannot be compared with `baseline`, in words; None when they can.
    `unit` is the adapter's; `fingerprint` this machine's (`trial.fingerprint`)."""
    if unit is not None and unit != baseline.unit:
        return (f"the adapter counts {unit}/s, the baseline {baseline.unit}/s: another unit "
                "(another adapter?)")
    if fingerprint is None:
        return None
    if baseline.device is not None and fingerprint.device != baseline.device:
        return (f"measured on another device: the baseline on {baseline.device!r}, this machine "
                f"{fingerprint.device!r}; write this machine's baseline with --update")
    if (not allow_torch_change and baseline.torch is not None
            and fingerprint.torch != baseline.torch):
        return (f"another torch version: the baseline's {baseline.torch}, this machine's "
                f"{fingerprint.torch}; pass --allow-torch-change to compare anyway (a new torch "
                "is a change a gate may well be meant to catch), or --update")
    return None
