"""Run-to-run spread and its measured causes: the facts travel as JSON, and the warning names
what was measured, never a guess."""

from __future__ import annotations

import json

import pytest

from autotune import HostCpu, Noise, Status, TrialResult
from autotune.contract.noise import OtherProcess, likely_cause, spread_warning

BUSY = Noise(seconds=10.0, cpus=2, other_cpu_seconds=16.0,
             busiest=(OtherProcess(name="python3", pid=4242, cpu_seconds=12.0),
                      OtherProcess(name="make", pid=77, cpu_seconds=3.0),
                      OtherProcess(name="kdamond.0", pid=78, cpu_seconds=0.2)))
QUIET = Noise(seconds=10.0, cpus=2, other_cpu_seconds=0.3, gpu_others=(), gpu_clock_ratio=0.99,
              gpu_limits=("sw_power_cap",), cpu_throttle_events=0)


def run(throughput: float, noise: Noise | None = QUIET, steal: float | None = None
        ) -> TrialResult:
    cpu = HostCpu(busy_fraction=0.9, steal_fraction=steal) if steal is not None else None
    return TrialResult(status=Status.OK, throughput=throughput, noise=noise, host_cpu=cpu)


def test_noise_travels_as_json() -> None:
    result = run(100.0, BUSY)
    back = TrialResult.from_dict(json.loads(json.dumps(result.to_dict())))
    assert back.noise == BUSY
    assert back.noise is not None and back.noise.busiest[0] == OtherProcess(
        name="python3", pid=4242, cpu_seconds=12.0)
    assert json.loads(json.dumps(QUIET.to_dict()))["gpu_limits"] == ["sw_power_cap"]
    assert TrialResult.from_dict({"status": "ok", "throughput": 1.0}).noise is None  # older files


def test_the_issues_case_names_the_other_process() -> None:
    # Confirmation runs of one config read 6.9k and 14.6k while another process was busy.
    warning = spread_warning([run(6_900.0, BUSY), run(14_600.0)], unit="samples")
    assert warning is not None
    assert warning.startswith("runs disagree by 2.12x (6.9k to 14.6k samples/s); likely cause: ")
    assert ("run 1: other processes kept 1.6 of the trial's 2 CPUs busy (busiest: python3 "
            "(pid 4242) 1.2, make (pid 77) 0.3)") in warning
    assert "run 2" not in warning  # the quiet run is not blamed
    assert "kdamond" not in warning  # 0.02 CPUs: not worth a name


def test_runs_that_agree_get_no_warning() -> None:
    assert spread_warning([run(100.0, BUSY), run(105.0, BUSY)], unit="samples") is None
    assert spread_warning([run(100.0)], unit="samples") is None  # one run has no spread


def test_spread_with_nothing_measured_to_blame_says_so() -> None:
    warning = spread_warning([run(100.0), run(150.0)], unit="samples")
    assert warning is not None and "nothing measured explains it" in warning
    assert "no other GPU process" in warning  # the GPU was read
    # A CPU trial read no GPU: the warning does not claim to have looked at one.
    cpu_only = Noise(seconds=10.0, cpus=2, other_cpu_seconds=0.1)
    on_cpu = spread_warning([run(100.0, cpu_only), run(150.0, cpu_only)], unit="samples")
    assert on_cpu is not None and "nothing measured explains it" in on_cpu
    assert "GPU" not in on_cpu
    unmeasured = spread_warning([run(100.0, None), run(150.0, None)], unit="samples")
    assert unmeasured is not None and "no cause could be measured" in unmeasured


@pytest.mark.parametrize(("noise", "steal", "expected"), [
    (Noise(seconds=1.0, cpus=16, other_cpu_seconds=1.0), None, None),  # 1 of 16 CPUs: minor
    (Noise(seconds=1.0, cpus=16, other_cpu_seconds=2.0), None, "kept 2.0 of the trial's 16 CPUs"),
    (Noise(seconds=1.0, cpus=2, gpu_others=("train.py (9)",)), None,
     "1 other process(es) on the GPU: train.py (9)"),
    (Noise(seconds=1.0, cpus=2, gpu_clock_ratio=0.6, gpu_limits=("sw_power_cap",)), None,
     "the GPU's SM clock was at 60% of its maximum (sw_power_cap)"),
    (Noise(seconds=1.0, cpus=2, gpu_clock_ratio=0.6, gpu_limits=("hw_thermal_slowdown",)), None,
     "the GPU's clocks were limited: hw_thermal_slowdown"),
    (Noise(seconds=1.0, cpus=2, cpu_throttle_events=3), None, "3 CPU thermal throttling"),
    (None, 0.12, "the hypervisor took 12% of the CPUs' time"),
    (QUIET, 0.01, None),
])
def test_each_measured_cause(noise: Noise | None, steal: float | None,
                             expected: str | None) -> None:
    cause = likely_cause([run(1.0, noise, steal)])
    if expected is None:
        assert cause is None
    else:
        assert cause is not None and expected in cause
