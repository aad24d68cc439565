"""Where a search starts: the baseline, the hand recipe as near as the space allows, then the
follow-ups a guided trial's diagnosis points at; enqueued once per role."""

from __future__ import annotations

import dataclasses
from typing import Any

import optuna
import pytest
from optuna.trial import TrialState

from autotune import Adapter, Diagnosis, Status, TrainConfig, TrialResult, Verdict
from autotune.study.policy.graphs import CUDA_GRAPH_SHAPES
from autotune.study.policy.headroom import MODEL_HEADROOM
from autotune.study.policy.ladder import Ladder
from autotune.study.policy.starts import diagnosed_recipe, follow_ups, initial_starts
from autotune.study.space.bound import SearchSpace
from autotune.study.space.file import parse_space
from autotune.study.store import records
from autotune.study.store.claim import enqueue
from autotune.study.store.records import TrialRecord

CPU_SPACE = {
    "num_workers": {"low": 0, "high": "cores"},
    "prefetch_factor": {"choices": [2, 4]},
    "persistent_workers": {"choices": [False, True]},
    "batch_size": {"factors": [0.5, 1, 2, 4, 8]},
    "amp_dtype": {"choices": ["fp32", "bf16"]},
    "compile": {"choices": ["none", "default"]},
}


class Eight(Adapter):
    batch_size = 8
    vary_global_batch = True  # the ladder climbs to larger batches only when asked to


def space_of(raw: dict[str, Any], device: str = "cpu", cpus: int = 4) -> SearchSpace:
    return parse_space(raw, source="s.yaml", adapter=Eight, device_type=device, cpus=cpus)


def done(number: int, config: TrainConfig, verdict: Verdict | None, *, role: str = "recipe",
         status: Status = Status.OK, throughput: float = 100.0,
         gpu_busy: float | None = None) -> TrialRecord:
    diagnosis = None if verdict is None else Diagnosis(
        verdict=verdict, suggestion="", throughput=throughput, loader_rate=None,
        compute_rate=None, data_wait_fraction=0.0, gpu_busy_fraction=gpu_busy)
    result = TrialResult(status=status, throughput=throughput if status is Status.OK else None,
                         diagnosis=diagnosis)
    return TrialRecord(number=number, state=TrialState.COMPLETE,
                       value=throughput if status is Status.OK else 0.0, config=config,
                       result=result, role=role)


# -- the first trials -----------------------------------------------------------------------------------


def test_the_baseline_then_the_hand_recipe() -> None:
    space = space_of(CPU_SPACE)
    starts = initial_starts(space, Eight, device="cpu", cpus=4)
    assert starts == [
        ("baseline", TrainConfig(batch_size=8)),
        # Half the cores as workers, persistent, prefetching 4, bf16; no pinning on a CPU, and
        # eager: a compile comes once the eager trials lead.
        ("recipe", TrainConfig(batch_size=8, num_workers=2, prefetch_factor=4,
                               persistent_workers=True, amp_dtype="bf16")),
    ]
    assert all(space.holds(config) for _, config in starts)


def test_the_recipe_as_near_as_the_space_allows() -> None:
    # No compile and no prefetch knob: the recipe keeps what the space searches, with the
    # space's nearest worker count to half the cores (2).
    raw = {"num_workers": {"choices": [0, 1, 6]}, "amp_dtype": {"choices": ["fp32", "bf16"]}}
    starts = initial_starts(space_of(raw), Eight, device="cpu", cpus=4)
    assert starts[1] == ("recipe", TrainConfig(batch_size=8, num_workers=1, amp_dtype="bf16"))
    tie = {**raw, "num_workers": {"choices": [0, 1, 3]}}  # 1 and 3 are as near: the larger
    starts = initial_starts(space_of(tie), Eight, device="cpu", cpus=4)
    assert starts[1] == ("recipe", TrainConfig(batch_size=8, num_workers=3, amp_dtype="bf16"))


