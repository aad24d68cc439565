"""Running one trial: the in-process twin, and real child processes (timeouts, crashes, compile)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from helpers import PID_DIR_ENV, kill_all, process_state, recorded_pids

from autotune import MeasureSettings, Status, TrainConfig, TrialResult
from autotune.contract.events import PhaseEvent, TrialEvent, WindowEvent
from autotune.contract.phases import PHASES
from autotune.contract.recompiles import divisor
from autotune.contract.request import TrialRequest
from autotune.study.execution.processes import _group_running, _wait_group_dead
from autotune.study.execution.runner import InProcessRunner, SubprocessRunner, kill_group
from autotune.study.execution.tail import EventTail

# Short windows: the tests check outcomes, not the precision of the numbers.
QUICK = MeasureSettings(window_seconds=0.02, budget_seconds=0.2, max_windows=5)


def request_for(adapter: Path, config: TrainConfig, measure: MeasureSettings = QUICK) -> TrialRequest:
    return TrialRequest(adapter=str(adapter), config=config, device="cpu", measure=measure, number=7)


# -- the in-process twin ----------------------------------------------------------------------------


def test_in_process_runner_ok(tmp_path: Path, tiny_adapter: Path) -> None:
    events: list[TrialEvent] = []
    trial_dir = tmp_path / "trials" / "7"
    result = InProcessRunner().run(
        request_for(tiny_adapter, TrainConfig(batch_size=8)), trial_dir, timeout=60,
        on_event=events.append,
    )
    assert result.status is Status.OK, result.reason
    assert result.throughput is not None and result.throughput > 0
    assert result.unit == "samples"
    assert result.windows is not None and result.windows >= 1
    assert result.step_seconds is not None and result.step_seconds > 0
    assert result.duration_seconds is not None and result.duration_seconds > 0
    assert result.peak_rss_mb is not None and result.peak_rss_mb > 0
    assert result.fingerprint is not None and result.fingerprint.torch
    assert len(result.window_throughputs) == result.windows
    if Path("/proc/stat").is_file():  # the CPUs worked while the windows were timed
        assert result.host_cpu is not None
        assert 0.0 < result.host_cpu.busy_fraction <= 1.0
        assert 0.0 <= result.host_cpu.steal_fraction < 1.0
    # One directory per trial: config in, result out.
    request = TrialRequest.from_dict(json.loads((trial_dir / "request.json").read_text()))
    assert request.config == TrainConfig(batch_size=8)
    assert TrialResult.load(trial_dir / "result.json") == result
    kinds = [e.KIND for e in events if not isinstance(e, PhaseEvent)]
    assert kinds[0] == "composed" and kinds.count("window") == result.windows
    # Each phase is announced as it starts, in order, and its seconds end up in the result.
    phases = [e.phase for e in events if isinstance(e, PhaseEvent)]
    assert phases == list(PHASES[1:])
    assert set(phases) <= set(result.phases)


def test_in_process_runner_counts_accumulated_micro_batches(tmp_path: Path, tiny_adapter: Path) -> None:
    one = InProcessRunner().run(request_for(tiny_adapter, TrainConfig(batch_size=8)),
                                tmp_path / "a", timeout=60)
    four = InProcessRunner().run(request_for(tiny_adapter, TrainConfig(batch_size=8, grad_accum=4)),
                                 tmp_path / "b", timeout=60)
    assert one.status is Status.OK and four.status is Status.OK
    assert one.step_seconds is not None and four.step_seconds is not None
    # Items per optimizer step = throughput x step time (per window: throughput = items/step /
    # step time), so four micro-batches of 8 show as 32 items per step. Exact up to the median of
    # an even number of windows; no wall-clock comparison between runs (the machine is shared).
    assert one.throughput is not None and four.throughput is not None
    assert one.throughput * one.step_seconds == pytest.approx(8, rel=0.1)
    assert four.throughput * four.step_seconds == pytest.approx(32, rel=0.1)


def test_in_process_runner_bf16(tmp_path: Path, tiny_adapter: Path) -> None:
    result = InProcessRunner().run(
        request_for(tiny_adapter, TrainConfig(batch_size=8, amp_dtype="bf16", checkpoint=1.0)),
        tmp_path / "t", timeout=60,
    )
    assert result.status is Status.OK, result.reason
    assert result.blocks_checkpointed == 2


@pytest.mark.parametrize(
    ("fault", "status", "reason"),
    [
        ("nan", Status.NAN, "not finite"),
        ("error", Status.ERROR, "ValueError: bad batch in the user's loss"),
    ],
)
def test_in_process_runner_failures(
    tmp_path: Path, test_adapters: Path, monkeypatch: pytest.MonkeyPatch,
    fault: str, status: Status, reason: str,
) -> None:
    monkeypatch.setenv("AUTOTUNE_TEST_FAULT", fault)
    result = InProcessRunner().run(
        request_for(test_adapters / "faulty.py", TrainConfig(batch_size=4)), tmp_path / "t",
        timeout=60,
    )
    assert result.status is status
    assert reason in result.reason
    assert result.throughput is None


def test_in_process_runner_oom(tmp_path: Path, test_adapters: Path) -> None:
    adapter = test_adapters / "oom_above.py"
    fits = InProcessRunner().run(request_for(adapter, TrainConfig(batch_size=16)), tmp_path / "a",
                                 timeout=60)
    too_big = InProcessRunner().run(request_for(adapter, TrainConfig(batch_size=32)), tmp_path / "b",
                                    timeout=60)
    assert fits.status is Status.OK, fits.reason
    assert too_big.status is Status.OOM
    assert too_big.reason.startswith("OutOfMemoryError: CUDA out of memory")


def test_in_process_runner_broken_adapter_is_an_error(tmp_path: Path) -> None:
    adapter = tmp_path / "broken.py"
    adapter.write_text("import autotune\n")
    result = InProcessRunner().run(request_for(adapter, TrainConfig(batch_size=4)), tmp_path / "t",
                                   timeout=60)
    assert result.status is Status.ERROR
    assert "no subclass of autotune.Adapter" in result.reason


# -- where a timed-out trial was stuck --------------------------------------------------------------------


def write_events(path: Path, *events: dict[str, Any]) -> None:
    with path.open("a") as f:
        for event in events:
            f.write(json.dumps(event) + "\n")


@pytest.mark.parametrize(
    ("events", "compiling", "says"),
    [
        ([], False, "the trial process was still starting after 40 s"),
        ([{"phase": "import"}], False, "still importing torch and the adapter after 40 s"),
        ([{"phase": "model"}], False, "still building the model and optimizer"),
        ([{"phase": "dataset"}], False, "still building the dataset and loader"),
        ([{"phase": "first_batch"}], False, "no batch from the DataLoader after 40 s"),
        ([{"phase": "warmup"}], True, "still compiling after 40 s"),
        ([{"phase": "warmup"}], False, "the first step had not finished after 40 s"),
        ([{"phase": "warmup"}, {"event": "first_step", "seconds": 3.0}], True,
         "still warming up after 40 s"),
        ([{"phase": "windows"}, {"event": "window", "throughput": 5.0, "seconds": 1.0,
                                 "steps": 3, "data_wait": 0.0}], False,
         "still measuring after 40 s (1 timed window(s))"),
        ([{"phase": "diagnosis"}], False, "still diagnosing"),
    ],
    ids=["start", "import", "model", "dataset", "first-batch", "compiling", "first-step",
         "warming-up", "measuring", "diagnosing"],
)
def test_a_stalled_trial_names_its_phase_and_how_long(
    tmp_path: Path, events: list[dict[str, Any]], compiling: bool, says: str
) -> None:
    path = tmp_path / "events.jsonl"
    path.touch()
    tail = EventTail(path, None)
    tail.phase_since = time.time() - 40.0  # launched 40 s ago
    then = time.time() - 40.0
    for event in events:
        write_events(path, {"event": "phase", "time": then, **event} if "phase" in event
                     else event)
    assert tail.stalled(compiling=compiling).startswith(says)


def test_a_warm_up_cut_after_a_few_slow_steps_says_they_were_slow(tmp_path: Path) -> None:
    # What a GRU tagger's baseline was killed with on a loaded 2-CPU VM: "step times had not
    # settled", after three steps (27, 4 and 13 s) in 57 s.
    path = tmp_path / "events.jsonl"
    write_events(path, {"event": "phase", "phase": "warmup", "time": time.time() - 57.0},
                 {"event": "first_step", "seconds": 27.3},
                 {"event": "warmup", "items": 3242.0, "seconds": 4.4, "steps": 1},
                 {"event": "warmup", "items": 3549.0, "seconds": 13.0, "steps": 1})
    assert EventTail(path, None).stalled(compiling=False) == (
        "still warming up after 57 s: 3 step(s), the first 27 s, then 8.7 s each. Steps this "
        "slow need a longer --trial-timeout (or --timeout) to settle, or a smaller batch")
    # A DDP trial's ranks report no warm-up steps: no count to read, none claimed.
    assert EventTail(path, None).stalled(compiling=False, counts_steps=False) == \
        "still warming up after 57 s (step times had not settled)"


def test_a_stalled_trial_counts_from_the_phase_it_entered_last(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    now = time.time()
    write_events(path, {"event": "phase", "phase": "model", "time": now - 100.0},
                 {"event": "phase", "phase": "first_batch", "time": now - 55.0})
    assert EventTail(path, None).stalled(compiling=False) == \
        "no batch from the DataLoader after 55 s"


def test_a_trial_killed_while_recompiling_says_what_its_compile_kept_failing_on(
        tmp_path: Path) -> None:
    # A T5 on padded batches, bf16, compiled with dynamic shapes: killed "still warming up"
    # after 254 s, with no word of the divisibility guards that kept it compiling (H100).
    path = tmp_path / "events.jsonl"
    then = time.time() - 254.0
    write_events(path, {"event": "phase", "phase": "warmup", "time": then},
                 {"event": "first_step", "seconds": 129.0},
                 {"event": "recompile", "count": 2, "seconds": 96.0,
                  "reasons": "(input_ids.size()[1] % 16) != 0 (meta__sdpa)"})
    said = EventTail(path, None).stalled(compiling=True)
    assert said.startswith("still warming up after 254 s (step times had not settled); 2 "
                           "recompiles after the first step (96 s), the last on (input_ids")
    assert said.endswith("lengths padded to a multiple of 16 keep them true")


def test_a_trial_killed_while_recompiling_keeps_its_recompiles_in_its_result(
        tmp_path: Path, tiny_adapter: Path) -> None:
    # trials.csv and `show` read the result's fields, not its reason: a killed trial's last
    # RecompileEvent fills them. The child is a script writing the events a trial would.
    lines = [{"event": "phase", "phase": "warmup", "time": time.time()},
             {"event": "first_step", "seconds": 0.1},
             {"event": "recompile", "count": 2, "seconds": 96.0,
              "reasons": "(x.size()[1] % 16) != 0 (f)"}]

    class Scripted(SubprocessRunner):
        def _launch(self, request: TrialRequest, trial_dir: Path, log: Any, *,
                    extra: Any = None) -> Any:
            text = "".join(json.dumps(e) + "\n" for e in lines)
            script = (f"import pathlib, time; pathlib.Path({str(trial_dir / 'events.jsonl')!r})"
                      f".write_text({text!r}); time.sleep(60)")
            return subprocess.Popen([sys.executable, "-c", script], stdout=log,
                                    stderr=subprocess.STDOUT, start_new_session=True)

    request = request_for(tiny_adapter, TrainConfig(batch_size=8, compile="default"))
    result = Scripted(grace_seconds=1.0).run(request, tmp_path / "trial", timeout=2.0)
    assert result.status is Status.TIMEOUT and "2 recompiles after the first step" in result.reason
    assert (result.recompiles, result.recompile_seconds) == (2, 96.0)
    assert result.recompile_reason == "(x.size()[1] % 16) != 0 (f)"
    assert divisor(result.recompile_reason) == 16


def test_the_tail_hands_on_typed_events_and_skips_unknown_kinds(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    write_events(path, {"event": "phase", "phase": "windows", "time": 1.0},
                 {"event": "from_a_later_version"},
                 {"event": "window", "throughput": 5.0, "seconds": 1.0, "steps": 3,
                  "data_wait": 0.0})
    seen: list[TrialEvent] = []
    tail = EventTail(path, seen.append)
    tail.poll()
    assert seen == [PhaseEvent(phase="windows", time=1.0),
                    WindowEvent(throughput=5.0, seconds=1.0, steps=3, data_wait=0.0)]
    assert tail.rates == [5.0] and tail.phase == "windows"


@pytest.mark.parametrize(
    ("events", "allowance"),
    [
        ([], 0.0),  # starting: no grace
        ([{"event": "phase", "phase": "first_batch"}], 0.0),  # a loader's wait is no compile
        ([{"event": "phase", "phase": "warmup"}], 50.0),  # compiling: all of it
        ([{"event": "phase", "phase": "warmup"}, {"event": "first_step", "seconds": 20.0}], 20.0),
        ([{"event": "phase", "phase": "warmup"}, {"event": "first_step", "seconds": 90.0}], 50.0),
        ([{"event": "phase", "phase": "windows"}, {"event": "first_step", "seconds": 20.0}], 20.0),
    ],
    ids=["start", "first-batch", "compiling", "compiled", "compiled-long", "measuring"],
)
def test_the_limit_grows_by_the_compile_up_to_the_grace(
    tmp_path: Path, events: list[dict[str, Any]], allowance: float
) -> None:
    # The limit counts compile apart from measurement: while the first step compiles the trial
    # may run `grace` longer; once it is done, as long as it took (at most `grace`).
    path = tmp_path / "events.jsonl"
    path.touch()
    tail = EventTail(path, None)
    write_events(path, *({"time": time.time(), **e} if "phase" in e else e for e in events))
    tail.poll()
    assert tail.compile_allowance(50.0) == allowance
    assert tail.compile_allowance(0.0) == 0.0


# -- real child processes -----------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads process states from /proc")
def test_timeout_kills_the_trial_and_its_dataloader_workers(
    tmp_path: Path, test_adapters: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pid_dir = tmp_path / "pids"
    pid_dir.mkdir()
    monkeypatch.setenv(PID_DIR_ENV, str(pid_dir))
    runner = SubprocessRunner(grace_seconds=2.0)
    request = request_for(test_adapters / "hang_worker.py", TrainConfig(batch_size=4, num_workers=2))
    timeout = 12.0
    start = time.monotonic()
    try:
        result = runner.run(request, tmp_path / "trial", timeout=timeout)
        elapsed = time.monotonic() - start
        main = recorded_pids(pid_dir, "main")
        workers = recorded_pids(pid_dir, "worker")
        # The trial got as far as hanging in both workers (else this test would prove nothing).
        assert len(main) == 1, (main, (tmp_path / "trial" / "log.txt").read_text())
        assert len(workers) == 2, workers

        assert result.status is Status.TIMEOUT
        # Where it was stuck, and for how long (the workers hang before the first batch).
        assert result.reason.startswith("killed at the 12 s trial limit: no batch from the "
                                        "DataLoader after "), result.reason
        # The trial's log ends saying so (its own output stops where it hung).
        log = (tmp_path / "trial" / "log.txt").read_text().strip().splitlines()
        assert log[-1] == f"[autotune] {result.reason}", log[-3:]
        assert timeout <= elapsed < timeout + runner.grace_seconds + 5
        # Dead when `run` returns: no process of the trial is still running...
        states = {pid: process_state(pid) for pid in main + workers}
        assert all(s in (None, "Z", "X") for s in states.values()), states
        # ...and reaped soon after (orphaned workers are reaped by init; a lasting zombie is a leak).
        deadline = time.monotonic() + 5
        while any(process_state(p) is not None for p in main + workers) and time.monotonic() < deadline:
            time.sleep(0.1)
        states = {pid: process_state(pid) for pid in main + workers}
        assert all(s is None for s in states.values()), states
    finally:
        # Do not leave hung processes behind if the runner failed to kill them.
        kill_all(recorded_pids(pid_dir, "main") + recorded_pids(pid_dir, "worker"))


@pytest.mark.slow
def test_a_trial_killed_diagnosing_keeps_its_measurement(tmp_path: Path,
                                                          test_adapters: Path) -> None:
    # Its windows were timed; only the bottleneck diagnosis after them hung past the limit. The
    # measurement stands (the baseline's rate is what every speedup is over), the diagnosis
    # says why it is missing.
    runner = SubprocessRunner(grace_seconds=1.0)
    request = request_for(test_adapters / "faults" / "hang_diagnosis.py", TrainConfig(batch_size=8))
    timeout = 25.0  # past the diagnosis's reserve once the trial has started and measured
    result = runner.run(request, tmp_path / "trial", timeout=timeout)
    log = (tmp_path / "trial" / "log.txt").read_text()
    assert result.status is Status.OK, (result.reason, log)
    assert result.throughput is not None and result.throughput > 0
    assert result.windows and len(result.window_throughputs) == result.windows
    assert result.diagnosis is None
    assert result.diagnosis_error.startswith("killed at the 25 s trial limit: still diagnosing")
    assert result.duration_seconds is not None and result.duration_seconds >= timeout
    assert TrialResult.load(tmp_path / "trial" / "result.json") == result


def test_a_trial_that_ended_without_reporting_keeps_what_it_had_written(tmp_path: Path) -> None:
    # Its whole result when it wrote one (killed while exiting), else its measurement (killed
    # or died diagnosing), else the kill or crash itself.
    from autotune.contract.phases import MEASURED
    from autotune.study.execution.runner import _read_result

    measured = TrialResult(status=Status.OK, throughput=10.0)
    whole = measured.replace(throughput=11.0, diagnosis_error="")
    (tmp_path / MEASURED).write_text(json.dumps(measured.to_dict()))

    def read(returncode: int, outcome: Status | None) -> TrialResult:
        return _read_result(tmp_path, returncode, outcome, 30.0, 25.0, "still diagnosing",
                            windows=[10.0])

    cut = read(-9, Status.TIMEOUT)
    assert (cut.status, cut.throughput) == (Status.OK, 10.0)
    assert cut.diagnosis_error == "killed at the 25 s trial limit: still diagnosing"
    died = read(-9, None)  # the host's OOM killer during the loader probe
    assert died.status is Status.OK and died.diagnosis_error == "killed by SIGKILL"
    whole.save(tmp_path / "result.json")
    assert read(-9, Status.TIMEOUT).throughput == 11.0
    (tmp_path / "result.json").unlink()
    (tmp_path / MEASURED).unlink()
    assert read(-9, None).status is Status.CRASHED
    assert read(-9, Status.TIMEOUT).status is Status.TIMEOUT


_SEARCH_STANDIN = """
import sys
from pathlib import Path
from autotune import TrainConfig
from autotune.contract.request import TrialRequest
from autotune.study.execution.runner import SubprocessRunner
request = TrialRequest(adapter=sys.argv[1], config=TrainConfig(batch_size=4, num_workers=2),
                       device="cpu")
