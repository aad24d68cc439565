"""A batch larger than the dataset: once a trial's loader gave no full batch, no larger batch
is run.

The tool's loader drops a last partial batch, so a dataset of 512 samples yields no batch of
768. With `--vary-global-batch` the space's factors reach 8x the adapter's batch, and a held-out
MobileNet on 512 images (2-CPU VM, 2026-11-28) spent two of its seven trials on batch 768, each
an error. As with memory (`Objective.memory_wall`), the first such trial is a wall: a batch at
least as large, under the same adapter knob values (a knob may choose the data) and the same
number of workers (an IterableDataset split across workers batches each worker's share, so 600
samples give no batch of 128 from 8 workers and two each from 2), is not run.
"""

from __future__ import annotations

from collections.abc import Sequence

from autotune.contract.config import TrainConfig
from autotune.contract.result import NO_BATCH, Status
from autotune.study.store.records import TrialRecord

__all__ = ["no_batch_refused"]


def no_batch_refused(config: TrainConfig, records: Sequence[TrialRecord]) -> str | None:
    """Why `config` is not run: a trial of its knob values and workers got no batch at a batch
    no larger."""
    wall = min((r for r in records if r.result is not None and r.config is not None
                and r.result.status is Status.ERROR and r.result.ran
                and NO_BATCH in r.result.reason and r.config.params == config.params
                and r.config.num_workers == config.num_workers
                and r.config.batch_size <= config.batch_size),
               key=lambda r: r.config.batch_size if r.config else 0, default=None)
    if wall is None or wall.config is None:
        return None
    return (f"not run: trial {wall.number}'s loader gave no batch at batch_size="
            f"{wall.config.batch_size} with {wall.config.num_workers} worker(s) (fewer samples "
            "than one batch, the last partial batch dropped; or a make_loader that returns an "
            "iterator)")