def test_no_recipe_when_it_is_the_baseline() -> None:
    starts = initial_starts(space_of({"batch_size": {"factors": [1, 2]}}), Eight, device="cpu",
                            cpus=4)
    assert starts == [("baseline", TrainConfig(batch_size=8))]


# -- the recipe, as the baseline's diagnosis points it ------------------------------------------------


HAND = TrainConfig(batch_size=8, num_workers=2, prefetch_factor=4, persistent_workers=True,
                   amp_dtype="bf16")  # eager, as `initial_starts` queues it


@pytest.mark.parametrize(("verdict", "expected"), [
    (Verdict.COMPUTE, HAND.replace(batch_size=64)),  # the largest batch at once
    (Verdict.INPUT, HAND.replace(num_workers=4)),  # every core loading
    (None, HAND),  # not diagnosed: the hand recipe as it is
])
def test_the_recipe_takes_the_step_the_baselines_diagnosis_points_at(
        verdict: Verdict | None, expected: TrainConfig) -> None:
    space = space_of(CPU_SPACE)
    baseline = done(0, TrainConfig(batch_size=8), verdict, role="baseline")
    assert diagnosed_recipe(space, HAND, baseline, device="cpu") == expected
    assert space.holds(expected)


def test_an_overhead_bound_baseline_gets_the_recipe_at_the_largest_batch_still_eager() -> None:
    # A launch-bound step takes about as long at any batch; CUDA graphs come once the eager
    # trials lead.
    raw = {**CPU_SPACE, "compile": {"choices": ["none", "default", "reduce-overhead"]}}
    baseline = done(0, TrainConfig(batch_size=8), Verdict.OVERHEAD, role="baseline")
    for device in ("cuda", "cpu"):
        assert diagnosed_recipe(space_of(raw, device=device), HAND, baseline, device=device) == \
            HAND.replace(batch_size=64)


def test_a_recipe_out_of_memory_at_the_largest_batch_halves_from_the_users_batch() -> None:
    space = space_of(CPU_SPACE)  # batch sizes 4, 8, 16, 32, 64; the user's is 8
    baseline = done(0, TrainConfig(batch_size=8), Verdict.COMPUTE, role="baseline")
    oom = done(1, HAND.replace(batch_size=64), None, status=Status.OOM)
    assert ups(space, oom, baseline) == [HAND.replace(batch_size=32)]  # the recipe's knobs
    oom32 = done(2, HAND.replace(batch_size=32), None, role="follow: x", status=Status.OOM)
    assert ups(space, oom32, baseline) == [HAND.replace(batch_size=16)]
    oom16 = done(3, HAND.replace(batch_size=16), None, role="follow: y", status=Status.OOM)
    assert HAND.replace(batch_size=8) not in ups(space, oom16, baseline)  # nothing between


# -- follow-ups -----------------------------------------------------------------------------------------


RECIPE = TrainConfig(batch_size=8, num_workers=2, prefetch_factor=2, persistent_workers=True,
                     amp_dtype="bf16")


def configs(starts: list[tuple[str, TrainConfig]]) -> list[TrainConfig]:
    return [config for _, config in starts]


def ups(space: SearchSpace, done_: TrialRecord, best: TrialRecord | None,
        device: str = "cpu") -> list[TrainConfig]:
    starts = follow_ups(space, done_, best, device=device)
    assert all(space.holds(c) for _, c in starts)
    assert len({role for role, _ in starts}) == len(starts)  # one role each: enqueued once
    assert all(role == f"follow: {c.describe()}" for role, c in starts)
    return configs(starts)


def test_an_input_bound_best_climbs_to_every_core_more_prefetch_and_the_batches_around() -> None:
    recipe = done(1, RECIPE, Verdict.INPUT)  # the CPUs unknown: every core is free
    assert ups(space_of(CPU_SPACE), recipe, recipe) == [
        RECIPE.replace(num_workers=4), RECIPE.replace(prefetch_factor=4),
        RECIPE.replace(batch_size=16), RECIPE.replace(batch_size=4)]


