"""A batch larger than the dataset gives no batch (the last partial one is dropped): once a
trial shows it, no batch at least as large runs (a MobileNet on 512 images spent two of seven
trials on batch 768, 2-CPU VM, 2026-11-28)."""

from __future__ import annotations

from optuna.trial import TrialState

from autotune import Status, TrainConfig, TrialResult
from autotune.contract.result import NO_BATCH
from autotune.study.policy.no_batch import no_batch_refused
from autotune.study.policy.refused import refused
from autotune.study.store.records import TrialRecord

BASE = TrainConfig(batch_size=96)


def record(number: int, config: TrainConfig, status: Status, reason: str = "",
           ran: bool = True) -> TrialRecord:
    return TrialRecord(number=number, state=TrialState.COMPLETE, value=0.0, config=config,
                       result=TrialResult(status=status, reason=reason, ran=ran,
                                          throughput=1.0 if status is Status.OK else None))


def empty(number: int, batch_size: int, **changes: object) -> TrialRecord:
    return record(number, BASE.replace(batch_size=batch_size, **changes), Status.ERROR,
                  f"RuntimeError: {NO_BATCH} (batch_size={batch_size}): a dataset smaller than "
                  "one batch with drop_last")


def test_a_batch_no_smaller_than_one_that_got_none_is_not_run() -> None:
    ran = [record(0, BASE, Status.OK), empty(1, 768, amp_dtype="bf16", compile="default")]
    reason = no_batch_refused(BASE.replace(batch_size=768), ran)
    assert reason == ("not run: trial 1's loader gave no batch at batch_size=768 with 0 "
                      "worker(s) (fewer samples than one batch, the last partial batch dropped; "
                      "or a make_loader that returns an iterator)")
    assert refused(BASE.replace(batch_size=1536, amp_dtype="bf16"), ran, "cpu") is not None
    # Another number of workers may batch an IterableDataset's shares otherwise: judged apart.
    assert no_batch_refused(BASE.replace(batch_size=768, num_workers=2), ran) is None
    assert no_batch_refused(BASE.replace(batch_size=384), ran) is None
    assert no_batch_refused(BASE, ran) is None


def test_the_smallest_such_batch_is_named_and_knob_values_are_kept_apart() -> None:
    ran = [empty(3, 768), empty(5, 384)]
    said = no_batch_refused(BASE.replace(batch_size=768), ran)
    assert said is not None and "trial 5's" in said and "batch_size=384" in said
    # An adapter knob may choose another dataset: its values are judged apart.
    assert no_batch_refused(BASE.replace(batch_size=768, params={"subset": "all"}), ran) is None


def test_other_errors_and_refusals_are_no_wall() -> None:
    ran = [record(1, BASE.replace(batch_size=768), Status.ERROR, "ValueError: bad sample 3"),
           record(2, BASE.replace(batch_size=384), Status.ERROR,
                  f"not run: something else mentioning {NO_BATCH}", ran=False)]
    assert no_batch_refused(BASE.replace(batch_size=768), ran) is None
