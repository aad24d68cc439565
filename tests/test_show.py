"""`autotune show`: finding a study from its output folder and printing its top trials."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest
import yaml
from helpers import FakeRunner, ok_by_batch_size
from rich.console import Console

from autotune import Adapter, InputError, MeasureSettings, Status, TrialResult
from autotune.display import QuietListener
from autotune.search import Search, SearchSettings
from autotune.show import load_study, show
from autotune.space import parse_space
from autotune.worker import TrialRequest


class Tiny(Adapter):
    batch_size = 8


def run_study(out: Path, storage: str, trials: int = 3) -> None:
    """A study whose second trial runs out of memory, told by a scripted runner."""

    def script(call: int, request: TrialRequest) -> TrialResult:
        if call == 1:
            return TrialResult(status=Status.OOM, reason="OutOfMemoryError: CUDA out of memory")
        return ok_by_batch_size(call, request)

    space = parse_space({"num_workers": {"low": 0, "high": 4}, "batch_size": {"factors": [1, 2, 4]}},
                        source="space.yaml", adapter=Tiny, device_type="cpu", cpus=4)
    settings = SearchSettings(adapter=Path("tiny.py"), space_source="space.yaml", device="cpu",
                              out=out, storage=storage, study_name="shown", trials=trials, seed=0,
                              measure=MeasureSettings(), confirm=0)
    Search(settings, space, Tiny, runner=FakeRunner(script), listener=QuietListener()).run()


@pytest.fixture(autouse=True)
def _quiet_optuna() -> None:
    optuna.logging.set_verbosity(optuna.logging.WARNING)


def test_load_study_from_the_output_folder(tmp_path: Path) -> None:
    out = tmp_path / "out"
    run_study(out, str(tmp_path / "study.db"))
    study = load_study(out)
    assert study.study_name == "shown"
    assert len(study.get_trials()) == 3


def test_show_prints_the_top_trials(tmp_path: Path) -> None:
    out = tmp_path / "out"
    run_study(out, str(tmp_path / "study.db"))
    console = Console(record=True, width=200)
    show(out, console=console)
    text = console.export_text()
    assert "shown: top 2 of 3 trials (samples/s)" in text
    assert "0 (base)" in text
    assert "bs=8 fp32" in text
    assert "other trials: 1 oom" in text


def test_show_top_limits_the_rows(tmp_path: Path) -> None:
    out = tmp_path / "out"
    run_study(out, str(tmp_path / "study.db"))
    console = Console(record=True, width=200)
    show(out, top=1, console=console)
    assert "top 1 of 3 trials" in console.export_text()


def test_load_study_without_study_yaml(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="study.yaml: not found"):
        load_study(tmp_path)


def test_load_study_with_a_bad_study_yaml(tmp_path: Path) -> None:
    (tmp_path / "study.yaml").write_text("storage: x.db\n")
    with pytest.raises(InputError, match="study_name and storage"):
        load_study(tmp_path)


def test_load_study_of_a_missing_study(tmp_path: Path) -> None:
    out = tmp_path / "out"
    run_study(out, str(tmp_path / "study.db"), trials=1)
    (out / "study.yaml").write_text(yaml.safe_dump({"study_name": "other",
                                                    "storage": str(tmp_path / "study.db")}))
    with pytest.raises(InputError, match="'other' is not in"):
        load_study(out)


def test_show_finds_a_relative_storage_from_another_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "search_here").mkdir()
    (tmp_path / "show_here").mkdir()
    out = tmp_path / "out"
    monkeypatch.chdir(tmp_path / "search_here")
    run_study(out, "study.db")  # `autotune search --storage study.db --out OUT`
    monkeypatch.chdir(tmp_path / "show_here")
    try:
        study = load_study(out)
    finally:
        stray = list((tmp_path / "show_here").iterdir())
    assert len(study.get_trials()) == 3
    assert stray == []
