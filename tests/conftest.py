"""Shared fixtures: the checkout's paths, the test adapters, a PostgreSQL server.

The quick loop: `python3 -m pytest -m "not slow"` (under 3 minutes on 2 cores) leaves out the
tests marked `slow`, those that start `python -m autotune` (the CLI, a trial process, a fork
server, a DDP launcher), run a real measured search or torch.compile; `python3 -m pytest` (CI)
runs everything. A test that starts `python -m autotune...` itself without the mark fails
(`_slow_if_it_starts_autotune`), so the quick loop stays quick.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from helpers import REPO_ROOT, TEST_ADAPTERS  # also puts this checkout on sys.path
from postgres import REQUIRE_ENV, Server, Unavailable


TEMP_ROOT_ENV = "PYTEST_DEBUG_TEMPROOT"
"""Where pytest makes `tmp_path` folders (pytest's own variable; the system's temp folder when
unset)."""


def pytest_configure(config: pytest.Config) -> None:
    """`tmp_path` in RAM (/dev/shm) where it has room, unless told otherwise. The searches the
    tests run keep their studies in SQLite files that commit after every trial: on a disk
    shared with other work each commit's fsync waits milliseconds, which made half the time
    of tests/study/test_search.py. pytest keeps the last 3 runs' folders, a few MB."""
    shm = Path("/dev/shm")
    if TEMP_ROOT_ENV in os.environ or not (shm.is_dir() and os.access(shm, os.W_OK)):
        return
    room = os.statvfs(shm)
    if room.f_bavail * room.f_frsize >= 1 << 30:  # never crowd a container's small /dev/shm
        os.environ[TEMP_ROOT_ENV] = str(shm)


@pytest.fixture
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture
def test_adapters() -> Path:
    """The folder of test-only adapters."""
    return TEST_ADAPTERS


@pytest.fixture
def tiny_adapter() -> Path:
    return TEST_ADAPTERS / "tiny.py"


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[Server]:
    """A real PostgreSQL server for the whole session (tests/postgres.py); skips, saying what
    to install, where none can be started, unless $AUTOTUNE_TEST_REQUIRE_POSTGRES is set."""
    try:
        server = Server()
    except Unavailable as exc:
        if os.environ.get(REQUIRE_ENV):
            pytest.fail(f"PostgreSQL is required here (${REQUIRE_ENV} is set): {exc}")
        pytest.skip(f"no PostgreSQL server for the many-hosts tests: {exc}")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def postgres_url(postgres_server: Server) -> str:
    """The URL of a new, empty database on the session's server."""
    return postgres_server.database()


def _autotune_module(args: str | bytes | os.PathLike[str] | Sequence[Any]) -> str | None:
    """The module of this package that the command `args` runs as `python -m`, if it does."""
    if isinstance(args, (str, bytes, os.PathLike)):  # one command line (shell=True)
        argv = os.fsdecode(args).split()
    else:
        argv = [os.fsdecode(a) for a in args]
    return next((module for flag, module in zip(argv, argv[1:])
                 if flag == "-m" and module.split(".")[0] == "autotune"), None)


@pytest.fixture(autouse=True)
def _slow_if_it_starts_autotune(request: pytest.FixtureRequest,
                                monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Fail a test not marked `slow` that starts `python -m autotune...` (each start costs
    seconds of imports: `-m "not slow"` must stay quick). Every `subprocess` start goes through
    `Popen._execute_child`; what the test starts is recorded, and it fails afterwards, not
    mid-run (a start in a search's thread would be lost in that thread). A start in a
    module-scoped fixture comes before this one: the tests that use it carry the mark."""
    if request.node.get_closest_marker("slow") is not None:
        yield
        return
    started: list[str] = []
    execute = subprocess.Popen._execute_child  # type: ignore[attr-defined]

    def watched(self: subprocess.Popen[Any], args: Any, *rest: Any, **kwargs: Any) -> Any:
        if (module := _autotune_module(args)) is not None:
            started.append(module)
        return execute(self, args, *rest, **kwargs)

    monkeypatch.setattr(subprocess.Popen, "_execute_child", watched)
    yield
    if started:
        pytest.fail(f"started `python -m {started[0]}` ({len(started)} process(es) of "
                    "autotune) without @pytest.mark.slow: mark the test slow", pytrace=False)
