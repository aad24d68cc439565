"""Where the study lives: SQLite by default, any Optuna RDB URL, or a journal file.

Several `autotune search` processes may share one study only through a journal file or a
server database: SQLite locks badly under concurrent writers.
"""

from __future__ import annotations

from pathlib import Path

import optuna
from optuna.storages import BaseStorage, InMemoryStorage, JournalStorage, RDBStorage
from optuna.storages.journal import JournalFileBackend

from autotune.contract.errors import InputError

__all__ = ["absolute_storage", "default_storage_url", "open_storage"]

_SQLITE_SUFFIXES = (".db", ".sqlite", ".sqlite3")


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


def open_storage(spec: str) -> BaseStorage:
    """An Optuna storage from a URL ("sqlite:///...", "postgresql://...") or a file path
    (".db" for SQLite, anything else for a journal file that several processes can share)."""
    if spec == ":memory:":
        return InMemoryStorage()  # nothing kept: for simulations and tests
    try:
        if "://" in spec:
            return RDBStorage(spec)
        path = Path(spec)
        if path.suffix in _SQLITE_SUFFIXES:
            return RDBStorage(f"sqlite:///{path.resolve()}")
        path.parent.mkdir(parents=True, exist_ok=True)
        return JournalStorage(JournalFileBackend(str(path)))
    except (OSError, ValueError, ImportError, optuna.exceptions.StorageInternalError) as exc:
        raise InputError(
            f"--storage {spec}: cannot open it ({type(exc).__name__}: {exc}); give a SQLite "
            "file (study.db), a journal file (study.log) or a database URL Optuna accepts"
        ) from None
    except Exception as exc:
        # SQLAlchemy raises its own errors for bad URLs and unreachable servers.
        if type(exc).__module__.startswith("sqlalchemy"):
            raise InputError(
                f"--storage {spec}: cannot open it ({type(exc).__name__}: {exc}); check the URL "
                "and that the database is reachable"
            ) from None
        raise
