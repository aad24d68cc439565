"""A search stops a trial in warm-up when it runs at a fraction of the best, the guided
follow-ups too, never the baseline or the recipe, and nothing with --no-prune. A runner stands in
that streams each trial's warm-up at its scripted rate."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import optuna
import pytest
from helpers import FakeRunner

from autotune import Adapter, Status, TrialResult
from autotune.contract.events import WarmupEvent
from autotune.outputs.display import QuietListener
from autotune.study.search import Search, SearchSettings
from autotune.study.space.file import parse_space
from autotune.study.store.records import read_records


class WarmingRunner(FakeRunner):
    """Streams two one-second warm-up chunks at the scripted rate before the result; records
    which trials it was asked to stop."""

    prunes = True

    def __init__(self, script: Any) -> None:
        super().__init__(script)
        self.stopped: list[int] = []

    def prune(self, reason: str) -> None:
        self.stopped.append(len(self.requests) - 1)

    def run(self, request: Any, trial_dir: Path, *, timeout: float,
            on_event: Any = None) -> TrialResult:
        result = super().run(request, trial_dir, timeout=timeout, on_event=on_event)
        for _ in range(2):
            if on_event is not None and result.throughput:
                on_event(WarmupEvent(items=result.throughput, seconds=1.0, steps=3))
        return result


def dtypes(call: int, request: Any) -> TrialResult:
    # fp16 runs at a twentieth of the others (a detector's fp16 on an H100: 0.06x).
    rate = 5.0 if request.config.amp_dtype == "fp16" else 100.0
    return TrialResult(status=Status.OK, throughput=rate)


@pytest.mark.parametrize("prune", [True, False])
def test_a_slow_eager_dtype_trial_is_stopped_in_warm_up_unless_pruning_is_off(
        tmp_path: Path, prune: bool) -> None:
    class Eight(Adapter):
        batch_size = 8

    raw = {"amp_dtype": {"choices": ["fp32", "bf16", "fp16"]}}
    space = parse_space(raw, source="s.yaml", adapter=Eight, device_type="cuda", cpus=16)
    runner = WarmingRunner(dtypes)
    settings = SearchSettings(adapter=tmp_path / "a.py", space_source="s.yaml", device="cuda",
                              out=tmp_path / "out", storage=str(tmp_path / "study.db"),
                              study_name="t", trials=4, seed=0, confirm=0, prune=prune)
    Search(settings, space, Eight, runner=runner, listener=QuietListener()).run()
    ran = [q.config.amp_dtype for q in runner.requests]
    slow = ran.index("fp16")
    assert runner.stopped == ([slow] if prune else [])
    if prune:  # told to Optuna with its warm-up rate
        study = optuna.load_study(study_name="t", storage=f"sqlite:///{tmp_path / 'study.db'}")
        record = next(r for r in read_records(study) if r.number == slow)
        assert record.role.startswith("eager: ")
        assert study.trials[slow].intermediate_values == {0: 5.0}
