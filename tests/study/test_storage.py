"""Where a study lives: a SQLite file by default, any Optuna RDB URL, or a journal file that
several searches can share; named the same from any working directory."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest
from optuna.storages import JournalStorage, RDBStorage

from autotune import InputError
from autotune.study.storage import absolute_storage, default_storage_url, open_storage


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
