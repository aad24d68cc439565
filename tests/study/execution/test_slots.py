"""Trials side by side in this process: fake runners, one per slot, prove the scheduling (no
trial process is started here; tests/test_multi_gpu.py runs real ones)."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path
from typing import Any

import optuna
import pytest
from helpers import ok_by_batch_size
from optuna.trial import TrialState

from autotune import Adapter, InputError, MeasureSettings, Status, TrainConfig, TrialResult
from autotune.contract.request import TrialRequest
from autotune.outputs.display import QuietListener
from autotune.study.execution.layout import Layout, Slot
from autotune.study.execution.protocol import RunnerBase
from autotune.study.execution.slots import GangRunner, Job, Slots, slot_runners
from autotune.study.search import Interrupted, Search, SearchSettings
from autotune.study.space.file import parse_space
from autotune.study.store.records import read_records

QUICK = MeasureSettings(window_seconds=0.02, budget_seconds=0.2, max_windows=5)
SPACE = {"num_workers": {"low": 0, "high": "cores"}, "batch_size": {"factors": [1, 2, 4, 8]}}


class Tiny(Adapter):
    batch_size = 8
    vary_global_batch = True


def two_slots(cpus: int = 1) -> Layout:
    return Layout(slots=(Slot(index=0, gpu="0", cpus=(0,)), Slot(index=1, gpu="1", cpus=(1,))),
                  cpus_per_trial=cpus, host_cpus=2)


class SlotRunner(RunnerBase):
    """A fake runner of one slot: records which configs run when, and on which slot; all
    slots share `live` to check that no config runs twice at once."""

    def __init__(self, name: str, live: dict[str, Any], script: Any = ok_by_batch_size,
                 seconds: float = 0.05) -> None:
        self.name, self.live, self.script, self.seconds = name, live, script, seconds
        self.calls: list[TrialRequest] = []
        self.stop = threading.Event()

    def run(self, request: TrialRequest, trial_dir: Path, *, timeout: float,
            on_event: Any = None) -> TrialResult:
        with self.live["lock"]:
            assert request.config not in self.live["running"].values(), "same config twice"
            self.live["running"][self.name] = request.config
            self.live["most"] = max(self.live["most"], len(self.live["running"]))
            call = len(self.calls)
            self.calls.append(request)
        try:
            barrier = self.live.get("barrier")
            if barrier is not None and call == 0:
                barrier.wait(timeout=10)  # both slots' first trials must be running at once
            if self.stop.wait(self.seconds):
                return TrialResult(status=Status.INTERRUPTED, reason="stopped")
            return self.script(call, request)
        finally:
            with self.live["lock"]:
                del self.live["running"][self.name]

    def interrupt(self, reason: str) -> None:
        self.stop.set()


def slot_search(tmp_path: Path, trials: int, runners: list[SlotRunner], *,
                space: dict[str, Any] = SPACE, layout: Layout | None = None,
                **changes: Any) -> Search:
    settings = SearchSettings(
        adapter=Path("tests/adapters/tiny.py"), space_source="test-space.yaml", device="cpu",
        out=tmp_path / "out", storage=str(tmp_path / "study.db"), study_name="test",
        trials=trials, seed=0, measure=QUICK, confirm=0, layout=layout or two_slots(),
        **changes)
    space_obj = parse_space(space, source="test-space.yaml", adapter=Tiny, device_type="cpu",
                            cpus=settings.layout.cpus_per_trial)  # type: ignore[union-attr]
    return Search(settings, space_obj, Tiny, runners=runners, listener=QuietListener())


def shared() -> dict[str, Any]:
    return {"lock": threading.Lock(), "running": {}, "most": 0}


@pytest.fixture(autouse=True)
def _quiet_optuna() -> None:
    optuna.logging.set_verbosity(optuna.logging.WARNING)


def records_of(tmp_path: Path) -> list[Any]:
    study = optuna.load_study(study_name="test", storage=f"sqlite:///{tmp_path / 'study.db'}")
    return [r for r in read_records(study) if r.state != TrialState.WAITING]


def test_two_slots_run_trials_at_once_and_never_the_same_config(tmp_path: Path) -> None:
    live = {**shared(), "barrier": threading.Barrier(2)}
    runners = [SlotRunner("gpu0", live), SlotRunner("gpu1", live)]
    started = time.monotonic()
    slot_search(tmp_path, 8, runners).run()
    assert time.monotonic() - started < 30
    assert live["most"] == 2  # both slots busy at once (the barrier proves it too)
    assert all(r.calls for r in runners)
    trials = records_of(tmp_path)
    assert len([t for t in trials if t.state == TrialState.COMPLETE]) == 8
    assert all(t.config.num_workers <= 1 for t in trials)  # the range follows the 1-CPU share
    ran = [r.config for runner in runners for r in runner.calls]
    assert len(ran) == len(set(map(repr, ran)))  # each config measured once, copies reused


def test_a_config_asked_while_it_runs_elsewhere_waits_and_copies_its_result(tmp_path: Path) -> None:
    live = shared()
    runners = [SlotRunner("gpu0", live, seconds=0.3), SlotRunner("gpu1", live, seconds=0.3)]
    slot_search(tmp_path, 4, runners, space={"batch_size": {"factors": [1]}}).run()
    assert sum(len(r.calls) for r in runners) == 1  # one config in the space: run once
    trials = records_of(tmp_path)
    assert [t.duplicate_of for t in trials] == [None, 0, 0, 0]
    assert all(t.state == TrialState.COMPLETE and t.value == trials[0].value for t in trials)


def test_a_crash_in_one_slot_does_not_stop_the_other(tmp_path: Path) -> None:
    def crash(call: int, request: TrialRequest) -> TrialResult:
        return TrialResult(status=Status.CRASHED, reason="killed by SIGSEGV")

    live = shared()
    runners = [SlotRunner("gpu0", live), SlotRunner("gpu1", live, script=crash)]
    slot_search(tmp_path, 6, runners).run()
    trials = records_of(tmp_path)
    assert len(trials) == 6 and all(t.state == TrialState.COMPLETE for t in trials)
    statuses = {t.status for t in trials}
    assert Status.CRASHED in statuses and Status.OK in statuses
    assert len(runners[0].calls) >= 2


def test_a_signal_stops_every_slot_and_starts_nothing_more(tmp_path: Path) -> None:
    live = {**shared(), "barrier": threading.Barrier(3)}
    runners = [SlotRunner("gpu0", live, seconds=60), SlotRunner("gpu1", live, seconds=60)]
    search = slot_search(tmp_path, 6, runners)

    def press_ctrl_c() -> None:
        live["barrier"].wait(timeout=10)  # both trials are running
        time.sleep(0.1)
        signal.raise_signal(signal.SIGINT)

    threading.Thread(target=press_ctrl_c, daemon=True).start()
    started = time.monotonic()
    with pytest.raises(Interrupted):
        search.run()
    assert time.monotonic() - started < 20
    assert [len(r.calls) for r in runners] == [1, 1]
    trials = records_of(tmp_path)
    assert [(t.state, t.status) for t in trials] == [(TrialState.FAIL, Status.INTERRUPTED)] * 2


def test_a_study_measured_with_another_cpu_share_is_refused(tmp_path: Path) -> None:
    slot_search(tmp_path, 2, [SlotRunner("gpu0", shared()), SlotRunner("gpu1", shared())]).run()
    wider = Layout(slots=(Slot(index=0, cpus=(0, 1)),), cpus_per_trial=2, host_cpus=2)
    with pytest.raises(InputError, match="measured with 1 CPUs per trial.*--cpus-per-trial 1"):
        slot_search(tmp_path, 3, [SlotRunner("one", shared())], layout=wider)


def test_runners_must_match_the_slots(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="one runner per slot"):
        slot_search(tmp_path, 2, [SlotRunner("gpu0", shared())])


def test_the_gang_runs_a_config_on_every_slot_and_reports_the_slowest(tmp_path: Path) -> None:
    def rate(value: float) -> Any:
        return lambda call, request: TrialResult(status=Status.OK, throughput=value)

    barrier = threading.Barrier(2)  # the gang's runs are at once: the same config on each
    gang = GangRunner([SlotRunner("a", {**shared(), "barrier": barrier}, rate(100.0)),
                       SlotRunner("b", {**shared(), "barrier": barrier}, rate(90.0))],
                      ["gpu0", "gpu1"])
    request = TrialRequest(adapter="x.py", config=TrainConfig(batch_size=8), device="cpu")
    result = gang.run(request, tmp_path / "run", timeout=10)
    assert result.status is Status.OK and result.throughput == 90.0
    assert "gpu0 100/s, gpu1 90/s" in result.reason
    assert (tmp_path / "run" / "result.json").is_file()
    failing = GangRunner([SlotRunner("a", shared(), rate(100.0)), SlotRunner(
        "b", shared(), lambda c, r: TrialResult(status=Status.OOM, reason="out of memory"))],
        ["gpu0", "gpu1"])
    result = failing.run(request, tmp_path / "run2", timeout=10)
    assert result.status is Status.OOM and result.reason == "on gpu1: out of memory"


def test_slots_free_and_wait() -> None:
    with Slots[str, int](2) as slots:
        assert slots.free() == 0
        gate = threading.Event()
        slots.start(0, _job("a"), lambda: gate.wait(5) and 1)
        slots.start(1, _job("b"), lambda: 2)
        assert slots.free() is None
        ended = slots.wait()
        assert [(j.item, f.result()) for j, f in ended] == [("b", 2)]
        assert slots.free() == 1
        gate.set()
        assert [j.item for j, _ in slots.wait()] == ["a"]


def _job(item: str) -> Job[str]:
    return Job(item=item, config=TrainConfig(batch_size=len(item)))


@pytest.mark.parametrize("ahead", [True, False])
def test_confirmation_runs_start_ahead_only_for_a_gpu(tmp_path: Path, ahead: bool) -> None:
    from autotune.study.execution.layout import plan_layout
    from autotune.study.execution.runner import SubprocessRunner
    from autotune.study.execution.spare_runner import SpareRunner

    one = plan_layout(None, None, device="cpu", host_cpus=[0, 1])
    two = plan_layout("0,1", None, device="cuda", host_cpus=list(range(4)), visible=["0", "1"])
    _, fresh = slot_runners(one, out=tmp_path, cache_dir=None, ahead=ahead)
    assert type(fresh) is (SpareRunner if ahead else SubprocessRunner)
    assert fresh.starts_ahead is ahead
    search, gang = slot_runners(two, out=tmp_path, cache_dir=None, ahead=ahead)
    assert len(search) == 2 and isinstance(gang, GangRunner)
    assert gang.starts_ahead is ahead  # what the confirmation's time estimate goes by
