"""DDP trials on a CPU: two gloo ranks through `torch.distributed.run`, a normal trial, an OOM on
rank 1 only, a hang on rank 0 only; the parent's environment reaches every rank; no process of a
trial (launcher, ranks, DataLoader workers) outlives it, not even when the search is SIGKILLed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import PID_DIR_ENV, REPO_ROOT, TAG_ENV, kill_all, leftovers, recorded_pids

from autotune import MeasureSettings, Status, TrainConfig, TrialResult
from autotune.contract.ranks import read_pids, read_ranks
from autotune.contract.request import TrialRequest
from autotune.study.execution.ddp_runner import DDPRunner

pytestmark = pytest.mark.slow  # each trial starts a launcher and two ranks: seconds each

QUICK = MeasureSettings(window_seconds=0.02, budget_seconds=0.2, max_windows=5)
# What the multi-GPU machines set to keep NVLink multicast off (the device folder's KINDS.md).
MULTICAST_OFF = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
                 "NVSHMEM_DISABLE_NVLS": "1"}


@pytest.fixture
def tag(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[str]:
    """Every process a trial starts inherits this tag (and records its pid): afterwards none
    may be left."""
    tag = uuid.uuid4().hex
    monkeypatch.setenv(TAG_ENV, tag)
    monkeypatch.setenv(PID_DIR_ENV, str(tmp_path))
    try:
        yield tag
    finally:
        kill_all(recorded_pids(tmp_path), tag)


def run(adapter: Path, config: TrainConfig, trial_dir: Path, *, limit: float = 60,
        collective_timeout: float = 60) -> TrialResult:
    request = TrialRequest(adapter=str(adapter), config=config, device="cpu", measure=QUICK,
                           number=3)
    runner = DDPRunner(nproc_per_node=2, collective_timeout=collective_timeout)
    return runner.run(request, trial_dir, timeout=limit)


def assert_nothing_left(trial_dir: Path, pid_dir: Path, tag: str) -> None:
    ranks = read_pids(trial_dir)
    assert len(ranks) == 2  # both ranks started (and were killed, or ended)
    assert leftovers([*ranks, *recorded_pids(pid_dir)], tag) == {}


def test_a_ddp_trial_measures_the_global_rate_with_the_parents_environment(
        tmp_path: Path, test_adapters: Path, tag: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in MULTICAST_OFF.items():
        monkeypatch.setenv(name, value)
    env_dir = tmp_path / "env"
    env_dir.mkdir()
    monkeypatch.setenv("AUTOTUNE_TEST_ENV_DIR", str(env_dir))
    monkeypatch.setenv("AUTOTUNE_TEST_ENV_NAMES", ",".join([*MULTICAST_OFF, TAG_ENV]))
    # Every DDP knob away from its default; accumulation skips the all-reduce but the last
    # micro-batch's (no_sync), which static_graph allows after its first step.
    config = TrainConfig(batch_size=8, grad_accum=2, bucket_cap_mb=1, static_graph=True,
                         gradient_as_bucket_view=True)
    trial_dir = tmp_path / "trials" / "3"
    result = run(test_adapters / "env_probe.py", config, trial_dir)
    assert result.status is Status.OK, result.reason
    # Global: 2 ranks x 2 micro-batches x 8 samples per optimizer step, over the slowest rank's
    # time (exact up to the median of an even number of windows).
    assert result.throughput is not None and result.step_seconds is not None
    assert result.throughput * result.step_seconds == pytest.approx(32, rel=0.1)
    assert result.windows is not None and result.windows >= 3
    assert result.diagnosis is None  # DDP trials are measured end to end only
    assert result.noise is None  # the other rank's CPU time is not noise
    request = json.loads((trial_dir / "request.json").read_text())
    assert request["nproc_per_node"] == 2 and request["config"]["static_graph"] is True
    assert [o.result.status for o in read_ranks(trial_dir)] == [Status.OK, Status.OK]
    windows = [json.loads(line) for line in (trial_dir / "events.jsonl").read_text().splitlines()]
    assert sum(e["event"] == "window" for e in windows) == result.windows  # rank 0's, global
    # The parent's environment reached both ranks unchanged: nothing was dropped.
    for rank in (0, 1):
        seen = json.loads((env_dir / f"env-{rank}.json").read_text())
        assert seen == {**MULTICAST_OFF, TAG_ENV: tag}, rank
    assert_nothing_left(trial_dir, tmp_path, tag)


def test_an_oom_on_rank_1_only_is_the_trials_oom(tmp_path: Path, test_adapters: Path,
                                                  tag: str) -> None:
    trial_dir = tmp_path / "trials" / "3"
    # Rank 0 waits for rank 1's gradients until the (short) collective timeout, then agrees.
    result = run(test_adapters / "faults" / "oom_rank1.py", TrainConfig(batch_size=8),
                 trial_dir, collective_timeout=3)
    assert result.status is Status.OOM, result.reason
    assert result.reason.startswith("rank 1: OutOfMemoryError"), result.reason
    ranks = {o.rank: o for o in read_ranks(trial_dir)}
    assert ranks[1].result.status is Status.OOM and not ranks[1].waited
    assert ranks[0].result.status is Status.ERROR and ranks[0].waited == "timeout"
    assert TrialResult.load(trial_dir / "result.json").status is Status.OOM  # agreed, saved
    assert_nothing_left(trial_dir, tmp_path, tag)


def test_a_hang_on_rank_0_only_ends_at_the_trial_limit(tmp_path: Path, test_adapters: Path,
                                                       tag: str) -> None:
    trial_dir = tmp_path / "trials" / "3"
    # A collective timeout longer than the trial limit: only the limit can end it. A DataLoader
    # worker per rank: they must go too.
    config = TrainConfig(batch_size=8, num_workers=1)
    result = run(test_adapters / "faults" / "hang_rank0.py", config, trial_dir, limit=18,
                 collective_timeout=120)
    assert result.status is Status.TIMEOUT, result.reason
    # Stuck in its steps (rank 0 sleeps in its third), not in starting up.
    assert "killed at the 18 s trial limit: still warming up" in result.reason, result.reason
    assert result.duration_seconds is not None and result.duration_seconds < 18 + 10
    assert len(recorded_pids(tmp_path, "worker")) == 2  # one worker per rank read samples
    assert_nothing_left(trial_dir, tmp_path, tag)


def test_a_search_killed_with_sigkill_takes_every_rank_with_it(
        tmp_path: Path, test_adapters: Path, tag: str) -> None:
    # The search process is SIGKILLed mid-trial: it cannot clean up, so the launcher dies with
    # it (autotune.trial.launch), the ranks with the launcher, the workers with the ranks.
    trial_dir = tmp_path / "trials" / "3"
    script = (
        "import sys; from pathlib import Path\n"
        "from autotune import MeasureSettings, TrainConfig\n"
        "from autotune.contract.request import TrialRequest\n"
        "from autotune.study.execution.ddp_runner import DDPRunner\n"
        f"r = TrialRequest(adapter={str(test_adapters / 'faults' / 'hang_rank0.py')!r}, "
        "config=TrainConfig(batch_size=8, num_workers=1), device='cpu', "
        "measure=MeasureSettings(window_seconds=0.02, budget_seconds=0.2))\n"
        f"DDPRunner(nproc_per_node=2).run(r, Path({str(trial_dir)!r}), timeout=300)\n")
    search = subprocess.Popen([sys.executable, "-c", script], cwd=REPO_ROOT,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        # Both ranks are up, and a worker of each has read samples: rank 0 is hanging.
        while len(recorded_pids(tmp_path, "worker")) < 2 or len(read_pids(trial_dir)) < 2:
            assert time.monotonic() < deadline, "the ranks did not start"
            assert search.poll() is None, "the search ended early"
            time.sleep(0.2)
        os.kill(search.pid, signal.SIGKILL)
        search.wait()
        assert_nothing_left(trial_dir, tmp_path, tag)
    finally:
        if search.poll() is None:
            search.kill()