def test_a_compute_bound_best_climbs_to_the_largest_batch_at_once() -> None:
    recipe = done(1, RECIPE, Verdict.COMPUTE)
    assert ups(space_of(CPU_SPACE), recipe, recipe) == [RECIPE.replace(batch_size=64)]


@pytest.mark.parametrize("verdict", [Verdict.COMPUTE, Verdict.OVERHEAD])
def test_a_best_whose_loader_is_near_its_rate_climbs_one_batch_at_a_time(
        verdict: Verdict) -> None:
    # A held-out MobileNetV3 on an H200: overhead-bound at batch 96 (2.48k images/s) beside a
    # loader of 3.27k; the largest batch (768) ran 1.1-1.5k and its warm-up was cut.
    def best(loader: float) -> TrialRecord:
        r = done(1, RECIPE, verdict, throughput=2483.0)
        assert r.result is not None and r.result.diagnosis is not None
        diagnosis = dataclasses.replace(r.result.diagnosis, loader_rate=loader)
        return dataclasses.replace(r, result=r.result.replace(diagnosis=diagnosis))

    near, far = best(3273.0), best(8000.0)
    assert RECIPE.replace(batch_size=16) in ups(space_of(CPU_SPACE), near, near)
    assert RECIPE.replace(batch_size=64) not in ups(space_of(CPU_SPACE), near, near)
    assert RECIPE.replace(batch_size=64) in ups(space_of(CPU_SPACE), far, far)
    # A loader probe below what it fed end to end is not believed: the largest at once.
    low = best(1000.0)
    assert RECIPE.replace(batch_size=64) in ups(space_of(CPU_SPACE), low, low)


def test_when_the_largest_batch_runs_out_of_memory_the_ladder_halves_the_way_back() -> None:
    space = space_of(CPU_SPACE)  # batch sizes 4, 8, 16, 32, 64
    best = done(1, RECIPE, Verdict.COMPUTE)
    oom = done(2, RECIPE.replace(batch_size=64), None, role="follow: x", status=Status.OOM)
    assert ups(space, oom, best) == [RECIPE.replace(batch_size=32)]
    oom32 = done(3, RECIPE.replace(batch_size=32), None, role="follow: y", status=Status.OOM)
    assert ups(space, oom32, best) == [RECIPE.replace(batch_size=16)]
    # Nothing left between: the best's choices are checked instead.
    oom16 = done(4, RECIPE.replace(batch_size=16), None, role="follow: z", status=Status.OOM)
    assert RECIPE.replace(batch_size=16) not in ups(space, oom16, best)
    # An OOM of another config (here with compile) is not this climb's: no bisection.
    other = done(5, RECIPE.replace(batch_size=64, compile="default"), None, role="follow: w",
                 status=Status.OOM)
    assert RECIPE.replace(batch_size=32) not in ups(space, other, best)


def test_an_overhead_bound_best_tries_cuda_graphs() -> None:
    raw = {"batch_size": {"factors": [1]}, "compile": {"choices": ["none", "reduce-overhead"]}}
    config = TrainConfig(batch_size=8)
    best = done(1, config, Verdict.OVERHEAD)
    assert ups(space_of(raw, device="cuda"), best, best, device="cuda")[0] == \
        config.replace(compile="reduce-overhead")


