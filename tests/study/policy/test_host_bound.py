"""CUDA graphs for an eager best whose `default` compile bought nothing (`host_bound`): a held-out
DeepLabV3 on an H200 (2026-11-29) read 212 images/s eager, 210 compiled with `default`, and
was never tried under CUDA graphs, which ran it at 381 in another search."""

from __future__ import annotations

import dataclasses
from typing import Any

from optuna.trial import TrialState

from autotune import Diagnosis, Status, TrainConfig, TrialResult, Verdict
from autotune.study.policy.graphs import CUDA_GRAPH_SHAPES
from autotune.study.policy.host_bound import graphs_after_default
from autotune.study.space.file import parse_space
from autotune.study.store.records import TrialRecord

RAW = {"num_workers": {"low": 0, "high": 8}, "pin_memory": {"choices": [False, True]},
       "expandable_segments": {"choices": [False, True]},
       "amp_dtype": {"choices": ["fp32", "bf16"]},
       "compile": {"choices": ["none", "default", "reduce-overhead"]}}
EAGER = TrainConfig(batch_size=8, num_workers=8, pin_memory=True, amp_dtype="bf16")
GRAPHS = EAGER.replace(compile="reduce-overhead")


def space(raw: dict[str, Any] = RAW) -> Any:
    from autotune import Adapter

    class Seg(Adapter):
        batch_size = 8

    return parse_space(raw, source="s.yaml", adapter=Seg, device_type="cuda", cpus=8)


def ran(number: int, config: TrainConfig, rate: float, *, verdict: Verdict | None = None,
        busy: float | None = 0.9, gains: dict[str, float] | None = None,
        **result: Any) -> TrialRecord:
    diagnosis = None if verdict is None else Diagnosis(
        verdict=verdict, suggestion="", throughput=rate, loader_rate=None, compute_rate=None,
        data_wait_fraction=0.0, gpu_busy_fraction=busy)
    return TrialRecord(number=number, state=TrialState.COMPLETE, value=rate, config=config,
                       result=TrialResult(status=Status.OK, throughput=rate,
                                          diagnosis=diagnosis, **result),
                       compile_gains=gains or {}, role="follow: x")


def deeplab(**leader: Any) -> list[TrialRecord]:
    """The eager leader, its `default` twin (0.99x) and a tie won by noise (expandable)."""
    return [ran(2, EAGER, 212.0, verdict=Verdict.COMPUTE, **leader),
            ran(8, EAGER.replace(compile="default"), 210.0, gains={"default": 0.99}),
            ran(11, EAGER.replace(expandable_segments=True), 214.0)]


def test_a_default_compile_that_bought_nothing_sends_the_leader_to_cuda_graphs() -> None:
    # The leader is the tie won by noise (expandable), diagnosed as every new best is: CUDA
    # graphs go to it, though the compile that bought nothing was its twin's.
    records = deeplab()
    records[2] = dataclasses.replace(records[2], result=records[0].result.replace(
        throughput=214.0))
    expandable = EAGER.replace(expandable_segments=True, compile="reduce-overhead")
    assert graphs_after_default(space(), records, device="cuda") == [
        (f"follow: {expandable.describe()}", expandable)]
    assert graphs_after_default(space(), records, device="cpu") == []
    assert graphs_after_default(space(), records[:1], device="cuda") == []  # no compile yet


def test_what_keeps_cuda_graphs_back() -> None:
    base = deeplab()[:2]
    assert graphs_after_default(space(), base, device="cuda") == [
        (f"follow: {GRAPHS.describe()}", GRAPHS)]
    paid = [base[0], ran(8, EAGER.replace(compile="default"), 240.0, gains={"default": 1.13})]
    assert graphs_after_default(space(), paid, device="cuda") == []  # the diagnosis decides
    for leader in ({"verdict": Verdict.INPUT}, {"verdict": None}, {"busy": 0.97},
                   {"shapes_vary": True, "shape_count": CUDA_GRAPH_SHAPES + 1}):
        kw = {"verdict": Verdict.COMPUTE, **leader}
        records = [ran(2, EAGER, 212.0, **kw), base[1]]
        assert graphs_after_default(space(), records, device="cuda") == [], leader
    overhead = [ran(2, EAGER, 212.0, verdict=Verdict.OVERHEAD, busy=None), base[1]]
    assert graphs_after_default(space(), overhead, device="cuda") != []
    done = [*base, ran(9, GRAPHS, 150.0)]  # ran already (and lost)
    assert graphs_after_default(space(), done, device="cuda") == []
    no_graphs = {**RAW, "compile": {"choices": ["none", "default"]}}
    assert graphs_after_default(space(no_graphs), base, device="cuda") == []
    compiled_best = [*base, ran(9, EAGER.replace(compile="default", amp_dtype="fp32"), 300.0)]
    assert graphs_after_default(space(), compiled_best, device="cuda") == []
