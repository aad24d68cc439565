"""A compiled step that keeps recompiling in warm-up ends there, as an error that says so and
names the shapes, instead of running to the trial's limit (a detection-style batch on 2 CPUs was
killed "still warming up" at 84 s). Injected clock and compile timer: no real time passes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO_ROOT, FakeClock, RecompilingStep

from autotune import MeasureSettings, Status, TrainConfig
from autotune.contract.recompiles import divisor
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
    # In a process of its own: a compile there starts work that would slow the tests after it.
    script = """
import json, torch
from autotune.contract.recompiles import SEPARATOR, divisor
from autotune.trial.features.compile import CompileWatch

def aligned(x):
    return x * 2 if x.shape[1] % 16 == 0 else x + 1

def rows_aligned(x):
    return x * 3 if x.shape[0] % 8 == 0 else x - 1

f = torch.compile(aligned, dynamic=True, backend="eager")
g = torch.compile(rows_aligned, dynamic=True, backend="eager")
watch = CompileWatch()
f(torch.ones(2, 17))
f(torch.ones(2, 32))  # a recompile within the first step: expected, not reported
g(torch.ones(2, 5))
watch.first_step_done()
f(torch.ones(2, 33))  # both sides of the guard compiled already: nothing new
quiet = watch.reasons()
g(torch.ones(8, 5))
seen, event = watch.read(), watch.event()
print(json.dumps({"quiet": quiet, "reasons": seen.reasons, "count": seen.count,
                  "multiple": divisor(SEPARATOR.join(seen.reasons)),
                  "event": [event.count, divisor(event.reasons), event.reasons]}))
"""
    ran = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         cwd=REPO_ROOT, timeout=120)
    assert ran.returncode == 0, ran.stderr[-2000:]
    got = json.loads(ran.stdout.strip().splitlines()[-1])
    assert got["quiet"] == []
    assert len(got["reasons"]) == 1 and "% 8" in got["reasons"][0], got
    assert (got["multiple"], got["count"]) == (8, 1)
    assert got["event"] == [1, 8, got["reasons"][0]]


def test_a_trial_streams_each_recompile_and_a_storm_keeps_the_guards(
        tmp_path: Path, tiny_adapter: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The wiring of time_step: the warm-up wrapper tells each step after the first that
    # compiled, the trial streams it (what a killed trial's reason is made of), and a storm
    # carries the watch's guards into the result. torch.compile is the identity here, and
    # Dynamo's compile seconds a counter: no compile runs.
    import torch

    from autotune.contract.events import RecompileEvent, decode
    from autotune.trial import measure as measure_module
    from autotune.trial.features import compile as compile_feature

    ticks = iter(range(1000))
    monkeypatch.setattr(torch, "compile", lambda fn, **kw: fn)
    monkeypatch.setattr(compile_feature, "compile_seconds", lambda: float(next(ticks)))
    guard = "(input_ids.size()[1] % 16) != 0 (meta__sdpa)"
    monkeypatch.setattr(compile_feature.CompileWatch, "reasons", lambda self: (guard,))

    def warming(step, *, on_first_step, **kwargs):  # type: ignore[no-untyped-def]
        step()
        on_first_step(1.0)
        step()
        step()
        raise RecompileStorm(steps=3, recompiling=2, seconds=2.0)

    monkeypatch.setattr(measure_module, "measure", warming)
    request = TrialRequest(adapter=str(tiny_adapter), device="cpu", diagnose=False,
                           check_env=False, config=TrainConfig(batch_size=8, compile="default"))
    events = tmp_path / "events.jsonl"
    result = run_trial(request, events=events)
    told = [e for e in map(decode, events.read_text().splitlines())
            if isinstance(e, RecompileEvent)]
    assert len(told) == 2 and all(e.reasons == guard and divisor(e.reasons) == 16 for e in told)
    assert result.recompile_reason == guard and divisor(result.recompile_reason) == 16
    assert "Pad the varying lengths to a multiple of 16" in result.reason


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
    assert "Pad the varying lengths to a multiple of 16 (Dynamo's guards test" in result.reason
    assert divisor(result.recompile_reason) == 16 and "% 16" in result.recompile_reason
