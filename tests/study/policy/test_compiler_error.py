"""A compile that failed inside torch.compile's own code rules out the same graph in every other
compile mode, unrun, as infeasible: a held-out speech model on an H200 (2026-11-28) failed
compile=default in Inductor's tiling_utils.py, then each other mode the same way, ~66 s apiece.
Another graph (dtype, batch, adapter knobs), eager, and a failure elsewhere still run; a failure
in code only some modes reach (CUDA graphs, autotuning) rules out its own mode alone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from helpers import compute_bound_by_dtype, fake_search
from optuna.trial import TrialState

from autotune import Adapter, Status, TrainConfig, TrialResult
from autotune.contract.in_compiler import RAISED_IN_COMPILER, compiler_file, compiler_note
from autotune.study.policy.compiler_error import compiler_failed, compiler_refused, mode_specific
from autotune.study.policy.refused import refused
from autotune.study.store.records import TrialRecord, read_records

TF32 = TrainConfig(batch_size=16, num_workers=2, amp_dtype="tf32", compile="default")
TILING = ("InductorError: AssertionError:" +
          compiler_note("torch/_inductor/tiling_utils.py", 271, "get_pw_red_splits"))
CUDAGRAPHS = ("RuntimeError: captured a sync" +
              compiler_note("torch/_inductor/cudagraph_trees.py", 1900, "_record"))
AUTOTUNE = ("AssertionError: no choice" +
            compiler_note("torch/_inductor/select_algorithm.py", 2500, "autotune_select_algorithm"))


def failed(number: int, config: TrainConfig, reason: str = TILING, *, ran: bool = True
           ) -> TrialRecord:
    return TrialRecord(number=number, state=TrialState.COMPLETE, value=0.0, config=config,
                       result=TrialResult(status=Status.ERROR, reason=reason, ran=ran))


def ok(number: int, config: TrainConfig) -> TrialRecord:
    return TrialRecord(number=number, state=TrialState.COMPLETE, value=100.0, config=config,
                       result=TrialResult(status=Status.OK, throughput=100.0))


def test_the_note_the_trial_writes_is_the_one_the_search_reads() -> None:
    assert RAISED_IN_COMPILER in TILING
    assert compiler_file(TILING) == "torch/_inductor/tiling_utils.py"
    assert compiler_file("InductorError: AssertionError:") is None
    # A DDP trial's reasons are joined with "; ": the note need not end the reason.
    assert compiler_file(f"{CUDAGRAPHS}; RuntimeError: rank 1") == \
        "torch/_inductor/cudagraph_trees.py"


def test_after_a_compile_failed_in_inductor_no_other_mode_of_that_graph_runs() -> None:
    done = [ok(0, TF32.replace(compile="none")), failed(3, TF32)]
    for mode in ("reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"):
        reason = compiler_refused(TF32.replace(compile=mode), done)
        assert reason is not None and reason.startswith(
            "not run: compiling this step failed inside torch.compile in trial 3 "
            "(InductorError: AssertionError:"), reason
        assert "tiling_utils.py:271" in reason and reason.endswith(
            "every compile mode lowers the same graph")
        # Every path that starts a trial asks `refused`: the objective, the ladder, exploration.
        assert refused(TF32.replace(compile=mode), done, "cuda") == reason
    # Loader-only knobs do not change the graph; the same mode again is ruled out too.
    loader = TF32.replace(compile="max-autotune", num_workers=8, prefetch_factor=4,
                          pin_memory=True, persistent_workers=True)
    assert compiler_failed(loader, done) is done[1]
    assert compiler_failed(TF32.replace(num_workers=0), done) is done[1]


def test_another_graph_eager_or_a_failure_elsewhere_still_runs() -> None:
    done = [failed(3, TF32)]
    for other in (TF32.replace(amp_dtype="bf16"), TF32.replace(batch_size=32),
                  TF32.replace(compile_scope="loss"), TF32.replace(checkpoint=0.5),
                  TF32.replace(memory_format="channels_last"), TF32.replace(params={"pad": 8}),
                  TF32.replace(compile="none")):
        assert compiler_refused(other, done) is None, other
    # Not raised in torch.compile's own code (the model's, CUDA's): nothing is implied.
    for reason in ("InductorError: AssertionError:", "RuntimeError: CUDA error: misaligned address",
                   "ValueError: bad shape (adapter.py:12 in forward)"):
        assert compiler_refused(TF32.replace(compile="max-autotune"), [failed(3, TF32, reason)]
                                ) is None, reason
    # A refusal (it did not run) is no failure; nor is an eager trial's error in FX or functorch.
    assert compiler_failed(TF32.replace(compile="reduce-overhead"), [failed(3, TF32, ran=False)]
                           ) is None
    eager = TF32.replace(compile="none")
    assert compiler_failed(TF32, [failed(3, eager)]) is None


def test_the_adapters_knobs_count_as_the_graph() -> None:
    padded = TF32.replace(params={"pad": 64})
    done = [failed(3, padded)]
    assert compiler_failed(padded.replace(compile="reduce-overhead"), done) is done[0]
    assert compiler_failed(padded.replace(params={"pad": None}), done) is None


def test_a_failure_in_code_of_some_modes_only_rules_out_its_own_mode() -> None:
    assert mode_specific("torch/_inductor/cudagraph_trees.py")
    assert mode_specific("torch/_inductor/select_algorithm.py")
    assert mode_specific("torch/_inductor/runtime/coordinate_descent_tuner.py")
    assert not mode_specific("torch/_inductor/tiling_utils.py")
    assert not mode_specific("torch/_dynamo/symbolic_convert.py")
    graphs = TF32.replace(compile="reduce-overhead")
    done = [failed(4, graphs, CUDAGRAPHS)]
    assert compiler_refused(TF32, done) is None
    assert compiler_refused(TF32.replace(compile="max-autotune"), done) is None
    again = compiler_refused(graphs.replace(num_workers=8), done)
    assert again is not None and "trial 4" in again and "compile=reduce-overhead" in again
    tuned = TF32.replace(compile="max-autotune")
    done = [failed(5, tuned, AUTOTUNE)]
    assert compiler_refused(TF32, done) is None
    assert compiler_refused(tuned.replace(compile="max-autotune-no-cudagraphs"), done) is None
    assert compiler_refused(tuned.replace(pin_memory=True), done) is not None


RAW = {"amp_dtype": {"choices": ["fp32", "tf32", "bf16"]},
       "num_workers": {"low": 0, "high": 4},
       "compile": {"choices": ["none", "default", "reduce-overhead", "max-autotune",
                               "max-autotune-no-cudagraphs"]}}


def inductor_fails_in_tf32(call: int, request: Any) -> TrialResult:
    """Eager rates by dtype; every tf32 compile fails in Inductor's code (the H200 speech
    model's), the others compile to 1.5x."""
    config = request.config
    if config.compile != "none" and config.amp_dtype == "tf32":
        return TrialResult(status=Status.ERROR, reason=TILING)
    return compute_bound_by_dtype(config)


def test_a_search_compiles_a_graph_that_failed_in_inductor_once(tmp_path: Path) -> None:
    class Speech(Adapter):
        batch_size = 8

    requests, study = fake_search(tmp_path, RAW, Speech, inductor_fails_in_tf32, trials=16)
    compiled = [q for q in requests if q.config.compile != "none"]
    tf32 = [q for q in compiled if q.config.amp_dtype == "tf32"]
    assert len(tf32) == 1, [q.config.describe() for q in tf32]
    assert any(q.config.amp_dtype != "tf32" for q in compiled), "other dtypes still compile"
    refusals = [r for r in read_records(study) if r.result is not None and not r.result.ran
                and r.config is not None and r.config.amp_dtype == "tf32"
                and r.config.compile != "none"]
    assert all(r.status is Status.ERROR and f"in trial {tf32[0].number} " in r.result.reason
               for r in refusals if r.result is not None)
