"""The study's picture: its points from pure functions (trial rows, confirmation, the clock),
then a PNG."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import pytest

from autotune.outputs.draw import save_plot, title
from autotune.outputs.plot import Confirmed, plot_data, search_clock
from autotune.outputs.table import rows_to_csv
from autotune.study.store.study_attrs import ConfirmationEntry

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def row(number: int, status: str, throughput: float | None = None, *, baseline: bool = False,
        batch_size: int = 8, grad_accum: int = 1, amp_dtype: str = "fp32",
        compile: str = "none", duration: float = 10.0, allocated: float | None = None,
        rss: float | None = 500.0) -> dict[str, Any]:
    return {"number": number, "status": status, "throughput": throughput, "baseline": baseline,
            "batch_size": batch_size, "grad_accum": grad_accum, "amp_dtype": amp_dtype,
            "compile": compile, "duration_seconds": duration, "peak_allocated_mb": allocated,
            "peak_rss_mb": rss}


ROWS = [
    row(3, "ok", 180.0, batch_size=16),  # out of order on purpose
    row(0, "ok", 100.0, baseline=True),
    row(1, "ok", 250.0, batch_size=32, amp_dtype="bf16", duration=20.0),
    row(2, "oom", batch_size=64, duration=5.0),
    row(4, "timeout", duration=60.0),
    row(5, "running"),
    row(6, "", batch_size=16),
]


def entry(trial: int, runs: tuple[float, ...], median: float, *, baseline: bool = False
          ) -> ConfirmationEntry:
    return ConfirmationEntry(trial=trial, baseline=baseline, search_throughput=runs[0],
                             throughputs=runs, median=median, spread=None,
                             statuses=("ok",) * len(runs))


def test_points_follow_the_trials_in_order_without_running_or_untold_ones() -> None:
    data = plot_data(ROWS, unit="samples")
    assert [p.number for p in data.points] == [0, 1, 2, 3, 4]
    assert [p.number for p in data.ok] == [0, 1, 3]
    assert [p.status for p in data.points] == ["ok", "ok", "oom", "ok", "timeout"]
    assert data.points[2].throughput is None
    # Without the study's clock, the search's time is the trials' durations summed.
    assert [p.seconds for p in data.points] == [10.0, 30.0, 35.0, 45.0, 105.0]
    assert data.clock == "trial durations"
    assert data.best_so_far == ((10.0, 100.0), (30.0, 250.0), (45.0, 250.0))


def test_a_copy_of_an_earlier_trials_result_is_no_point_of_its_own() -> None:
    rows = [row(0, "ok", 100.0), {**row(1, "ok", 100.0), "reason": "same config as trial 0: "
                                  "not re-run"}]
    data = plot_data(rows, unit="samples")
    assert [p.number for p in data.points] == [0] and data.copies == 1
    assert title(data).startswith("2 trials, 1 ran ok (1 repeated an earlier config: not drawn)")


def test_a_config_refused_unrun_is_no_point_at_zero() -> None:
    # MobileNetV3 run 6 (H200, 2026-11-28): a compile estimated at 66 s with 34 s left, told
    # to the study as a timeout, was drawn at 0 beside the trial cut at its limit.
    rows = [row(0, "ok", 100.0), {**row(1, "timeout"), "reason": "not run: compiling and "
                                  "running it would take about 66 s, more than the 34 s left"},
            {**row(2, "timeout"), "reason": "killed at the 17 s trial limit"}]
    data = plot_data(rows, unit="samples")
    assert [p.number for p in data.points] == [0, 2] and data.not_run == 1
    assert title(data).startswith("3 trials, 1 ran ok (1 not run: not drawn)")


def test_the_baseline_keeps_its_real_trial_number() -> None:
    # After a resume the baseline need not be trial 0.
    rows = [row(0, "error"), row(1, "ok", 90.0), row(2, "ok", 120.0, baseline=True)]
    assert plot_data(rows, unit="samples").baseline == (2, 120.0)
    assert plot_data(rows[:2], unit="samples").baseline is None


def test_configs_differ_in_effective_batch_dtype_and_compile() -> None:
    # The case: bs 128 x accum 2 with compile, and bs 128 without, were one dot.
    rows = [row(0, "ok", 100.0, batch_size=128, grad_accum=2, compile="default",
                amp_dtype="bf16"),
            row(1, "ok", 90.0, batch_size=128)]
    a, b = plot_data(rows, unit="samples").points
    assert (a.effective_batch, a.batch_size, a.amp_dtype, a.compile) == (256, 128, "bf16",
                                                                         "default")
    assert (b.effective_batch, b.batch_size, b.amp_dtype, b.compile) == (128, 128, "fp32", "none")


def test_memory_is_the_device_peak_when_there_is_one_else_the_hosts() -> None:
    on_gpu = plot_data([row(0, "ok", 1.0, allocated=2048.0), row(1, "oom")], unit="samples")
    assert on_gpu.memory == "peak allocated"
    assert [p.peak_memory_gb for p in on_gpu.points] == [2.0, None]
    on_cpu = plot_data([row(0, "ok", 1.0, rss=1024.0)], unit="samples")
    assert on_cpu.memory == "peak RSS (host)" and on_cpu.points[0].peak_memory_gb == 1.0


def test_the_winner_and_the_confirmation_runs() -> None:
    confirmation = [entry(3, (200.0, 170.0), 185.0), entry(1, (150.0, 240.0), 195.0),
                    entry(0, (100.0, 102.0), 101.0, baseline=True)]
    data = plot_data(ROWS, unit="samples", confirmation=confirmation, winner=3)
    assert data.winner == 3
    assert [(c.trial, c.winner, c.baseline) for c in data.confirmed] == [
        (3, True, False), (1, False, False), (0, False, True)]
    assert data.confirmed[0].runs == (200.0, 170.0)
    timed_out = ConfirmationEntry(trial=0, baseline=True, search_throughput=1.0,
                                  throughputs=(1.0,), median=1.0, spread=None,
                                  statuses=("ok", "timeout"))
    assert plot_data(ROWS, unit="samples", confirmation=[timed_out]).confirmed[0].failed == 1
    assert data.confirmed[1].spread == pytest.approx(90.0 / 195.0)
    assert Confirmed(trial=0, runs=(5.0,), median=5.0, search=5.0, baseline=False,
                     winner=False).spread is None


def test_the_title_names_the_winner_and_its_ratio_unless_the_baseline_disagrees() -> None:
    agree = [entry(3, (200.0, 170.0), 185.0), entry(0, (99.0, 101.0), 100.0, baseline=True)]
    text = title(plot_data(ROWS, unit="samples", confirmation=agree, winner=3))
    assert text == ("5 trials, 3 ran ok\nwinner: trial 3, 185 samples/s (median of its "
                    "confirmation runs), 1.85x the baseline (trial 0)")
    # The case: the baseline's runs read 55 and 2.8k.
    disagree = [entry(3, (6_900.0, 14_600.0), 10_750.0),
                entry(0, (55.0, 2_800.0), 1_427.5, baseline=True)]
    text = title(plot_data(ROWS, unit="samples", confirmation=disagree, winner=3))
    assert text.endswith("not confirmed: the baseline's own runs disagree 50.9x")
    # What best.yaml says of the winner is said the same way.
    told = title(plot_data(ROWS, unit="samples", confirmation=disagree, winner=3,
                           standing="confidence low: tie within noise",
                           ratio_note="not confirmed: the baseline has no fresh run"))
    assert "(median of its confirmation runs), 7.53x the baseline (trial 0) · confidence low: " \
        "tie within noise\n" in told
    assert told.endswith("\nnot confirmed: the baseline has no fresh run")
    unconfirmed = title(plot_data(ROWS, unit="samples", winner=1))
    assert unconfirmed.endswith("trial 1, 250 samples/s (search measurement), 2.50x the "
                                "baseline (trial 0)")


def test_the_search_clock_counts_short_waits_and_skips_a_resume() -> None:
    spans = [(0, 1000.0, 1010.0), (1, 1012.0, 1020.0),  # a 2 s wait between trials: counted
             (2, 5000.0, 5030.0),                        # the study resumed hours later
             (3, 5029.0, 5040.0)]                        # overlapping (another process)
    ends, resumes = search_clock(spans)
    assert ends == {0: 10.0, 1: 20.0, 2: 50.0, 3: 60.0}
    assert resumes == (20.0,)
    data = plot_data([row(n, "ok", 10.0 * (n + 1)) for n in range(4)], unit="samples",
                     ends=ends, resumes=resumes)
    assert [p.seconds for p in data.points] == [10.0, 20.0, 50.0, 60.0]
    assert data.clock == "wall-clock" and data.resumes == (20.0,)


def test_rows_read_back_from_trials_csv_give_the_same_points(tmp_path: Path) -> None:
    text = rows_to_csv([{**r, "state": "COMPLETE"} for r in ROWS])
    read = list(csv.DictReader(text.splitlines()))
    assert plot_data(read, unit="samples") == plot_data(ROWS, unit="samples")


def test_without_ok_trials() -> None:
    data = plot_data([row(0, "error"), row(1, "crashed")], unit="samples")
    assert data.ok == () and data.best_so_far == () and data.baseline is None
    assert [p.status for p in data.points] == ["error", "crashed"]


@pytest.mark.parametrize("rows", [ROWS, [row(0, "oom")], []], ids=["mixed", "all-oom", "none"])
def test_save_plot_writes_a_png(tmp_path: Path, rows: list[dict[str, Any]]) -> None:
    path = tmp_path / "throughput.png"
    confirmation = [entry(3, (200.0, 170.0), 185.0), entry(0, (99.0, 101.0), 100.0,
                                                          baseline=True)]
    save_plot(plot_data(rows, unit="samples", confirmation=confirmation, winner=3), path)
    assert path.read_bytes()[:8] == PNG_SIGNATURE
    assert list(tmp_path.iterdir()) == [path]  # no temporary file left behind


def test_the_winners_star_sits_at_its_search_reading_and_names_its_fresh_median() -> None:
    # A held-out user's baseline won at 3.6k fresh; its star sat at the 125 it read in the
    # search beside a pytest, under a title saying 3.6k (2026-11-28).
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    from autotune.outputs.draw import _over_time

    def labels(median: float) -> list[str]:
        data = plot_data(ROWS, unit="samples", winner=3,
                         confirmation=[entry(3, (median, median), median)])
        fig, ax = plt.subplots()
        try:
            _over_time(ax, data)
            return ax.get_legend_handles_labels()[1]
        finally:
            plt.close(fig)

    assert "winner (trial 3, 3.6k fresh)" in labels(3600.0)
    assert "winner (trial 3)" in labels(185.0)  # within a tenth of its search reading (180)
