"""Opening a study: with its sampler and pruner (`policy`), and the checks that a study
continued measures what this run measures (unit, device, ranks per trial, CPUs per trial)."""

from __future__ import annotations

import optuna

from autotune.adapter import Adapter
from autotune.contract.errors import InputError
from autotune.study.execution.layout import Layout
from autotune.study.policy.pruning import IncumbentPruner
from autotune.study.policy.sampler import sampler
from autotune.study.settings import SearchSettings
from autotune.study.space.bound import SearchSpace
from autotune.study.store import study_attrs
from autotune.study.store.storage import open_storage

__all__ = ["open_study"]


def open_study(settings: SearchSettings, adapter: type[Adapter], space: SearchSpace,
               layout: Layout) -> optuna.Study:
    """Create the study, or continue it when it measures what this run measures; otherwise an
    `InputError` naming the flag to change."""
    s = settings
    study = optuna.create_study(
        storage=open_storage(s.storage, s.heartbeat),
        study_name=s.study_name,
        direction="maximize",
        sampler=sampler(s.sampler, seed=s.seed),
        pruner=IncumbentPruner() if s.prune else optuna.pruners.NopPruner(),
        load_if_exists=True,
    )
    _check_layout(study, s, layout)
    info = study_attrs.read_info(study)
    if info is None:
        study_attrs.write_info(study, study_attrs.StudyInfo(
            adapter=str(s.adapter), unit=adapter.unit, space=space.source,
            device=s.device, nproc_per_node=s.nproc_per_node))
    elif info.unit != adapter.unit:
        raise InputError(
            f"study {s.study_name!r} in {s.storage} measures {info.unit}, this adapter "
            f"{adapter.unit}; pass another --study-name for a new study"
        )
    elif info.device != s.device:
        raise InputError(
            f"study {s.study_name!r} in {s.storage} was measured on {info.device}, this "
            f"run is on {s.device}: their throughputs cannot be ranked together; pass "
            f"--device {info.device} or another --study-name"
        )
    elif info.nproc_per_node != s.nproc_per_node:
        raise InputError(
            f"study {s.study_name!r} in {s.storage} ran {info.nproc_per_node} rank(s) per "
            f"trial, this run {s.nproc_per_node}: their throughputs cannot be ranked "
            f"together; pass --nproc-per-node {info.nproc_per_node} or another --study-name"
        )
    return study


def _check_layout(study: optuna.Study, settings: SearchSettings, layout: Layout) -> None:
    """Rates measured with another CPU share per trial do not rank together."""
    cpus = layout.cpus_per_trial
    stored = study_attrs.read_layout(study)
    if stored is None:
        study_attrs.write_layout(study, cpus_per_trial=cpus, trials_at_once=layout.concurrent)
    elif stored != cpus:
        raise InputError(
            f"study {settings.study_name!r} in {settings.storage} was measured with "
            f"{stored} CPUs per trial, this run gives each trial {cpus}: input-bound rates "
            f"differ; pass --cpus-per-trial {stored} or another --study-name")