def test_an_overhead_bound_best_on_batches_of_many_shapes_compiles_dynamic_not_graphs() -> None:
    # A CUDA graph per shape: T5 padded per batch (48 shapes a trial) was killed at 274 s.
    raw = {"batch_size": {"factors": [1]},
           "compile": {"choices": ["none", "default", "reduce-overhead"]}}
    config = TrainConfig(batch_size=8)
    best = done(1, config, Verdict.OVERHEAD)
    many = dataclasses.replace(best, result=best.result.replace(
        shapes_vary=True, shape_count=CUDA_GRAPH_SHAPES + 1))
    few = dataclasses.replace(best, result=best.result.replace(
        shapes_vary=True, shape_count=CUDA_GRAPH_SHAPES))
    space = space_of(raw, device="cuda")
    assert ups(space, many, many, device="cuda")[0] == config.replace(compile="default")
    assert config.replace(compile="reduce-overhead") not in ups(space, many, many, device="cuda")
    assert ups(space, few, few, device="cuda")[0] == config.replace(compile="reduce-overhead")
    compiled = dataclasses.replace(many, config=config.replace(compile="default"))
    assert config.replace(compile="reduce-overhead") not in \
        ups(space, compiled, compiled, device="cuda")


def test_at_the_largest_batch_the_best_configs_choices_are_checked() -> None:
    largest = done(1, RECIPE.replace(batch_size=64, compile="default"), Verdict.COMPUTE)
    # Compile off; on a CPU, no workers (they take cores from the step), with and without
    # compile.
    assert ups(space_of(CPU_SPACE), largest, largest) == [
        largest.config.replace(compile="none"),
        TrainConfig(batch_size=64, amp_dtype="bf16", compile="default"),
        TrainConfig(batch_size=64, amp_dtype="bf16"),
    ]


def test_an_input_bound_best_is_not_checked_compiled() -> None:
    eager = RECIPE.replace(batch_size=64)
    compute = done(1, eager, Verdict.COMPUTE)
    assert eager.replace(compile="default") in ups(space_of(CPU_SPACE), compute, compute)
    loader = done(1, eager, Verdict.INPUT)  # on a CPU the compiled model takes the workers' cores
    assert all(c.compile == "none" for c in ups(space_of(CPU_SPACE), loader, loader))


def with_rates(record: TrialRecord, *, loader: float | None, model: float | None
               ) -> TrialRecord:
    assert record.result is not None and record.result.diagnosis is not None
    diagnosis = dataclasses.replace(record.result.diagnosis, loader_rate=loader,
                                    compute_rate=model)
    return dataclasses.replace(record, result=dataclasses.replace(record.result,
                                                                  diagnosis=diagnosis))


def test_on_a_gpu_an_input_bound_best_is_checked_compiled_unless_its_model_outpaces_its_loader(
        ) -> None:
    # A held-out timm ViT-S (H100, 2026-11-27): 15 workers on 16 CPUs, waiting 36% of its step
    # for data, its model alone 2.7k and its loader alone 2.2k beside 2.3k end to end; the
    # search never compiled it, and compiled it ran 1.18x side by side.
    gpu = space_of(GPU_SPACE, device="cuda", cpus=8)
    config = TrainConfig(batch_size=64, num_workers=8, prefetch_factor=4, pin_memory=True,
                         persistent_workers=True, amp_dtype="bf16")
    compiled = config.replace(compile="default")
    vit = with_rates(done(1, config, Verdict.INPUT, throughput=2315.0), loader=2184.0,
                     model=2675.0)
    assert ups(gpu, vit, vit, device="cuda")[:2] == [config.replace(batch_size=32), compiled]
    unknown = with_rates(vit, loader=None, model=None)  # not measured: it may pay
    assert compiled in ups(gpu, unknown, unknown, device="cuda")
    # The model alone 1.25x its loader or more: the step waits for the loader whatever the
    # model does, and the compile is not checked.
    outpaced = with_rates(vit, loader=2184.0, model=2184.0 * MODEL_HEADROOM)
    assert compiled not in ups(gpu, outpaced, outpaced, device="cuda")
    # ... but for a step far below its loader's rate alone (the ViT's other reading: 2.0k end
    # to end beside a loader of 3.5k), time is lost in the process they share: checked.
    contended = with_rates(done(1, config, Verdict.INPUT, throughput=1973.0), loader=3528.0,
                           model=3528.0 * MODEL_HEADROOM)
    assert compiled in ups(gpu, contended, contended, device="cuda")
    # A loader probe below what the loader fed end to end is not believed (a timm ViT's read
    # 243 images/s beside 1.6k): the compile is checked.
    low_probe = with_rates(vit, loader=243.0, model=2675.0)
    assert compiled in ups(gpu, low_probe, low_probe, device="cuda")
    assert compiled not in ups(gpu, vit, vit, device="cpu")  # on a CPU: never


