"""Bottleneck diagnosis and steady state: a pure `classify`, the measuring helpers on a scripted
step with an injected clock, then real CPU steps built from adapters that are slow on purpose
(tests/adapters/slow_loader.py: input-bound; tests/adapters/slow_model.py: compute-bound).

Durations in the scripted tests are powers of two so that the fake clock's sums are exact.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from helpers import TEST_ADAPTERS, FakeClock

from autotune import Diagnosis, MeasureSettings, Status, TrainConfig, TrialResult, load_adapter
from autotune.contract.fmt import human
from autotune.contract.request import TrialRequest
from autotune.study.execution.runner import InProcessRunner
from autotune.trial.compose import TrainStep
from autotune.contract.consistency import CONSISTENT, contradicted
from autotune.trial.diagnose import (
    HANDOVER,
    HEAVY_DATA_WAIT,
    INPUT_MARGIN,
    LOADER_MAX,
    MIN_DATA_WAIT,
    MIN_GPU_BUSY,
    classify,
    compute_rate,
    diagnose,
    loader_rate,
)
from autotune.trial.measure import Measurement, StepResult, measure

SLOW_LOADER = TEST_ADAPTERS / "slow_loader.py"
SLOW_MODEL = TEST_ADAPTERS / "slow_model.py"
ITEMS = 8
FAST = 1 / 64
SLOW = 1 / 8


# -- classify: made-up numbers ----------------------------------------------------------------------


def verdict_of(
    *,
    loader: float | None = 100.0,
    compute: float | None = 1000.0,
    wait: float = 0.5,
    busy: float | None = None,
    cpu: float | None = None,
    workers: int | None = None,
    cpus: int | None = None,
) -> Diagnosis:
    return classify(throughput=90.0, data_wait_fraction=wait, loader_rate=loader,
                    compute_rate=compute, gpu_busy_fraction=busy, unit="samples",
                    cpu_busy_fraction=cpu, num_workers=workers, cpus=cpus)


def test_input_bound_with_every_cpu_busy_does_not_ask_for_more_workers() -> None:
    # The H100 ResNet winner: 16 workers on 16 CPUs, the loader far slower than the model.
    saturated = verdict_of(loader=4_420.0, compute=20_600.0, wait=0.81, cpu=0.97)
    assert saturated.verdict == "input-bound"
    assert "97% busy" in saturated.suggestion
    assert "more workers will not help" in saturated.suggestion
    assert saturated.cpu_busy_fraction == 0.97
    # With CPU to spare (or unknown) and CPUs without a worker, more workers come first.
    for cpu in (0.5, None):
        d = verdict_of(loader=4_420.0, compute=20_600.0, wait=0.81, cpu=cpu, workers=8, cpus=16)
        assert d.suggestion.endswith("more workers or cheaper transforms"), d.suggestion


def test_input_bound_with_a_worker_on_every_cpu_points_past_more_workers() -> None:
    # The H100 sweep: 16, 24 and 32 workers on 16 CPUs all ran 3.4k-3.8k images/s, CPUs 61% busy.
    d = verdict_of(loader=5_150.0, compute=25_400.0, wait=0.8, cpu=0.61, workers=16, cpus=16)
    assert d.verdict == "input-bound"
    assert "every CPU already has a worker and the CPUs are only 61% busy" in d.suggestion
    assert "more workers are unlikely to help" in d.suggestion
    unknown_cpu = verdict_of(loader=5_150.0, compute=25_400.0, wait=0.8, workers=20, cpus=16)
    assert "every CPU already has a worker:" in unknown_cpu.suggestion


def test_slow_loader_and_waiting_is_input_bound() -> None:
    d = verdict_of(loader=500.0, compute=40_000.0, wait=0.8)
    assert d.verdict == "input-bound"
    assert "more workers" in d.suggestion
    # The suggestion names both rates, as the display writes them.
    assert f"{human(500.0)} samples/s" in d.suggestion
    assert f"{human(40_000.0)} samples/s" in d.suggestion
    assert d.loader_rate == 500.0 and d.compute_rate == 40_000.0
    assert d.data_wait_fraction == 0.8 and d.throughput == 90.0
    assert d.gpu_busy_fraction is None


def test_classify_slow_model_is_compute_bound() -> None:
    d = verdict_of(loader=200_000.0, compute=1_600.0, wait=0.01)
    assert d.verdict == "compute-bound"
    assert human(1_600.0) in d.suggestion
    assert "more workers will not help" in d.suggestion


def test_compute_bound_without_a_compute_rate_says_so_without_a_number() -> None:
    d = verdict_of(loader=None, compute=None, wait=0.2)
    assert d.verdict == "compute-bound"  # nothing measured says the loader is the limit
    assert "data resident" not in d.suggestion


def test_idle_gpu_with_a_fast_loader_is_overhead_bound() -> None:
    d = verdict_of(loader=10_000.0, compute=1_000.0, wait=0.01, busy=0.3)
    assert d.verdict == "overhead-bound"
    assert "30%" in d.suggestion
    assert "reduce-overhead" in d.suggestion
    assert d.gpu_busy_fraction == 0.3


def test_input_bound_wins_over_overhead_bound() -> None:
    # A GPU starved of data is idle too: the loader is what to fix first.
    assert verdict_of(loader=100.0, compute=1000.0, wait=0.5, busy=0.1).verdict == "input-bound"


@pytest.mark.parametrize(
    ("loader", "expected"),
    [
        (INPUT_MARGIN * 1000.0, "compute-bound"),  # exactly at the margin: not slower enough
        (INPUT_MARGIN * 1000.0 - 0.01, "input-bound"),
        (1000.0, "compute-bound"),  # as fast as the model
        (5000.0, "compute-bound"),
    ],
)
def test_loader_margin_edge(loader: float, expected: str) -> None:
    # A wait the rates decide (above the minimum, below what is input-bound on its own).
    wait = (MIN_DATA_WAIT + HEAVY_DATA_WAIT) / 2
    assert verdict_of(loader=loader, compute=1000.0, wait=wait).verdict == expected


@pytest.mark.parametrize(
    ("wait", "expected"),
    [
        (MIN_DATA_WAIT, "input-bound"),  # the threshold itself counts
        (MIN_DATA_WAIT - 1e-6, "compute-bound"),  # a slow loader the step never waited for
        (0.0, "compute-bound"),
    ],
)
def test_data_wait_edge(wait: float, expected: str) -> None:
    assert verdict_of(loader=100.0, compute=1000.0, wait=wait).verdict == expected


@pytest.mark.parametrize(
    ("wait", "expected"),
    [
        (HEAVY_DATA_WAIT, "input-bound"),  # the threshold itself counts
        (HEAVY_DATA_WAIT - 1e-6, "compute-bound"),
        (0.9, "input-bound"),
    ],
)
def test_heavy_data_wait_is_input_bound_though_the_loader_alone_reads_faster(
    wait: float, expected: str
) -> None:
    # A short loader-only probe of a bursty loader can read faster than the model (the H100
    # grids' input-bound cells: up to 1.64x the step's rate).
    assert verdict_of(loader=HANDOVER * 90.0 - 1.0, compute=200.0, wait=wait).verdict == expected
    assert verdict_of(loader=None, compute=None, wait=wait).verdict == expected


def test_without_workers_a_faster_loader_that_was_waited_for_is_explained() -> None:
    # A held-out stream on a 2-CPU VM (2026-11-28): "input-bound: the loader delivers 61.5k
    # samples/s, the model consumes 29.6k" read as a contradiction. No workers: it loads in series.
    d = verdict_of(loader=200.0, compute=150.0, wait=0.4, workers=0)
    assert d.verdict == "input-bound"
    assert ("but with no workers the loading runs in the training process between steps: at "
            "most 85.7 samples/s together") in d.suggestion
    assert "no workers" not in verdict_of(loader=200.0, compute=150.0, wait=0.4,
                                          workers=4).suggestion


@pytest.mark.parametrize(("busy", "expected"), [(0.28, "overhead-bound"), (0.9, "compute-bound")])
def test_a_heavy_wait_beside_a_loader_many_times_the_step_is_the_hand_over(
    busy: float, expected: str
) -> None:
    # The held-out GRU under CUDA graphs (H100): 32% of its step waiting, its loader alone at
    # 3.4x the step's rate. More workers cannot shorten that wait; the model's own knobs
    # (the loss compiled, a fused optimizer) still can, and input-bound skips them.
    d = verdict_of(loader=HANDOVER * 90.0, compute=200.0, wait=0.32, busy=busy, workers=8)
    assert d.verdict == expected
    assert "taking each batch over" in d.suggestion and "pin_memory" in d.suggestion
    assert verdict_of(loader=HANDOVER * 90.0, compute=200.0, wait=0.2,
                      workers=8).verdict == "compute-bound"
    no_model = verdict_of(loader=HANDOVER * 90.0, compute=None, wait=0.32, workers=8)
    assert no_model.verdict == "compute-bound" and "waited for data only" not in no_model.suggestion


@pytest.mark.parametrize(("workers", "cpu"), [(0, None), (None, None), (8, 0.95)])
def test_no_hand_over_without_workers_or_with_the_cpus_saturated(
    workers: int | None, cpu: float | None
) -> None:
    # Without workers the wait is the loading itself (the probe times that same work: a 36%
    # wait reads the loader at 1/0.36 = 2.8x the step); saturated CPUs make the idle-model
    # probe read high.
    assert verdict_of(loader=HANDOVER * 90.0, compute=200.0, wait=0.36, workers=workers,
                      cpu=cpu, cpus=16).verdict == "input-bound"


@pytest.mark.parametrize(
    ("busy", "expected"),
    [
        (MIN_GPU_BUSY, "compute-bound"),  # the threshold itself is busy enough
        (MIN_GPU_BUSY - 1e-6, "overhead-bound"),
        (1.0, "compute-bound"),
        (None, "compute-bound"),  # no CUDA: never overhead-bound
    ],
)
def test_gpu_busy_edge(busy: float | None, expected: str) -> None:
    assert verdict_of(loader=10_000.0, compute=1000.0, wait=0.01, busy=busy).verdict == expected


def test_missing_rate_is_not_input_bound_below_a_heavy_wait() -> None:
    wait = HEAVY_DATA_WAIT - 0.01
    assert verdict_of(loader=None, compute=1000.0, wait=wait).verdict == "compute-bound"
    assert verdict_of(loader=100.0, compute=None, wait=wait).verdict == "compute-bound"


def test_diagnosis_travels_as_json() -> None:
    d = verdict_of(loader=500.0, compute=40_000.0, wait=0.8)
    result = TrialResult(status=Status.OK, throughput=90.0, diagnosis=d)
    data = json.loads(json.dumps(result.to_dict()))["diagnosis"]
    assert data["verdict"] == "input-bound"
    assert set(data) == {"verdict", "suggestion", "throughput", "loader_rate", "compute_rate",
                         "data_wait_fraction", "gpu_busy_fraction", "cpu_busy_fraction",
                         "unreliable", "step_ops", "distinct_ops"}
    assert Diagnosis(**data) == d
    assert TrialResult.from_dict({"status": "ok", "throughput": 90.0, "diagnosis": data}).diagnosis == d


# -- sanity: the rates checked against each other ---------------------------------------------------


@pytest.mark.parametrize(
    ("loader", "compute", "wait", "expected"),
    [
        (1e6, CONSISTENT * 2000.0, 0.0, (False, False)),  # at the margin: noise, not a contradiction
        (1e6, CONSISTENT * 2000.0 - 0.01, 0.0, (False, True)),  # the model alone is slower
        (CONSISTENT * 2000.0 - 0.01, 1e6, 0.0, (True, False)),  # a slow loader never waited for
        # ...and one waited for: it fed every batch, so it cannot be slower than the step (a
        # timm ViT's probe read 243 images/s beside 1.6k end to end, waiting 34%; H100).
        (CONSISTENT * 2000.0 - 0.01, 1e6, 0.34, (True, False)),
        (None, None, 0.0, (False, False)),  # nothing measured, nothing contradicted
    ],
)
def test_rates_that_contradict_the_end_to_end_rate(
    loader: float | None, compute: float | None, wait: float, expected: tuple[bool, bool]
) -> None:
    assert contradicted(throughput=2000.0, loader_rate=loader, compute_rate=compute) == expected
    d = classify(throughput=2000.0, data_wait_fraction=wait, loader_rate=loader,
                 compute_rate=compute, gpu_busy_fraction=None, unit="samples")
    assert d.unreliable.startswith("the loader alone read") == expected[0]


def test_a_model_rate_below_the_end_to_end_rate_draws_no_conclusion() -> None:
    # The issue's numbers: 283/s with data resident beside 2.0k/s end to end, and the verdict
    # had said "the model itself is the limit (283 ...)".
    d = classify(throughput=2000.0, data_wait_fraction=0.1, loader_rate=1_900.0,
                 compute_rate=283.0, gpu_busy_fraction=None, unit="samples")
    assert d.compute_rate == 283.0  # reported as measured...
    assert "283 samples/s, below the 2k samples/s" in d.unreliable
    assert "the loader alone" not in d.unreliable
    assert "with data resident)" not in d.suggestion.split(" (not used")[0]  # ...not concluded on
    assert d.verdict == "compute-bound"  # the step waited 10%: from the wait, not the rate
    assert "waited for data only 10%" in d.suggestion
    assert "not used: the model with data resident read 283" in d.suggestion


def test_a_slow_loader_the_step_never_waited_for_is_set_aside() -> None:
    d = classify(throughput=2000.0, data_wait_fraction=0.0, loader_rate=500.0,
                 compute_rate=2100.0, gpu_busy_fraction=None, unit="samples")
    assert d.loader_rate == 500.0 and d.unreliable.startswith("the loader alone read 500")
    assert d.verdict == "compute-bound" and "2.1k samples/s with data resident" in d.suggestion


def test_agreeing_rates_are_not_flagged() -> None:
    d = verdict_of(loader=200_000.0, compute=1_600.0, wait=0.01)
    assert d.unreliable == "" and "not used" not in d.suggestion


def test_a_heavy_wait_without_a_model_rate_names_the_wait() -> None:
    d = classify(throughput=2000.0, data_wait_fraction=0.6, loader_rate=2100.0,
                 compute_rate=100.0, gpu_busy_fraction=None, unit="samples")
    assert d.verdict == "input-bound"
    assert d.suggestion.startswith("the step waited for data 60% of the time")


# -- loader_rate / compute_rate / diagnose on a scripted step with an injected clock ------------------


class Unit:
    unit = "images"


class ScriptedStep:
    """The parts of a TrainStep the diagnosis uses. The loader holds `queued` batches ahead
    (handed over at once), then takes `batch_seconds` per batch; a micro-step takes
    `micro_seconds`, plus `first_extra` on the very first (compilation)."""

    def __init__(
        self,
        clock: FakeClock,
        *,
        config: TrainConfig,
        batch_seconds: float = FAST,
        micro_seconds: float = FAST,
        queued: int = 0,
        first_extra: float = 0.0,
    ) -> None:
        self.clock = clock
        self.config = config
        self.device = torch.device("cpu")
        self.adapter = Unit()
        self.batch_seconds = batch_seconds
        self.micro_seconds = micro_seconds
        self.queued = queued
        self.first_extra = first_extra
        self.batches = 0
        self.micro_steps = 0
        self.optimizer_steps = 0
        self.optimizer = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)

    def next_batch(self) -> tuple[Any, int]:
        if self.queued:
            self.queued -= 1
        else:
            self.clock.now += self.batch_seconds
        self.batches += 1
        return (torch.zeros(ITEMS, 2),), ITEMS

    def micro_step(self, batch: Any, accum: int) -> None:
        assert batch[0].shape == (ITEMS, 2)
        self.clock.now += self.micro_seconds + (self.first_extra if self.micro_steps == 0 else 0.0)
        self.micro_steps += 1

    def optimizer_step(self) -> None:
        self.optimizer_steps += 1

    # The real one: grad_accum micro-steps on the resident batch, then the optimizer step
    # (through the real per-micro-step hook, which only differs under DDP).
    resident_step = TrainStep.resident_step
    skip_queued = TrainStep.skip_queued
    _micro_step = TrainStep._micro_step
    to_device = TrainStep.to_device
    _ddp = None
    _batch_format = None
    _varying: frozenset[tuple[str, int]] = frozenset()

    def sync(self) -> None:
        pass


def test_loader_rate_drains_the_prefetched_batches_first() -> None:
    clock = FakeClock()
    # Six batches wait in the queue (workers x prefetch_factor): handing them over is instant
    # and would overstate the loader's steady rate.
    step = ScriptedStep(clock, config=TrainConfig(batch_size=ITEMS, num_workers=2,
                                                  prefetch_factor=3), queued=6)
    rate = loader_rate(step, prefetch_batches=6, seconds=0.5, clock=clock)  # type: ignore[arg-type]
    assert rate == ITEMS / FAST  # exactly the steady rate
    # The queue, the pull that blocked (the queue was empty), the one the clock starts at, then
    # a few rounds of both workers (at least 8).
    assert step.batches == 6 + 1 + 1 + 8


def test_skipping_the_queue_of_a_slow_loader_stops_after_seconds() -> None:
    clock = FakeClock()
    # 64 batches queued ahead, each 1 s to load: skipping them all would take a minute.
    step = ScriptedStep(clock, config=TrainConfig(batch_size=ITEMS), batch_seconds=1.0)
    rate = loader_rate(step, prefetch_batches=64, seconds=2.5, clock=clock)  # type: ignore[arg-type]
    # 3 skipped within 2.5 s, one more that blocked (the queue is empty), the one the clock
    # starts at, then 3 timed.
    assert step.batches == 3 + 1 + 1 + 3
    assert clock.now == 8.0
    assert rate == ITEMS / 1.0


def test_skipping_the_queue_stops_after_seconds() -> None:
    clock = FakeClock()
    # Pulls of 1/2048 s never block long enough to show an empty queue: seconds end it.
    step = ScriptedStep(clock, config=TrainConfig(batch_size=ITEMS), batch_seconds=1 / 2048)
    assert step.skip_queued(1e-3, 1000, seconds=1 / 64) == 32
    assert step.skip_queued(1e-3, 10) == 10  # or the count


def test_loader_rate_without_draining_overstates() -> None:
    clock = FakeClock()
    step = ScriptedStep(clock, config=TrainConfig(batch_size=ITEMS), queued=6)
    rate = loader_rate(step, prefetch_batches=0, seconds=0.5, clock=clock)  # type: ignore[arg-type]
    assert rate > ITEMS / FAST  # why the worker passes the prefetch depth


def test_loader_rate_pulls_three_rounds_of_all_workers() -> None:
    clock = FakeClock()
    step = ScriptedStep(clock, config=TrainConfig(batch_size=ITEMS, num_workers=8),
                        batch_seconds=1 / 16)
    rate = loader_rate(step, prefetch_batches=0, seconds=2.0, clock=clock)  # type: ignore[arg-type]
    # 1 s would be 16 batches; 3 rounds of 8 workers need 24 (after the one the clock starts at).
    assert step.batches == 1 + 24
    assert rate == ITEMS * 16


def test_loader_rate_stops_at_seconds() -> None:
    clock = FakeClock()
    step = ScriptedStep(clock, config=TrainConfig(batch_size=ITEMS), batch_seconds=1.0)
    loader_rate(step, prefetch_batches=0, seconds=2.5, clock=clock)  # type: ignore[arg-type]
    # The one the clock starts at, then 3, not the 8 it wants: a very slow loader is cut off.
    assert step.batches == 1 + 3
    assert clock.now == 4.0


class BurstyStep(ScriptedStep):
    """`workers` workers that finish their batches together every `period` s, the first time
    at `first` s: the loader hands over `workers` batches at once, then none for a period."""

    def __init__(self, clock: FakeClock, *, workers: int, period: float, first: float) -> None:
        super().__init__(clock, config=TrainConfig(batch_size=ITEMS, num_workers=workers))
        self.period, self.first = period, first

    def made(self, t: float) -> int:
        bursts = 0 if t < self.first else 1 + math.floor((t - self.first) / self.period + 1e-9)
        return self.config.num_workers * bursts

    def next_batch(self) -> tuple[Any, int]:
        if self.made(self.clock.now) <= self.batches:  # none ready: wait for the next burst
            k = self.batches // self.config.num_workers
            self.clock.now = self.first + k * self.period
        self.batches += 1
        return (torch.zeros(ITEMS, 2),), ITEMS


@pytest.mark.parametrize("first", [0.05, 0.3, 0.6])
def test_loader_rate_of_workers_in_bursts_holds_at_any_phase(first: float) -> None:
    # 15 workers, a batch each every 0.72 s: 20.8 batches/s, in bursts of 15. Timed from the
    # start, not from a batch's arrival (the probe before 2026-11-28), a first burst at 0.3 s
    # read 0.75x the rate and one at 0.6 s (2 batches in 0.6 s) 0.16x.
    truth = ITEMS * 15 / 0.72
    for throughput, rounds in ((None, 1), (truth, 3)):
        clock = FakeClock()
        step = BurstyStep(clock, workers=15, period=0.72, first=first)
        rate = loader_rate(step, prefetch_batches=0, seconds=0.5, clock=clock,  # type: ignore[arg-type]
                           throughput=throughput)
        assert rate == pytest.approx(truth)
        # Half a second is under a round; at the step's pace, three rounds are timed.
        assert step.batches == 1 + 15 * rounds


def test_loader_rate_stretches_to_the_rounds_no_further_than_loader_max() -> None:
    clock = FakeClock()
    # 8 workers, 1 s a batch: 3 rounds at the step's pace would take 24 s.
    step = ScriptedStep(clock, config=TrainConfig(batch_size=ITEMS, num_workers=8),
                        batch_seconds=1.0)
    loader_rate(step, prefetch_batches=0, seconds=0.5, clock=clock,  # type: ignore[arg-type]
                throughput=ITEMS / 1.0)
    assert clock.now == 1.0 + LOADER_MAX


@pytest.mark.parametrize("accum", [1, 2, 4])
def test_compute_rate_times_full_steps_on_one_resident_batch(accum: int) -> None:
    clock = FakeClock()
    step = ScriptedStep(clock, config=TrainConfig(batch_size=ITEMS, grad_accum=accum),
                        batch_seconds=SLOW, micro_seconds=FAST, first_extra=4.0)
    rate = compute_rate(step, seconds=0.5, clock=clock)  # type: ignore[arg-type]
    # The first (compiling) step and the loader are outside the timing: the micro-step rate.
    assert rate == ITEMS / FAST
    assert step.batches == 1
    assert step.micro_steps == accum * step.optimizer_steps
    assert step.optimizer_steps >= 1 + 3


@pytest.mark.parametrize(
    ("batch_seconds", "micro_seconds", "wait", "expected"),
    [
        (SLOW, FAST, 0.5, "input-bound"),
        (FAST, SLOW, 0.01, "compute-bound"),
        (SLOW, FAST, 0.0, "compute-bound"),  # the step never waited: the queue kept up
    ],
)
def test_diagnose_scripted(
    batch_seconds: float, micro_seconds: float, wait: float, expected: str
) -> None:
    clock = FakeClock()
    step = ScriptedStep(clock, config=TrainConfig(batch_size=ITEMS), batch_seconds=batch_seconds,
                        micro_seconds=micro_seconds)
    d = diagnose(step, throughput=42.0, data_wait_fraction=wait,  # type: ignore[arg-type]
                 prefetch_batches=0, seconds=0.5, clock=clock)
    assert d.verdict == expected
    assert d.loader_rate == ITEMS / batch_seconds
    assert d.compute_rate == ITEMS / micro_seconds
    assert d.gpu_busy_fraction is None  # a CPU step is never profiled
    assert d.throughput == 42.0
    assert "images/s" in d.suggestion  # the adapter's unit


class DisturbedStep(ScriptedStep):
    """Micro-steps take SLOW for the first `disturbed` of them (another process had the
    machine), FAST after."""

    def __init__(self, clock: FakeClock, disturbed: int) -> None:
        super().__init__(clock, config=TrainConfig(batch_size=ITEMS))
        self.disturbed = disturbed

    def micro_step(self, batch: Any, accum: int) -> None:
        self.clock.now += SLOW if self.micro_steps < self.disturbed else FAST
        self.micro_steps += 1


def test_a_disturbed_model_probe_is_measured_once_more() -> None:
    clock = FakeClock()
    step = DisturbedStep(clock, disturbed=5)  # the first probe: 1 untimed + 4 timed SLOW steps
    d = diagnose(step, throughput=400.0, data_wait_fraction=0.0,  # type: ignore[arg-type]
                 prefetch_batches=0, seconds=0.5, clock=clock)
    assert d.compute_rate == ITEMS / FAST  # the second probe, undisturbed
    assert d.unreliable == "" and "with data resident" in d.suggestion


def test_a_model_probe_that_stays_below_is_set_aside_after_one_more() -> None:
    clock = FakeClock()
    step = DisturbedStep(clock, disturbed=10**6)
    d = diagnose(step, throughput=400.0, data_wait_fraction=0.0,  # type: ignore[arg-type]
                 prefetch_batches=0, seconds=0.5, clock=clock)
    assert d.compute_rate == ITEMS / SLOW
    assert d.unreliable.startswith(f"the model with data resident read {human(ITEMS / SLOW)}")
    assert step.optimizer_steps == 2 * (1 + 4)  # two probes, no more: bounded


# -- steady state (beyond tests/trial/test_measure.py) --------------------------------------------------


class TimedStep:
    """Step n takes `compute(n)` of work plus `wait(n)` blocked on the loader."""

    def __init__(self, clock: FakeClock, compute: Callable[[int], float],
                 wait: Callable[[int], float] = lambda n: 0.0) -> None:
        self.clock = clock
        self.compute = compute
        self.wait = wait
        self.calls = 0

    def __call__(self) -> StepResult:
        w = self.wait(self.calls)
        self.clock.now += self.compute(self.calls) + w
        self.calls += 1
        return StepResult(items=ITEMS, data_wait=w)


def measured(step: TimedStep, clock: FakeClock, **settings: Any) -> Measurement:
    values: dict[str, Any] = {"window_seconds": 4 * FAST, "budget_seconds": 1000.0, **settings}
    return measure(step, sync=lambda: None, finite=lambda: True,
                   settings=MeasureSettings(**values), clock=clock)


SETTLING = [4.0, 2.0, 1.0, 0.5, 0.25, 0.125, 0.0625, 1 / 32]  # settled from step 9 on


def settling(n: int) -> float:
    return SETTLING[n] if n < len(SETTLING) else FAST


def test_prefetch_is_drained_after_settling_not_during() -> None:
    # Compute settles at step 9 (the first two FAST steps agree), then the 3 prefetched
    # batches must be consumed: steps before settling do not count towards them.
    clock = FakeClock()
    m = measured(TimedStep(clock, settling), clock, min_warmup_steps=3, prefetch_batches=3)
    assert m.settled
    assert m.warmup_steps == len(SETTLING) + 2 + 3


def test_settled_compute_with_prefetch_larger_than_the_settling() -> None:
    clock = FakeClock()
    m = measured(TimedStep(clock, lambda n: FAST), clock, min_warmup_steps=3, prefetch_batches=8)
    assert m.warmup_steps == 3 + 8  # settled at 3, then all 8 queued batches


def test_settling_judges_compute_not_data_wait() -> None:
    # Workers starting up: the first batches take long to arrive, compute is steady at once.
    clock = FakeClock()
    waits = [2.0, 1.0, 0.5, 0.25]
    step = TimedStep(clock, lambda n: FAST, wait=lambda n: waits[n] if n < len(waits) else 0.0)
    m = measured(step, clock, min_warmup_steps=3, prefetch_batches=0)
    assert m.settled and m.warmup_steps == 3
    assert m.compile_seconds == 0.0  # the slow first batch is not compile time


def test_timed_windows_start_after_the_prefetch_is_consumed() -> None:
    # Queued batches arrive without waiting; afterwards each batch makes the step wait 1/64 s.
    # Once warm-up has consumed the queue, every timed window sees the steady wait.
    prefetch = 4
    clock = FakeClock()
    step = TimedStep(clock, lambda n: FAST, wait=lambda n: 0.0 if n < 3 + prefetch else FAST)
    m = measured(step, clock, min_warmup_steps=3, prefetch_batches=prefetch)
    assert m.warmup_steps == 3 + prefetch
    assert {w.data_wait / w.steps for w in m.windows} == {FAST}
    assert m.data_wait_fraction == 0.5


def test_drifting_windows_end_unconverged() -> None:
    # Thermal throttling: every step a little slower than the one before, for ever. The last
    # windows never agree within 3 %, so measuring stops at max_windows and says so.
    clock = FakeClock()
    step = TimedStep(clock, lambda n: FAST * (1.0 if n < 3 else 1.03 ** (n - 3)))
    m = measured(step, clock, min_warmup_steps=3, window_seconds=4 * FAST, min_window_steps=4,
                 max_windows=6, tolerance=0.03)
    assert not m.converged
    assert len(m.windows) == 6
    assert m.spread > 0.03
    assert m.summary()["converged"] is False
    throughputs = [w.throughput for w in m.windows]
    assert throughputs == sorted(throughputs, reverse=True)  # it really drifted


def test_drifting_windows_stop_at_the_budget() -> None:
    clock = FakeClock()
    step = TimedStep(clock, lambda n: FAST * (1.0 if n < 3 else 1.03 ** (n - 3)))
    m = measured(step, clock, min_warmup_steps=3, min_window_steps=4, max_windows=1000,
                 budget_seconds=1.0)
    assert not m.converged
    assert 3 <= len(m.windows) < 1000
    assert sum(w.seconds for w in m.windows) >= 1.0


@pytest.mark.parametrize("min_windows", [3, 5, 8])
def test_min_windows_are_timed_past_the_budget(min_windows: int) -> None:
    clock = FakeClock()
    step = TimedStep(clock, lambda n: FAST if n < 3 or ((n - 3) // 4) % 2 else SLOW)
    m = measured(step, clock, min_warmup_steps=3, min_window_steps=4, window_seconds=2 * FAST,
                 min_windows=min_windows, budget_seconds=1e-6)
    assert len(m.windows) == min_windows
    assert not m.converged


def test_agreeing_windows_still_wait_for_min_windows() -> None:
    clock = FakeClock()
    m = measured(TimedStep(clock, lambda n: FAST), clock, min_windows=5, agree=3)
    assert m.converged
    assert len(m.windows) == 5  # the first three agreed already


def test_a_slowdown_is_cut_at_twice_the_window_but_not_below_min_steps() -> None:
    # Warm-up at 1/64 s per step sets 32-step windows of 0.5 s; then every step takes 1/8 s.
    clock = FakeClock()
    step = TimedStep(clock, lambda n: FAST if n < 3 else SLOW)
    m = measured(step, clock, min_warmup_steps=3, window_seconds=0.5, min_window_steps=3,
                 max_windows=3)
    assert {w.steps for w in m.windows} == {8}  # cut once 2 x 0.5 s were spent
    assert {w.seconds for w in m.windows} == {1.0}


def test_window_of_an_input_bound_step_lasts_window_seconds() -> None:
    # Each step: 1/64 s of compute, 3/64 s waiting for the loader. A 1 s window is 16 steps.
    clock = FakeClock()
    step = TimedStep(clock, lambda n: FAST, wait=lambda n: 3 * FAST)
    m = measured(step, clock, min_warmup_steps=3, window_seconds=1.0, min_window_steps=3,
                 max_windows=3)
    assert {w.seconds for w in m.windows} == {1.0}


# -- a real CPU TrainStep from slow-on-purpose adapters ----------------------------------------------

QUICK = MeasureSettings(window_seconds=0.2, budget_seconds=1.0)


@pytest.fixture
def composed() -> Iterator[Callable[[Path, TrainConfig], TrainStep]]:
    steps: list[TrainStep] = []

    def build(path: Path, config: TrainConfig) -> TrainStep:
        step = TrainStep(load_adapter(path)(), config, torch.device("cpu"))
        steps.append(step)
        return step

    yield build
    for step in steps:
        step.close()


def measure_and_diagnose(step: TrainStep, prefetch: int) -> tuple[Measurement, Diagnosis]:
    settings = dataclasses.replace(QUICK, num_workers=step.config.num_workers,
                                   prefetch_batches=prefetch)
    m = measure(step, sync=step.sync, finite=step.finite, settings=settings)
    d = diagnose(step, throughput=m.throughput, data_wait_fraction=m.data_wait_fraction,
                 prefetch_batches=prefetch, seconds=0.5)
    return m, d


@pytest.mark.parametrize("workers", [0, 1])
def test_slow_loader_is_input_bound(
    composed: Callable[[Path, TrainConfig], TrainStep], workers: int
) -> None:
    config = TrainConfig(batch_size=8, num_workers=workers, prefetch_factor=2 if workers else None)
    step = composed(SLOW_LOADER, config)
    m, d = measure_and_diagnose(step, prefetch=2 * workers)
    assert m.data_wait_fraction >= MIN_DATA_WAIT, m.summary()
    assert d.verdict == "input-bound", d
    assert d.loader_rate is not None and d.compute_rate is not None
    assert d.loader_rate < d.compute_rate
    # 8 samples at 4 ms each: one process cannot deliver more than 250 samples/s.
    assert d.loader_rate < 300
    assert "more workers" in d.suggestion


def test_slow_model_is_compute_bound(composed: Callable[[Path, TrainConfig], TrainStep]) -> None:
    step = composed(SLOW_MODEL, TrainConfig(batch_size=8))
    m, d = measure_and_diagnose(step, prefetch=0)
    assert m.data_wait_fraction < 0.25, m.summary()  # a 20 ms forward, microseconds of loading
    assert d.verdict == "compute-bound", d
    assert d.loader_rate is not None and d.compute_rate is not None
    assert d.compute_rate < d.loader_rate
    # A 20 ms forward: at most 8 / 20 ms = 400 samples/s.
    assert d.compute_rate < 400
    assert d.gpu_busy_fraction is None


@pytest.mark.parametrize(
    ("adapter", "expected"),
    [(SLOW_LOADER, "input-bound"), (SLOW_MODEL, "compute-bound")],
    ids=["slow-loader", "slow-model"],
)
def test_trial_reports_the_diagnosis(tmp_path: Path, adapter: Path, expected: str) -> None:
    request = TrialRequest(adapter=str(adapter), config=TrainConfig(batch_size=8), device="cpu",
                           measure=QUICK, number=7)
    result = InProcessRunner().run(request, tmp_path / "trial", timeout=60)
    assert result.status is Status.OK, result.reason
    diagnosis = result.diagnosis
    assert diagnosis is not None, result.diagnosis_error
    assert diagnosis.verdict == expected, diagnosis
    assert diagnosis.data_wait_fraction == result.data_wait_fraction
    assert diagnosis.throughput == result.throughput
    assert diagnosis.loader_rate is not None and diagnosis.compute_rate is not None
    if expected == "input-bound":
        assert diagnosis.loader_rate < diagnosis.compute_rate
    else:
        assert diagnosis.compute_rate < diagnosis.loader_rate
    assert "diagnosis" in result.phases  # the time it took is accounted for
    # What the parent reads back from the trial folder says the same.
    saved = json.loads((tmp_path / "trial" / "result.json").read_text())
    assert saved["diagnosis"]["verdict"] == expected
    assert TrialResult.load(tmp_path / "trial" / "result.json").diagnosis == diagnosis


class _ProfiledStep:
    """A step the GPU-busy probe drives: it counts resident steps; its shape log says whether
    the probe's batch shape ran before."""

    def __init__(self, first_run: bool) -> None:
        from autotune.trial.shapes import ShapeLog, signature
        self.shapes = ShapeLog()
        self.shapes.add(signature(torch.zeros(2)))
        if not first_run:
            self.shapes.run_last()
        self.device = torch.device("cuda")
        self.resident = 0

    def next_batch(self) -> tuple[torch.Tensor, int]:
        return torch.zeros(2), 2  # its signature was added above, as next_batch adds it

    def to_device(self, batch: Any, *, non_blocking: bool) -> Any:
        return batch

    def resident_step(self, batch: Any) -> None:
        self.resident += 1

    def sync(self) -> None:
        pass


