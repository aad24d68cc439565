"""The noise probe on a fake /proc, a fake /sys and a fake nvidia-smi: CPU time outside the
trial's process group, the busiest outside processes, throttling, other GPU processes."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from autotune.trial import noiseprobe
from autotune.trial.noiseprobe import TICK, finish, parse_limits, start

GROUP = 500  # the trial's process group: the trial (pid 500) and its DataLoader workers
UUID = "GPU-1111aaaa-0000-0000-0000-000000000000"


class FakeMachine:
    """/proc and /sys as files under tmp_path, changed by the test between readings."""

    def __init__(self, root: Path) -> None:
        self.proc = root / "proc"
        self.sys = root / "sys"
        self.proc.mkdir()
        self.now = 0.0

    def cpus(self, *busy: tuple[int, int]) -> None:
        """(user, system) ticks of cpu0, cpu1, ...; idle stays 1000."""
        lines = ["cpu  0 0 0 0 0 0 0 0 0 0"]
        lines += [f"cpu{i} {user} 0 {system} 1000 0 0 0 0 0 0"
                  for i, (user, system) in enumerate(busy)]
        (self.proc / "stat").write_text("\n".join(lines) + "\n")

    def process(self, pid: int, name: str, pgrp: int, utime: int, stime: int = 0,
                cutime: int = 0) -> None:
        folder = self.proc / str(pid)
        folder.mkdir(exist_ok=True)
        (folder / "stat").write_text(
            f"{pid} ({name}) S 1 {pgrp} {pgrp} 0 -1 4194304 0 0 0 0 {utime} {stime} {cutime} 0 "
            "20 0 1 0 100 0 0\n")

    def exit(self, pid: int) -> None:
        (self.proc / str(pid) / "stat").unlink()
        (self.proc / str(pid)).rmdir()

    def throttles(self, *counts: int) -> None:
        for i, count in enumerate(counts):
            folder = self.sys / f"cpu{i}" / "thermal_throttle"
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "core_throttle_count").write_text(f"{count}\n")

    def clock(self) -> float:
        return self.now


@pytest.fixture
def machine(tmp_path: Path) -> FakeMachine:
    return FakeMachine(tmp_path)


def read(m: FakeMachine, change: Callable[[], None], **kwargs: object) -> noiseprobe.Noise:
    before = start(pgrp=GROUP, cpus=[0, 1], proc=m.proc, sys_cpu=m.sys, clock=m.clock)
    change()
    return finish(before, pgrp=GROUP, cpus=[0, 1], proc=m.proc, sys_cpu=m.sys, clock=m.clock,
                  **kwargs)  # type: ignore[arg-type]


def test_cpu_time_outside_the_group_and_the_busiest_processes(machine: FakeMachine) -> None:
    m = machine
    m.cpus((100, 0), (100, 0))
    m.process(500, "python3", GROUP, utime=50)
    m.process(501, "pt_data_worker", GROUP, utime=20)  # a DataLoader worker
    m.process(900, "stress (ng)", 900, utime=10)  # a name with a space and a parenthesis
    m.process(901, "bash", 901, utime=5)
    m.process(902, "idle", 902, utime=3)

    def two_seconds() -> None:
        m.now += 2.0
        # The trial and its worker used 150 ticks, the two CPUs 350 in all: others 200.
        m.cpus((250, 25), (275, 0))
        m.process(500, "python3", GROUP, utime=120)
        m.process(501, "pt_data_worker", GROUP, utime=100)
        m.process(900, "stress (ng)", 900, utime=160)
        m.process(901, "bash", 901, utime=45)
        m.process(903, "make", 903, utime=4)  # started during the windows

    noise = read(m, two_seconds)
    assert noise.seconds == 2.0 and noise.cpus == 2
    assert noise.other_cpu_seconds == pytest.approx(200 / TICK)
    assert noise.other_cpus == pytest.approx(100 / TICK)
    assert [(p.name, p.pid) for p in noise.busiest] == [("stress (ng)", 900), ("bash", 901),
                                                         ("make", 903)]
    assert noise.busiest[0].cpu_seconds == pytest.approx(150 / TICK)
    assert noise.gpu_others is None and noise.gpu_limits is None  # a CPU trial: no GPU asked
    assert noise.cpu_throttle_events is None  # this kernel counts none


def test_a_worker_that_exits_mid_window_is_still_the_trials_time(machine: FakeMachine) -> None:
    m = machine
    m.cpus((0, 0))
    m.process(500, "python3", GROUP, utime=10)
    m.process(501, "pt_data_worker", GROUP, utime=40)

    def worker_exits() -> None:
        m.now += 1.0
        m.cpus((100, 0))  # all of it the trial's: the worker's 30 more, the trial's 70
        m.exit(501)  # reaped: its 70 ticks move into the trial's cutime
        m.process(500, "python3", GROUP, utime=80, cutime=70)

    before = start(pgrp=GROUP, cpus=[0], proc=m.proc, sys_cpu=m.sys, clock=m.clock)
    worker_exits()
    noise = finish(before, pgrp=GROUP, cpus=[0], proc=m.proc, sys_cpu=m.sys, clock=m.clock)
    assert noise.other_cpu_seconds == 0.0
    assert noise.busiest == ()


def test_only_the_trials_cpus_count(machine: FakeMachine) -> None:
    m = machine
    m.cpus((0, 0), (0, 0))
    m.process(500, "python3", GROUP, utime=0)
    before = start(pgrp=GROUP, cpus=[1], proc=m.proc, sys_cpu=m.sys, clock=m.clock)
    m.now += 1.0
    m.cpus((90, 0), (30, 0))  # cpu0 is not the trial's: its 90 ticks are someone else's affair
    m.process(500, "python3", GROUP, utime=20)
    noise = finish(before, pgrp=GROUP, cpus=[1], proc=m.proc, sys_cpu=m.sys, clock=m.clock)
    assert noise.cpus == 1 and noise.other_cpu_seconds == pytest.approx(10 / TICK)


def test_without_proc_nothing_is_claimed(tmp_path: Path) -> None:
    missing = tmp_path / "no-proc"
    before = start(pgrp=GROUP, cpus=[0], proc=missing, sys_cpu=missing)
    noise = finish(before, pgrp=GROUP, cpus=[0], proc=missing, sys_cpu=missing)
    assert noise.other_cpu_seconds is None and noise.other_cpus is None
    assert noise.busiest == () and noise.cpu_throttle_events is None


def test_cpu_thermal_throttling_is_counted(machine: FakeMachine) -> None:
    m = machine
    m.cpus((0, 0), (0, 0))
    m.throttles(7, 3)

    def throttled() -> None:
        m.throttles(9, 6)

    assert read(m, throttled).cpu_throttle_events == 5


# -- the GPU, through a fake nvidia-smi ----------------------------------------------------------------

GPUS = ("GPU-1111aaaa-0000-0000-0000-000000000000, 1275, 1980, 71, 0x0000000000000044\n"
        "GPU-2222bbbb-0000-0000-0000-000000000000, 1980, 1980, 40, 0x0000000000000000\n")


def fake_smi(gpus: str | None, apps: str | None, *, old_driver: bool = False
             ) -> tuple[Callable[[list[str]], str | None], list[list[str]]]:
    calls: list[list[str]] = []

    def run(cmd: list[str]) -> str | None:
        calls.append(cmd)
        if cmd[1].startswith("--query-gpu="):
            if old_driver and "clocks_event_reasons" in cmd[1]:
                return None  # an older nvidia-smi knows only the old field name
            return gpus
        return apps

    return run, calls


def gpu_noise(machine: FakeMachine, run: Callable[[list[str]], str | None]) -> noiseprobe.Noise:
    machine.cpus((0, 0), (0, 0))
    machine.process(500, "python3", GROUP, utime=0)
    return read(machine, lambda: None, gpu_uuid="1111aaaa-0000-0000-0000-000000000000", run=run)


def test_other_processes_and_clocks_of_the_trials_gpu(machine: FakeMachine) -> None:
    apps = (f"{UUID}, 500, python3\n"
            f"{UUID}, 4242, other_training.py\n"
            "GPU-2222bbbb-0000-0000-0000-000000000000, 777, on_another_gpu\n")
    run, calls = fake_smi(GPUS, apps)
    noise = gpu_noise(machine, run)
    assert noise.gpu_others == ("other_training.py (4242)",)
    assert noise.gpu_clock_ratio == pytest.approx(1275 / 1980)
    assert noise.gpu_temperature_c == 71.0
    assert noise.gpu_limits == ("sw_power_cap", "hw_thermal_slowdown")
    assert len(calls) == 2


def test_an_older_nvidia_smi_is_asked_with_the_old_field_name(machine: FakeMachine) -> None:
    run, calls = fake_smi(GPUS, f"{UUID}, 500, python3\n", old_driver=True)
    noise = gpu_noise(machine, run)
    assert "clocks_throttle_reasons.active" in calls[1][1]
    assert noise.gpu_limits == ("sw_power_cap", "hw_thermal_slowdown")
    assert noise.gpu_others == ()  # only the trial itself: measured, none


def test_gpu_processes_of_another_pid_namespace_say_nothing(machine: FakeMachine) -> None:
    # In a container nvidia-smi may list host PIDs: the trial's own is not among them.
    run, _ = fake_smi(GPUS, f"{UUID}, 123456, python3\n")
    assert gpu_noise(machine, run).gpu_others is None


def test_without_nvidia_smi_the_gpu_facts_are_unknown(machine: FakeMachine) -> None:
    run, _ = fake_smi(None, None)
    noise = gpu_noise(machine, run)
    assert (noise.gpu_others, noise.gpu_clock_ratio, noise.gpu_limits) == (None, None, None)


@pytest.mark.parametrize(("mask", "names"), [
    ("0x0000000000000000", ()),
    ("0x0000000000000001", ("gpu_idle",)),
    ("0x00000000000000A8", ("hw_slowdown", "sw_thermal_slowdown", "hw_power_brake_slowdown")),
    ("[N/A]", None),
])
def test_clock_limit_reasons(mask: str, names: tuple[str, ...] | None) -> None:
    assert parse_limits(mask) == names