def test_on_a_gpu_an_input_bound_best_below_its_loaders_rate_is_compiled_before_the_loader_climb(
        ) -> None:
    # The held-out timm ViT-S (H100, 2026-11-27): 1.77k end to end beside a loader of 3.48k
    # alone; the loader climb ran first and the compile came with 23 s left, not run.
    gpu = space_of(GPU_SPACE, device="cuda", cpus=16)
    config = TrainConfig(batch_size=8, num_workers=15, prefetch_factor=4, pin_memory=True,
                         persistent_workers=True, amp_dtype="bf16")
    below = with_rates(done(5, config, Verdict.INPUT, throughput=1770.0), loader=3479.0,
                       model=2298.0)
    climb = ups(gpu, below, below, device="cuda")
    assert climb[0] == config.replace(compile="default")
    assert config.replace(prefetch_factor=2) not in climb  # (the deepest is the space's 4)
    # At its loader's rate the loader is the limit: its knobs first, the compile at the end.
    at = with_rates(done(5, config, Verdict.INPUT, throughput=3400.0), loader=3479.0,
                    model=3900.0)
    assert ups(gpu, at, at, device="cuda")[0].compile == "none"
    assert ups(gpu, below, below, device="cpu")[0].compile == "none"  # never first on a CPU


GPU_SPACE = {**CPU_SPACE, "pin_memory": {"choices": [False, True]},
             "expandable_segments": {"choices": [False, True]}}


@pytest.mark.parametrize("verdict", [Verdict.COMPUTE, Verdict.INPUT])
def test_on_a_gpu_the_checks_keep_the_graph_and_fewer_workers_only_when_not_input_bound(
        verdict: Verdict) -> None:
    config = TrainConfig(batch_size=64, num_workers=8, prefetch_factor=4, pin_memory=True,
                         persistent_workers=True, amp_dtype="bf16", compile="default")
    best = done(1, config, verdict)
    checks = ups(space_of(GPU_SPACE, device="cuda", cpus=8), best, best, device="cuda")
    fewer = [config.replace(num_workers=2)] if verdict is Verdict.COMPUTE else []
    # At the largest batch, every core loading, the deepest prefetch: nothing left to climb
    # but, when input-bound, the smaller batch (the loader's rate moves with the batch).
    smaller = [config.replace(batch_size=32)] if verdict is Verdict.INPUT else []
    # Compiled, the prefetch one step shallower: its depth was climbed for the eager step.
    shallower = [config.replace(prefetch_factor=2)]
    assert checks == smaller + [config.replace(compile="none")] + shallower + fewer + [
        config.replace(pin_memory=False), config.replace(expandable_segments=True)]
    eager = done(1, config.replace(compile="none"), verdict)
    assert config.replace(compile="none", prefetch_factor=2) not in \
        ups(space_of(GPU_SPACE, device="cuda", cpus=8), eager, eager, device="cuda")


