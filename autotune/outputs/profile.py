"""`breakdown.md`: one profiled step's breakdown, or two side by side (`autotune profile
--compare`), as Markdown tables whose columns are the configs."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from autotune.contract.fmt import human
from autotune.contract.profile import Breakdown, Op

__all__ = ["to_markdown"]

Column = tuple[str, Breakdown]
"""A column's heading (the config file, or "PyTorch defaults") and its breakdown."""

VIEWERS = {
    "trace.json": "open in https://ui.perfetto.dev (or chrome://tracing, or HTA)",
    "memory-snapshot.pickle": "drag into https://pytorch.org/memory_viz",
    "tensorboard": "`tensorboard --logdir` on it (the PyTorch Profiler plugin)",
}


def to_markdown(columns: Sequence[Column]) -> str:
    """The breakdown of each column's step: regions, GPU, memory, the slowest operators and
    kernels, the diagnosis and the files written."""
    first = columns[0][1]
    title = " vs ".join(label for label, _ in columns)
    lines = [f"# autotune profile: {first.adapter}", "",
             f"On {first.device}; {title}. Times are per optimizer step, averaged over the "
             "profiled steps; shares are of the profiled step's wall time on the host.", ""]
    lines += _table("", columns, _summary_rows(columns))
    lines += ["", "## Where the step's time goes", "",
              "The regions are the step's parts as the training thread lives them; on CUDA, "
              "the kernels they launched run later, on the GPU (`GPU` rows).", ""]
    lines += _table("region", columns, _region_rows(columns))
    for kind, what in (("cpu", "operators on the host"), ("cuda", "kernels on the GPU")):
        if any(op.kind == kind for _, b in columns for op in b.top_ops):
            lines += ["", f"## Top {what} by self time", ""]
            lines += _ranked(columns, kind)
    lines += ["", "## The diagnosis", ""]
    for label, b in columns:
        lines.append(f"- {label}: {_diagnosis(b)}")
    lines += ["", "## Files", ""]
    for label, b in columns:
        where = f"{label}: " if len(columns) > 1 else ""
        for name in b.files:
            lines.append(f"- {where}`{name}`: {VIEWERS.get(name, '')}".rstrip(": "))
    return "\n".join(lines) + "\n"


Row = tuple[str, Callable[[Breakdown], str]]


def _summary_rows(columns: Sequence[Column]) -> list[Row]:
    unit = columns[0][1].unit
    rows: list[Row] = [
        ("config", lambda b: b.config.describe()),
        (f"{unit}/s, no profiler", lambda b: human(b.throughput)),
        ("step, no profiler", lambda b: _ms(b.measured_step_seconds)),
        ("step, profiled", lambda b: f"{_ms(b.step_seconds)} ({b.steps} steps)"),
        ("data wait, no profiler", lambda b: _pct(b.data_wait_fraction)),
        ("GPU busy", lambda b: _pct(b.gpu_busy_fraction) if b.gpu_busy_fraction is not None
         else "n/a (no CUDA)"),
        ("GPU idle between kernels", lambda b: _ms(b.gpu_idle_seconds)
         if b.gpu_idle_seconds is not None else "n/a (no CUDA)"),
    ]
    if any(b.peak_allocated_mb is not None for _, b in columns):
        rows += [("peak allocated", lambda b: _mb(b.peak_allocated_mb)),
                 ("peak reserved", lambda b: _mb(b.peak_reserved_mb))]
    rows.append(("peak host RSS", lambda b: _mb(b.peak_rss_mb)))
    rows.append(("bound (diagnosis)", lambda b: b.diagnosis.verdict.value if b.diagnosis
                 else "-"))
    return rows


def _region_rows(columns: Sequence[Column]) -> list[Row]:
    names = [r.name for r in columns[0][1].regions]
    cuda = any(r.gpu_seconds is not None for _, b in columns for r in b.regions)
    rows: list[Row] = []
    for name in names:
        rows.append((name, lambda b, n=name: _region(b, n)))
        if cuda and name != "other":
            rows.append((f"{name}: GPU", lambda b, n=name: _region_gpu(b, n)))
    rows.append(("step", lambda b: f"{_ms(b.step_seconds)} (100%)"))
    return rows


def _region(b: Breakdown, name: str) -> str:
    r = next((r for r in b.regions if r.name == name), None)
    return "-" if r is None else f"{_ms(r.host_seconds)} ({_pct(r.host_share)})"


def _region_gpu(b: Breakdown, name: str) -> str:
    r = next((r for r in b.regions if r.name == name), None)
    if r is None or r.gpu_seconds is None:
        return "-"
    return f"{_ms(r.gpu_seconds)} ({_pct(r.gpu_seconds / b.step_seconds)})"


def _table(first: str, columns: Sequence[Column], rows: list[Row]) -> list[str]:
    lines = ["| " + " | ".join([first] + [label for label, _ in columns]) + " |",
             "| --- |" + " ---: |" * len(columns)]
    for name, cell in rows:
        lines.append("| " + " | ".join([name] + [cell(b) for _, b in columns]) + " |")
    return lines


def _ranked(columns: Sequence[Column], kind: str) -> list[str]:
    """Rank, then each column's op at that rank: ms per step, share of the step, calls."""
    lists = [[op for op in b.top_ops if op.kind == kind] for _, b in columns]
    lines = ["| # | " + " | ".join(label for label, _ in columns) + " |",
             "| ---: |" + " --- |" * len(columns)]
    for i in range(max(len(ops) for ops in lists)):
        cells = [_op(ops[i]) if i < len(ops) else "" for ops in lists]
        lines.append(f"| {i + 1} | " + " | ".join(cells) + " |")
    return lines


def _op(op: Op) -> str:
    name = op.name if len(op.name) <= 60 else op.name[:57] + "..."
    name = name.replace("|", "\\|")
    calls = "1 call" if op.calls == 1 else f"{op.calls:g} calls"
    return f"`{name}` {_ms(op.self_seconds)} ({_pct(op.share)}, {calls})"


def _diagnosis(b: Breakdown) -> str:
    d = b.diagnosis
    if d is None:
        return f"not diagnosed ({b.diagnosis_error})" if b.diagnosis_error else "not diagnosed"
    source = "recorded in best.yaml by the search" if b.diagnosis_from == "best.yaml" else \
        "measured in this run, after profiling"
    gpu = f", GPU busy {_pct(d.gpu_busy_fraction)}" if d.gpu_busy_fraction is not None else ""
    return (f"**{d.verdict.value}** ({source}): loader alone {human(d.loader_rate)} "
            f"{b.unit}/s, model alone {human(d.compute_rate)} {b.unit}/s, data wait "
            f"{_pct(d.data_wait_fraction)}{gpu}. {d.suggestion}")


def _ms(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    ms = seconds * 1e3
    return f"{ms:.3g} ms" if ms >= 0.01 else f"{ms * 1e3:.3g} us"


def _pct(fraction: float | None) -> str:
    return "-" if fraction is None else f"{fraction:.1%}"


def _mb(mb: float | None) -> str:
    return "-" if mb is None else f"{mb:,.0f} MB"
