"""Where a study lives: a SQLite file by default, any Optuna RDB URL, or a journal file that
several searches can share; named the same from any working directory."""

from __future__ import annotations

import importlib.util
import socket
from pathlib import Path
from typing import Any

import optuna
import pytest
from optuna.storages import JournalStorage, RDBStorage

from autotune import InputError
from autotune.study.store.storage import (
    Heartbeat,
    absolute_storage,
    default_storage_url,
    open_storage,
    shown,
)


def test_default_storage_is_an_absolute_sqlite_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                    ) -> None:
    monkeypatch.chdir(tmp_path)
    url = default_storage_url(Path("results/mlp"))
    assert url == f"sqlite:///{tmp_path}/results/mlp/study.db"
    assert url.startswith("sqlite:////")  # four slashes: an absolute path for SQLAlchemy


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("sqlite:///study.db", "sqlite:///{cwd}/study.db"),
        ("sqlite:////abs/study.db", "sqlite:////abs/study.db"),
        ("postgresql://user@db/autotune", "postgresql://user@db/autotune"),
        ("study.log", "{cwd}/study.log"),
        ("runs/study.db", "{cwd}/runs/study.db"),
        ("/abs/study.log", "/abs/study.log"),
    ],
)
def test_absolute_storage(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spec: str,
                          expected: str) -> None:
    monkeypatch.chdir(tmp_path)
    assert absolute_storage(spec) == expected.format(cwd=tmp_path)


def test_open_a_sqlite_url_and_a_db_file(tmp_path: Path) -> None:
    by_url = open_storage(f"sqlite:///{tmp_path / 'a.db'}")
    by_file = open_storage(str(tmp_path / "b.sqlite3"))
    assert isinstance(by_url, RDBStorage) and isinstance(by_file, RDBStorage)
    optuna.create_study(storage=by_file, study_name="s")
    assert (tmp_path / "b.sqlite3").is_file()


def test_any_other_file_is_a_journal_several_searches_share(tmp_path: Path) -> None:
    path = tmp_path / "shared" / "study.log"  # its folder is made
    first = open_storage(str(path))
    assert isinstance(first, JournalStorage)
    optuna.create_study(storage=first, study_name="s", direction="maximize").add_trial(
        optuna.trial.create_trial(value=1.0))
    second = optuna.load_study(study_name="s", storage=open_storage(str(path)))
    assert [t.value for t in second.get_trials()] == [1.0]


@pytest.mark.parametrize("spec", ["nosuchdialect://x/y", "sqlite:////nonexistent-dir-for-autotune/x/study.db"])
def test_a_storage_that_cannot_be_opened_is_bad_input(spec: str) -> None:
    with pytest.raises(InputError, match=r"^--storage .*: cannot open it"):
        open_storage(spec)


# -- a database server ----------------------------------------------------------------------------


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # nothing listens there once it is closed


def test_an_unreachable_server_is_bad_input_without_the_password() -> None:
    url = f"postgresql://me:s3cret@127.0.0.1:{closed_port()}/autotune"
    with pytest.raises(InputError, match=r"^--storage postgresql://me:\*\*\*@127\.0\.0\.1:\d+/"
                       r"autotune: cannot open it .*that the server runs") as caught:
        open_storage(url)
    assert "s3cret" not in str(caught.value)


def test_a_missing_driver_says_what_to_install() -> None:
    if importlib.util.find_spec("pg8000") is not None:
        pytest.skip("pg8000 is installed: no missing driver to show")
    with pytest.raises(InputError, match=r"^--storage postgresql\+pg8000://me@127.0.0.1:1/db: "
                       r"cannot open it: its database driver 'pg8000' is not installed; "
                       r"pip install pg8000$"):
        open_storage("postgresql+pg8000://me@127.0.0.1:1/db")


def test_a_database_that_does_not_exist_is_bad_input(postgres_server: Any) -> None:
    url = postgres_server.url.rsplit("/", 1)[0] + "/no_such_database"
    with pytest.raises(InputError, match=r'^--storage .*/no_such_database: cannot open it '
                       r'.*"no_such_database" does not exist'):
        open_storage(url)


def test_a_server_study_records_heartbeats(postgres_url: str) -> None:
    storage = open_storage(postgres_url, Heartbeat(interval=3, grace=20))
    assert isinstance(storage, RDBStorage)
    assert (storage.heartbeat_interval, storage.grace_period) == (3, 20)
    assert shown(postgres_url) == postgres_url  # no password: shown as given


@pytest.mark.parametrize(("interval", "grace"), [(0, 5), (5, 5)])
def test_a_heartbeat_needs_a_grace_longer_than_its_interval(interval: int, grace: int) -> None:
    with pytest.raises(ValueError, match="grace > interval"):
        Heartbeat(interval=interval, grace=grace)