@pytest.mark.parametrize(("busy", "graphs"), [(0.64, True), (0.92, False), (None, False)])
def test_an_eager_best_with_the_gpu_often_idle_is_checked_under_cuda_graphs_too(
        busy: float | None, graphs: bool) -> None:
    # A held-out MobileNetV3 (H200, 2026-11-28): its eager leader, compute-bound with kernels
    # running 64% of its step, compiled `default` at 0.80x and was never tried under CUDA graphs,
    # which had run 1.27x the eager leader on another host.
    raw = {**GPU_SPACE, "compile": {"choices": ["none", "default", "reduce-overhead"]}}
    config = TrainConfig(batch_size=64, num_workers=8, prefetch_factor=4, pin_memory=True,
                         persistent_workers=True, amp_dtype="bf16")
    space = space_of(raw, device="cuda", cpus=8)
    best = done(1, config, Verdict.COMPUTE, gpu_busy=busy, role="eager: x")
    checks = ups(space, best, best, device="cuda")
    assert checks[0] == config.replace(compile="default")
    assert (checks[1] == config.replace(compile="reduce-overhead")) is graphs
    assert (config.replace(compile="reduce-overhead") in checks) is graphs
    # A space without the default compile still checks CUDA graphs.
    graphs_only = {**GPU_SPACE, "compile": {"choices": ["none", "reduce-overhead"]}}
    assert (config.replace(compile="reduce-overhead") in ups(
        space_of(graphs_only, device="cuda", cpus=8), best, best, device="cuda")) is graphs
    # Overhead-bound, CUDA graphs are the climb itself, once.
    launch = done(1, config, Verdict.OVERHEAD, gpu_busy=0.4, role="eager: x")
    assert ups(space, launch, launch, device="cuda").count(
        config.replace(compile="reduce-overhead")) == 1


@pytest.mark.parametrize("verdict", [Verdict.COMPUTE, Verdict.OVERHEAD, Verdict.INPUT])
def test_a_compiled_best_checks_the_other_optimizer_unless_input_bound(verdict: Verdict) -> None:
    # The padded transformers GPT-2 (H100, 2026-11-26): its eager fused trial read 0.89x in
    # variable-shape noise and fused was never tried again; compiled with CUDA graphs, fused is
    # the best known config.
    raw = {**GPU_SPACE, "compile": {"choices": ["none", "reduce-overhead"]},
           "optimizer_impl": {"choices": ["default", "fused"]}}
    config = TrainConfig(batch_size=64, num_workers=8, prefetch_factor=4, pin_memory=True,
                         persistent_workers=True, amp_dtype="bf16", compile="reduce-overhead")
    best = done(1, config, verdict)
    checks = ups(space_of(raw, device="cuda", cpus=8), best, best, device="cuda")
    fused = config.replace(optimizer_impl="fused")
    if verdict is Verdict.INPUT:
        assert fused not in checks
    else:  # right after compile off: the most at stake after the compile itself
        assert checks[checks.index(config.replace(compile="none")) + 1] == fused
    # With foreach too (full.yaml), fused: foreach is CUDA's default already.
    three = {**raw, "optimizer_impl": {"choices": ["default", "foreach", "fused"]}}
    assert (fused in ups(space_of(three, device="cuda", cpus=8), best, best, device="cuda")) is (
        verdict is not Verdict.INPUT)
    eager = done(2, config.replace(compile="none"), verdict)  # eager: the dtype stage's trial
    assert config.replace(compile="none", optimizer_impl="fused") not in ups(
        space_of(raw, device="cuda", cpus=8), eager, eager, device="cuda")


