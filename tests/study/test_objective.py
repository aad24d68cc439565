"""The objective: refuse what is known to fail, reuse what was measured, infer what memory
cannot hold, run everything else; with a fake runner that runs nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers import FakeRunner
from optuna.trial import TrialState

from autotune import Diagnosis, MeasureSettings, Status, TrainConfig, TrialResult, Verdict
from autotune.contract.events import TrialEvent, WindowEvent
from autotune.contract.request import TrialRequest
from autotune.contract.result import Fingerprint
from autotune.study.execution.protocol import RunnerBase
from autotune.study.objective import Objective, Outcome
from autotune.study.store.records import TrialRecord

MEASURE = MeasureSettings(budget_seconds=5.0)
GRAPHS_WITH_ACCUM = TrainConfig(batch_size=8, grad_accum=2, compile="reduce-overhead")


def record(number: int, config: TrainConfig, result: TrialResult | None) -> TrialRecord:
    value = (result.throughput or 0.0) if result is not None else None
    return TrialRecord(number=number, state=TrialState.COMPLETE, value=value, config=config,
                       result=result)


def objective(tmp_path: Path, runner: Any, finished: list[TrialRecord] | None = None,
              device: str = "cpu", infer_slow: bool = False) -> Objective:
    return Objective(adapter=Path("adapters/mlp.py"), device=device, out=tmp_path,
                     runner=runner, measure=MEASURE, finished=lambda: list(finished or []),
                     infer_slow=infer_slow)


OOM = TrialResult(status=Status.OOM, reason="OutOfMemoryError: CUDA out of memory")


# -- running -------------------------------------------------------------------------------------------


def test_a_new_config_runs_in_a_trial_folder_of_its_own(tmp_path: Path) -> None:
    runner = FakeRunner()
    config = TrainConfig(batch_size=16, num_workers=2)
    outcome = objective(tmp_path, runner)(5, config, limit=42.0)
    assert outcome == Outcome(result=TrialResult(status=Status.OK, throughput=1600.0,
                                                 duration_seconds=1.0))
    (request,) = runner.requests
    assert request == TrialRequest(adapter="adapters/mlp.py", config=config, device="cpu",
                                   measure=MEASURE, number=5)
    assert runner.timeouts == [42.0]
    assert (tmp_path / "trials" / "5").is_dir()


def test_events_reach_the_caller(tmp_path: Path) -> None:
    class Streaming(RunnerBase):
        def run(self, request: TrialRequest, trial_dir: Path, *, timeout: float,
                on_event: Any = None) -> TrialResult:
            on_event(WindowEvent(throughput=3.0))
            return TrialResult(status=Status.OK, throughput=3.0)

    seen: list[TrialEvent] = []
    objective(tmp_path, Streaming())(0, TrainConfig(batch_size=8), limit=1.0, on_event=seen.append)
    assert seen == [WindowEvent(throughput=3.0)]


# -- refusing ------------------------------------------------------------------------------------------


def test_a_known_incompatible_config_is_refused_without_running(tmp_path: Path) -> None:
    runner = FakeRunner()
    outcome = objective(tmp_path, runner, device="cuda")(1, GRAPHS_WITH_ACCUM, limit=60.0)
    assert outcome.result.status is Status.ERROR  # told as infeasible: the sampler learns it
    assert outcome.result.reason.startswith("not run: compile=reduce-overhead replays CUDA graphs")
    assert outcome.duplicate_of is None
    assert runner.requests == [] and not (tmp_path / "trials").exists()


def test_the_same_config_runs_where_it_is_compatible(tmp_path: Path) -> None:
    runner = FakeRunner()
    outcome = objective(tmp_path, runner, device="cpu")(1, GRAPHS_WITH_ACCUM, limit=60.0)
    assert outcome.result.status is Status.OK
    assert [r.config for r in runner.requests] == [GRAPHS_WITH_ACCUM]


def test_a_refused_config_is_refused_again_not_copied(tmp_path: Path) -> None:
    refused = TrialResult(status=Status.ERROR, ran=False, reason="not run: ...")
    earlier = [record(0, GRAPHS_WITH_ACCUM, refused)]
    outcome = objective(tmp_path, FakeRunner(), earlier, device="cuda")(1, GRAPHS_WITH_ACCUM,
                                                                         limit=60.0)
    assert outcome.duplicate_of is None
    assert outcome.result.reason.startswith("not run: compile=reduce-overhead")


# -- reusing -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("earlier", [TrialResult(status=Status.OK, throughput=123.0), OOM],
                         ids=["ok", "oom"])
def test_a_config_measured_before_is_not_run_again(tmp_path: Path, earlier: TrialResult) -> None:
    runner = FakeRunner()
    config = TrainConfig(batch_size=16)
    finished = [record(0, TrainConfig(batch_size=8), TrialResult(status=Status.OK, throughput=1.0)),
                record(2, config, earlier)]
    outcome = objective(tmp_path, runner, finished)(7, config, limit=60.0)
    assert outcome == Outcome(result=earlier, duplicate_of=2)
    assert runner.requests == []


def test_threads_null_runs_with_count_as_null_itself(tmp_path: Path) -> None:
    # On a 2-CPU VM PyTorch runs 2 intra-op threads by default: cpu.yaml's null and 2 are one
    # step under two names, and the sampler measured both (stop 50's held-out searches).
    here = Fingerprint(torch_threads=2)
    null = TrainConfig(batch_size=16, num_workers=1)
    finished = [record(0, null, TrialResult(status=Status.OK, throughput=5.0, fingerprint=here))]
    runner = FakeRunner()
    two = objective(tmp_path, runner, finished)(1, null.replace(intra_op_threads=2), limit=60.0)
    assert two.duplicate_of == 0 and runner.requests == []
    # One thread, or another config, still runs; and null after a measured 2 is its copy too.
    one = objective(tmp_path, runner, finished)(2, null.replace(intra_op_threads=1), limit=60.0)
    assert one.duplicate_of is None and len(runner.requests) == 1
    counted = [record(0, null.replace(intra_op_threads=2),
                      TrialResult(status=Status.OK, throughput=5.0, fingerprint=here))]
    assert objective(tmp_path, runner, counted)(3, null, limit=60.0).duplicate_of == 0
    # Where no trial said its count (results from before), nothing is a copy.
    unknown = [record(0, null, TrialResult(status=Status.OK, throughput=5.0))]
    assert objective(tmp_path, runner, unknown)(4, null.replace(intra_op_threads=2),
                                                limit=60.0).duplicate_of is None


def test_a_config_pruned_before_is_not_run_again(tmp_path: Path) -> None:
    runner = FakeRunner()
    config = TrainConfig(batch_size=16)
    pruned = TrialResult(status=Status.PRUNED, reason="pruned after 2 window(s)",
                         throughput=10.0, windows=2, window_throughputs=(9.0, 11.0))
    finished = [TrialRecord(number=3, state=TrialState.PRUNED, value=None, config=config,
                            result=pruned)]
    outcome = objective(tmp_path, runner, finished)(7, config, limit=60.0)
    assert outcome == Outcome(result=pruned, duplicate_of=3)
    assert runner.requests == []


def test_a_trial_without_a_result_is_not_reused(tmp_path: Path) -> None:
    runner = FakeRunner()
    config = TrainConfig(batch_size=16)
    outcome = objective(tmp_path, runner, [record(0, config, None)])(1, config, limit=60.0)
    assert outcome.duplicate_of is None and len(runner.requests) == 1


def test_only_the_same_config_is_a_duplicate(tmp_path: Path) -> None:
    runner = FakeRunner()
    finished = [record(0, TrainConfig(batch_size=16),
                       TrialResult(status=Status.OK, throughput=1.0))]
    outcome = objective(tmp_path, runner, finished)(1, TrainConfig(batch_size=16, pin_memory=True),
                                                    limit=60.0)
    assert outcome.duplicate_of is None and len(runner.requests) == 1


# -- the memory wall -----------------------------------------------------------------------------------


def test_a_larger_batch_than_one_that_ran_out_of_memory_is_not_run(tmp_path: Path) -> None:
    runner = FakeRunner()
    finished = [record(3, TrainConfig(batch_size=32, num_workers=2), OOM)]
    run = objective(tmp_path, runner, finished)
    # Workers do not change what a step holds in memory: the same wall.
    implied = run(4, TrainConfig(batch_size=64, num_workers=4), limit=60.0)
    assert implied.result.status is Status.OOM and implied.duplicate_of is None
    assert not implied.result.ran
    assert implied.result.reason == ("not run: implied by trial 3, which ran out of memory at "
                                     "batch_size=32")
    assert runner.requests == []
    # A smaller batch, or other memory-relevant knobs, may fit: they run.
    for config in (TrainConfig(batch_size=16), TrainConfig(batch_size=64, amp_dtype="bf16"),
                   TrainConfig(batch_size=64, checkpoint=1.0)):
        assert run(5, config, limit=60.0).result.status is Status.OK
    assert len(runner.requests) == 3


def test_an_implied_oom_is_no_wall_of_its_own(tmp_path: Path) -> None:
    runner = FakeRunner()
    implied = TrialResult(status=Status.OOM, ran=False,
                          reason="not run: implied by trial 1, ...")
    outcome = objective(tmp_path, runner, [record(2, TrainConfig(batch_size=32), implied)])(
        3, TrainConfig(batch_size=64), limit=60.0)
    assert outcome.result.status is Status.OK and len(runner.requests) == 1


# -- a smaller batch behind an overhead-bound trial -------------------------------------------------


def bound(verdict: Verdict, rate: float) -> TrialResult:
    return TrialResult(status=Status.OK, throughput=rate, duration_seconds=10.0,
                       diagnosis=Diagnosis(verdict=verdict, suggestion="", throughput=rate,
                                           loader_rate=1e9, compute_rate=rate,
                                           data_wait_fraction=0.0, gpu_busy_fraction=0.3))


GRAPHS_512 = TrainConfig(batch_size=512, num_workers=8, compile="reduce-overhead")


def test_a_quarter_of_an_overhead_bound_trials_batch_is_not_run(tmp_path: Path) -> None:
    # The H100 tinyblocks grid: reduce-overhead ran 2.5k, 10.3k, 43.8k samples/s at bs 32, 128,
    # 512. At bs 128, 1.5 x a quarter of 43.8k (16.4k) stays under 0.6 x the best (26.3k).
    runner = FakeRunner()
    finished = [record(3, GRAPHS_512, bound(Verdict.OVERHEAD, 43_800.0))]
    run = objective(tmp_path, runner, finished, infer_slow=True)
    config = TrainConfig(batch_size=128, num_workers=15, amp_dtype="bf16", checkpoint=1.0,
                         compile="reduce-overhead")
    outcome = run(4, config, limit=60.0)
    assert runner.requests == []
    assert outcome.result.status is Status.PRUNED and outcome.duplicate_of is None
    assert outcome.ceiling == pytest.approx(1.5 * 43_800.0 / 4)
    assert outcome.result.throughput is None  # nothing was measured: the bound is no rate
    assert outcome.result.reason == (
        "not run: at most 16.4k/s, implied by trial 3, overhead-bound at batch_size=512 "
        "with compile=reduce-overhead (43.8k/s): a launch-bound step takes as long at a "
        "smaller batch")


def test_a_guided_start_is_measured_even_behind_an_overhead_bound_trial(tmp_path: Path) -> None:
    # The baseline, the recipe and the ladder's follow-ups are measured to the end.
    runner = FakeRunner()
    finished = [record(3, GRAPHS_512, bound(Verdict.OVERHEAD, 43_800.0))]
    outcome = objective(tmp_path, runner, finished, infer_slow=True)(
        4, TrainConfig(batch_size=32, compile="reduce-overhead"), limit=60.0, prunable=False)
    assert outcome.ceiling is None and len(runner.requests) == 1


@pytest.mark.parametrize("config", [
    TrainConfig(batch_size=256, compile="reduce-overhead"),  # half: 1.5 x 1/2 is over 0.6
    TrainConfig(batch_size=128, compile="default"),  # another compile mode: other launches
    TrainConfig(batch_size=128, grad_accum=4, compile="none"),  # more accumulation
])
def test_a_batch_the_overhead_bound_trial_does_not_bound_runs(
        tmp_path: Path, config: TrainConfig) -> None:
    runner = FakeRunner()
    finished = [record(3, GRAPHS_512, bound(Verdict.OVERHEAD, 43_800.0)),
                record(5, TrainConfig(batch_size=512, compile="none"),
                       bound(Verdict.OVERHEAD, 14_000.0))]
    outcome = objective(tmp_path, runner, finished, infer_slow=True)(6, config, limit=60.0)
    assert outcome.ceiling is None and len(runner.requests) == 1


def test_only_an_overhead_bound_trial_bounds_smaller_batches(tmp_path: Path) -> None:
    # Compute-bound at bs 512: a smaller batch does less work per step, not the same.
    runner = FakeRunner()
    finished = [record(3, GRAPHS_512, bound(Verdict.COMPUTE, 43_800.0))]
    outcome = objective(tmp_path, runner, finished, infer_slow=True)(
        4, TrainConfig(batch_size=32, compile="reduce-overhead"), limit=60.0)
    assert outcome.ceiling is None and len(runner.requests) == 1


def test_a_search_without_pruning_runs_what_an_overhead_bound_trial_bounds(
        tmp_path: Path) -> None:
    runner = FakeRunner()
    finished = [record(3, GRAPHS_512, bound(Verdict.OVERHEAD, 43_800.0))]
    outcome = objective(tmp_path, runner, finished)(
        4, TrainConfig(batch_size=32, compile="reduce-overhead"), limit=60.0)
    assert outcome.ceiling is None and len(runner.requests) == 1


def test_a_config_implied_slow_is_judged_again_not_copied(tmp_path: Path) -> None:
    small = TrainConfig(batch_size=32, compile="reduce-overhead")
    skipped = TrialResult(status=Status.PRUNED, ran=False,
                          reason="not run: at most 4,106/s, ...")
    # The overhead-bound trial is gone from what is known (another study's, say): it runs.
    runner = FakeRunner()
    outcome = objective(tmp_path, runner, [record(4, small, skipped)], infer_slow=True)(
        5, small, limit=60.0)
    assert outcome.duplicate_of is None and len(runner.requests) == 1


# -- diagnosis only where it can matter ----------------------------------------------------------


def test_a_trial_is_diagnosed_only_if_it_beats_the_best(tmp_path: Path) -> None:
    runner = FakeRunner()
    finished = [record(0, TrainConfig(batch_size=8), TrialResult(status=Status.OK, throughput=1000.0)),
                record(1, TrainConfig(batch_size=32), OOM)]
    objective(tmp_path, runner, finished)(2, TrainConfig(batch_size=16), limit=60.0)
    (request,) = runner.requests
    assert request.diagnose_from == pytest.approx(1000.0)
    assert TrialRequest.from_dict(request.to_dict()) == request


def test_the_first_trial_is_always_diagnosed(tmp_path: Path) -> None:
    runner = FakeRunner()
    objective(tmp_path, runner)(0, TrainConfig(batch_size=16), limit=60.0)
    assert runner.requests[0].diagnose_from is None


# -- what is left of the budget ------------------------------------------------------------------------


def _ran(number: int, config: TrainConfig, *, compile_seconds: float, seconds: float,
         status: Status = Status.OK) -> TrialRecord:
    return record(number, config, TrialResult(status=status, throughput=100.0,
                                               compile_seconds=compile_seconds,
                                               duration_seconds=seconds))


COMPILED = TrainConfig(batch_size=64, amp_dtype="bf16", compile="default")
EAGER = TrainConfig(batch_size=64, amp_dtype="bf16")


def test_a_new_graph_that_cannot_finish_in_what_is_left_is_not_started(tmp_path: Path) -> None:
    # This study compiled one graph in 30 s; its quickest trial took 6 s besides compiling.
    done = [_ran(0, EAGER, compile_seconds=0.3, seconds=6.3),
            _ran(1, COMPILED, compile_seconds=30.0, seconds=40.0)]
    runner = FakeRunner()
    new_graph = COMPILED.replace(batch_size=32)
    obj = objective(tmp_path, runner, done)
    assert obj.cold_compile(new_graph) == (36.0, 1)
    outcome = obj(2, new_graph, limit=20.0, budget_cut=True)
    assert outcome.unaffordable and outcome.result.status is Status.TIMEOUT
    assert outcome.result.reason == ("not run: compiling and running it would take about 36 s "
                                     "(as trial 1's compile took here), more than the 20 s left")
    assert runner.requests == []
    # A config without compile compiles nothing: it runs. So does the new graph when the budget
    # is not what limits it.
    for config, cut in ((EAGER.replace(batch_size=32), True), (new_graph, False)):
        assert obj.cold_compile(config) is None or not cut
        assert not obj(3, config, limit=20.0, budget_cut=cut).unaffordable
    assert len(runner.requests) == 2


def test_an_eager_config_whose_knob_made_its_trials_slow_is_not_started_short(
        tmp_path: Path) -> None:
    # MobileNetV3 on an H200 (2026-11-28, run 4): cuDNN's benchmark made its one trial take 37 s
    # (24 s of warm-up); a later proposal with it was started with 12 s left and cut in its first
    # step. The check modelled only compiles.
    bench = EAGER.replace(cudnn_benchmark=True)
    done = [_ran(0, EAGER, compile_seconds=0.3, seconds=19.0),
            _ran(1, bench, compile_seconds=0.3, seconds=37.5),
            _ran(2, EAGER.replace(num_workers=3), compile_seconds=0.3, seconds=8.7)]
    runner = FakeRunner()
    obj = objective(tmp_path, runner, done)
    outcome = obj(3, bench.replace(num_workers=11, memory_format="channels_last"), limit=12.0,
                  budget_cut=True)
    assert outcome.unaffordable == 37.5 and outcome.result.status is Status.TIMEOUT
    assert outcome.result.reason == ("not run: eager trials with cudnn_benchmark=True took at "
                                     "least 38 s here (trial 1), more than the 12 s left")
    assert runner.requests == []
    # Without that knob its values ran in 9-19 s: started. So it is when the budget does not
    # cut the trial, and a compiled config is left to the compile estimate.
    assert not obj(4, EAGER.replace(num_workers=3, pin_memory=True), limit=12.0,
                   budget_cut=True).unaffordable
    assert not obj(5, bench.replace(num_workers=2), limit=12.0, budget_cut=False).unaffordable
    assert len(runner.requests) == 2


def test_a_cached_graph_still_costs_its_quickest_compile(tmp_path: Path) -> None:
    # The persistent cache holds the graph, but Dynamo traces the model and looks the graphs up
    # again: a transformers GPT-2 spent 44 s so with every graph cached (H100), and a trial of
    # it started with 29 s left was cut while compiling.
    done = [_ran(0, EAGER, compile_seconds=0.3, seconds=6.3),
            _ran(1, COMPILED, compile_seconds=30.0, seconds=40.0),
            _ran(2, COMPILED.replace(num_workers=2), compile_seconds=12.0, seconds=19.0)]
    runner = FakeRunner()
    obj = objective(tmp_path, runner, done)
    same_graph = COMPILED.replace(num_workers=4)
    assert obj.cold_compile(same_graph) == (18.0, 2)  # the quickest compile, 12 s, + 6 s
    assert obj(3, same_graph, limit=15.0, budget_cut=True).unaffordable
    assert not obj(3, same_graph, limit=20.0, budget_cut=True).unaffordable
    assert len(runner.requests) == 1


def test_a_pruned_trial_compiled_its_graph(tmp_path: Path) -> None:
    done = [_ran(0, EAGER, compile_seconds=0.3, seconds=6.3),
            _ran(1, COMPILED, compile_seconds=30.0, seconds=40.0),
            record(2, COMPILED.replace(batch_size=32),
                   TrialResult(status=Status.PRUNED, throughput=50.0, duration_seconds=33.0))]
    obj = objective(tmp_path, FakeRunner(), done)
    assert obj.cold_compile(COMPILED.replace(batch_size=32, num_workers=2)) is None
    assert obj.cold_compile(COMPILED.replace(batch_size=16)) == (36.0, 1)
    # Nothing compiled yet: nothing to go by.
    assert objective(tmp_path, FakeRunner(), done[:1]).cold_compile(COMPILED) is None


def _counted(number: int, config: TrainConfig, ops: int, distinct: int, *, seconds: float,
             vary: bool = False) -> TrialRecord:
    """An eager trial whose diagnosis counted `ops` ATen calls a step, `distinct` of them
    distinct."""
    diagnosis = Diagnosis(verdict=Verdict.COMPUTE, suggestion="", throughput=100.0,
                          loader_rate=None, compute_rate=None, data_wait_fraction=0.0,
                          gpu_busy_fraction=0.9, step_ops=ops,
                          distinct_ops=distinct)
    return record(number, config, TrialResult(status=Status.OK, throughput=100.0,
                                               compile_seconds=0.5, duration_seconds=seconds,
                                               diagnosis=diagnosis, shapes_vary=vary))


def test_the_first_compile_is_estimated_from_the_eager_steps_op_count(tmp_path: Path) -> None:
    # A held-out transformers BERT (2,416 ATen calls a step, 132 distinct, shapes varying) had
    # its first compile killed at a 56-s limit, still in its first step (H100, 2026-11-27).
    # From its eager trials' count the compile is about (4 + 0.005 x 2416 + 0.12 x 132) x 3 =
    # 96 s, + 11.5 s of the rest.
    done = [_counted(0, TrainConfig(batch_size=32), 2416, 132, seconds=12.0, vary=True),
            _counted(1, EAGER, 2400, 130, seconds=20.0, vary=True)]
    runner = FakeRunner()
    obj = objective(tmp_path, runner, done, device="cuda")
    cold = obj.cold_compile(COMPILED)
    assert cold is not None and cold[1] == 0 and cold[0] == pytest.approx(95.8 + 11.5, abs=0.1)
    outcome = obj(2, COMPILED, limit=56.0, budget_cut=True)
    assert outcome.unaffordable and runner.requests == []
    assert "trial 0's eager step dispatched 2,416 operations, 132 distinct" in outcome.result.reason
    assert "x3 with shapes that vary" in outcome.result.reason
    assert "more than the 56 s left" in outcome.result.reason
    # With the time, it runs; with fixed shapes the estimate is a third.
    assert not obj(2, COMPILED, limit=120.0, budget_cut=True).unaffordable
    fixed = [_counted(0, TrainConfig(batch_size=32), 2416, 132, seconds=12.0)]
    cold = objective(tmp_path, FakeRunner(), fixed, device="cuda").cold_compile(COMPILED)
    assert cold is not None and cold[0] == pytest.approx(31.9 + 11.5, abs=0.1)
    # A checkpointed trial counts its recomputed forward too: a plain one's count is taken.
    ckpt = _counted(2, EAGER.replace(checkpoint=1.0), 4000, 200, seconds=20.0)
    cold = objective(tmp_path, FakeRunner(), [*fixed, ckpt], device="cuda").cold_compile(COMPILED)
    assert cold is not None and cold[1] == 0
    # No count (an old study, a compiled baseline) or a CPU device: nothing to go by, as before.
    assert objective(tmp_path, FakeRunner(), done, device="cpu").cold_compile(COMPILED) is None
    plain = [_ran(0, EAGER, compile_seconds=0.3, seconds=6.3)]
    assert objective(tmp_path, FakeRunner(), plain, device="cuda").cold_compile(COMPILED) is None
    # A compiled trial that failed timed no compile: the estimate, and the words, stay the prior's.
    failed = record(2, COMPILED.replace(batch_size=16),
                    TrialResult(status=Status.ERROR, reason="boom", duration_seconds=30.0))
    obj = objective(tmp_path, FakeRunner(), [*done, failed], device="cuda")
    outcome = obj(3, COMPILED, limit=56.0, budget_cut=True)
    assert outcome.unaffordable and "eager step dispatched 2,416" in outcome.result.reason
    # Once a trial compiled here, its measured time is what counts.
    timed = [*done, _ran(2, COMPILED.replace(batch_size=32), compile_seconds=30.0, seconds=40.0)]
    cold = objective(tmp_path, FakeRunner(), timed, device="cuda").cold_compile(COMPILED)
    assert cold == (40.0, 2)  # its 30-s compile + its own 10 s besides, the shortest rest


def test_the_compile_to_expect_is_the_same_mode_s(tmp_path: Path) -> None:
    graphs = COMPILED.replace(compile="reduce-overhead")
    done = [_ran(0, EAGER, compile_seconds=0.3, seconds=6.3),
            _ran(1, graphs, compile_seconds=60.0, seconds=70.0),
            _ran(2, COMPILED, compile_seconds=30.0, seconds=40.0)]
    obj = objective(tmp_path, FakeRunner(), done)
    assert obj.cold_compile(COMPILED.replace(batch_size=32)) == (36.0, 2)
    assert obj.cold_compile(graphs.replace(batch_size=32)) == (66.0, 1)
    # A mode no trial compiled yet: the longest of any.
    assert obj.cold_compile(COMPILED.replace(compile="max-autotune")) == (66.0, 1)


def test_seconds_that_would_read_equal_get_a_tenth() -> None:
    # "about 14 s, more than the 14 s left" read as a contradiction (2026-11-28).
    from autotune.study.objective import _secs

    assert (_secs(14.4, 13.6), _secs(13.6, 14.4)) == ("14.4", "13.6")
    assert (_secs(20.2, 14.0), _secs(14.0, 20.2)) == ("20", "14")
