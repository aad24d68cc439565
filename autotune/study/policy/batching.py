"""Whether the adapter's loader makes its own batches, whatever batch_size says.

A `make_loader` may ignore the batch size it is handed: a bucketing `batch_sampler` that fills
each batch up to a token budget, a loader built with a fixed batch. Trials at other batch sizes
then measure the same loader, and a best.yaml's batch_size would not be what ran. Each trial
reports the items and tensor elements its batches held on average (`TrialResult.batch_items`,
`batch_numel`): when a batch size at least twice another's bought no more of either than the
geometric middle of the two, the batch size does not reach the batches, and the search holds it
at the adapter's (`sampler.held`, the ladder's batch steps).

So too when the items did not grow though the tensors did: the count does not scale with the
batch, so rates at two batch sizes do not compare. A held-out time-major batch (T, B, F) with
`items()` left to its default counted T = 40 rows whatever B, and ranked batch 512 at 0.1x the
baseline's 64 where it ran 1.07x it in sequences (2-CPU VM, 2026-11-28).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from autotune.contract.result import Status
from autotune.study.policy.eager import _measured
from autotune.study.store import records as roles
from autotune.study.store.records import MeasuredRecord, TrialRecord

__all__ = ["ON_DEVICE", "Unbatched", "batch_held", "loader_on_device", "loader_sets_batch",
           "on_device_note", "unbatched_note"]

ON_DEVICE = {"num_workers": 0, "pin_memory": False}
"""The loader knobs held once its batches come already on the device (`loader_on_device`): a
DataLoader worker forked from a process that holds CUDA tensors cannot read them ("Cannot
re-initialize CUDA in forked subprocess"), and pinning takes only host memory."""

Unbatched = tuple[MeasuredRecord, MeasuredRecord]
"""Two trials, the smaller batch size first, whose batches held about as much."""


def loader_sets_batch(records: Sequence[TrialRecord]) -> Unbatched | None:
    """The first two measured trials with the same adapter knobs, one at a batch size at least
    twice the other's, whose batches held fewer than sqrt(that ratio) times the items of the
    other's; None when no such pair ran. A loader that honours batch_size and a count that
    follows it scale them by the ratio (the last, short batch of an epoch aside)."""
    ran = sorted((r for r in _measured(records) if r.result.batch_items),
                 key=lambda r: r.config.batch_size)
    for i, small in enumerate(ran):
        for large in ran[i + 1:]:
            ratio = large.config.batch_size / small.config.batch_size
            if ratio < 2 or large.config.params != small.config.params:
                continue
            if not _grew(small.result.batch_items, large.result.batch_items, ratio):
                return small, large
    return None


def _grew(small: float | None, large: float | None, ratio: float) -> bool:
    return bool(small) and bool(large) and large / small >= math.sqrt(ratio)


def batch_held(records: Sequence[TrialRecord]) -> int | None:
    """The batch size the search holds (the baseline's, the adapter's) once the loader is seen
    to make its own batches (`loader_sets_batch`); None while batch_size is searched."""
    if loader_sets_batch(records) is None:
        return None
    return next((r.config.batch_size for r in records
                 if r.role == roles.BASELINE and r.config is not None), None)


def unbatched_note(pair: Unbatched, unit: str) -> str:
    """One line for the search's end and best.yaml: the loader's own batches, or (the tensors
    grew) a count that does not follow the batch."""
    small, large = pair
    numel = (small.result.batch_numel, large.result.batch_numel)
    if None not in numel and _grew(*numel, large.config.batch_size / small.config.batch_size):
        return (f"the adapter's count of {unit} does not follow the batch size: trials "
                f"{small.number} and {large.number} at batch_size {small.config.batch_size} and "
                f"{large.config.batch_size} counted {small.result.batch_items:.4g} and "
                f"{large.result.batch_items:.4g} {unit} a batch while their tensors grew, so "
                "rates at two batch sizes do not compare and batch_size was held at the "
                "adapter's from then on; define items(self, batch) to count your units (the "
                "default counts the first tensor's rows: batch-first)")
    return (f"the adapter's loader makes its own batches: trials {small.number} and "
            f"{large.number} at batch_size {small.config.batch_size} and "
            f"{large.config.batch_size} pulled {small.result.batch_items:.4g} and "
            f"{large.result.batch_items:.4g} {unit} a batch, so batch_size was held at the "
            "adapter's from then on; set the batch where make_loader builds it")


def loader_on_device(records: Sequence[TrialRecord]) -> str | None:
    """The device type a trial found the tool's DataLoader handing over batches on already (a
    dataset of CUDA tensors), None while none did, or once a trial that ran ok had them in host
    memory (an adapter knob choosing where the dataset lives: workers may serve that one)."""
    ran = [r.result for r in records if r.result is not None and r.result.status is Status.OK]
    if any(result.batch_device is None for result in ran):
        return None
    return next((result.batch_device for result in ran if result.batch_device), None)


def on_device_note(device: str, workers: Sequence[int] = (0,)) -> str:
    """One line for the search's end and best.yaml; `workers`, the space's num_workers values
    (a space without 0 left the sampler nothing to hold: every config with workers failed)."""
    if 0 not in workers:
        return (f"the adapter's batches come already on {device}: DataLoader workers cannot "
                f"read them, and the space offers num_workers {list(workers)} only, so every "
                "config failed but the baseline; add 0 to num_workers in the space, or return "
                "host-memory tensors from dataset() and let the tool move each batch")
    return (f"the adapter's batches come already on {device}: DataLoader workers cannot read "
            "them and pinning takes only host memory, so num_workers and pin_memory were held "
            "at 0 and false; to search them, return host-memory tensors from dataset() and let "
            "the tool move each batch")
