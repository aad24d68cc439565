"""Live progress: the rich display prints one line per finished trial (to a console writing
into a string here), keeps a status line, and reports the winner; the quiet listener says
nothing."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from optuna.trial import TrialState
from rich.console import Console
from rich.text import Text

from autotune import Noise, Status, TrainConfig, TrialResult
from autotune.contract.events import FirstStepEvent, PhaseEvent, WindowEvent
from autotune.contract.noise import OtherProcess
from autotune.outputs.display import QuietListener, RichDisplay, make_console
from autotune.study.confirmation.candidate import Candidate
from autotune.study.confirmation.winner import Winner
from autotune.study.search import SearchSettings
from autotune.study.store.records import TrialRecord
from autotune.study.store.study_attrs import ConfirmationEntry

BASE = TrainConfig(batch_size=8)
FAST = TrainConfig(batch_size=32, num_workers=2, amp_dtype="bf16")


def console() -> Console:
    return Console(file=io.StringIO(), width=200, color_system=None)


def printed(display: RichDisplay) -> str:
    return " ".join(display.console.file.getvalue().split())  # type: ignore[attr-defined]


def winner(number: int, throughput: float, baseline: float | None,
           confirmation: list[ConfirmationEntry] | None = None) -> Winner:
    rec = TrialRecord(number=number, state=TrialState.COMPLETE, value=throughput, config=FAST,
                      result=TrialResult(status=Status.OK, throughput=throughput))
    return Winner(rec, throughput, baseline, confirmation)


def finish(display: RichDisplay, number: int, config: TrainConfig, result: TrialResult,
           best: Winner | None = None) -> str:
    before = len(printed(display))
    display.trial_started(number, config, 300.0)
    display.trial_finished(number, result, best)
    return printed(display)[before:].strip()


# -- one line per finished trial ----------------------------------------------------------------------


def test_an_ok_trial_line() -> None:
    display = RichDisplay(console())
    line = finish(display, 0, BASE, TrialResult(status=Status.OK, throughput=800.0,
                                                converged=True, duration_seconds=12.4))
    assert line == "#0 ok 800 samples/s bs=8 fp32 [12 s]"


def test_an_ok_trial_against_the_baseline_with_compile_and_noise() -> None:
    display = RichDisplay(console())
    result = TrialResult(status=Status.OK, throughput=2400.0, unit="tokens", converged=False,
                         compile_seconds=31.0, duration_seconds=55.0)
    line = finish(display, 3, FAST, result, winner(3, 2400.0, 800.0))
    # Eager: its first step's extra seconds are no compile (a held-out user read them as one).
    assert line == ("#3 ok 2.4k tokens/s 3.00x (not converged) bs=32 workers=2 bf16 "
                    "[55 s, first step 31 s]")
    compiled = finish(RichDisplay(console()), 4, FAST.replace(compile="default"), result,
                      winner(4, 2400.0, 800.0))
    assert compiled.endswith("bs=32 workers=2 bf16 compile=default [55 s, compile 31 s]")


def test_an_ok_trial_whose_windows_climbed_says_how_many_were_dropped() -> None:
    display = RichDisplay(console())
    result = TrialResult(status=Status.OK, throughput=1200.0, converged=True, rising_windows=4,
                         duration_seconds=30.0)
    line = finish(display, 2, BASE, result)
    assert line == ("#2 ok 1.2k samples/s (still climbing: 4 early window(s) dropped) bs=8 fp32 "
                    "[30 s]")


def test_an_ok_trial_says_how_many_windows_ran_a_shape_first() -> None:
    result = TrialResult(status=Status.OK, throughput=1200.0, converged=True,
                         new_shape_windows=3, duration_seconds=30.0)
    line = finish(RichDisplay(console()), 2, BASE, result)
    assert line == "#2 ok 1.2k samples/s (3 window(s) of new shapes: first runs' cost left out) bs=8 fp32 [30 s]"


def test_a_duplicate_says_so_instead_of_its_cost() -> None:
    display = RichDisplay(console())
    result = TrialResult(status=Status.OK, throughput=800.0, converged=True,
                         reason="same config as trial 0: not re-run")
    line = finish(display, 4, BASE, result)
    assert line.endswith("bs=8 fp32 (same config as trial 0: not re-run)")


@pytest.mark.parametrize("status", [Status.OOM, Status.NAN, Status.ERROR, Status.TIMEOUT,
                                    Status.CRASHED, Status.INTERRUPTED])
def test_a_failed_trial_line_keeps_status_config_and_reason_apart(status: Status) -> None:
    display = RichDisplay(console())
    line = finish(display, 1, FAST, TrialResult(status=status, reason="what happened"))
    assert line == f"#1 {status.value} bs=32 workers=2 bf16 what happened"


# -- the status line ---------------------------------------------------------------------------------


def status_line(display: RichDisplay) -> str:
    text = display.__rich__()
    assert isinstance(text, Text)
    return " ".join(text.plain.split())


def test_status_line_follows_the_running_trial_its_phase_and_the_best() -> None:
    display = RichDisplay(console())
    display.total = 5
    display.trial_started(2, FAST, 120.0)
    assert "trial 1/5" in status_line(display)
    assert "running #2 bs=32 workers=2 bf16 (limit 120 s) [start 0 s: starting; trial 0 s]" \
        in status_line(display)
    display.trial_event(2, PhaseEvent(phase="first_batch", time=0.0))
    assert "[first_batch 0 s: waiting for the first batch;" in status_line(display)
    display.trial_event(2, PhaseEvent(phase="warmup", time=0.0))
    assert "[warmup 0 s: warming up;" in status_line(display)
    display.trial_event(2, PhaseEvent(phase="windows", time=0.0))
    display.trial_event(2, WindowEvent(throughput=1500.0))
    display.trial_event(2, WindowEvent(throughput=1600.0))
    assert "[windows 0 s: window 2: 1.6k/s;" in status_line(display)
    display.trial_event(2, PhaseEvent(phase="diagnosis", time=0.0))
    assert "[diagnosis 0 s: diagnosing: the loader alone, the model alone;" in status_line(display)
    display.trial_finished(2, TrialResult(status=Status.OK, throughput=1600.0),
                           winner(2, 1600.0, 800.0))
    line = status_line(display)
    assert "trial 2/5" in line and "best #2 1.6k items/s (2.00x baseline)" in line
    assert "running" not in line


def test_status_line_says_compiling_until_the_first_step_is_done() -> None:
    display = RichDisplay(console())
    display.trial_started(0, TrainConfig(batch_size=8, compile="default"), 60.0)
    display.trial_event(0, PhaseEvent(phase="warmup", time=0.0))
    assert "[warmup 0 s: compiling (the first step);" in status_line(display)
    display.trial_event(0, FirstStepEvent(seconds=20.0))
    assert "[warmup 0 s: warming up;" in status_line(display)


# -- piped or logged: plain lines ------------------------------------------------------------------------


def test_piped_output_is_never_wrapped_and_has_no_live_line(tmp_path: Path) -> None:
    out = io.StringIO()
    display = RichDisplay(make_console(file=out))
    assert display.plain and not display.console.is_terminal
    long = TrainConfig(batch_size=32, grad_accum=2, num_workers=8, prefetch_factor=4,
                       pin_memory=True, persistent_workers=True, amp_dtype="bf16",
                       compile="reduce-overhead", checkpoint=0.5, expandable_segments=True)
    display.started(settings(tmp_path), 0, "samples")
    assert display.live is None
    display.trial_started(7, long, 300.0)
    display.trial_finished(7, TrialResult(status=Status.OK, throughput=2400.0, converged=True,
                                          duration_seconds=40.0), None)
    display.finished(None)
    lines = out.getvalue().splitlines()
    trial_line = next(line for line in lines if line.startswith("#7"))
    assert len(trial_line) > 80 and trial_line.endswith("[40 s]")  # one line, not wrapped
    assert trial_line.split("samples/s")[1].strip().startswith(long.describe())
    assert "\x1b[" not in out.getvalue()  # no terminal codes


def test_a_terminal_gets_rich_console_and_the_live_line(tmp_path: Path) -> None:
    display = RichDisplay(Console(file=io.StringIO(), force_terminal=True, width=100))
    assert not display.plain
    display.started(settings(tmp_path), 0, "samples")
    try:
        assert display.live is not None
    finally:
        display.finished(None)
    assert display.live is None


def test_a_search_interrupted_before_any_trial_ended_is_not_called_a_failure(
        tmp_path: Path) -> None:
    # Ctrl-C during the baseline printed "no trial ran ok after 0:11; see the reasons above"
    # (2026-11-28): the CLI's "interrupted by SIGINT" line says what happened.
    out = io.StringIO()
    display = RichDisplay(make_console(file=out))
    display.started(settings(tmp_path), 0, "samples")
    display.finished(None, interrupted=True)
    assert "no trial ran ok" not in out.getvalue()
    display.finished(None)
    assert "no trial ran ok" in out.getvalue()


# -- the search's start and end ----------------------------------------------------------------------


def settings(tmp_path: Path) -> SearchSettings:
    return SearchSettings(adapter=Path("adapters/mlp.py"), space_source="cpu.yaml",
                          device="cpu", out=tmp_path / "out", storage=str(tmp_path / "s.db"),
                          study_name="mlp", trials=5)


def test_started_and_finished(tmp_path: Path) -> None:
    display = RichDisplay(console())
    display.started(settings(tmp_path), 2, "samples")
    text = printed(display)
    assert "autotune search adapter=adapters/mlp.py device=cpu study='mlp'" in text
    assert "(2 trial(s) done before)" in text
    assert display.total == 5 and display.done == 2 and display.unit == "samples"
    display.finished(winner(3, 2400.0, 800.0))
    assert "best: trial #3, 2.4k samples/s, 3.00x the baseline (" in printed(display)


def test_finished_with_a_confirmed_winner_and_without_one() -> None:
    display = RichDisplay(console())
    entry = ConfirmationEntry(trial=3, baseline=False, search_throughput=2500.0,
                              throughputs=(2400.0,), median=2400.0, spread=None, statuses=("ok",))
    display.finished(winner(3, 2400.0, None, [entry]))
    assert "best: trial #3, 2.4k items/s (confirmed by repeated runs)" in printed(display)
    display.finished(None)
    assert "no trial ran ok" in printed(display) and "trials/<n>/log.txt" in printed(display)


def test_a_ratio_to_a_baseline_whose_runs_disagree_is_not_called_confirmed() -> None:
    # The numbers: the baseline's confirmation runs read 55 and 2.8k samples/s.
    display = RichDisplay(console())
    display.unit = "samples"
    entries = [ConfirmationEntry(trial=3, baseline=False, search_throughput=5000.0,
                                 throughputs=(6900.0, 14600.0), median=10750.0, spread=0.72,
                                 statuses=("ok", "ok")),
               ConfirmationEntry(trial=0, baseline=True, search_throughput=800.0,
                                 throughputs=(55.0, 2800.0), median=1427.5, spread=1.92,
                                 statuses=("ok", "ok"))]
    display.finished(winner(3, 10750.0, 1427.5, entries))
    text = printed(display)
    assert "7.53x the baseline (not confirmed: the baseline's own runs disagree 50.9x)" in text
    assert "confirmed by repeated runs" not in text


def test_confirmation_lines() -> None:
    display = RichDisplay(console())
    display.unit = "samples"
    cands = [Candidate(trial=3, config=FAST, search_throughput=2500.0, duration_seconds=10.0),
             Candidate(trial=0, config=BASE, search_throughput=800.0, duration_seconds=5.0,
                       baseline=True)]
    display.confirm_started(cands, 2)
    display.confirm_result(cands[0], TrialResult(status=Status.OK, throughput=2400.0))
    display.confirm_result(cands[1], TrialResult(status=Status.OOM, reason="out of memory"))
    text = printed(display)
    assert ("confirming #3, #0 (baseline): shuffled rounds of fresh runs until the lead is clear "
            "(2 for the leader, one for a config behind)") in text
    assert "#3 2.4k samples/s (search measured 2.5k)" in text
    assert "#0 oom out of memory (search measured 800)" in text


def test_a_confirmation_announced_with_no_run_says_the_budget_ended() -> None:
    # A 2-CPU VM: "confirming #1: ..." and then the winner "not confirmed", with no word of
    # why nothing ran.
    display = RichDisplay(console())
    display.unit = "samples"
    cand = Candidate(trial=1, config=FAST, search_throughput=15400.0, duration_seconds=49.0)
    display.confirm_started([cand], 2)
    display.finished(winner(1, 15400.0, None))
    text = printed(display)
    assert ("no fresh run started: the search's budget (--timeout) had too little time left "
            "for one") in text
    assert text.index("no fresh run started") < text.index("best: trial #1")
    # Runs that did start say nothing of the kind.
    ran = RichDisplay(console())
    ran.confirm_started([cand], 2)
    ran.confirm_result(cand, TrialResult(status=Status.OK, throughput=15000.0))
    ran.finished(winner(1, 15000.0, None))
    assert "no fresh run started" not in printed(ran)
    # Stopped by Ctrl-C before a run ended: the interruption, not the budget.
    stopped = RichDisplay(console())
    stopped.confirm_started([cand], 2)
    stopped.finished(winner(1, 15400.0, None), interrupted=True)
    assert "no fresh run started" not in printed(stopped)


def test_a_cnn_in_a_space_without_channels_last_is_told_at_its_first_trial() -> None:
    # A held-out MobileNetV3 (H200): the note came after a 540-s search; an expert's
    # channels_last config ran 1.135x its winner side by side.
    display = RichDisplay(console())
    display.unit = "images"
    display.memory_formats = ("contiguous",)
    convs = TrialResult(status=Status.OK, throughput=577.0, conv_weights=62)
    display.trial_finished(0, convs, None)
    display.trial_finished(1, convs, None)
    text = printed(display)
    assert text.count("note: the model has 62 convolution weights and this space does not "
                      "search memory_format: the default space does") == 1
    searched = RichDisplay(console())
    searched.memory_formats = ("contiguous", "channels_last")
    searched.trial_finished(0, convs, None)
    only = RichDisplay(console())  # a space that holds channels_last alone searches it
    only.memory_formats = ("channels_last",)
    only.trial_finished(0, convs, None)
    assert "note:" not in printed(only)
    plain = RichDisplay(console())
    plain.memory_formats = ("contiguous",)
    plain.trial_finished(0, TrialResult(status=Status.OK, throughput=1.0, conv_weights=0), None)
    assert "note:" not in printed(searched) + printed(plain)


def test_noisy_confirmation_runs_get_a_warning_naming_the_measured_cause() -> None:
    display = RichDisplay(console())
    display.unit = "samples"
    cand = Candidate(trial=3, config=FAST, search_throughput=2500.0, duration_seconds=10.0)
    steady = Candidate(trial=0, config=BASE, search_throughput=800.0, duration_seconds=5.0,
                       baseline=True)
    busy = Noise(seconds=10.0, cpus=2, other_cpu_seconds=16.0,
                 busiest=(OtherProcess(name="python3", pid=4242, cpu_seconds=12.0),))
    display.confirm_started([cand, steady], 2)
    display.confirm_result(cand, TrialResult(status=Status.OK, throughput=6900.0, noise=busy))
    display.confirm_result(steady, TrialResult(status=Status.OK, throughput=800.0))
    display.confirm_result(cand, TrialResult(status=Status.OK, throughput=14600.0))
    display.confirm_result(steady, TrialResult(status=Status.OK, throughput=810.0))
    display.finished(winner(3, 10750.0, 805.0))
    text = printed(display)
    assert ("warning: trial #3: runs disagree by 2.12x (6.9k to 14.6k samples/s); likely cause: "
            "run 1: other processes kept 1.6 of the trial's 2 CPUs busy (busiest: python3 "
            "(pid 4242) 1.2)") in text
    assert "trial #0:" not in text  # its runs agree


def test_an_unconverged_trial_names_the_measured_cause() -> None:
    display = RichDisplay(console())
    busy = Noise(seconds=4.0, cpus=2, other_cpu_seconds=6.0)
    line = finish(display, 5, BASE, TrialResult(status=Status.OK, throughput=800.0,
                                                converged=False, noise=busy,
                                                duration_seconds=9.0))
    assert line == ("#5 ok 800 samples/s (not converged: likely other processes kept 1.5 of "
                    "the trial's 2 CPUs busy) bs=8 fp32 [9 s]")
    # Converged beside other work: a steady reading of a slowed step, said as such.
    line = finish(display, 6, BASE, TrialResult(status=Status.OK, throughput=125.0,
                                                converged=True, noise=busy, duration_seconds=8.0))
    assert line == ("#6 ok 125 samples/s (measured while other processes kept 1.5 of the "
                    "trial's 2 CPUs busy) bs=8 fp32 [8 s]")


# -- quiet -----------------------------------------------------------------------------------------------


def test_quiet_listener_says_nothing(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    quiet = QuietListener()
    quiet.started(None, 0, "samples")
    quiet.trial_started(0, BASE, 60.0)
    quiet.trial_event(0, WindowEvent(throughput=1.0))
    quiet.trial_finished(0, TrialResult(status=Status.OK, throughput=1.0), winner(0, 1.0, 1.0))
    quiet.confirm_started([], 2)
    quiet.confirm_result(Candidate(trial=0, config=BASE, search_throughput=1.0,
                                   duration_seconds=1.0), TrialResult(status=Status.OK,
                                                                      throughput=1.0))
    quiet.finished(None)
    assert capsys.readouterr() == ("", "")
