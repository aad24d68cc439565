"""Where the study lives: SQLite by default, a database server, or a journal file.

Several `autotune search` processes may share one study only through a journal file or a
server database: SQLite locks badly under concurrent writers. On a server (PostgreSQL), each
running trial records Optuna's heartbeat, and a trial whose heartbeat stops (its host died, or
its search was killed) is failed by whichever search looks next: the others step over it
(`recovery`).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import random
import threading
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import optuna
from optuna.storages import BaseStorage, InMemoryStorage, JournalStorage, RDBStorage
from optuna.storages.journal import JournalFileBackend

from autotune.contract.errors import InputError

__all__ = ["Heartbeat", "absolute_storage", "ask", "backend", "beating", "default_storage_url",
           "open_storage", "shown"]

_SQLITE_SUFFIXES = (".db", ".sqlite", ".sqlite3")
# Seconds to wait for a database server to answer a connection (libpq's connect_timeout):
# an unreachable host fails the start, it does not hang it.
_CONNECT_TIMEOUT = 10
_ASKING = threading.Lock()


@dataclasses.dataclass(frozen=True, kw_only=True)
class Heartbeat:
    """Optuna's heartbeat on a server database (ignored for SQLite and journal files)."""

    interval: int = 10
    """Seconds between two heartbeats of a running trial."""
    grace: int = 60
    """Seconds without a heartbeat after which another search fails the trial."""

    def __post_init__(self) -> None:
        if self.interval < 1 or self.grace <= self.interval:
            raise ValueError(f"need interval >= 1 and grace > interval, got {self.interval=}, "
                             f"{self.grace=}")


def default_storage_url(out: Path) -> str:
    # An absolute path gives "sqlite:////abs/path" (four slashes), which SQLAlchemy needs.
    return f"sqlite:///{(out / 'study.db').resolve()}"


def absolute_storage(spec: str) -> str:
    """The same storage named independently of the working directory (study.yaml records it,
    and `autotune show` may run from elsewhere)."""
    if spec.startswith("sqlite:///") and not spec.startswith("sqlite:////"):
        return f"sqlite:///{Path(spec[len('sqlite:///'):]).resolve()}"
    if "://" in spec or spec == ":memory:":
        return spec
    return str(Path(spec).resolve())


def shown(spec: str) -> str:
    """The storage as messages may show it: a database URL without its password."""
    if "://" not in spec:
        return spec
    import sqlalchemy

    try:
        return sqlalchemy.engine.make_url(spec).render_as_string(hide_password=True)
    except sqlalchemy.exc.ArgumentError:
        return spec.split("://", 1)[0] + "://..."


def open_storage(spec: str, heartbeat: Heartbeat | None = None) -> BaseStorage:
    """An Optuna storage from a URL ("sqlite:///...", "postgresql://...") or a file path
    (".db" for SQLite, anything else for a journal file that several processes can share).
    A server URL gets `heartbeat` (default: `Heartbeat()`)."""
    if spec == ":memory:":
        return InMemoryStorage()  # nothing kept: for simulations and tests
    try:
        if spec.startswith("sqlite:"):
            return RDBStorage(spec)
        if "://" in spec:
            return _open_server(spec, heartbeat or Heartbeat())
        path = Path(spec)
        if path.suffix in _SQLITE_SUFFIXES:
            return RDBStorage(f"sqlite:///{path.resolve()}")
        path.parent.mkdir(parents=True, exist_ok=True)
        return JournalStorage(JournalFileBackend(str(path)))
    except ImportError as exc:
        missing = getattr(exc.__cause__, "name", None) or getattr(exc, "name", None) or "?"
        package = "psycopg2-binary" if missing.startswith("psycopg") else missing
        raise InputError(
            f"--storage {shown(spec)}: cannot open it: its database driver {missing!r} is not "
            f"installed; pip install {package}"
        ) from None
    except (OSError, ValueError, optuna.exceptions.StorageInternalError) as exc:
        raise InputError(
            f"--storage {shown(spec)}: cannot open it ({type(exc).__name__}: {exc}); give a "
            "SQLite file (study.db), a journal file (study.log) or a database URL Optuna accepts"
        ) from None
    except Exception as exc:
        # SQLAlchemy raises its own errors for bad URLs and unreachable servers.
        if type(exc).__module__.startswith("sqlalchemy"):
            first = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0]
            raise InputError(
                f"--storage {shown(spec)}: cannot open it ({type(exc).__name__}: {first}); check "
                "the URL (postgresql://USER:PASSWORD@HOST:PORT/DATABASE), that the server runs "
                "and accepts connections from this host, and that the database exists"
            ) from None
        raise


def _open_server(url: str, heartbeat: Heartbeat) -> RDBStorage:
    import sqlalchemy

    engine_kwargs: dict[str, object] = {"pool_pre_ping": True}  # a search outlives idle timeouts
    parsed = sqlalchemy.engine.make_url(url)
    if parsed.get_backend_name() == "postgresql":
        engine_kwargs["connect_args"] = {"connect_timeout": _CONNECT_TIMEOUT}
        if parsed.drivername == "postgresql":
            # SQLAlchemy 2.1 reads a plain postgresql:// with psycopg (3), 2.0 with psycopg2:
            # take whichever of the two is installed.
            driver = next((d for d in ("psycopg", "psycopg2") if importlib.util.find_spec(d)),
                          None)
            if driver is not None:
                url = parsed.set(drivername=f"postgresql+{driver}").render_as_string(
                    hide_password=False)
    for attempt in range(3):
        try:
            with warnings.catch_warnings():
                # The heartbeat is "experimental" in Optuna: chosen knowingly.
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                return RDBStorage(url, engine_kwargs=engine_kwargs,
                                  heartbeat_interval=heartbeat.interval,
                                  grace_period=heartbeat.grace)
        except (sqlalchemy.exc.IntegrityError, sqlalchemy.exc.ProgrammingError):
            # Hosts starting together on an empty database race to create Optuna's tables
            # (PostgreSQL: a duplicate key in pg_type); the loser finds them made on retry.
            if attempt == 2:
                raise
            time.sleep(0.2 + random.random())
    raise AssertionError("not reached")


def backend(study: optuna.Study) -> BaseStorage:
    """The study's storage itself: Optuna wraps an RDBStorage in a cache."""
    storage = study._storage
    if isinstance(storage, optuna.storages._CachedStorage):
        return storage._backend
    return storage


def ask(study: optuna.Study) -> optuna.Trial:
    """`study.ask()`, without Optuna's warning that heartbeats belong to `study.optimize`: the
    search's own loop records them (`beating`)."""
    # One thread at a time: catch_warnings swaps the process's filters, and two interleaved
    # would restore each other's (trials may run in threads).
    with _ASKING, warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Heartbeat of storage is supposed", UserWarning)
        return study.ask()


@contextmanager
def beating(study: optuna.Study, trial_id: int) -> Iterator[None]:
    """Record the trial's heartbeat every interval while the block runs (a server database
    only). Optuna beats only inside `study.optimize`; an ask-and-tell loop beats itself."""
    storage = backend(study)
    interval = storage.get_heartbeat_interval() if isinstance(storage, RDBStorage) else None
    if interval is None:
        yield
        return
    stop = threading.Event()

    def beat() -> None:
        while True:
            try:
                storage.record_heartbeat(trial_id)
            except Exception:  # noqa: BLE001 -- a server blip: the next beat tries again
                pass
            if stop.wait(interval):
                return

    storage.record_heartbeat(trial_id)  # from the start: a trial without one is never stale
    thread = threading.Thread(target=beat, name=f"heartbeat-{trial_id}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
