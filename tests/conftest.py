"""Shared paths and the CLI-as-a-subprocess helper."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
"""The checkout: `python -m autotune` is run from here, so the package is importable."""
TEST_ADAPTERS = Path(__file__).resolve().parent / "adapters"

# `pytest` (not only `python -m pytest`) should find the package of this checkout.
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

RunCli = Callable[..., "subprocess.CompletedProcess[str]"]


def run_autotune(*args: str | Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """`python -m autotune ARGS...` from the repository root, output captured as text."""
    return subprocess.run(
        [sys.executable, "-m", "autotune", *map(str, args)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.fixture
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture
def test_adapters() -> Path:
    """The folder of test-only adapters."""
    return TEST_ADAPTERS


@pytest.fixture
def cli() -> RunCli:
    return run_autotune


@pytest.fixture
def tiny_adapter() -> Path:
    return TEST_ADAPTERS / "tiny.py"