@pytest.mark.parametrize("verdict", [Verdict.COMPUTE, Verdict.INPUT])
def test_a_compiled_best_with_convolutions_checks_the_other_memory_format(verdict: Verdict) -> None:
    # A held-out DeepLabV3 (H200, 2026-11-29): channels_last read 0.95x eager and was compiled
    # contiguous; compiled under CUDA graphs, channels_last ran 1.11x side by side.
    raw = {**GPU_SPACE, "compile": {"choices": ["none", "reduce-overhead"]},
           "optimizer_impl": {"choices": ["default", "fused"]},
           "memory_format": {"choices": ["contiguous", "channels_last"]}}
    space = space_of(raw, device="cuda", cpus=8)
    config = TrainConfig(batch_size=64, num_workers=8, prefetch_factor=4, pin_memory=True,
                         persistent_workers=True, amp_dtype="bf16", compile="reduce-overhead",
                         optimizer_impl="fused")
    nhwc = config.replace(memory_format="channels_last")

    def checks(convs: int | None, cfg: TrainConfig = config, device: str = "cuda") -> list:
        best = done(1, cfg, verdict)
        result = dataclasses.replace(best.result, conv_weights=convs)
        best = dataclasses.replace(best, result=result)
        return ups(space, best, best, device=device)

    if verdict is Verdict.INPUT:  # the loader sets the rate: the layout changes nothing
        assert nhwc not in checks(53)
        return
    # After the cache hits (the optimizer), before the host's resources.
    assert checks(53)[checks(53).index(config.replace(optimizer_impl="default")) + 1] == nhwc
    assert checks(53, nhwc).count(config) == 1  # and back
    assert nhwc not in checks(0) and nhwc not in checks(None)  # no convolution, or not known
    assert nhwc not in checks(1)  # a ViT's patch embedding: not a convolutional network
    assert nhwc not in checks(53, device="cpu")
    eager = config.replace(compile="none")  # eager, the scan measured the layout
    assert eager.replace(memory_format="channels_last") not in checks(53, eager)
    assert space.holds(nhwc)


def test_a_follow_up_that_did_not_beat_the_best_checks_the_bests_choices() -> None:
    best = done(2, RECIPE.replace(batch_size=16), Verdict.COMPUTE, role="follow: x",
                throughput=300.0)
    slower = done(3, RECIPE.replace(batch_size=32), Verdict.COMPUTE, role="follow: y",
                  throughput=200.0)
    assert ups(space_of(CPU_SPACE), slower, best) == [
        RECIPE.replace(batch_size=16, compile="default"),
        TrainConfig(batch_size=16, amp_dtype="bf16")]  # not a larger batch: that way is spent


@pytest.mark.parametrize("status", [Status.OOM, Status.ERROR, Status.TIMEOUT])
def test_a_failed_recipe_climbs_from_the_best_so_far(status: Status) -> None:
    baseline = done(0, TrainConfig(batch_size=8), Verdict.COMPUTE, role="baseline")
    failed = done(1, RECIPE, Verdict.INPUT, status=status)
    assert ups(space_of(CPU_SPACE), failed, baseline) == [TrainConfig(batch_size=64)]


def test_nothing_to_follow_without_a_best() -> None:
    assert ups(space_of(CPU_SPACE), done(1, RECIPE, Verdict.INPUT, status=Status.OOM), None) == []


# -- the ladder: the newest best's follow-ups first ----------------------------------------------------


def test_the_ladder_puts_a_new_bests_follow_ups_first_and_feeds_one_at_a_time() -> None:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    space = space_of(CPU_SPACE)
    study = optuna.create_study(direction="maximize")
    a, b, c = (("follow: a", RECIPE.replace(batch_size=16)),
               ("follow: b", RECIPE.replace(batch_size=32)),
               ("follow: c", RECIPE.replace(batch_size=64)))
    ladder = Ladder()
    ladder.add([a, b], new_best=False)
    ladder.add([c, a], new_best=True)  # a new best: its own first, a repeat not doubled
    assert ladder.pending == [c, a, b]
    ladder.add([("follow: d", RECIPE)], new_best=False)  # not a new best: after the rest
    assert [role for role, _ in ladder.pending] == ["follow: c", "follow: a", "follow: b",
                                                    "follow: d"]
    ladder.feed(study, space)
    ladder.feed(study, space)  # one waiting already: nothing more enqueued
    waiting = study.get_trials(states=(TrialState.WAITING,))
    assert [t.user_attrs["role"] for t in waiting] == ["follow: c"]
    trial = study.ask()
    assert space.suggest(trial) == c[1]


