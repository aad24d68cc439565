"""`autotune show`: finding a study from its output folder and printing its top trials."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import optuna
import pytest
import yaml
from rich.console import Console

from autotune import InputError, MeasureSettings, Status, TrainConfig, TrialResult
from autotune.outputs.report import write_outputs
from autotune.outputs.show import load_study, show
from autotune.study.search import SearchSettings
from autotune.study.store import records, study_attrs
from autotune.study.store.storage import open_storage

# The study `show` reads: the baseline, a batch that ran out of memory, a faster one.
OUTCOMES = [
    ("baseline", TrainConfig(batch_size=8),
     TrialResult(status=Status.OK, throughput=800.0, spread=0.01, converged=True)),
    ("", TrainConfig(batch_size=32, num_workers=2),
     TrialResult(status=Status.OOM, reason="OutOfMemoryError: CUDA out of memory")),
    ("", TrainConfig(batch_size=16, num_workers=1),
     TrialResult(status=Status.OK, throughput=1600.0, spread=0.2, converged=False,
                 step_seconds=0.01, data_wait_fraction=0.25, recompiles=3, shapes_vary=True,
                 shape_range="input_ids[1] 512-1024", shape_count=437, recompile_seconds=40.0,
                 recompile_reason="(input_ids.size()[1] % 16) != 0 (meta__sdpa)")),
]


def run_study(out: Path, storage: str, trials: int = 3, stopped: str | None = None) -> None:
    """A study whose second trial ran out of memory, written as a search writes it (through
    `records`), and its outputs (study.yaml points `show` at the storage)."""
    settings = SearchSettings(adapter=Path("tiny.py"), space_source="space.yaml", device="cpu",
                              out=out, storage=storage, study_name="shown", trials=trials, seed=0,
                              measure=MeasureSettings(), confirm=0)
    out.mkdir(parents=True, exist_ok=True)
    study = optuna.create_study(storage=open_storage(settings.storage), study_name="shown",
                                direction="maximize")
    study_attrs.write_info(study, study_attrs.StudyInfo(adapter="tiny.py", unit="samples",
                                                space="space.yaml", device="cpu"))
    for role, config, result in OUTCOMES[:trials]:
        records.enqueue_config(study, {}, role)
        trial = study.ask()
        records.write_config(trial, config)
        records.write_result(trial, result)
        study.tell(trial, result.throughput or 0.0)
    write_outputs(study, settings, stopped=stopped)


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
    lines = text.splitlines()
    fastest = next(i for i, line in enumerate(lines) if "bs=16 workers=1 fp32" in line)
    base = next(i for i, line in enumerate(lines) if "0 (base)" in line)
    assert fastest < base  # fastest first
    assert "2.00" in lines[fastest] and "20.0%*" in lines[fastest]  # x base; spread, not converged
    assert "10.0" in lines[fastest] and "25%" in lines[fastest]  # step ms, data wait
    assert "* not converged: the windows' median was not known to the tolerance" in text
    assert "recompiles" in text and "|          3 |" in lines[fastest]
    assert "Batch shapes vary from batch to batch (input_ids[1] 512-1024, 437 distinct" in text
    # What kept its compile going, and the padding that stops it (a T5's bf16 compile, H100).
    assert ("trial 2: 3 recompiles after the first step (40 s), the last on (input_ids.size()[1] "
            "% 16) != 0 (meta__sdpa)") in text and "to a multiple of 16" in text
    written = yaml.safe_load((out / "best.yaml").read_text())
    assert written["measurement"]["recompile_reason"] == "(input_ids.size()[1] % 16) != 0 (meta__sdpa)"
    assert "padded to a multiple of 16 (64 is one)" in written["shapes"]["note"]
    # Where to go next (issue 26): the winner's profile, then the gate once it is applied.
    best = out / "best.yaml"
    assert f"autotune profile --adapter tiny.py --config {best}" in text
    assert f"after autotune apply, keep its speed (e.g. in CI): autotune check --adapter " \
        f"tiny.py --against {best}" in text


def test_show_lists_a_copy_once(tmp_path: Path) -> None:
    # The sampler proposed batch 16 again: the study keeps the copy, the table shows the
    # original only and says how many copies it left out.
    out = tmp_path / "out"
    run_study(out, str(tmp_path / "study.db"))
    study = load_study(out)
    _, config, result = OUTCOMES[2]
    trial = study.ask()
    records.write_config(trial, config)
    records.write_result(trial, result)
    records.write_duplicate(trial, 2)
    study.tell(trial, result.throughput or 0.0)
    console = Console(record=True, width=200)
    show(out, console=console)
    text = console.export_text()
    assert "shown: top 2 of 4 trials (samples/s, 1 copy not shown)" in text
    assert sum("bs=16 workers=1 fp32" in line for line in text.splitlines()) == 1


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


def test_piped_show_draws_ascii_lines_and_a_left_title(tmp_path: Path) -> None:
    # Not a terminal (a pipe, a log): no box-drawing characters, the title at the left.
    out = tmp_path / "out"
    run_study(out, str(tmp_path / "study.db"))
    console = Console(record=True, width=200, force_terminal=False)
    show(out, console=console)
    text = console.export_text()
    assert text.isascii()
    assert text.splitlines()[0].startswith("shown: top 2 of 3 trials")
    row = next(line for line in text.splitlines() if "0 (base)" in line)
    assert row.startswith("|") and row.rstrip().endswith("|")
    assert any(line.startswith("+---") for line in text.splitlines())


def test_a_config_refused_unrun_is_not_counted_as_a_timeout(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # "other trials: 5 pruned, 1 timeout" counted a config the budget left unrun (2026-11-28).
    unrun = TrialResult(status=Status.TIMEOUT, ran=False,
                        reason="not run: compiling and running it would take about 14.2 s")
    monkeypatch.setitem(globals(), "OUTCOMES",
                        [*OUTCOMES, ("", TrainConfig(batch_size=8, compile="default"), unrun)])
    out = tmp_path / "out"
    run_study(out, str(tmp_path / "study.db"), trials=4)
    console = Console(record=True, width=200)
    show(out, console=console)
    assert "other trials: 1 not run, 1 oom" in console.export_text()


def test_a_stopped_search_says_so_first_in_best_yaml_and_show(tmp_path: Path) -> None:
    # A search stopped by Ctrl-C wrote a best.yaml that read as its answer ("confidence low:
    # not confirmed"), with no word of the stop (a held-out user, 2026-11-28).
    out = tmp_path / "out"
    run_study(out, str(tmp_path / "study.db"), stopped="interrupted by SIGINT")
    text = (out / "best.yaml").read_text()
    assert text.startswith("# STOPPED: interrupted by SIGINT before the search finished: the "
                           "best so far, not its answer; run the same command again to continue.")
    doc = yaml.safe_load(text)
    assert list(doc)[0] == "stopped" and doc["stopped"].startswith("interrupted by SIGINT")
    console = Console(record=True, width=400)
    show(out, console=console)
    shown = console.export_text()
    assert "stopped: interrupted by SIGINT before the search finished" in shown
    assert shown.index("stopped:") < shown.index("winner:")
    # Continued to its end, the next write has no such line.
    run_study(tmp_path / "again", str(tmp_path / "again.db"))
    assert "STOPPED" not in (tmp_path / "again" / "best.yaml").read_text()


def test_a_candidate_without_a_fresh_run_says_what_judged_it(tmp_path: Path) -> None:
    # An empty "runs" cell read as a lost result (a held-out user on the CPU VM, 2026-11-28).
    out = tmp_path / "out"
    run_study(out, str(tmp_path / "study.db"))
    study = load_study(out)
    entries = [study_attrs.ConfirmationEntry(trial=2, baseline=False, search_throughput=1600.0,
                                             throughputs=(1500.0, 1550.0), median=1525.0,
                                             spread=0.03, statuses=("ok", "ok")),
               study_attrs.ConfirmationEntry(trial=0, baseline=True, search_throughput=800.0,
                                             throughputs=(790.0,), median=790.0, spread=None,
                                             statuses=("ok",)),
               study_attrs.ConfirmationEntry(trial=1, baseline=False, search_throughput=900.0,
                                             throughputs=(), median=None, spread=None,
                                             statuses=())]
    study_attrs.write_confirmation(study, entries)
    console = Console(record=True, width=200)
    show(out, console=console)
    text = console.export_text()
    assert "1.5k, 1.55k" in text and "none: judged by its search rate" in text


def test_a_baseline_read_low_in_the_search_is_said_under_the_table(tmp_path: Path) -> None:
    # A held-out user's baseline read 30.3k in the search and 44.1k fresh: a trial shown at
    # 1.38x ran 0.90x it fresh, and nothing said why (2-CPU VM, 2026-11-28).
    out = tmp_path / "out"
    run_study(out, str(tmp_path / "study.db"))
    study = load_study(out)

    def entries(base_fresh: float) -> list[study_attrs.ConfirmationEntry]:
        return [study_attrs.ConfirmationEntry(trial=2, baseline=False, search_throughput=1600.0,
                                              throughputs=(1500.0, 1550.0), median=1525.0,
                                              spread=0.03, statuses=("ok", "ok")),
                study_attrs.ConfirmationEntry(trial=0, baseline=True, search_throughput=800.0,
                                              throughputs=(base_fresh,), median=base_fresh,
                                              spread=None, statuses=("ok",))]

    for fresh, said in ((1200.0, True), (840.0, False)):
        study_attrs.write_confirmation(study, entries(fresh))
        console = Console(record=True, width=200)
        show(out, console=console)
        text = console.export_text()
        assert ("x base divides by the baseline's search reading" in text) is said, text
    assert ("x base divides by the baseline's search reading, 800; its fresh runs read 1.2k, so "
            "the search's ratios read 1.50x what they would against that") in " ".join(
                show_text(out, entries(1200.0), study).split())


def show_text(out: Path, entries: list[study_attrs.ConfirmationEntry], study: Any) -> str:
    study_attrs.write_confirmation(study, entries)
    console = Console(record=True, width=300)
    show(out, console=console)
    return console.export_text()


def test_a_study_with_no_trial_ok_shows_why_not_an_empty_table(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A held-out user's failed baseline: `show` printed an empty table and "1 error" (2026-11-28).
    failed = TrialResult(status=Status.ERROR, log="out/trials/0/log.txt",
                         reason="TypeError: adapter.loss must return a scalar tensor")
    monkeypatch.setitem(globals(), "OUTCOMES", [("baseline", TrainConfig(batch_size=8), failed)])
    out = tmp_path / "out"
    run_study(out, str(tmp_path / "study.db"), trials=1)
    console = Console(record=True, width=200)
    show(out, console=console)
    text = console.export_text()
    assert "#0 error: TypeError: adapter.loss must return a scalar tensor\n  log: " \
           "out/trials/0/log.txt" in text
    assert "samples/s |" not in text  # no empty table
