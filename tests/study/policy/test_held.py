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
    assert held([record(0)], lambda k: every[k]) == NO_CONVOLUTION
    assert held([record(3)], lambda k: every[k]) == {}
    assert held([record(None)], lambda k: every[k]) == {}  # not counted: may have some
    assert held([record(0), record(2)], lambda k: every[k]) == {}  # a variant has some
    fixed = {"memory_format": ("contiguous",), "cudnn_benchmark": (False, True)}
    assert held([record(0)], lambda k: fixed[k]) == {"cudnn_benchmark": False}


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
    assert held(leads, lambda k: values[k], no_compile_fits=True) == {"compile": "none"}
    assert held(leads, lambda k: values[k]) == {}  # a compile may still fit
    behind = [ran(0, eager, 100.0), ran(1, compiled, 150.0)]  # the compiled best: not held
    assert held(behind, lambda k: values[k], no_compile_fits=True) == {}


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
