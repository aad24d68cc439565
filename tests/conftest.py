"""Shared fixtures: the checkout's paths, the test adapters, a PostgreSQL server."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import REPO_ROOT, TEST_ADAPTERS  # also puts this checkout on sys.path
from postgres import REQUIRE_ENV, Server, Unavailable


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
