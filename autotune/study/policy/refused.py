"""Configs a trial's findings rule out before they run, the same for every path that starts a
trial (the objective, the ladder's guided starts, exploration): CUDA graphs on batches of many
shapes (`graphs`), an optimizer_impl the adapter's optimizer does not take (`optimizer`), a
compile where a compile compiled nothing (`no_graph`), a batch larger than the dataset
(`no_batch`), and a compile of a graph that failed inside torch.compile (`compiler_error`)."""

from __future__ import annotations

from collections.abc import Sequence

from autotune.contract.config import TrainConfig
from autotune.study.policy.compiler_error import compiler_refused
from autotune.study.policy.graphs import graphs_refused
from autotune.study.policy.no_batch import no_batch_refused
from autotune.study.policy.no_graph import nothing_refused
from autotune.study.policy.optimizer import impl_refused
from autotune.study.store.records import TrialRecord

__all__ = ["refused"]


def refused(config: TrainConfig, finished: Sequence[TrialRecord], device: str) -> str | None:
    """Why `config` is not run ("not run: ..."), else None."""
    return (graphs_refused(config, finished, device) or impl_refused(config, finished)
            or nothing_refused(config, finished) or no_batch_refused(config, finished)
            or compiler_refused(config, finished))
