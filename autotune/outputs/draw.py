"""Draw `PlotData` into throughput.png: four panels, one encoding of a config throughout.

Colour is the AMP dtype, marker shape the compile mode, a hollow marker an accumulated batch
(grad_accum > 1): two configs that differ in any of these never look like one dot.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from autotune.contract.files import atomic_write_bytes
from autotune.contract.fmt import human
from autotune.outputs.plot import PlotData, Point

__all__ = ["save_plot", "title"]

DTYPE_COLOURS = {"fp32": "tab:blue", "tf32": "tab:cyan", "bf16": "tab:orange",
                 "fp16": "tab:purple"}
COMPILE_MARKERS = {"none": "o", "default": "s", "reduce-overhead": "^", "max-autotune": "D",
                   "max-autotune-no-cudagraphs": "v"}
FAILED_COLOURS = {"oom": "tab:red", "timeout": "tab:orange", "nan": "tab:purple",
                  "interrupted": "tab:gray"}
WINNER, BASELINE = "gold", "dimgray"
DISAGREE = 2.0
"""Runs of the baseline this far apart (fastest over slowest) leave no ratio to it standing."""


def save_plot(data: PlotData, path: Path) -> None:
    """Render the four panels into a PNG at `path`, written atomically."""
    try:
        import matplotlib
    except ImportError as exc:
        raise ImportError("the throughput plot needs matplotlib: pip install matplotlib") from exc
    matplotlib.use("Agg")  # files only; no display needed
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    fig, axes = plt.subplots(2, 2, figsize=(13, 9))
    _over_time(axes[0][0], data)
    _confirmation(axes[0][1], data)
    _by_batch(axes[1][0], data)
    _memory(axes[1][1], data)
    for ax in (axes[0][0], axes[0][1], axes[1][0]):  # rates as 416k, not 416000
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: human(v) if v else "0"))
    fig.suptitle(title(data), fontsize=11)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    atomic_write_bytes(path, buf.getvalue())


def title(data: PlotData) -> str:
    """The figure's headline: the winner, its rate and its ratio to the baseline (said not to
    be confirmed when the baseline's own runs disagree)."""
    ran = sum(1 for p in data.points if p.status == "ok")
    text = f"{len(data.points) + data.copies + data.not_run} trials, {ran} ran ok"
    unseen = [f"{data.copies} repeated an earlier config"] if data.copies else []
    unseen += [f"{data.not_run} not run"] if data.not_run else []
    if unseen:
        text += f" ({', '.join(unseen)}: not drawn)"
    win = next((p for p in data.points if p.number == data.winner), None)
    if win is None or win.throughput is None:
        return text
    confirmed = next((c for c in data.confirmed if c.winner and c.median), None)
    value = confirmed.median if confirmed else win.throughput
    how = "median of its confirmation runs" if confirmed else "search measurement"
    text += f"\nwinner: trial {win.number}, {human(value)} {data.unit}/s ({how})"
    base_runs = next((c for c in data.confirmed if c.baseline and c.median), None)
    base = base_runs.median if confirmed and base_runs else \
        (data.baseline[1] if data.baseline and not confirmed else None)
    if base and data.baseline:
        text += f", {value / base:.2f}x the baseline (trial {data.baseline[0]})"
    if data.standing:
        text += f" · {data.standing}"
    if base and data.baseline:
        runs = base_runs.runs if confirmed and base_runs else ()
        if data.ratio_note:
            text += f"\n{data.ratio_note}"
        elif runs and min(runs) > 0 and max(runs) / min(runs) >= DISAGREE:
            text += (f"\nnot confirmed: the baseline's own runs disagree "
                     f"{max(runs) / min(runs):.1f}x")
    return text


