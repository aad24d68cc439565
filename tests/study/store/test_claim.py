"""Searches on several hosts sharing one PostgreSQL study (a real server, tests/postgres.py):
the study lock, the heartbeat that fails a dead search's trial, and the one claim on the
confirmation. The whole-CLI version, with a search killed mid-trial, is tests/test_many_hosts.py."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from autotune import Adapter, Status
from autotune.study.policy.starts import initial_starts
from autotune.study.space.file import parse_space
from autotune.study.store import records
from autotune.study.store.claim import (
    StudyLock,
    claim_confirmation,
    end_confirmation,
    read_claim,
    enqueue,
    running_twin,
)
from autotune.study.store.recovery import fail_stale, step_over, take_over
from autotune.study.store.storage import Heartbeat, ask, beating, open_storage

FAST = Heartbeat(interval=1, grace=2)


@pytest.fixture(autouse=True)
def _quiet_optuna() -> None:
    optuna.logging.set_verbosity(optuna.logging.WARNING)


def open_study(url: str) -> optuna.Study:
    """The study as one search opens it: a storage (a connection pool) of its own."""
    return optuna.create_study(storage=open_storage(url, FAST), study_name="s",
                               direction="maximize", load_if_exists=True)


def together(n: int, work: Callable[[int], object]) -> list[object]:
    """Run work(0..n-1) in n threads released at once; their results."""
    barrier = threading.Barrier(n)
    results: list[object] = [None] * n

    def one(i: int) -> None:
        barrier.wait()
        results[i] = work(i)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    return results


def test_threads_of_one_search_share_its_lock(postgres_url: str) -> None:
    lock = StudyLock(open_study(postgres_url), postgres_url)  # one search, trials in threads
    spans: list[tuple[float, float]] = []

    def hold(i: int) -> None:
        with lock:
            start = time.monotonic()
            time.sleep(0.1)
            spans.append((start, time.monotonic()))

    together(3, hold)
    spans.sort()
    assert len(spans) == 3
    assert all(a_end <= b_start for (_, a_end), (b_start, _) in zip(spans, spans[1:])), spans


def test_searches_starting_together_enqueue_the_baseline_once(postgres_url: str) -> None:
    class Tiny(Adapter):
        batch_size = 8

    space = parse_space({"num_workers": {"choices": [0, 1]}, "batch_size": {"factors": [1, 2]}},
                        source="test", adapter=Tiny, device_type="cpu", cpus=2)
    starts = initial_starts(space, Tiny, device="cpu", cpus=2)
    assert [role for role, _ in starts] == ["baseline", "recipe"]
    studies = [open_study(postgres_url) for _ in range(4)]

    def start(i: int) -> None:
        with StudyLock(studies[i], postgres_url):  # as Search.run does
            enqueue(studies[i], space, starts)

    together(4, start)
    roles = [r.role for r in records.read_records(studies[0])]
    assert sorted(roles) == ["baseline", "recipe"]


def test_the_lock_holds_across_processes_and_dies_with_its_holder(postgres_url: str,
                                                                  tmp_path: Path) -> None:
    holder = tmp_path / "holder.py"
    holder.write_text(
        "import time, optuna\n"
        "from autotune.study.store.claim import StudyLock\n"
        "from autotune.study.store.storage import open_storage\n"
        f"study = optuna.load_study(study_name='s', storage=open_storage({postgres_url!r}))\n"
        f"with StudyLock(study, {postgres_url!r}):\n"
        "    print('held', flush=True)\n"
        "    time.sleep(600)\n")
    study = open_study(postgres_url)
    acquired = threading.Event()

    def take() -> None:
        with StudyLock(study, postgres_url):
            acquired.set()

    proc = subprocess.Popen([sys.executable, str(holder)], stdout=subprocess.PIPE, text=True)
    taker = threading.Thread(target=take)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "held\n"
        taker.start()
        assert not acquired.wait(1.5), "another process holds the lock: this one must wait"
        proc.kill()  # SIGKILL: no cleanup runs; the server ends its session, and the lock
        proc.wait(timeout=10)
        assert acquired.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()  # type: ignore[union-attr]
        taker.join(timeout=30)


def test_a_trial_whose_heartbeat_stopped_is_failed_saying_why(postgres_url: str) -> None:
    study = open_study(postgres_url)
    dead = ask(study)
    records.write_owner(dead)
    with beating(study, dead._trial_id):
        pass  # one heartbeat, then none: its search died
    live = ask(study)
    with beating(study, live._trial_id):
        assert fail_stale(study) == []  # not yet: within the grace period
        time.sleep(FAST.grace + 0.8)  # the last heartbeat: just now
        other = open_study(postgres_url)  # another search finds it
        assert [r.number for r in fail_stale(other)] == [dead.number]
        assert fail_stale(other) == []  # once
    by_number = {r.number: r for r in records.read_records(study)}
    failed = by_number[dead.number]
    assert failed.state == TrialState.FAIL
    assert failed.status is Status.INTERRUPTED and failed.result is not None
    assert "stopped sending heartbeats" in failed.result.reason
    assert f"host {socket.gethostname()}" in failed.result.reason
    assert by_number[live.number].state == TrialState.RUNNING  # it kept beating


def test_a_start_whose_search_died_is_measured_again_once(postgres_url: str) -> None:
    class Tiny(Adapter):
        batch_size = 8

    space = parse_space({"num_workers": {"choices": [0, 1]}, "batch_size": {"factors": [1, 2]}},
                        source="test", adapter=Tiny, device_type="cpu", cpus=2)
    starts = dict(initial_starts(space, Tiny, device="cpu", cpus=2))
    study = open_study(postgres_url)
    lock = StudyLock(study, postgres_url)
    enqueue(study, space, list(starts.items()))
    # A dead search held both starts; another search waits for the baseline's config (its twin).
    dead = [ask(study), ask(study)]
    for trial in dead:
        role = records.read_role(trial)
        records.write_config(trial, starts[role])
        with beating(study, trial._trial_id):
            pass
    waiter = ask(study)
    records.write_config(waiter, starts["baseline"])
    assert running_twin(study, waiter.number, starts["baseline"]) == dead[0].number
    with beating(study, waiter._trial_id):
        time.sleep(FAST.grace + 0.8)  # the last heartbeat: just now
        step_over(open_study(postgres_url), lock, space)  # another search finds them
        take_over(study, lock, waiter, dead[0].number)
    by_role = {}
    for r in records.read_records(study):
        by_role.setdefault(r.role, []).append((r.number, r.state))
    # The baseline passed to the trial waiting for it; the recipe, with none, is queued again.
    assert by_role["baseline"] == [(0, TrialState.FAIL), (waiter.number, TrialState.RUNNING)]
    assert by_role["recipe"] == [(1, TrialState.FAIL), (3, TrialState.WAITING)]
    assert study.trials[waiter.number].user_attrs["baseline"] is True  # for optuna-dashboard


def test_one_search_confirms_and_a_later_one_does_not_again(postgres_url: str) -> None:
    studies = [open_study(postgres_url) for _ in range(4)]
    locks = [StudyLock(s, postgres_url) for s in studies]
    held = together(4, lambda i: claim_confirmation(studies[i], locks[i], done=5, seconds=60,
                                                    me=("host", 100 + i)))
    assert [h is None for h in held].count(True) == 1, held
    winner = held.index(None)
    # While it confirms, another search finds it taken, by whom.
    taken = claim_confirmation(studies[0], locks[0], done=5, seconds=60, me=("other", 1))
    assert taken is not None and (taken.host, taken.pid, taken.state) == (
        "host", 100 + winner, "running")
    end_confirmation(studies[winner], locks[winner], finished=True, me=("host", 100 + winner))
    # A search started later with no new trial: confirmed already, not again.
    late = claim_confirmation(studies[0], locks[0], done=5, seconds=60, me=("late", 2))
    assert late is not None and late.state == "finished"
    # New trials since: a new confirmation, which the late search takes.
    assert claim_confirmation(studies[0], locks[0], done=6, seconds=60, me=("late", 2)) is None


def test_a_claim_whose_search_stopped_is_taken_over(postgres_url: str) -> None:
    study = open_study(postgres_url)
    lock = StudyLock(study, postgres_url)
    # Interrupted (Ctrl-C): abandoned, anyone takes it.
    assert claim_confirmation(study, lock, done=3, seconds=60, me=("a", 1)) is None
    end_confirmation(study, lock, finished=False, me=("a", 1))
    assert read_claim(study).state == "abandoned"  # type: ignore[union-attr]
    assert claim_confirmation(study, lock, done=3, seconds=60, me=("b", 2)) is None
    # Killed on this host: its pid is gone.
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    here = socket.gethostname()
    assert claim_confirmation(study, lock, done=4, seconds=60, me=(here, int(gone.stdout))) is None
    assert claim_confirmation(study, lock, done=4, seconds=60, me=("c", 3)) is None
    # Killed on another host: free once its lease (the longest it could take) has run out.
    assert claim_confirmation(study, lock, done=5, seconds=0.5, me=("far", 4)) is None
    assert claim_confirmation(study, lock, done=5, seconds=60, me=("d", 5)) is not None
    time.sleep(0.6)
    assert claim_confirmation(study, lock, done=5, seconds=60, me=("d", 5)) is None
