"""Configs that differ by name only: `intra_op_threads` null beside the count null runs.

PyTorch's default intra-op thread count is one per CPU the process may use (OMP_NUM_THREADS where
it is set), so on a 2-CPU VM cpu.yaml's null and 2 run the same step under two names, and the
sampler measured both. A trial reports the count null runs (`Fingerprint.torch_threads`); a config
that differs from a measured one only so is a copy of it."""

from __future__ import annotations

from collections.abc import Iterable

from autotune.contract.config import TrainConfig
from autotune.study.store.records import TrialRecord

__all__ = ["null_threads", "runs_alike"]


def null_threads(records: Iterable[TrialRecord]) -> int | None:
    """The intra-op threads `intra_op_threads` null ran with in these trials (None: unknown)."""
    return next((r.result.fingerprint.torch_threads for r in records
                 if r.result is not None and r.result.fingerprint is not None
                 and r.result.fingerprint.torch_threads), None)


def runs_alike(a: TrainConfig | None, b: TrainConfig, threads: int | None) -> bool:
    """Whether `a` and `b` run the same step: equal, or equal but for `intra_op_threads`, one
    null and the other the `threads` null runs."""
    if a == b:
        return True
    if a is None or threads is None or a.intra_op_threads == b.intra_op_threads:
        return False
    counts = {a.intra_op_threads or threads, b.intra_op_threads or threads}
    return len(counts) == 1 and a.replace(intra_op_threads=None) == b.replace(intra_op_threads=None)
