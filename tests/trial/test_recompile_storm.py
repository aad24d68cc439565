"""A compiled step that keeps recompiling in warm-up ends there, as an error that says so and
names the shapes, instead of running to the trial's limit (a detection-style batch on 2 CPUs was
killed "still warming up" at 84 s). Injected clock and compile timer: no real time passes."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import FakeClock, RecompilingStep

from autotune import MeasureSettings, Status, TrainConfig
from autotune.contract.request import TrialRequest
from autotune.contract.result import RECOMPILING
from autotune.trial import steps
from autotune.trial.warmup import RECOMPILING_STEPS, RecompileStorm, warm_up
from autotune.trial.worker import run_trial

STEP = 0.01


def warm(at: set[int], **kw: object) -> object:
    clock = FakeClock()
    step = RecompilingStep(clock, at, step=STEP, compile=5.0)
    return warm_up(step, sync=lambda: None, clock=clock,
                   settings=MeasureSettings(min_warmup_steps=3, max_warmup_steps=50),
                   compiled_seconds=lambda: step.compiled, **kw)  # type: ignore[arg-type]


def test_a_step_that_keeps_recompiling_ends_its_warm_up_with_an_error_saying_so() -> None:
    with pytest.raises(RecompileStorm) as caught:
        warm(set(range(0, 50, 2)))  # the first step's compile, then every other step
    storm = caught.value
    assert storm.recompiling == RECOMPILING_STEPS and storm.seconds == 5.0 * RECOMPILING_STEPS
    assert storm.steps == 2 * RECOMPILING_STEPS + 1
    assert f"recompiled in {RECOMPILING_STEPS} of its first {storm.steps}" in str(storm)


def test_a_recompile_or_two_after_the_first_compile_is_a_cost_not_a_storm() -> None:
    w = warm({0, 4, 9})  # dynamic shapes from the start: a transformers model recompiled once
    assert w.settled  # type: ignore[attr-defined]


def test_ranks_measuring_as_one_never_give_up_alone() -> None:
    w = warm(set(range(0, 12)), gather=lambda t: [t])
    assert w.settled  # type: ignore[attr-defined]


def test_the_trial_reports_an_error_that_names_the_shapes(tmp_path: Path, tiny_adapter: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    def storming(step, *args, **kwargs):  # type: ignore[no-untyped-def]
        for _ in range(3):
            step.next_batch()
        raise RecompileStorm(steps=7, recompiling=3, seconds=41.0)

    monkeypatch.setattr(steps, "time_step", storming)
    request = TrialRequest(adapter=str(tiny_adapter), device="cpu", diagnose=False,
                           check_env=False, config=TrainConfig(batch_size=8))
    result = run_trial(request, events=tmp_path / "events.jsonl")
    assert result.status is Status.ERROR and result.reason.startswith(RECOMPILING)
    assert "recompiled in 3 of its first 7 warm-up steps (41 s" in result.reason
    assert "Pad the varying dimensions" in result.reason
    assert (result.recompiles, result.recompile_seconds) == (3, 41.0)
    assert result.shapes_vary is False and result.shape_count == 1  # the tiny adapter's one


def test_the_watch_reads_why_dynamo_compiled_again_after_the_first_step() -> None:
    # A guard on a length's divisibility, as SDPA's memory-efficient backward makes one (a
    # transformers T5 on padded batches, bf16, H100, 2026-11-28): Dynamo's own words, read back.
    import torch

    from autotune.trial.features.compile import CompileWatch

    torch._dynamo.reset()

    def aligned(x: torch.Tensor) -> torch.Tensor:
        return x * 2 if x.shape[1] % 16 == 0 else x + 1

    f = torch.compile(aligned, dynamic=True, backend="eager")
    watch = CompileWatch()
    f(torch.ones(2, 17))
    watch.first_step_done()
    assert watch.reasons() == ()
    f(torch.ones(2, 33))  # the same remainder: no recompile
    f(torch.ones(2, 32))
    seen = watch.read()
    assert len(seen.reasons) == 1 and "% 16" in seen.reasons[0], seen.reasons
    assert seen.multiple == 16 and seen.count == 1
    event = watch.event()
    assert (event.count, event.multiple, event.reason) == (1, 16, seen.reasons[0])
    torch._dynamo.reset()


def test_a_storm_on_a_divisibility_guard_says_which_multiple_to_pad_to(
        tmp_path: Path, tiny_adapter: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def storming(step, *args, **kwargs):  # type: ignore[no-untyped-def]
        storm = RecompileStorm(steps=7, recompiling=3, seconds=41.0)
        storm.reasons = ("(input_ids.size()[1] % 16) != 0 (meta__sdpa)",
                         "(labels.size()[1] % 8) == 0 (is_aligned)")
        raise storm

    monkeypatch.setattr(steps, "time_step", storming)
    request = TrialRequest(adapter=str(tiny_adapter), device="cpu", diagnose=False,
                           check_env=False, config=TrainConfig(batch_size=8))
    result = run_trial(request, events=tmp_path / "events.jsonl")
    assert "the last guard that failed: (labels.size()[1] % 8) == 0 (is_aligned)" in result.reason
    assert "Pad the varying lengths to a multiple of 16" in result.reason
    assert result.recompile_multiple == 16 and "% 16" in result.recompile_reason