@pytest.mark.parametrize(("first_run", "untimed"), [(True, 1), (False, 0)])
def test_the_gpu_busy_probe_runs_a_first_seen_shape_once_before_profiling(
        monkeypatch: pytest.MonkeyPatch, first_run: bool, untimed: int) -> None:
    import contextlib

    import torch.profiler
    from autotune.trial import diagnose

    profiled: list[int] = []
    step = _ProfiledStep(first_run)

    @contextlib.contextmanager
    def fake_profile(**kwargs: Any) -> Iterator[Any]:
        profiled.append(step.resident)  # resident steps run before the profile opened
        yield type("Prof", (), {"events": lambda self: []})()

    monkeypatch.setattr(torch.profiler, "profile", fake_profile)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)
    assert diagnose.gpu_busy_fraction(step, steps=3) is None  # no kernels recorded
    assert profiled == [untimed] and step.resident == untimed + 3


def test_the_diagnosis_counts_an_eager_steps_operations(
        composed: Callable[[Path, TrainConfig], TrainStep]) -> None:
    # What a first compile must trace, for the search's prior on its seconds
    # (`study.policy.compile_prior`): a Linear's forward, a cross-entropy and their backward
    # are tens of ATen calls; the probe's gradients are dropped after.
    from autotune.trial.opcount import step_ops

    step = composed(SLOW_MODEL, TrainConfig(batch_size=8))
    _, d = measure_and_diagnose(step, prefetch=0)
    assert d.step_ops is not None and 10 <= d.step_ops <= 200, d.step_ops
    assert d.distinct_ops is not None and 5 <= d.distinct_ops <= d.step_ops
    assert all(p.grad is None for p in step.model.parameters())
    batch = step.to_device(step.next_batch()[0], non_blocking=False)
    assert step_ops(step, batch) == (d.step_ops, d.distinct_ops)  # the same step, again
    # A compiled step is not counted: the mode would make Dynamo trace it anew.
    import copy
    twin = copy.copy(step)
    twin.config = dataclasses.replace(step.config, compile="default")
    assert step_ops(twin, batch) is None


def test_a_repeated_call_is_one_distinct_op() -> None:
    # A block repeated, or a cell stepped in a Python loop: Inductor compiles its kernels once.
    from autotune.trial.opcount import _Count

    a, b = torch.ones(4, 4), torch.ones(4, 8)
    with _Count() as count:
        for _ in range(10):
            torch.mm(a, a)
        torch.mm(a, b)
    assert (count.calls, len(count.distinct)) == (11, 2)

