"""The study's own attributes: what it measures (`StudyInfo`), the CPUs each trial had, the
machine it ran on, and the confirmation's summary. Their only reader and writer (`records` is the
trials').

Optuna keeps them as the study's user attributes, JSON underneath; a resumed study is checked
against them, and the outputs read them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import optuna

from autotune.contract.result import Fingerprint

__all__ = ["ConfirmationEntry", "StudyInfo", "read_confirmation", "read_fingerprint", "read_info",
           "read_layout", "write_confirmation", "write_fingerprint", "write_info", "write_layout"]

_INFO_KEYS = ("adapter", "unit", "space", "device")


@dataclasses.dataclass(frozen=True, kw_only=True)
class StudyInfo:
    """What a study measures: fixed when it is created, checked when it is resumed."""

    adapter: str
    unit: str
    space: str
    device: str
    nproc_per_node: int = 1
    """DDP ranks per trial: the layout its throughputs hold for."""


def read_info(study: optuna.Study) -> StudyInfo | None:
    attrs = study.user_attrs
    if not all(k in attrs for k in _INFO_KEYS):
        return None
    # A study made before DDP trials ran one process per trial.
    return StudyInfo(**{k: attrs[k] for k in _INFO_KEYS},
                     nproc_per_node=int(attrs.get("nproc_per_node", 1)))


def write_info(study: optuna.Study, info: StudyInfo) -> None:
    for key, value in dataclasses.asdict(info).items():
        study.set_user_attr(key, value)


def read_layout(study: optuna.Study) -> int | None:
    """The CPUs each trial of the study was given (None: not recorded, an older study)."""
    layout = study.user_attrs.get("layout")
    return int(layout["cpus_per_trial"]) if layout else None


def write_layout(study: optuna.Study, *, cpus_per_trial: int, trials_at_once: int) -> None:
    study.set_user_attr("layout", {"cpus_per_trial": cpus_per_trial,
                                   "trials_at_once": trials_at_once})


def read_fingerprint(study: optuna.Study) -> Fingerprint | None:
    data = study.user_attrs.get("fingerprint")
    if not data:
        return None
    fields = {f.name for f in dataclasses.fields(Fingerprint)}
    return Fingerprint(**{k: v for k, v in data.items() if k in fields})


def write_fingerprint(study: optuna.Study, fingerprint: Fingerprint) -> None:
    study.set_user_attr("fingerprint", dataclasses.asdict(fingerprint))


@dataclasses.dataclass(frozen=True, kw_only=True)
class ConfirmationEntry:
    """One config's fresh re-runs after the search."""

    trial: int
    """The search trial whose config was re-run."""
    baseline: bool
    search_throughput: float
    throughputs: tuple[float, ...]
    """Each ok re-run's rate, in the order they ran."""
    median: float | None
    spread: float | None
    statuses: tuple[str, ...]
    compile_artifacts: str = ""
    """Compiled artifacts a run of this config saved (compiled configs only)."""


def read_confirmation(study: optuna.Study) -> list[ConfirmationEntry] | None:
    data = study.user_attrs.get("confirmation")
    if not data:
        return None
    fields = {f.name for f in dataclasses.fields(ConfirmationEntry)}
    return [ConfirmationEntry(**{**{k: v for k, v in c.items() if k in fields},
                                 "throughputs": tuple(c["throughputs"]),
                                 "statuses": tuple(c["statuses"])}) for c in data]


def write_confirmation(study: optuna.Study, entries: Sequence[ConfirmationEntry] | None) -> None:
    """Store the confirmation (None: stale, new trials ran since)."""
    study.set_user_attr("confirmation", None if entries is None else [
        {**dataclasses.asdict(c), "throughputs": list(c.throughputs),
         "statuses": list(c.statuses)} for c in entries])
