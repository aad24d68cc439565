"""`autotune lab`: the tuning guides' side-by-side runs, interleaved and repeated in one go.

Five rows: (1) PyTorch defaults, (2) + bf16 autocast, (3) + bf16 + torch.compile, (4) the common hand
recipe, (5) a given YAML. Each run is a fresh trial process; the rows are rotated between
repeats so that drift on a shared machine does not favour one row. The table reports each row's
median over repeats, the spread, peak memory, and ratios to row 1 and to the best of rows 2-4.
"""

from __future__ import annotations

import dataclasses
import json
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

from autotune.adapter import Adapter
from autotune.contract.config import TrainConfig
from autotune.contract.errors import InputError
from autotune.contract.fmt import human
from autotune.contract.noise import spread_warning
from autotune.contract.request import MeasureSettings, TrialRequest
from autotune.contract.result import Status, TrialResult
from autotune.contract.stats import relative_spread
from autotune.study.execution.protocol import Runner
from autotune.study.policy.recipes import bf16, bf16_compile, hand_recipe, pytorch_defaults

__all__ = ["LabRow", "lab_rows", "next_steps", "noise_warnings", "run_lab", "summarize"]

RECIPE_ROWS = (2, 3, 4)  # the rows a tuned config must beat: what people try by hand


@dataclasses.dataclass(frozen=True, kw_only=True)
class LabRow:
    index: int
    name: str
    config: TrainConfig


def lab_rows(
    adapter: type[Adapter], *, device: str, cpus: int, tuned: TrainConfig | None
) -> list[LabRow]:
    rows = [
        LabRow(index=1, name="PyTorch defaults", config=pytorch_defaults(adapter)),
        LabRow(index=2, name="+ bf16 autocast", config=bf16(adapter)),
        LabRow(index=3, name="+ bf16 + torch.compile", config=bf16_compile(adapter)),
        LabRow(index=4, name="hand recipe", config=hand_recipe(adapter, device=device, cpus=cpus)),
    ]
    if tuned is not None:
        unknown = sorted(set(tuned.params) - set(adapter.knobs))
        if unknown:  # each run would fail in the trial process: say so before any
            raise InputError(f"the YAML sets params {unknown}, knobs {adapter.__name__} does not "
                             f"declare (its knobs: {sorted(adapter.knobs)}); pass the YAML a "
                             "search of this adapter wrote")
        rows.append(LabRow(index=5, name="tuned (YAML)", config=tuned))
    return rows


def run_lab(
    rows: list[LabRow],
    *,
    adapter_path: Path,
    device: str,
    runner: Runner,
    out: Path,
    repeats: int,
    trial_timeout: float,
    measure: MeasureSettings,
    on_result: Callable[[LabRow, int, TrialResult], None] | None = None,
) -> dict[int, list[TrialResult]]:
    """Run every row `repeats` times, rotating the order each round; results by row index.
    A compiled row's compile counts apart from `trial_timeout`, as a search trial's does
    (`TrialRequest.compile_grace`): it may take as long again compiling, so a compile of
    varying shapes (minutes) is not killed by a limit meant for measuring."""
    results: dict[int, list[TrialResult]] = {row.index: [] for row in rows}
    for rep in range(repeats):
        shift = rep % len(rows)
        for row in rows[shift:] + rows[:shift]:
            request = TrialRequest(adapter=str(adapter_path), config=row.config, device=device,
                                   measure=measure, number=row.index, diagnose=False,
                                   compile_grace=trial_timeout)
            result = runner.run(request, out / "runs" / f"row{row.index}-rep{rep}",
                                timeout=trial_timeout)
            results[row.index].append(result)
            if on_result is not None:
                on_result(row, rep, result)
    return results


