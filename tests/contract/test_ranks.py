"""Merging the outcomes of a DDP trial's ranks into the trial's one outcome."""

from __future__ import annotations

from pathlib import Path

from autotune import Status, TrialResult
from autotune.contract.ranks import RankOutcome, merge_ranks, read_ranks, waited_only


def ok(throughput: float, memory: float) -> TrialResult:
    return TrialResult(status=Status.OK, throughput=throughput, peak_rss_mb=memory)


def failed(status: Status, reason: str) -> TrialResult:
    return TrialResult(status=status, reason=reason)


def test_all_ok_is_rank_0s_global_rate_with_the_largest_memory() -> None:
    merged = merge_ranks([RankOutcome(rank=1, result=ok(90.0, 300.0)),
                          RankOutcome(rank=0, result=ok(100.0, 200.0))])
    assert merged.status is Status.OK
    assert merged.throughput == 100.0  # rank 0's windows are already every rank's items
    assert merged.peak_rss_mb == 300.0


def test_an_oom_on_any_rank_is_the_trials_oom_whatever_the_others_say() -> None:
    merged = merge_ranks([
        RankOutcome(rank=0, result=failed(Status.ERROR, "RuntimeError: Timed out"), waited="timeout"),
        RankOutcome(rank=1, result=failed(Status.ERROR, "ValueError: bad sample")),
        RankOutcome(rank=2, result=failed(Status.OOM, "OutOfMemoryError: CUDA out of memory")),
    ])
    assert merged.status is Status.OOM
    assert merged.reason == "rank 2: OutOfMemoryError: CUDA out of memory"


def test_a_rank_that_only_waited_is_never_the_cause() -> None:
    merged = merge_ranks([
        RankOutcome(rank=0, result=failed(Status.ERROR, "PeerStopped: rank(s) [1]"),
                    waited="stopped"),
        RankOutcome(rank=1, result=failed(Status.NAN, "loss was not finite")),
    ])
    assert merged.status is Status.NAN and merged.reason.startswith("rank 1: ")


def test_ranks_that_all_waited_past_the_timeout_mean_a_stuck_rank() -> None:
    outcomes = [RankOutcome(rank=r, result=failed(Status.ERROR, "RuntimeError: Timed out waiting"),
                            waited="timeout") for r in (0, 1)]
    merged = merge_ranks(outcomes, collective_timeout=60)
    assert merged.status is Status.TIMEOUT and "within its timeout of 60 s" in merged.reason
    gone = waited_only([RankOutcome(rank=1, result=failed(Status.ERROR, "closed"), waited="gone")],
                       collective_timeout=60, missing=[0])
    assert gone.status is Status.CRASHED and gone.reason.startswith("rank(s) [0] stopped")


def test_rank_files_round_trip(tmp_path: Path) -> None:
    outcome = RankOutcome(rank=1, result=failed(Status.OOM, "x"), waited="")
    outcome.save(tmp_path)
    assert read_ranks(tmp_path) == [outcome]
