"""Shared by the tests: the checkout's paths, the CLI as a subprocess, a scripted fake runner."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
"""The checkout: `python -m autotune` runs from here, so the package of this checkout is used."""
TEST_ADAPTERS = Path(__file__).resolve().parent / "adapters"

# `pytest` (not only `python -m pytest`) should import the package of this checkout.
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from autotune.result import Status, TrialResult  # noqa: E402 -- needs the path above
from autotune.worker import TrialRequest  # noqa: E402


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


Script = Callable[[int, TrialRequest], TrialResult]


def ok_by_batch_size(call: int, request: TrialRequest) -> TrialResult:
    """Larger batches are faster, as on a real machine until memory runs out."""
    return TrialResult(status=Status.OK, throughput=100.0 * request.config.batch_size,
                       duration_seconds=1.0)


class FakeRunner:
    """Answers each trial from a script, runs nothing, and remembers what it was asked."""

    def __init__(self, script: Script = ok_by_batch_size) -> None:
        self.script = script
        self.requests: list[TrialRequest] = []
        self.timeouts: list[float] = []

    def run(self, request: TrialRequest, trial_dir: Path, *, timeout: float,
            on_event: Any = None) -> TrialResult:
        trial_dir.mkdir(parents=True, exist_ok=True)
        self.requests.append(request)
        self.timeouts.append(timeout)
        return self.script(len(self.requests) - 1, request)