def summarize(
    rows: list[LabRow],
    results: dict[int, list[TrialResult]],
    *,
    flops_per_item: float | None = None,
    peak_flops: float | None = None,
) -> list[dict[str, Any]]:
    """One dict per row: median throughput, spread, memory, ratios, and MFU where it applies."""
    table: list[dict[str, Any]] = []
    for row in rows:
        runs = results[row.index]
        ok = [r.throughput for r in runs if r.status is Status.OK and r.throughput]
        peaks = [r.peak_reserved_mb or r.peak_rss_mb for r in runs if r.status is Status.OK]
        table.append({
            "row": row.index,
            "name": row.name,
            "config": row.config.to_dict(),
            "throughputs": ok,
            "throughput": statistics.median(ok) if ok else None,
            "spread": relative_spread(ok) if len(ok) > 1 else None,
            "peak_mb": max((p for p in peaks if p), default=None),
            "statuses": [r.status.value for r in runs],
            "reasons": sorted({r.reason for r in runs if r.status is not Status.OK}),
            "compile_seconds": statistics.median(
                [r.compile_seconds for r in runs if r.compile_seconds is not None] or [0.0]),
        })
    base = table[0]["throughput"]
    recipes = [t["throughput"] for t in table if t["row"] in RECIPE_ROWS and t["throughput"]]
    best_recipe = max(recipes, default=None)
    for t in table:
        value = t["throughput"]
        t["vs_defaults"] = value / base if value and base else None
        t["vs_best_recipe"] = value / best_recipe if value and best_recipe else None
        t["mfu"] = (value * flops_per_item / peak_flops
                    if value and flops_per_item and peak_flops else None)
    return table


def noise_warnings(rows: list[LabRow], results: dict[int, list[TrialResult]], *, unit: str
                   ) -> list[str]:
    """One line per row whose repeated runs disagree, naming the cause that was measured."""
    lines = []
    for row in rows:
        warning = spread_warning(results.get(row.index, []), unit=unit)
        if warning is not None:
            lines.append(f"row {row.index} ({row.name}): {warning}")
    return lines


def to_markdown(table: list[dict[str, Any]], *, unit: str, header: str = "") -> str:
    mfu = any(t["mfu"] is not None for t in table)
    cols = ["row", f"median {unit}/s", "spread", "peak GB", "compile s", "x defaults",
            "x best of 2-4"] + (["MFU"] if mfu else [])
    lines = [header] if header else []
    lines += ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for t in table:
        value = t["throughput"]
        cells = [
            f"{t['row']}. {t['name']}",
            human(value) if value else ", ".join(sorted(set(t["statuses"]))),
            f"{t['spread']:.1%}" if t["spread"] is not None else "-",
            f"{t['peak_mb'] / 1024:.1f}" if t["peak_mb"] else "-",
            f"{t['compile_seconds']:.0f}",
            f"{t['vs_defaults']:.2f}" if t["vs_defaults"] else "-",
            f"{t['vs_best_recipe']:.2f}" if t["vs_best_recipe"] else "-",
        ]
        if mfu:
            cells.append(f"{t['mfu']:.1%}" if t["mfu"] is not None else "-")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def save(table: list[dict[str, Any]], out: Path, *, unit: str, meta: dict[str, Any]) -> None:
    from autotune.contract.files import atomic_write_text

    atomic_write_text(out / "lab.json", json.dumps({"meta": meta, "rows": table}, indent=2))
    header = ", ".join(f"{k}: {v}" for k, v in meta.items() if v is not None)
    atomic_write_text(out / "lab.md", to_markdown(table, unit=unit, header=header + "\n"))


def next_steps(adapter: Path, config: Path | None) -> list[str]:
    """Where to go from the lab: a row's profile; with a tuned YAML, the performance gate once
    it is applied."""
    lines = [f"where row 1's step goes (PyTorch's defaults): autotune profile --adapter {adapter}"]
    if config is not None:
        lines += [f"where row 5's step goes: autotune profile --adapter {adapter} --config "
                  f"{config}",
                  f"after autotune apply, keep its speed (e.g. in CI): autotune check --adapter "
                  f"{adapter} --against {config}"]
    return lines
