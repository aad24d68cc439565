"""Many searches, one study: a lock around each check-then-write, and who confirms.

Searches on several hosts share one study and must not both do what one should: enqueue the
baseline, run a config another is running, confirm the leaders. Optuna pops an enqueued trial
atomically, but "enqueue unless already queued" and "claim unless claimed" are two steps; the
study's lock makes them one. The lock is the database's own where there is one (a PostgreSQL
advisory lock, held by a transaction: released when it ends, or when its connection dies with
its host), a lock file beside a journal file, and within this process otherwise (SQLite is
not for several processes).
"""

from __future__ import annotations

import dataclasses
import os
import socket
import threading
import time
import zlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import optuna
from optuna.storages import JournalStorage, RDBStorage
from optuna.storages.journal import JournalFileOpenLock
from optuna.trial import TrialState

from autotune.contract.config import TrainConfig
from autotune.study.execution.processes import alive
from autotune.study.space.bound import SearchSpace
from autotune.study.store import records
from autotune.study.store.storage import backend

__all__ = ["Claim", "StudyLock", "claim_confirmation", "end_confirmation", "enqueue",
           "running_same", "running_twin", "wait_finished"]

_CLAIM = "autotune:confirmation"
"""The study system attribute naming who confirms, for which finished trials."""
# First key of PostgreSQL's two-int advisory locks: autotune's, whatever else uses the server.
_NAMESPACE = zlib.crc32(b"autotune") & 0x7FFFFFFF
_LOCAL = threading.Lock()


class StudyLock:
    """`with lock:` excludes every other search of the same study while the block runs (and
    every other thread of this one: each holds its own)."""

    def __init__(self, study: optuna.Study, spec: str) -> None:
        self.study = study
        self.spec = spec
        """The storage as given: a journal file's lock file lies beside it."""
        self._held_here = threading.local()

    @contextmanager
    def _held(self) -> Iterator[None]:
        storage = backend(self.study)
        if isinstance(storage, RDBStorage) and storage.engine.dialect.name == "postgresql":
            import sqlalchemy

            with storage.engine.begin() as connection:  # the lock lasts as long as it
                connection.execute(sqlalchemy.text("SELECT pg_advisory_xact_lock(:a, :b)"),
                                   {"a": _NAMESPACE, "b": self.study._study_id})
                yield
        elif isinstance(storage, JournalStorage) and "://" not in self.spec:
            lock = JournalFileOpenLock(f"{self.spec}.autotune")
            lock.acquire()
            try:
                yield
            finally:
                lock.release()
        else:
            with _LOCAL:
                yield

    def __enter__(self) -> None:
        context = self._held()
        context.__enter__()
        self._held_here.context = context

    def __exit__(self, *exc: Any) -> None:
        self._held_here.context.__exit__(*exc)


def running_twin(study: optuna.Study, number: int, config: TrainConfig) -> int | None:
    """Another running trial that measures `config` (call under the lock, after writing this
    trial's config: whoever writes second finds the first, never the other way round)."""
    twin = running_same(study, number, config)
    return None if twin is None else twin.number


def running_same(study: optuna.Study, number: int, config: TrainConfig
                 ) -> records.TrialRecord | None:
    """The running trial other than `number` that measures `config`, if any."""
    for record in records.read_records(study, [TrialState.RUNNING]):
        if record.number != number and record.config == config:
            return record
    return None


def enqueue(study: optuna.Study, space: SearchSpace,
            starts: Sequence[tuple[str, TrainConfig]]) -> None:
    """Enqueue each start unless a trial of that role is already done, running or waiting (call
    under the lock: searches starting together enqueue the baseline once)."""
    for role, config in starts:
        if not records.role_taken(study, role):
            records.enqueue_config(study, space.params_for(config), role)


def wait_finished(study: optuna.Study, numbers: list[int] | None, *, timeout: float,
                  recover: Callable[[], object], stop: Callable[[], bool] = lambda: False,
                  poll: float = 1.0) -> bool:
    """Wait until none of these trials (None: of those running now) runs any more (finished, or
    failed by the heartbeat check `recover()`, run at each poll), at most `timeout` seconds or
    until `stop()`; whether they did."""
    deadline = time.monotonic() + timeout
    wanted = None if numbers is None else set(numbers)
    while not stop():
        recover()
        running = {t.number for t in study.get_trials(deepcopy=False,
                                                      states=(TrialState.RUNNING,))}
        if wanted is None:
            wanted = running
        if not running & wanted:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(poll)
    return False


@dataclasses.dataclass(frozen=True, kw_only=True)
class Claim:
    """Who confirms the leaders of which finished trials."""

    done: int
    """The study's finished trials when it was claimed: new ones call for a new confirmation."""
    host: str
    pid: int
    state: str
    """"running", "finished", or "abandoned" (interrupted: anyone may take it)."""
    until: float
    """Wall-clock time (epoch seconds) after which a running claim is free to take: its
    confirmation would have ended by then, had its search lived (hosts' clocks agree: NTP)."""

    def describe(self) -> str:
        return f"host {self.host}, pid {self.pid}"

    def dead(self) -> bool:
        """Whether its search is known to be gone (its host's clock passed `until`, or it ran
        on this host and its process is no more)."""
        if time.time() > self.until:
            return True
        return self.host == socket.gethostname() and not alive(self.pid)


def read_claim(study: optuna.Study) -> Claim | None:
    data = study._storage.get_study_system_attrs(study._study_id).get(_CLAIM)
    return Claim(**data) if data else None


def _write(study: optuna.Study, claim: Claim) -> None:
    study._storage.set_study_system_attr(study._study_id, _CLAIM, dataclasses.asdict(claim))


def claim_confirmation(study: optuna.Study, lock: StudyLock, *, done: int, seconds: float,
                       me: tuple[str, int] | None = None) -> Claim | None:
    """Take the confirmation of the study's `done` finished trials for `me` (host, pid; default
    this process), expected to end within `seconds`; None when taken, else the claim that holds
    it (finished, or running and alive)."""
    host, pid = me or _me()
    with lock:
        held = read_claim(study)
        if held is not None and held.done == done and (held.host, held.pid) != (host, pid):
            if held.state == "finished" or (held.state == "running" and not held.dead()):
                return held
        _write(study, Claim(done=done, host=host, pid=pid, state="running",
                            until=time.time() + seconds))
    return None


def end_confirmation(study: optuna.Study, lock: StudyLock, *, finished: bool,
                     me: tuple[str, int] | None = None) -> None:
    """Mark `me`'s claim (default this process's) finished, or abandoned (another search may
    take it then)."""
    with lock:
        held = read_claim(study)
        if held is not None and (held.host, held.pid) == (me or _me()) \
                and held.state == "running":
            _write(study, dataclasses.replace(held, state="finished" if finished
                                              else "abandoned"))


def _me() -> tuple[str, int]:
    return socket.gethostname(), os.getpid()
