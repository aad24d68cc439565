"""The sampler holds knobs that measurements say cannot pay: the convolution knobs at PyTorch's
defaults for a model without convolutions (a held-out MLP's best.yaml carried channels_last, a
no-op TPE had proposed), `compile` at none while the model outpaces its loader."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from helpers import fake_search
from optuna.trial import TrialState

from autotune import Adapter, Status, TrainConfig, TrialResult
from autotune.study.policy.sampler import NO_CONVOLUTION, held
from autotune.study.store.records import TrialRecord

RAW = {"amp_dtype": {"choices": ["fp32", "bf16"]},
       "num_workers": {"low": 0, "high": 4},
       "memory_format": {"choices": ["contiguous", "channels_last"]},
       "cudnn_benchmark": {"choices": [False, True]}}


def record(conv_weights: int | None) -> TrialRecord:
    return TrialRecord(number=0, state=TrialState.COMPLETE, value=1.0, config=TrainConfig(batch_size=8),
                       result=TrialResult(status=Status.OK, throughput=1.0,
                                          conv_weights=conv_weights), role="baseline")


def test_without_convolutions_the_convolution_knobs_are_held_where_the_space_varies_them() -> None:
    every = {"memory_format": ("contiguous", "channels_last"), "cudnn_benchmark": (False, True),
             "compile": ("none", "default")}
    assert held([record(0)], lambda k: every.get(k, ())) == NO_CONVOLUTION
    assert held([record(3)], lambda k: every.get(k, ())) == {}
    assert held([record(None)], lambda k: every.get(k, ())) == {}  # not counted: may have some
    assert held([record(0), record(2)], lambda k: every.get(k, ())) == {}  # a variant has some
    fixed = {"memory_format": ("contiguous",), "cudnn_benchmark": (False, True)}
    assert held([record(0)], lambda k: fixed.get(k, ())) == {"cudnn_benchmark": False}


def test_once_no_compile_fits_compile_is_held_while_eager_leads() -> None:
    # A held-out nn.TransformerEncoder (2-CPU VM, 2026-11-27): once one compile did not fit in
    # what was left, TPE, told nothing by it, kept proposing compiled configs not run either.
    values = {"compile": ("none", "default")}
    eager = TrainConfig(batch_size=8)
    compiled = eager.replace(batch_size=16, compile="default")

    def ran(number: int, config: TrainConfig, rate: float) -> TrialRecord:
        return TrialRecord(number=number, state=TrialState.COMPLETE, value=rate, config=config,
                           result=TrialResult(status=Status.OK, throughput=rate))

    leads = [ran(0, eager, 200.0), ran(1, compiled, 150.0)]
    assert held(leads, lambda k: values.get(k, ()), no_compile_fits=True) == {"compile": "none"}
    assert held(leads, lambda k: values.get(k, ())) == {}  # a compile may still fit
    behind = [ran(0, eager, 100.0), ran(1, compiled, 150.0)]  # the compiled best: not held
    assert held(behind, lambda k: values.get(k, ()), no_compile_fits=True) == {}


def mlp(call: int, request: Any) -> TrialResult:
    rate = 100.0 * (1 + request.config.num_workers / 10) * (1.2 if request.config.amp_dtype ==
                                                           "bf16" else 1.0)
    return TrialResult(status=Status.OK, throughput=rate, conv_weights=0)


def test_a_search_of_a_model_without_convolutions_proposes_none_of_their_knobs(
        tmp_path: Path) -> None:
    class Mlp(Adapter):
        batch_size = 8

    requests, _ = fake_search(tmp_path, RAW, Mlp, mlp, trials=12)
    assert len(requests) >= 8
    assert {(q.config.memory_format, q.config.cudnn_benchmark) for q in requests} == \
        {("contiguous", False)}


def test_checkpointing_is_held_off_while_every_batch_tried_fit() -> None:
    # A held-out DeepLabV3 at its fixed batch of 8, 3 GB of an H200's 141 (2026-11-29): 5 of
    # TPE's 14 proposals recomputed activations, the bf16 one that ran at 0.77x its leader.
    values = {"checkpoint": (0.0, 0.5, 1.0)}

    def ran(number: int, batch: int, status: Status = Status.OK) -> TrialRecord:
        ok = status is Status.OK
        return TrialRecord(number=number, state=TrialState.COMPLETE, value=100.0 if ok else 0.0,
                           config=TrainConfig(batch_size=batch),
                           result=TrialResult(status=status, throughput=100.0 if ok else None))

    fit = [ran(0, 8), ran(1, 64)]
    assert held(fit, lambda k: values.get(k, ())) == {"checkpoint": 0.0}
    assert held(fit + [ran(2, 128, Status.OOM)], lambda k: values.get(k, ())) == {}
    assert held([ran(0, 8, Status.ERROR)], lambda k: values.get(k, ())) == {}  # nothing measured
    assert held(fit, lambda k: {"checkpoint": (0.5, 1.0)}.get(k, ())) == {}  # always on


def test_a_search_that_never_runs_out_of_memory_proposes_no_checkpointing(
        tmp_path: Path) -> None:
    class Mlp(Adapter):
        batch_size = 8

    raw = {**RAW, "checkpoint": {"choices": [0.0, 0.5, 1.0]}}
    requests, _ = fake_search(tmp_path, raw, Mlp, mlp, trials=12)
    assert len(requests) >= 8
    assert {q.config.checkpoint for q in requests} == {0.0}
