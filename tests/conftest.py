"""Shared fixtures: the checkout's paths and the test adapters."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import REPO_ROOT, TEST_ADAPTERS  # also puts this checkout on sys.path


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