def _over_time(ax: Any, data: PlotData) -> None:
    minutes = max((p.seconds for p in data.points), default=0.0) > 600
    scale = 60.0 if minutes else 1.0
    ok = [p for p in data.points if p.status == "ok" and p.throughput is not None]
    pruned = [p for p in data.points if p.status == "pruned" and p.throughput is not None]
    if ok:
        ax.scatter([p.seconds / scale for p in ok], [p.throughput for p in ok], s=26,
                   color="tab:blue", label="trial", zorder=3)
    if pruned:
        ax.scatter([p.seconds / scale for p in pruned], [p.throughput for p in pruned], s=26,
                   facecolors="none", edgecolors="tab:gray", label="pruned (partial rate)",
                   zorder=3)
    if data.best_so_far:
        xs, ys = zip(*data.best_so_far)
        last = max(p.seconds for p in data.points)
        ax.step([x / scale for x in (*xs, last)], [*ys, ys[-1]], where="post",
                color="tab:green", label="best so far")
    if data.baseline is not None:
        ax.axhline(data.baseline[1], color=BASELINE, linestyle="--",
                   label=f"baseline (trial {data.baseline[0]})")
    for status in sorted({p.status for p in data.points} - {"ok", "pruned"}):
        xs = [p.seconds / scale for p in data.points if p.status == status]
        ax.scatter(xs, [0] * len(xs), marker="x", color=FAILED_COLOURS.get(status, "black"),
                   label=status, zorder=4, clip_on=False)
    for i, resume in enumerate(data.resumes):
        ax.axvline(resume / scale, color="tab:gray", linestyle=":",
                   label="study resumed" if i == 0 else None)
    win = next((p for p in ok if p.number == data.winner), None)
    if win is not None:
        # At its search reading; its fresh runs' median, where that differs, in the label (a
        # held-out user's baseline won at 3.6k, its star drawn at the 125 read beside a pytest).
        fresh = next((c.median for c in data.confirmed if c.winner and c.median), None)
        said = f", {human(fresh)} fresh" if fresh and abs(fresh / win.throughput - 1) > 0.1 else ""
        ax.scatter([win.seconds / scale], [win.throughput], marker="*", s=260, color=WINNER,
                   edgecolors="black", linewidths=0.6,
                   label=f"winner (trial {win.number}{said})", zorder=5)
    if len(ok) + len(pruned) <= 40:  # numbers to find a point in trials.csv
        for p in ok + pruned:
            ax.annotate(str(p.number), (p.seconds / scale, p.throughput), fontsize=7,
                        xytext=(4, 3), textcoords="offset points", color="dimgray")
    unit = "min" if minutes else "s"
    how = "wall-clock" if data.clock == "wall-clock" else "trial durations summed"
    ax.set_xlabel(f"search time, {unit} ({how}; each trial at its end)")
    ax.set_ylabel(f"{data.unit}/s")
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    ax.set_title("What the search's time bought")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="best", fontsize=7)
    ax.grid(alpha=0.3)


def _confirmation(ax: Any, data: PlotData) -> None:
    ax.set_title("Confirmation: fresh re-runs of the leaders and the baseline")
    ax.set_ylabel(f"{data.unit}/s")
    ax.grid(alpha=0.3, axis="y")
    if not data.confirmed:
        ax.text(0.5, 0.5, "no confirmation runs\n(--confirm 0, stopped early, or stale after "
                "new trials)", ha="center", va="center", transform=ax.transAxes, color="dimgray")
        ax.set_xticks([])
        ax.set_yticks([])
        return
    for i, c in enumerate(data.confirmed):
        colour = WINNER if c.winner else BASELINE if c.baseline else "tab:blue"
        if c.runs:
            ax.vlines(i, min(c.runs), max(c.runs), color=colour, linewidth=2, alpha=0.6)
            ax.scatter([i] * len(c.runs), c.runs, s=30, color=colour, edgecolors="black",
                       linewidths=0.5, zorder=3, label="run" if i == 0 else None)
        if c.median:
            ax.hlines(c.median, i - 0.25, i + 0.25, color="black", linewidth=1.5,
                      label="median" if i == 0 else None)
        if c.failed:  # a run that did not end ok: at the bottom, like a failed trial
            ax.scatter([i] * c.failed, [0] * c.failed, marker="x", color="tab:red", zorder=4,
                       clip_on=False, label="run not ok" if not any(
                           d.failed for d in data.confirmed[:i]) else None)
        ax.scatter([i + 0.3], [c.search], marker="D", s=28, facecolors="none",
                   edgecolors="tab:gray", zorder=3, label="search measured" if i == 0 else None)
        if c.spread is not None:
            ax.annotate(f"spread {c.spread:.0%}", (i, max(c.runs)), fontsize=7, ha="center",
                        xytext=(0, 6), textcoords="offset points")
    ax.set_xticks(range(len(data.confirmed)),
                  [f"trial {c.trial}\n" + ", ".join(["winner"] * c.winner + ["baseline"] * c.baseline)
                   for c in data.confirmed], fontsize=8)
    ax.set_xlim(-0.6, len(data.confirmed) - 0.4)
    top = max((v for c in data.confirmed for v in (*c.runs, c.search)), default=1.0)
    ax.set_ylim(0, 1.12 * top)  # room for the spread labels
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="best", fontsize=7)


def _configs(ax: Any, points: list[Point], x: Any, y: Any) -> None:
    """Points in the one encoding: colour = dtype, marker = compile, hollow = accumulated."""
    for p in points:
        colour = DTYPE_COLOURS.get(p.amp_dtype, "black")
        ax.scatter([x(p)], [y(p)], s=34, marker=COMPILE_MARKERS.get(p.compile, "P"),
                   facecolors="none" if p.grad_accum > 1 else colour, edgecolors=colour,
                   linewidths=1.3, zorder=3)


