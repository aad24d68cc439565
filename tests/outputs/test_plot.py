"""The throughput plot: its points from a pure function, then a PNG."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from autotune.outputs.plot import PlotData, plot_data, save_plot

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def row(number: int, status: str, throughput: float | None = None, *, baseline: bool = False,
        batch_size: int = 8, amp_dtype: str = "fp32") -> dict[str, Any]:
    return {"number": number, "status": status, "throughput": throughput, "baseline": baseline,
            "batch_size": batch_size, "amp_dtype": amp_dtype}


ROWS = [
    row(3, "ok", 180.0, batch_size=16),  # out of order on purpose
    row(0, "ok", 100.0, baseline=True),
    row(1, "ok", 250.0, batch_size=32, amp_dtype="bf16"),
    row(2, "oom", batch_size=64),
    row(4, "timeout"),
    row(5, "running"),
    row(6, "", batch_size=16),
]


def test_plot_data() -> None:
    data = plot_data(ROWS, unit="samples")
    assert data.unit == "samples"
    assert data.ok == ((0, 100.0), (1, 250.0), (3, 180.0))
    assert data.failed == ((2, "oom"), (4, "timeout"))  # running and untold trials are not failures
    assert data.best_so_far == ((0, 100.0), (1, 250.0), (2, 250.0), (3, 250.0), (4, 250.0),
                                (5, 250.0), (6, 250.0))
    assert data.baseline == 100.0
    assert data.by_batch == ((8, 100.0, "fp32"), (32, 250.0, "bf16"), (16, 180.0, "fp32"))


def test_plot_data_best_so_far_starts_at_the_first_ok_trial() -> None:
    data = plot_data([row(0, "oom"), row(1, "ok", 5.0), row(2, "ok", 3.0)], unit="tokens")
    assert data.best_so_far == ((1, 5.0), (2, 5.0))
    assert data.baseline is None


def test_plot_data_without_ok_trials() -> None:
    data = plot_data([row(0, "error"), row(1, "crashed")], unit="samples")
    assert data == PlotData(unit="samples", ok=(), failed=((0, "error"), (1, "crashed")),
                            best_so_far=(), baseline=None, by_batch=())


def test_save_plot_writes_a_png(tmp_path: Path) -> None:
    path = tmp_path / "throughput.png"
    save_plot(plot_data(ROWS, unit="samples"), path)
    assert path.read_bytes()[:8] == PNG_SIGNATURE
    assert list(tmp_path.iterdir()) == [path]  # no temporary file left behind


def test_save_plot_without_ok_trials(tmp_path: Path) -> None:
    path = tmp_path / "throughput.png"
    save_plot(plot_data([row(0, "oom")], unit="samples"), path)
    assert path.read_bytes()[:8] == PNG_SIGNATURE
