"""One flat row per trial: what `trials.csv`, the plot and `show` read.

Confirmation runs and the winner are trials too (`role` confirm and winner, `confirms` names the
search trial they re-ran); the winner's row is marked, and each confirmed search trial carries
the median of its fresh runs, the number best.yaml and `autotune show` report.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from typing import Any

from optuna.trial import TrialState

from autotune.contract.config import KNOBS
from autotune.contract.noise import Noise
from autotune.contract.phases import PHASES
from autotune.study.confirmation.winner import Winner
from autotune.study.store.records import TrialRecord

__all__ = ["COLUMNS", "PARAM_PREFIX", "rows_to_csv", "trial_rows"]

KNOB_COLUMNS = tuple(spec.name for spec in KNOBS)
PARAM_PREFIX = "params."
"""The adapter's own knobs have a column each after the tool's: `params.NAME`, as in best.yaml."""
MEASURES = (
    "throughput", "unit", "speedup", "spread", "converged", "rising_windows",
    "new_shape_windows", "step_seconds",
    "compile_seconds", "warmup_seconds", "data_wait_fraction", "peak_allocated_mb", "peak_reserved_mb",
    "peak_rss_mb", "duration_seconds", "fixed_seconds", "compile_cache_hits",
    "compiled_graphs", "recompiles", "recompile_seconds", "recompile_reason", "dynamic_shapes",
    "shapes_vary", "shape_range",
    "shape_count", "shape_count_padded", "batch_items",
)
# "warmup_seconds" is a measure already (the result's own): one column, not two.
PHASE_COLUMNS = {p: f"{p}_seconds" for p in PHASES if f"{p}_seconds" not in MEASURES}
# What else ran or held the machine back while the trial was timed (`Noise`): the measured
# causes of a spread, per trial, so a noisy row says why.
NOISE_COLUMNS = ("noise_other_cpus", "noise_busiest", "noise_gpu_others", "noise_gpu_clock_ratio",
                 "noise_gpu_limits", "noise_cpu_throttle_events")
COLUMNS = ("number", "state", "status", "baseline", *KNOB_COLUMNS, "role", "confirms", "copy_of", "winner",
           "confidence", "confirmed_median", "confirmed_runs", *MEASURES,
           *PHASE_COLUMNS.values(), "verdict",
           "loader_rate", "compute_rate", "gpu_busy_fraction", "cpu_busy_fraction",
           "cpu_steal_fraction", *NOISE_COLUMNS, "reason", "log")


def trial_rows(records: Sequence[TrialRecord], baseline: float | None,
               winner: Winner | None = None, unit: str | None = None) -> list[dict[str, Any]]:
    """One row per trial that got a config; `winner` (`pick_winner`'s) marks its rows. `unit`:
    the study's, on every row (a trial cut before it loaded the adapter, or pruned by the
    parent, knows no unit of its own)."""
    confirmed = {c.trial: c for c in (winner.confirmation or ())} if winner else {}
    # Fresh runs compare with the baseline's fresh runs, search trials with its search trial.
    fresh_base = winner.baseline if winner and winner.confirmation else baseline
    rows = []
    for r in records:
        if r.config is None:
            continue
        result = r.result
        status = result.status.value if result else (
            "running" if r.state == TrialState.RUNNING else "")
        row: dict[str, Any] = {
            "number": r.number,
            "state": r.state.name,
            "status": status,
            "baseline": r.baseline,
            **r.config.to_dict(),
            **{f"{PARAM_PREFIX}{k}": v for k, v in r.config.params.items()},
            **{k: getattr(result, k, None) for k in MEASURES},
            "reason": result.reason if result else "",
            **({"unit": unit} if unit else {}),
            "log": result.log if result else "",
        }
        if result is not None and result.windows == 1:
            row["spread"] = None  # one window has none to tell: it read 0.0% (a held-out stream)
        for phase, column in PHASE_COLUMNS.items():
            row[column] = result.phases.get(phase) if result else None
        d = result.diagnosis if result else None
        row["verdict"] = d.verdict.value if d else None
        row["loader_rate"] = d.loader_rate if d else None
        row["compute_rate"] = d.compute_rate if d else None
        row["gpu_busy_fraction"] = d.gpu_busy_fraction if d else None
        cpu = result.host_cpu if result else None
        row["cpu_busy_fraction"] = cpu.busy_fraction if cpu else None
        row["cpu_steal_fraction"] = cpu.steal_fraction if cpu else None
        row.update(_noise_columns(result.noise if result else None))
        row["copy_of"] = r.duplicate_of
        if r.duplicate_of is not None:
            row["reason"] = f"same config as trial {r.duplicate_of}: not re-run"
        throughput = result.throughput if result and status == "ok" else None
        base = baseline if r.search else fresh_base
        row["speedup"] = throughput / base if throughput and base else None
        row["role"] = r.role
        row["confirms"] = r.confirms
        entry = confirmed.get(r.number) if r.search else None
        row["confirmed_median"] = entry.median if entry else None
        row["confirmed_runs"] = len(entry.throughputs) if entry else None
        row["winner"] = winner is not None and r.number == (
            winner.study_trial if winner.confirmation and winner.study_trial is not None
            else winner.record.number)
        row["confidence"] = (winner.decision.confidence if row["winner"] and winner
                             and winner.decision else None)
        rows.append(row)
    return rows


def rows_to_csv(rows: Sequence[dict[str, Any]]) -> str:
    params = dict.fromkeys(k for row in rows for k in row if k.startswith(PARAM_PREFIX))
    at = COLUMNS.index(KNOB_COLUMNS[-1]) + 1
    columns = (*COLUMNS[:at], *params, *COLUMNS[at:])
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: _csv_value(row.get(k)) for k in columns})
    return buf.getvalue()


def _csv_value(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.6g}"
    return value


def _noise_columns(noise: Noise | None) -> dict[str, Any]:
    """`Noise` as plain cells: CPUs busy with other processes, the busiest of them ("name
    (pid)"; "; " between), other processes on the GPU, the SM clock's share of its maximum,
    the GPU's active clock limits, CPU thermal throttling events. Empty where not measured."""
    if noise is None:
        return dict.fromkeys(NOISE_COLUMNS)
    return {
        "noise_other_cpus": noise.other_cpus,
        "noise_busiest": "; ".join(f"{p.name} ({p.pid})" for p in noise.busiest) or None,
        "noise_gpu_others": None if noise.gpu_others is None else "; ".join(noise.gpu_others),
        "noise_gpu_clock_ratio": noise.gpu_clock_ratio,
        "noise_gpu_limits": None if noise.gpu_limits is None else "; ".join(noise.gpu_limits),
        "noise_cpu_throttle_events": noise.cpu_throttle_events,
    }
