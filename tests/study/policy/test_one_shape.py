"""The one-shape stage: the dtypes again at one shape, then its fastest compiled with graphs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import optuna
import pytest
from helpers import FakeRunner
from optuna.trial import TrialState

from autotune import Adapter, Diagnosis, Status, TrainConfig, TrialResult, Verdict
from autotune.outputs.display import QuietListener
from autotune.study.policy.one_shape import OneShapeStage, shape_fixing
from autotune.study.policy.ladder import Ladder
from autotune.study.search import Search, SearchSettings
from autotune.study.space.file import parse_space
from autotune.study.store.records import TrialRecord, measured


class Padded(Adapter):
    unit = "tokens"
    batch_size = 8
    knobs = {"pad": {"choices": [None, 64, 1024]}, "attn": {"choices": ["sdpa", "eager"]},
             "mask": {"choices": ["keep", "drop"]}}


RAW = {"num_workers": {"choices": [0, 8]}, "prefetch_factor": {"choices": [4]},
       "pin_memory": {"choices": [False, True]}, "persistent_workers": {"choices": [True]},
       "amp_dtype": {"choices": ["fp32", "tf32", "bf16", "fp16"]},
       "compile": {"choices": ["none", "default", "reduce-overhead"]},
       "optimizer_impl": {"choices": ["default", "fused"]}}


def space() -> Any:
    return parse_space(RAW, source="s.yaml", adapter=Padded, device_type="cuda", cpus=16)


def record(number: int, config: TrainConfig, rate: float, vary: bool, role: str = "eager: x"
           ) -> TrialRecord:
    result = TrialResult(status=Status.OK, throughput=rate, shapes_vary=vary)
    return TrialRecord(number=number, state=TrialState.COMPLETE, value=rate, config=config,
                       result=result, role=role)


def test_the_values_that_keep_one_shape_are_those_no_varying_trial_had() -> None:
    s = space()
    base = s.baseline.replace(amp_dtype="tf32")
    ran = [record(1, base, 58.0, True),
           record(2, s.changed(base, pad=64), 58.2, True),
           record(3, s.changed(base, pad=1024), 55.7, False),
           record(4, s.changed(base, mask="drop"), 69.6, True)]
    assert shape_fixing(s, measured(ran)) == {"pad": 1024}  # sdpa and keep varied elsewhere
    assert shape_fixing(s, measured(ran[:2])) == {}  # no trial of one shape


def test_a_shape_varied_by_another_knob_fixes_no_adapter_knob() -> None:
    # A batch size that leaves a short last batch varies the shape whatever the adapter's
    # knobs: bs 16 varied, bs 8 kept one shape with either attention (found in review).
    class Varying(Padded):
        vary_global_batch = True

    s = parse_space({**RAW, "batch_size": {"factors": [1, 2]}}, source="s.yaml",
                    adapter=Varying, device_type="cuda", cpus=16)
    small = s.baseline
    ran = [record(1, s.with_batch(small, 16), 60.0, True),
           record(2, small, 50.0, False),
           record(3, s.changed(small, attn="eager"), 55.0, False)]
    assert shape_fixing(s, measured(ran)) == {}
    ran.append(record(4, s.changed(small, attn="eager", pad=1024), 56.0, False))
    ran.append(record(5, s.changed(small, attn="eager", pad=64), 49.0, True))  # pad 64 varied
    assert shape_fixing(s, measured(ran)) == {"pad": 1024}


def test_the_stage_runs_the_dtypes_at_one_shape_on_the_best_eager_knobs_then_compiles_once(
        ) -> None:
    s = space()
    base = s.baseline.replace(amp_dtype="tf32", num_workers=8, prefetch_factor=4,
                              persistent_workers=True)
    ran = [record(1, base, 58.0, True),
           record(2, s.changed(base, pad=1024), 55.7, False),
           record(3, s.changed(base, mask="drop"), 69.6, True)]
    stage = OneShapeStage(s, device="cuda")
    assert stage.due(ran, [("eager: knob", base)]) == ([], [])  # the knob stage runs first
    eager, compiled = stage.due(ran, [])
    one = s.changed(base, mask="drop", pad=1024)
    assert compiled == []
    assert [c for _, c in eager][0] == one  # the best's knobs (drop), the shape fixed
    assert {c.amp_dtype for _, c in eager} == {"tf32", "bf16", "fp16", "fp32"}
    bf16 = s.changed(one, amp_dtype="bf16")
    ran += [record(4, one, 56.0, False), record(5, bf16, 78.7, False),
            record(6, s.changed(one, amp_dtype="fp16"), 75.0, False)]
    # On several GPUs the fp32 trial may still run on another: nothing is compiled yet (the
    # fastest dtype is not known).
    fp32 = s.changed(one, amp_dtype="fp32")
    running = TrialRecord(number=7, state=TrialState.RUNNING, value=None, config=fp32,
                          result=None, role=f"eager: {fp32.describe()}")
    assert stage.due([*ran, running], []) == ([], [])
    eager, compiled = stage.due(ran, [])
    assert eager == [] and [c for _, c in compiled] == [bf16.replace(compile="reduce-overhead")]
    assert stage.due(ran, []) == ([], [])  # once


def test_an_urgent_start_stays_ahead_of_later_bests_follow_ups() -> None:
    s = space()
    graphs = ("follow: graphs", s.baseline.replace(compile="reduce-overhead"))
    check = ("follow: pin", s.baseline.replace(pin_memory=True))
    later = ("follow: workers", s.baseline.replace(num_workers=8))
    ladder = Ladder()
    ladder.add([check], new_best=True)
    ladder.add([graphs], new_best=True, urgent=True)
    ladder.add([later], new_best=True)  # a new best's: still behind the urgent start
    assert ladder.pending == [graphs, later, check]


# The transformers GPT-2 padded per batch on an H100 (2026-11-26, results/h100/search/hf_gpt2/):
# real tokens/s by dtype at per-batch lengths and padded to 1024 (eager), the padding mask
# dropped (1.2x at varying shapes), a dynamic compile (1.08x), and CUDA graphs of one shape.
VARYING = {"fp32": 31e3, "tf32": 58e3, "bf16": 41e3, "fp16": 47e3}
ONE = {"fp32": 28e3, "tf32": 55.7e3, "bf16": 78.7e3, "fp16": 75e3}
GRAPHS = {"fp32": 60e3, "tf32": 120e3, "bf16": 206e3, "fp16": 200e3}


def hf_gpt2(call: int, request: Any) -> TrialResult:
    c = request.config
    one = c.params["pad"] == 1024
    if one and c.compile == "reduce-overhead":
        rate = GRAPHS[c.amp_dtype]
    else:
        rate = (ONE if one else VARYING)[c.amp_dtype]
        rate *= 1.2 if c.params["mask"] == "drop" and not one else 1.0
        rate *= 0.97 if c.params["attn"] == "eager" else 1.0
        rate *= {"none": 1.0, "default": 1.3 if one else 1.08, "reduce-overhead": 0.5}[c.compile]
    return TrialResult(status=Status.OK, throughput=rate, shapes_vary=not one,
                       diagnosis=Diagnosis(verdict=Verdict.COMPUTE, suggestion="",
                                           throughput=rate, loader_rate=1e7, compute_rate=rate,
                                           data_wait_fraction=0.0, gpu_busy_fraction=0.95))


def test_a_padded_transformers_step_finds_padding_with_graphs_in_bf16(tmp_path: Path) -> None:
    # The H100 search of 2026-11-26 ended at 73.4k: tf32 + mask dropped + a dynamic compile.
    # Its eager trials were ten; the budget then paid three compiles.
    runner = FakeRunner(hf_gpt2)
    settings = SearchSettings(adapter=tmp_path / "a.py", space_source="s.yaml", device="cuda",
                              out=tmp_path / "out", storage=str(tmp_path / "study.db"),
                              study_name="t", trials=16, seed=0, confirm=0)
    Search(settings, space(), Padded, runner=runner, listener=QuietListener()).run()
    ran = [(q.config.amp_dtype, q.config.compile, q.config.params["pad"])
           for q in runner.requests]
    first_compile = next(i for i, r in enumerate(ran) if r[1] != "none")
    assert ran[first_compile] == ("bf16", "reduce-overhead", 1024), ran
    study = optuna.load_study(study_name="t", storage=f"sqlite:///{tmp_path / 'study.db'}")
    assert study.best_value == pytest.approx(206e3)


def test_the_fastest_one_shape_trial_is_compiled_whatever_its_role_and_only_once_queued(
        ) -> None:
    s = space()
    base = s.baseline.replace(amp_dtype="tf32")
    one = s.changed(base, pad=1024)
    ran = [record(1, base, 58.0, True, role="recipe"),
           record(2, one, 80.0, False, role="")]  # TPE's: no eager role
    stage = OneShapeStage(s, device="cuda")
    stage.eager_queued = True  # its eager trials have run
    eager, compiled = stage.due(ran, [])
    assert eager == [] and [c for _, c in compiled] == [one.replace(compile="reduce-overhead")]
    assert stage.compiled_queued
    # Its compiled form ran already (TPE's): nothing more to queue, the stage is done.
    again = OneShapeStage(s, device="cuda")
    again.eager_queued = True
    done = ran + [record(3, one.replace(compile="reduce-overhead"), 200.0, False)]
    assert again.due(done, []) == ([], []) and again.compiled_queued
    # A space without compile modes: nothing queued, and the stage stays open.
    bare = parse_space({"amp_dtype": {"choices": ["fp32", "tf32"]}}, source="s.yaml",
                       adapter=Padded, device_type="cuda", cpus=16)
    none = OneShapeStage(bare, device="cuda")
    none.eager_queued = True
    assert none.due([record(1, bare.baseline, 58.0, True),
                     record(2, bare.changed(bare.baseline, pad=1024), 80.0, False)], []) \
        == ([], []) and not none.compiled_queued


def test_an_urgent_start_already_pending_moves_first() -> None:
    s = space()
    graphs = ("follow: graphs", s.baseline.replace(compile="reduce-overhead"))
    check = ("follow: pin", s.baseline.replace(pin_memory=True))
    ladder = Ladder()
    ladder.add([check, graphs], new_best=True)
    ladder.add([graphs], new_best=True, urgent=True)
    assert ladder.pending == [graphs, check]