# -- enqueueing --------------------------------------------------------------------------------------


def test_enqueued_starts_are_asked_first_with_their_roles_and_only_once() -> None:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    space = space_of(CPU_SPACE)
    study = optuna.create_study(direction="maximize")
    starts = initial_starts(space, Eight, device="cpu", cpus=4)
    enqueue(study, space, starts)
    enqueue(study, space, starts)  # a resumed search: the roles are taken
    asked = []
    for _ in range(len(starts)):
        trial = study.ask()
        asked.append((records.read_role(trial), space.suggest(trial)))
        study.tell(trial, 1.0)
    assert asked == starts
    enqueue(study, space, starts)  # done: not again
    assert not [t for t in study.get_trials() if t.state == TrialState.WAITING]


THREADS_SPACE = {**CPU_SPACE, "intra_op_threads": {"choices": [None, 1, 2, 4]}}


def test_an_input_bound_step_puts_the_training_threads_on_the_cores_the_workers_leave() -> None:
    space = space_of(THREADS_SPACE)
    baseline = done(0, TrainConfig(batch_size=8), Verdict.INPUT, role="baseline")
    # 4 CPUs, 3 workers (the free cores loading): one thread for the step.
    assert diagnosed_recipe(space, HAND, baseline, device="cpu", cpus=4) == \
        HAND.replace(num_workers=3, intra_op_threads=1)
    # The climb from a best with 2 workers on 4 CPUs: 2 threads, beside the other steps.
    best = done(1, RECIPE, Verdict.INPUT)
    climb = configs(follow_ups(space, best, best, device="cpu", cpus=4))
    assert RECIPE.replace(intra_op_threads=2) in climb
    # Unknown CPUs, or a space without the knob: the threads stay PyTorch's.
    assert all(c.intra_op_threads is None for c in configs(follow_ups(space, best, best,
                                                                      device="cpu")))
    assert diagnosed_recipe(space_of(CPU_SPACE), HAND, baseline, device="cpu",
                            cpus=4).intra_op_threads is None


def test_a_number_projects_to_the_nearest_number_beside_a_null_choice() -> None:
    space = space_of(THREADS_SPACE)
    assert space.changed(RECIPE, intra_op_threads=3).intra_op_threads == 4
    assert space.changed(RECIPE, intra_op_threads=1).intra_op_threads == 1
    assert space.changed(RECIPE, intra_op_threads=None).intra_op_threads is None


@pytest.mark.parametrize("verdict", [Verdict.COMPUTE, Verdict.INPUT])
def test_a_compiled_best_checks_the_other_compile_scope_unless_input_bound(
        verdict: Verdict) -> None:
    # GPT-2 small's cross-entropy over 50k logits ran eagerly beside its compiled model: about a
    # fifth of the step's GPU time (H100, 2026-11-25). One compile says whether fusing it pays.
    raw = {**GPU_SPACE, "compile_scope": {"choices": ["model", "loss"]}}
    config = TrainConfig(batch_size=64, num_workers=8, prefetch_factor=4, pin_memory=True,
                         persistent_workers=True, amp_dtype="bf16", compile="default")
    space = space_of(raw, device="cuda", cpus=8)
    for scope, other in (("model", "loss"), ("loss", "model")):
        best = done(1, config.replace(compile_scope=scope), verdict)
        checks = ups(space, best, best, device="cuda")
        if verdict is Verdict.INPUT:  # compiling anything of the model buys nothing there
            assert all(c.compile_scope == scope or c.compile == "none" for c in checks)
        else:  # right after compile off, which drops the scope with the compile
            first = checks.index(TrainConfig(**{**config.to_dict(), "compile": "none"}))
            assert checks[first + 1] == config.replace(compile_scope=other)
    eager = done(2, config.replace(compile="none"), Verdict.COMPUTE)
    assert all(c.compile_scope == "model" for c in ups(space, eager, eager, device="cuda"))