SubprocessRunner().run(request, Path(sys.argv[2]), timeout=600)
"""


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads process states from /proc")
def test_killed_search_leaves_no_trial_process_behind(
    tmp_path: Path, test_adapters: Path, repo_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pid_dir = tmp_path / "pids"
    pid_dir.mkdir()
    monkeypatch.setenv(PID_DIR_ENV, str(pid_dir))
    monkeypatch.setenv("PYTHONPATH", str(repo_root))
    search = subprocess.Popen(
        [sys.executable, "-c", _SEARCH_STANDIN, str(test_adapters / "hang_worker.py"),
         str(tmp_path / "trial")],
    )
    try:
        deadline = time.monotonic() + 60
        while len(recorded_pids(pid_dir, "worker")) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert len(recorded_pids(pid_dir, "worker")) == 2, "the trial never reached its workers"
        search.kill()  # what `kill -9` or the kernel's OOM killer does to the search
        search.wait()
        trial = recorded_pids(pid_dir, "main") + recorded_pids(pid_dir, "worker")
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(
            process_state(p) not in (None, "Z", "X") for p in trial
        ):
            time.sleep(0.2)
        states = {pid: process_state(pid) for pid in trial}
        assert all(s in (None, "Z", "X") for s in states.values()), states
    finally:
        if search.poll() is None:
            search.kill()
            search.wait()
        kill_all(recorded_pids(pid_dir, "main") + recorded_pids(pid_dir, "worker"))


@pytest.mark.slow
def test_subprocess_killed_by_a_signal_is_crashed(
    tmp_path: Path, test_adapters: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AUTOTUNE_TEST_FAULT", "kill")
    result = SubprocessRunner().run(
        request_for(test_adapters / "faulty.py", TrainConfig(batch_size=4)), tmp_path / "t",
        timeout=120,
    )
    assert result.status is Status.CRASHED
    assert result.reason == "killed by SIGKILL"
    assert result.log == str(tmp_path / "t" / "log.txt")


@pytest.mark.slow
def test_subprocess_with_compile(tmp_path: Path, tiny_adapter: Path) -> None:
    events: list[TrialEvent] = []
    trial_dir = tmp_path / "t"
    result = SubprocessRunner().run(
        request_for(tiny_adapter, TrainConfig(batch_size=8, compile="default"),
                    MeasureSettings(window_seconds=0.1, budget_seconds=0.5)),
        trial_dir, timeout=240, on_event=events.append,
    )
    assert result.status is Status.OK, (result.reason, (trial_dir / "log.txt").read_text()[-3000:])
    assert result.compile_seconds is not None and result.step_seconds is not None
    assert result.warmup_seconds is not None
    # Compiling takes far longer than a compiled step, and is reported apart from it.
    assert result.compile_seconds > 20 * result.step_seconds
    assert result.warmup_seconds >= result.compile_seconds
    assert result.compiled_graphs is not None and result.compiled_graphs >= 1
    assert result.duration_seconds is not None and result.duration_seconds >= result.warmup_seconds
    assert (trial_dir / "result.json").is_file() and (trial_dir / "log.txt").is_file()
    assert any(isinstance(e, WindowEvent) for e in events)
    # The limit the runner enforces went to the trial with its request.
    written = TrialRequest.from_dict(json.loads((trial_dir / "request.json").read_text()))
    assert written.time_limit == 240


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads process states from /proc")
def test_kill_group_returns_only_when_no_member_still_runs(tmp_path: Path) -> None:
    # A leader with a busy grandchild (like a DataLoader worker spinning in __getitem__).
    pid_file = tmp_path / "child.pid"
    code = ("import subprocess, sys, time\n"
            "c = subprocess.Popen([sys.executable, '-c', 'while True: pass'])\n"
            f"open({str(pid_file)!r}, 'w').write(str(c.pid))\n"
            "time.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    try:
        deadline = time.monotonic() + 20
        while not pid_file.is_file() or not pid_file.read_text():
            assert time.monotonic() < deadline, "the child never started"
            time.sleep(0.05)
        child = int(pid_file.read_text())
        assert _group_running(proc.pid)

        kill_group(proc, grace_seconds=0.0)

        # Checked at once, no sleep: killpg alone returns before the busy child is dead.
        assert not _group_running(proc.pid)
        assert process_state(child) in (None, "Z", "X")
    finally:
        kill_all([proc.pid] + ([int(pid_file.read_text())] if pid_file.is_file() and pid_file.read_text() else []))


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads process states from /proc")
def test_waiting_for_a_group_lasts_until_its_last_member_is_dead() -> None:
    # Stands in for a worker still finishing after SIGKILL: a member that needs a moment to end.
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.8)"],
                            start_new_session=True)
    try:
        start = time.monotonic()
        _wait_group_dead(proc.pid, timeout=10.0)
        assert time.monotonic() - start >= 0.5
        assert process_state(proc.pid) in ("Z", "X")  # ended, not yet reaped by its parent
        start = time.monotonic()
        _wait_group_dead(proc.pid, timeout=10.0)  # nothing left running: returns at once
        assert time.monotonic() - start < 0.5
    finally:
        proc.kill()
        proc.wait()


class _SlowStart(SubprocessRunner):
    """A runner whose launch waits first, as taking over a spare still starting up, or
    starting the fork server, does: the runner's clock runs, the trial's does not yet."""

    def _launch(self, *args: Any, **kwargs: Any) -> subprocess.Popen[bytes]:
        time.sleep(8.0)
        return super()._launch(*args, **kwargs)


@pytest.mark.slow
def test_windows_end_by_the_runners_deadline_not_the_trials_own_clock(
    tmp_path: Path, tiny_adapter: Path
) -> None:
    # Windows that never agree and a budget far past the limit: the trial must end them by the
    # runner's deadline. Counted from its own start, 8 s late, it would run past the kill.
    endless = MeasureSettings(window_seconds=0.05, budget_seconds=1000.0, max_windows=100_000,
                              tolerance=1e-12)
    trial_dir = tmp_path / "t"
    before = time.time()
    result = _SlowStart().run(request_for(tiny_adapter, TrainConfig(batch_size=8), endless),
                              trial_dir, timeout=20.0)
    assert result.status is Status.OK, (result.reason, (trial_dir / "log.txt").read_text()[-2000:])
    assert result.windows is not None and result.windows >= 1 and not result.converged
    deadline = json.loads((trial_dir / "request.json").read_text())["deadline"]
    assert before + 20.0 <= deadline <= before + 20.5


@pytest.mark.slow
def test_a_trial_hopeless_in_warm_up_is_stopped_there_with_its_warm_up_rate(
        tmp_path: Path, test_adapters: Path) -> None:
    # 20 ms a step (8 samples: about 400/s) against a best of 1M/s; its warm-up alone would
    # take 6 s, and no window ran.
    import optuna

    from autotune.study.policy.pruning import report_windows

    study = optuna.create_study(direction="maximize")
    study.tell(study.ask(), 1e6)
    trial = study.ask()
    runner = SubprocessRunner()
    long_warm_up = MeasureSettings(min_warmup_steps=300, max_warmup_steps=300,
                                   window_seconds=0.5, budget_seconds=2.0)
    result = runner.run(request_for(test_adapters / "slow_model.py", TrainConfig(batch_size=8),
                                    long_warm_up), tmp_path / "t", timeout=60,
                        on_event=report_windows(trial, runner.prune, windows=False))
    assert result.status is Status.PRUNED, result.reason
    assert result.reason.startswith("pruned in warm-up: its steps ran at most ")
    assert result.windows == 0 and result.throughput is not None
    assert 100 < result.throughput < 500  # what it was judged on, its fastest second


@pytest.mark.slow
def test_a_compile_that_compiled_nothing_says_so(tmp_path: Path, test_adapters: Path) -> None:
    # A GRU tagger's compile=default trial read as compiled, its compile 0.1 s: Dynamo had
    # skipped the model (nn.GRU) and it ran eagerly (2-CPU VM, 2026-11-28).
    trial_dir = tmp_path / "t"
    result = SubprocessRunner().run(
        request_for(test_adapters / "gru.py", TrainConfig(batch_size=8, compile="default"),
                    MeasureSettings(window_seconds=0.1, budget_seconds=0.5)),
        trial_dir, timeout=240)
    assert result.status is Status.OK, (result.reason, (trial_dir / "log.txt").read_text()[-3000:])
    assert result.compiled_graphs == 0
