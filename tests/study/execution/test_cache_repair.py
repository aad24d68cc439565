"""A compile cache a killed trial left half-written is repaired before the next compile reads
it: a search interrupted during a bf16 compile on the CPU left a 0-byte `.main.so`, and the
resumed search's trial of that config failed on "file too short" (2026-11-28)."""

from __future__ import annotations

import _bisect
import fcntl
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from autotune import MeasureSettings, Status, TrainConfig
from autotune.contract.request import TrialRequest
from autotune.study.execution import cache_repair
from autotune.study.execution.cache_repair import cut_short, repair
from autotune.study.execution.runner import SubprocessRunner

LIBRARY = Path(_bisect.__file__)  # a whole ELF shared library, small


def build(cache: Path, key: str, suffix: str = ".main.so", *, keep: float = 1.0) -> Path:
    """`cache/<xx>/<key><suffix>`: the library, or its first `keep` of it."""
    path = cache / key[1:3] / f"{key}{suffix}"
    path.parent.mkdir(parents=True, exist_ok=True)
    data = LIBRARY.read_bytes()
    path.write_bytes(data[:int(len(data) * keep)])
    return path


def test_only_builds_cut_short_are_deleted(tmp_path: Path) -> None:
    whole = build(tmp_path, "cwhole")
    half = build(tmp_path, "chalf", keep=0.5)
    empty = build(tmp_path, "cempty", keep=0.0)
    almost = build(tmp_path, "calmost", ".o", keep=0.999)
    text = tmp_path / "py" / "cpython.py"
    text.parent.mkdir()
    text.write_text("")  # not a build: Inductor writes its Python whole, by a rename
    lock = tmp_path / "locks" / "cwhole.lock"
    lock.parent.mkdir()
    lock.touch()  # an empty lock file is no build either
    assert not cut_short(whole) and cut_short(half) and cut_short(empty) and cut_short(almost)
    assert sorted(repair(tmp_path)) == sorted([half, empty, almost])
    assert whole.exists() and text.exists() and lock.exists()
    assert not (half.exists() or empty.exists() or almost.exists())
    assert repair(tmp_path) == [] and repair(tmp_path / "none") == [] and repair(None) == []


def test_a_build_whose_lock_is_held_is_left_to_its_builder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A parallel trial writing the library holds Inductor's lock of its key (an flock).
    monkeypatch.setattr(cache_repair, "_LOCK_WAIT_SECONDS", 0.1)
    building = build(tmp_path, "cbusy", keep=0.3)
    lock = tmp_path / "locks" / "cbusy.lock"
    lock.parent.mkdir()
    lock.touch()
    fd = os.open(lock, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        assert repair(tmp_path) == [] and building.exists()
    finally:
        os.close(fd)
    assert repair(tmp_path) == [building] and not building.exists()


def test_a_trial_killed_while_it_wrote_a_build_leaves_none_cut_short(tmp_path: Path) -> None:
    # The child stands for a trial whose compiler was writing a library when its limit came.
    cache = tmp_path / "cache"
    half = LIBRARY.read_bytes()[:4096]
    target = cache / "ab" / "cabcd.main.so"

    class Writing(SubprocessRunner):
        def _launch(self, request: TrialRequest, trial_dir: Path, log: Any, *,
                    extra: Any = None) -> Any:
            script = (f"import pathlib, time; p = pathlib.Path({str(target)!r}); "
                      f"p.parent.mkdir(parents=True); p.write_bytes({half!r}); time.sleep(60)")
            return subprocess.Popen([sys.executable, "-c", script], stdout=log,
                                    stderr=subprocess.STDOUT, start_new_session=True)

    request = TrialRequest(adapter="a.py", config=TrainConfig(batch_size=8), device="cpu",
                           measure=MeasureSettings(), number=0)
    result = Writing(grace_seconds=0.5, cache_dir=cache).run(request, tmp_path / "trial",
                                                             timeout=1.5)
    assert result.status is Status.TIMEOUT
    assert cache.is_dir() and not target.exists()
    assert f"removed a compiled library the trial left cut short: {target}" in (
        tmp_path / "trial" / "log.txt").read_text()


def test_a_whole_library_is_not_cut_short_on_this_machine() -> None:
    # The check reads the section table's end; every shared library of the interpreter is whole.
    libraries = sorted(Path(sys.base_prefix).rglob("lib-dynload/*.so"))[:20] or [LIBRARY]
    assert [p for p in libraries if cut_short(p)] == []
