"""A compiled step whose batches change shape: it peeks at its first batches, compiles with
dynamic shapes from the start when they differ, trains on the peeked batches all the same, and
reports its shapes and recompiles (tests/adapters/padded.py: sequences padded per batch)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch
from helpers import TEST_ADAPTERS

from autotune import MeasureSettings, Status, TrainConfig, load_adapter
from autotune.contract.request import TrialRequest
from autotune.contract.result import RECOMPILING
from autotune.trial.compose import PEEK_BATCHES, compose
from autotune.trial.features.compile import MARK_DISTINCT, mark_varying
from autotune.trial.shapes import signature, varying_dims
from autotune.trial.worker import run_trial

PADDED = TEST_ADAPTERS / "padded.py"
SPECIALIZED = TEST_ADAPTERS / "specialized.py"
BUCKETED = TEST_ADAPTERS / "bucketed.py"


def step_of(adapter: Path, compile: str):  # type: ignore[no-untyped-def]
    return compose(load_adapter(adapter)(), TrainConfig(batch_size=8, compile=compile),
                   torch.device("cpu"))


def test_an_eager_step_pulls_one_batch_ahead_as_before() -> None:
    step = step_of(PADDED, "none")
    step.start_loader()
    assert len(step._pending) == 1 and not step.dynamic_shapes


@pytest.mark.slow  # imports torch._dynamo (seconds); nothing is compiled
def test_peeked_batches_of_varying_shapes_compile_dynamic_and_are_trained_on_in_order() -> None:
    step = step_of(PADDED, "default")
    first = step.forward_model
    step.start_loader()
    peeked = list(step._pending)
    assert len(peeked) == PEEK_BATCHES and len({signature(b) for b in peeked}) > 1
    assert step.dynamic_shapes and step.forward_model is not first
    assert step.forward_model._orig_mod is first._orig_mod  # the same model, compiled again
    assert [step.next_batch()[0] for _ in peeked] == peeked  # not lost: trained on first
    assert step.shapes.vary and step.shapes.count == len({signature(b) for b in peeked})
    step.close()


@pytest.mark.slow
def test_fixed_shapes_compile_as_before(tiny_adapter: Path) -> None:
    step = step_of(tiny_adapter, "default")
    first = step.forward_model
    step.start_loader()
    assert not step.dynamic_shapes and step.forward_model is first
    step.close()


@pytest.mark.slow  # torch.compile on the CPU: 20-60 s
def test_a_compiled_trial_on_varying_lengths_compiles_dynamic_once(tmp_path: Path) -> None:
    measure = MeasureSettings(window_seconds=0.05, budget_seconds=1.0, max_windows=5)
    request = TrialRequest(adapter=str(PADDED), device="cpu", measure=measure, diagnose=False,
                           check_env=False, config=TrainConfig(batch_size=8, compile="default"))
    result = run_trial(request, events=tmp_path / "events.jsonl")
    assert result.status is Status.OK, result.reason
    assert result.shapes_vary and result.dynamic_shapes
    assert result.shape_count is not None and result.shape_count >= 6
    assert result.shape_range is not None and result.shape_range.startswith("input_ids[1] ")
    assert result.recompiles is not None and result.recompiles <= 2
    assert result.recompile_seconds is not None and result.settled


def test_the_dims_that_vary_between_batches_are_found_and_marked_dynamic() -> None:
    a = {"input_ids": torch.zeros(4, 10), "mask": torch.zeros(4, 10), "label": torch.zeros(4)}
    b = {"input_ids": torch.zeros(4, 12), "mask": torch.zeros(4, 12), "label": torch.zeros(4)}
    c = {"input_ids": torch.zeros(4, 12), "extra": torch.zeros(3), "label": torch.zeros(4)}
    dims = varying_dims([signature(a), signature(b)])
    assert dims == {("input_ids", 1), ("mask", 1)}
    assert varying_dims([signature(a), signature(c)]) == {("input_ids", 1)}  # held by both
    assert varying_dims([signature(a)]) == set() and varying_dims([]) == set()
    assert mark_varying(b, dims) is b
    assert b["input_ids"]._dynamo_dynamic_indices == {1}  # what torch._dynamo.mark_dynamic sets
    assert not hasattr(b["label"], "_dynamo_dynamic_indices")
    one = {"input_ids": torch.zeros(4, 1)}  # a size under 2 is never marked (Dynamo's 0/1)
    mark_varying(one, dims)
    assert not hasattr(one["input_ids"], "_dynamo_dynamic_indices")


@pytest.mark.slow  # torch.compile on the CPU; Dynamo stops at its trace, nothing is built
def test_a_compile_that_specializes_the_varying_length_is_an_error_naming_the_line(
        tmp_path: Path) -> None:
    measure = MeasureSettings(window_seconds=0.05, budget_seconds=1.0, max_windows=5)
    request = TrialRequest(adapter=str(SPECIALIZED), device="cpu", measure=measure,
                           diagnose=False, check_env=False,
                           config=TrainConfig(batch_size=8, compile="default"))
    result = run_trial(request, events=tmp_path / "events.jsonl")
    assert result.status is Status.ERROR and result.reason.startswith(RECOMPILING)
    assert "specialized a dimension that varies between batches" in result.reason
    assert "specialized.py" in result.reason and "Pad the varying dimensions" in result.reason
    assert result.contract_error == ""  # the compile's, not the adapter's
    assert "L['ids'].size()[1]" in result.reason  # the dimension, as the model saw it
    # Eager, the same adapter trains: the error is the compile's alone.
    eager = run_trial(dataclasses.replace(request, config=TrainConfig(batch_size=8)))
    assert eager.status is Status.OK, eager.reason


@pytest.mark.slow  # torch.compile on the CPU
def test_a_few_bucket_lengths_are_not_marked_and_compile_once_each(tmp_path: Path) -> None:
    step = step_of(BUCKETED, "default")
    step.start_loader()
    assert step.dynamic_shapes and step._varying == frozenset()  # peeked batches repeat
    step.close()
    measure = MeasureSettings(window_seconds=0.05, budget_seconds=1.0, max_windows=5)
    request = TrialRequest(adapter=str(BUCKETED), device="cpu", measure=measure, diagnose=False,
                           check_env=False, config=TrainConfig(batch_size=8, compile="default"))
    result = run_trial(request, events=tmp_path / "events.jsonl")
    # The model specializes the length, so each bucket compiles once: paid, then settled.
    assert result.status is Status.OK, result.reason
    assert result.shape_count == 2 and result.recompiles is not None and result.recompiles <= 2


@pytest.mark.slow  # imports torch._dynamo; nothing is compiled
@pytest.mark.parametrize("sizes, marked", [(MARK_DISTINCT - 1, False), (MARK_DISTINCT, True)])
def test_marks_need_many_distinct_shapes_among_the_peeked_batches(sizes: int,
                                                                  marked: bool) -> None:
    lengths = tuple(range(16, 16 + 2 * sizes, 2))  # padded to each in turn
    adapter = type("Sized", (load_adapter(BUCKETED),), {"lengths": lengths})()
    step = compose(adapter, TrainConfig(batch_size=8, compile="default"), torch.device("cpu"))
    step.start_loader()
    assert step.dynamic_shapes and len({signature(b) for b in step._pending}) == sizes
    assert step._varying == ({("input_ids", 1), ("mask", 1)} if marked else frozenset())
    step.close()
