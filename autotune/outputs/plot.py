"""The throughput curve: points computed in a pure function, drawn in another (optuna's way)."""

from __future__ import annotations

import dataclasses
import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from autotune.contract.files import atomic_write_bytes

__all__ = ["PlotData", "plot_data", "save_plot"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class PlotData:
    unit: str
    ok: tuple[tuple[int, float], ...]
    """(trial number, throughput) of trials that ran."""
    failed: tuple[tuple[int, str], ...]
    """(trial number, status) of trials that did not."""
    best_so_far: tuple[tuple[int, float], ...]
    """Running maximum over trial numbers, one point per trial."""
    baseline: float | None
    by_batch: tuple[tuple[int, float, str], ...]
    """(batch size, throughput, amp dtype) of trials that ran."""


def plot_data(rows: Sequence[dict[str, Any]], *, unit: str) -> PlotData:
    rows = sorted(rows, key=lambda r: r["number"])
    ok, failed, best_so_far, by_batch = [], [], [], []
    best = None
    baseline = None
    for r in rows:
        if r["status"] == "ok" and r["throughput"] is not None:
            ok.append((r["number"], float(r["throughput"])))
            by_batch.append((int(r["batch_size"]), float(r["throughput"]), str(r["amp_dtype"])))
            best = max(best or 0.0, float(r["throughput"]))
            if r["baseline"]:
                baseline = float(r["throughput"])
        elif r["status"] not in ("", "running"):
            failed.append((r["number"], str(r["status"])))
        if best is not None:
            best_so_far.append((r["number"], best))
    return PlotData(unit=unit, ok=tuple(ok), failed=tuple(failed), best_so_far=tuple(best_so_far),
                    baseline=baseline, by_batch=tuple(by_batch))


def save_plot(data: PlotData, path: Path) -> None:
    try:
        import matplotlib
    except ImportError as exc:
        raise ImportError(
            "the throughput plot needs matplotlib: pip install matplotlib"
        ) from exc
    matplotlib.use("Agg")  # files only; no display needed
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator, ScalarFormatter

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5))
    per_s = f"{data.unit}/s"
    if data.ok:
        xs, ys = zip(*data.ok)
        ax1.scatter(xs, ys, s=22, color="tab:blue", label="trial", zorder=3)
    if data.best_so_far:
        xs, ys = zip(*data.best_so_far)
        ax1.step(xs, ys, where="post", color="tab:green", label="best so far")
    if data.baseline is not None:
        ax1.axhline(data.baseline, color="gray", linestyle="--", label="baseline (trial 0)")
    markers = {"oom": "tab:red", "timeout": "tab:orange", "nan": "tab:purple"}
    for status in sorted({s for _, s in data.failed}):
        xs = [n for n, s in data.failed if s == status]
        ax1.scatter(xs, [0] * len(xs), marker="x", color=markers.get(status, "black"),
                    label=status, zorder=3, clip_on=False)
    ax1.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax1.set_xlabel("trial")
    ax1.set_ylabel(per_s)
    ax1.set_ylim(bottom=0)
    ax1.set_title("Throughput per trial")
    ax1.legend(loc="lower right", fontsize=8)
    ax1.grid(alpha=0.3)

    for dtype in sorted({d for _, _, d in data.by_batch}):
        pts = [(b, t) for b, t, d in data.by_batch if d == dtype]
        ax2.scatter(*zip(*pts), s=22, label=dtype)
    if data.by_batch:
        ax2.set_xscale("log", base=2)
        ax2.xaxis.set_major_formatter(ScalarFormatter())
        ax2.legend(title="amp_dtype", fontsize=8)
    ax2.set_xlabel("batch size")
    ax2.set_ylabel(per_s)
    ax2.set_ylim(bottom=0)
    ax2.set_title("Throughput against batch size")
    ax2.grid(alpha=0.3)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    atomic_write_bytes(path, buf.getvalue())
