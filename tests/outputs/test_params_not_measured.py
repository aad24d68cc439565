"""best.yaml says which of the adapter's knob values the search never measured: a 150-s search
of a transformers classifier on a 2-CPU VM never ran `pad_to_multiple_of` 8 or 128, and its
`params:` read as if the default had won (2026-11-28)."""

from __future__ import annotations

from pathlib import Path

import optuna
import yaml
from optuna.distributions import CategoricalDistribution
from rich.console import Console

from autotune import MeasureSettings, Status, TrainConfig, TrialResult
from autotune.outputs.best import params_not_measured, params_note
from autotune.outputs.report import write_outputs
from autotune.outputs.show import show
from autotune.study.search import SearchSettings
from autotune.study.store import records, study_attrs
from autotune.study.store.storage import open_storage

PAD = CategoricalDistribution([None, 8, 128])


def searched(tmp_path: Path, pads: list[tuple[int | None, Status]]) -> dict:
    """best.yaml of a study whose trials ran these `pad` values with these outcomes."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    out = tmp_path / "out"
    out.mkdir()
    settings = SearchSettings(adapter=Path("a.py"), space_source="space.yaml", device="cpu",
                              out=out, storage=str(tmp_path / "s.db"), study_name="p",
                              trials=len(pads), seed=0, measure=MeasureSettings(), confirm=0)
    study = optuna.create_study(storage=open_storage(settings.storage), study_name="p",
                                direction="maximize")
    study_attrs.write_info(study, study_attrs.StudyInfo(adapter="a.py", unit="samples",
                                                        space="space.yaml", device="cpu"))
    for i, (pad, status) in enumerate(pads):
        records.enqueue_config(study, {"pad": pad}, "baseline" if i == 0 else "")
        trial = study.ask({"pad": PAD})
        records.write_config(trial, TrainConfig(batch_size=8, params={"pad": pad}))
        rate = 100.0 + i if status is Status.OK else None
        records.write_result(trial, TrialResult(status=status, throughput=rate))
        study.tell(trial, rate or 0.0)
    write_outputs(study, settings)
    return yaml.safe_load((out / "best.yaml").read_text())


def test_the_values_never_measured_ok_are_listed_under_params(tmp_path: Path) -> None:
    doc = searched(tmp_path, [(None, Status.OK), (None, Status.OK), (128, Status.OOM)])
    assert doc["params"] == {"pad": None}
    missing = doc["params_not_measured"]
    assert missing["pad"] == [8, 128] and "pad 8, 128" in missing["note"]
    assert list(doc).index("params_not_measured") == list(doc).index("params") + 1


def test_nothing_is_said_when_every_value_ran(tmp_path: Path) -> None:
    doc = searched(tmp_path, [(None, Status.OK), (8, Status.OK), (128, Status.OK)])
    assert doc["params"] == {"pad": 128} and "params_not_measured" not in doc
    assert "note: params:" not in shown(tmp_path / "out")


def test_show_says_it_as_best_yaml_does(tmp_path: Path) -> None:
    # `autotune show` printed the winner with no word that pad 8 and 128 never ran.
    doc = searched(tmp_path, [(None, Status.OK), (None, Status.OK), (128, Status.OOM)])
    text = shown(tmp_path / "out")
    assert f"note: {doc['params_not_measured']['note']}" in " ".join(text.split())
    assert text.index("winner:") < text.index("note: params:")


def shown(out: Path) -> str:
    console = Console(record=True, width=400)
    show(out, console=console)
    return console.export_text()


def test_the_note_names_each_knob_and_value_as_yaml_writes_them() -> None:
    assert params_note({}) is None
    note = params_note({"pad": [None, 64], "attn": ["eager"]})
    assert note is not None and "pad null, 64; attn \"eager\"" in note
    assert params_not_measured({"pad": [None, 8]}, []) == {"pad": [None, 8]}


def test_a_value_pruned_once_it_ran_was_measured() -> None:
    # A two-tower model's pad_to_multiple_of 64 ran four times, each pruned as slower, and
    # best.yaml said the search ended before measuring it (2-CPU VM, 2026-11-28).
    from optuna.trial import TrialState

    from autotune.study.store.records import TrialRecord

    def rec(n: int, pad: int | None, status: Status, ran: bool = True) -> TrialRecord:
        return TrialRecord(number=n, state=TrialState.COMPLETE, value=1.0,
                           config=TrainConfig(batch_size=8, params={"pad": pad}),
                           result=TrialResult(status=status, ran=ran,
                                              throughput=1.0 if status is Status.OK else None))
    recs = [rec(0, None, Status.OK), rec(1, 8, Status.PRUNED),
            rec(2, 128, Status.PRUNED, ran=False)]  # "not run: ...": never measured
    assert params_not_measured({"pad": [None, 8, 128]}, recs) == {"pad": [128]}