def _legend(ax: Any, data: PlotData, points: list[Point], *, oom: bool = False) -> None:
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], marker="o", linestyle="", color=DTYPE_COLOURS.get(d, "black"),
                      label=d) for d in sorted({p.amp_dtype for p in points})]
    handles += [Line2D([], [], marker=COMPILE_MARKERS.get(c, "P"), linestyle="", color="black",
                       label=f"compile {c}") for c in sorted({p.compile for p in points})]
    if any(p.grad_accum > 1 for p in points):
        handles.append(Line2D([], [], marker="o", linestyle="", markerfacecolor="none",
                              color="black", label="hollow: grad_accum > 1"))
    if any(p.number == data.winner for p in points):
        handles.append(Line2D([], [], marker="o", markersize=12, linestyle="",
                              markerfacecolor="none", markeredgecolor=WINNER,
                              markeredgewidth=2.5, label=f"winner (trial {data.winner})"))
    if oom:
        handles.append(Line2D([], [], marker="x", linestyle="", color=FAILED_COLOURS["oom"],
                              label="out of memory"))
    ax.legend(handles=handles, fontsize=7, loc="best")


def _mark(ax: Any, data: PlotData, points: list[Point], x: Any, y: Any) -> None:
    """A ring around the winner (its own marker stays readable) and each trial's number."""
    for p in points:
        if p.number == data.winner:
            ax.scatter([x(p)], [y(p)], marker="o", s=300, facecolors="none", edgecolors=WINNER,
                       linewidths=2.5, zorder=2)
        if len(points) <= 40:
            ax.annotate(str(p.number), (x(p), y(p)), fontsize=7, xytext=(5, 3),
                        textcoords="offset points", color="dimgray")


def _dodge(points: list[Point], x: Any) -> dict[int, float]:
    """Each trial's x, spread a little around its batch size when several share it (in trial
    order), so that configs of one batch size do not hide each other."""
    groups: dict[int, list[Point]] = {}
    for p in points:
        groups.setdefault(x(p), []).append(p)
    out: dict[int, float] = {}
    for value, group in groups.items():
        step = min(0.06, 0.5 / len(group))  # in octaves: the group stays within +-1/4 octave
        for i, p in enumerate(sorted(group, key=lambda p: p.number)):
            out[p.number] = value * 2 ** ((i - (len(group) - 1) / 2) * step)
    return out


def _log2_batches(ax: Any, values: list[int]) -> None:
    """A log2 axis with a tick at each batch size, all of `values` in view (OOM marks too)."""
    from matplotlib.ticker import FixedLocator, NullLocator, ScalarFormatter

    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(FixedLocator(sorted(set(values))))
    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.xaxis.set_minor_locator(NullLocator())
    lo, hi = min(values), max(values)
    ax.set_xlim(lo / 2**0.5, hi * 2**0.5)


def _by_batch(ax: Any, data: PlotData) -> None:
    ok = [p for p in data.points if p.status == "ok" and p.throughput is not None]
    ax.set_title("Throughput against the effective batch (batch_size x grad_accum)")
    ax.set_xlabel("effective batch")
    ax.set_ylabel(f"{data.unit}/s")
    ax.grid(alpha=0.3)
    if not ok:
        return
    xs = _dodge(ok, lambda p: p.effective_batch)
    _mark(ax, data, ok, lambda p: xs[p.number], lambda p: p.throughput)
    _configs(ax, ok, lambda p: xs[p.number], lambda p: p.throughput)
    _log2_batches(ax, [p.effective_batch for p in ok])
    if len({p.effective_batch for p in ok}) == 1:
        ax.text(0.02, 0.02, f"every trial kept the effective batch of {ok[0].effective_batch}: "
                "the micro-batch is on the right", transform=ax.transAxes, fontsize=7,
                color="dimgray")
    ax.set_ylim(0, 1.08 * max(p.throughput for p in ok))  # room for the trial numbers
    _legend(ax, data, ok)


def _memory(ax: Any, data: PlotData) -> None:
    # A failed trial's peak says how far it got, not what its config needs.
    ran = [p for p in data.points if p.peak_memory_gb is not None
           and p.status in ("ok", "pruned")]
    oom = [p for p in data.points if p.status == "oom"]
    ax.set_title(f"{data.memory[0].upper()}{data.memory[1:]} memory against the micro-batch")
    ax.set_xlabel("batch_size (micro-batch)")
    ax.set_ylabel("GiB")
    ax.grid(alpha=0.3)
    if ran:
        xs = _dodge(ran, lambda p: p.batch_size)
        _mark(ax, data, ran, lambda p: xs[p.number], lambda p: p.peak_memory_gb)
        _configs(ax, ran, lambda p: xs[p.number], lambda p: p.peak_memory_gb)
        ax.set_ylim(0, 1.1 * max(p.peak_memory_gb for p in ran))
        _legend(ax, data, ran, oom=bool(oom))
    if oom:  # at the top: the batch did not fit, whatever it would have needed
        ax.scatter([p.batch_size for p in oom], [0.97] * len(oom), marker="x", s=40,
                   color=FAILED_COLOURS["oom"], transform=ax.get_xaxis_transform(),
                   clip_on=False, zorder=4)
    if ran or oom:
        _log2_batches(ax, [p.batch_size for p in ran + oom])
