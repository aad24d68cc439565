"""Outputs of a study: `best.yaml` with provenance, `trials.csv`, the plot, and `show`'s table.

Everything is computed from the study's storage (the single source of truth, so a resumed or
shared study reports every trial) and written atomically after each finished trial: a kill at
any moment leaves the last complete versions.
"""

from __future__ import annotations

import csv
import dataclasses
import datetime
import io
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import yaml
from optuna.trial import FrozenTrial, TrialState

from autotune.config import TrainConfig
from autotune.files import atomic_write_text

if TYPE_CHECKING:
    import optuna

    from autotune.search import SearchSettings

__all__ = ["KNOBS", "Winner", "best_and_baseline", "best_document", "pick_winner", "trial_rows",
           "write_outputs"]

KNOBS = tuple(f.name for f in TrainConfig.__dataclass_fields__.values())
MEASURES = (
    "throughput", "unit", "speedup", "spread", "converged", "step_seconds", "compile_seconds",
    "warmup_seconds", "data_wait_fraction", "peak_allocated_mb", "peak_reserved_mb",
    "peak_rss_mb", "duration_seconds",
)
COLUMNS = ("number", "state", "status", "baseline", *KNOBS, *MEASURES, "verdict", "loader_rate",
           "compute_rate", "gpu_busy_fraction", "cpu_busy_fraction", "cpu_steal_fraction",
           "reason", "log")
# Above this share of CPU time taken by the hypervisor, best.yaml warns that CPU-bound rates
# will move between runs (steal is time this VM was ready to run and was not allowed to).
STEAL_WARNING = 0.05


def trial_rows(trials: Sequence[FrozenTrial], baseline: float | None) -> list[dict[str, Any]]:
    """One flat row per trial that got a config (what `trials.csv` and the plot show)."""
    rows = []
    for t in trials:
        config = t.user_attrs.get("config")
        if config is None:
            continue
        result = t.user_attrs.get("result") or {}
        row: dict[str, Any] = {
            "number": t.number,
            "state": t.state.name,
            "status": result.get("status", "running" if t.state == TrialState.RUNNING else ""),
            "baseline": bool(t.user_attrs.get("baseline")),
            **{k: config.get(k) for k in KNOBS},
            **{k: result.get(k) for k in MEASURES},
            "reason": result.get("reason", ""),
            "log": result.get("log", ""),
        }
        diagnosis = (result.get("extra") or {}).get("diagnosis") or {}
        for key in ("verdict", "loader_rate", "compute_rate", "gpu_busy_fraction"):
            row[key] = diagnosis.get(key)
        host_cpu = (result.get("extra") or {}).get("host_cpu") or {}
        row["cpu_busy_fraction"] = host_cpu.get("busy_fraction")
        row["cpu_steal_fraction"] = host_cpu.get("steal_fraction")
        if "duplicate_of" in t.user_attrs:
            row["reason"] = f"same config as trial {t.user_attrs['duplicate_of']}: not re-run"
        throughput = result.get("throughput") if result.get("status") == "ok" else None
        row["speedup"] = throughput / baseline if throughput and baseline else None
        rows.append(row)
    return rows


def best_document(winner: Winner, attrs: dict[str, Any], settings: SearchSettings) -> dict[str, Any]:
    """The contents of best.yaml."""
    best = winner.trial
    config = TrainConfig(**best.user_attrs["config"])
    result = best.user_attrs["result"]
    unit = attrs.get("unit", result.get("unit"))
    fp = attrs.get("fingerprint") or {}
    how = ("median of the confirmation runs" if winner.confirmation
           else "the search trial's median window")
    return {
        "config": config.to_dict(),
        "env": {"PYTORCH_CUDA_ALLOC_CONF": config.alloc_conf},
        "throughput": {"value": _round(winner.throughput), "unit": f"{unit}/s", "from": how},
        "baseline": ({"value": _round(winner.baseline), "unit": f"{unit}/s"}
                     if winner.baseline else None),
        "speedup": _round(winner.speedup),
        "confirmation": [
            {"trial": c["trial"], "baseline": c["baseline"],
             "runs": [_round(v) for v in c["throughputs"]], "median": _round(c["median"]),
             "spread": _round(c["spread"]), "search": _round(c["search_throughput"])}
            for c in winner.confirmation
        ] if winner.confirmation else None,
        "diagnosis": _diagnosis(result),
        "measurement": {
            "trial": best.number,
            "spread": _round(result.get("spread")),
            "converged": result.get("converged"),
            "windows": result.get("windows"),
            "step_seconds": _round(result.get("step_seconds")),
            "compile_seconds": _round(result.get("compile_seconds")),
            "data_wait_fraction": _round(result.get("data_wait_fraction")),
            "peak_allocated_mb": _round(result.get("peak_allocated_mb")),
            "peak_reserved_mb": _round(result.get("peak_reserved_mb")),
            **_host_cpu(result),
        },
        "provenance": {
            "device": fp.get("gpu") or f"cpu: {fp.get('cpu_model')}",
            "device_kind": settings.device,
            "gpu_memory_gb": fp.get("gpu_memory_gb"),
            "driver": fp.get("driver"),
            "torch": fp.get("torch"),
            "cuda": fp.get("cuda"),
            "cudnn": fp.get("cudnn"),
            "cpu_count": fp.get("cpu_count"),
            "cpus_available": fp.get("cpus_available"),
            "cpu_model": fp.get("cpu_model"),
            "cgroup_cpu_limit": fp.get("cgroup_cpu_limit"),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "adapter": str(settings.adapter),
            "space": attrs.get("space"),
            "study_name": settings.study_name,
            "storage": settings.storage,
        },
    }


def write_outputs(study: optuna.Study, settings: SearchSettings) -> Winner | None:
    """Write best.yaml (when a trial ran ok), trials.csv and throughput.png into `settings.out`."""
    from autotune.plot import plot_data, save_plot

    out = settings.out
    trials = study.get_trials(deepcopy=False)
    _, baseline = best_and_baseline(trials)
    winner = pick_winner(trials, study.user_attrs)
    rows = trial_rows(trials, baseline)
    atomic_write_text(out / "study.yaml", yaml.safe_dump(
        {"study_name": settings.study_name, "storage": settings.storage}, sort_keys=False))
    atomic_write_text(out / "trials.csv", rows_to_csv(rows))
    if winner is not None:
        doc = best_document(winner, study.user_attrs, settings)
        atomic_write_text(out / "best.yaml", _yaml_header(doc) + yaml.safe_dump(doc, sort_keys=False))
    if rows:
        save_plot(plot_data(rows, unit=study.user_attrs.get("unit", "items")), out / "throughput.png")
    return winner


def _host_cpu(result: dict[str, Any]) -> dict[str, Any]:
    """The CPUs' busy and steal shares while the winner was timed, with a warning when the
    hypervisor took enough to make CPU-bound rates unrepeatable."""
    usage = (result.get("extra") or {}).get("host_cpu")
    if not usage:
        return {}
    out: dict[str, Any] = {"cpu_busy_fraction": _round(usage["busy_fraction"]),
                           "cpu_steal_fraction": _round(usage["steal_fraction"])}
    if usage["steal_fraction"] >= STEAL_WARNING:
        out["warning"] = (f"the hypervisor took {usage['steal_fraction']:.0%} of the CPUs' time "
                          "while this was measured: CPU-bound rates vary between runs here")
    return out


def _diagnosis(result: dict[str, Any]) -> dict[str, Any] | None:
    d = (result.get("extra") or {}).get("diagnosis")
    if not d:
        return None
    return {k: (_round(v) if isinstance(v, float) else v) for k, v in d.items()}


def best_and_baseline(trials: Sequence[FrozenTrial]) -> tuple[FrozenTrial | None, float | None]:
    """The fastest ok trial of the search, and the baseline's throughput (None if not ok)."""
    ok = [t for t in trials if t.state == TrialState.COMPLETE and _status(t) == "ok"]
    best = max(ok, key=lambda t: t.value or 0.0, default=None)
    baseline = next((t.value for t in ok if t.user_attrs.get("baseline")), None)
    return best, baseline


@dataclasses.dataclass(frozen=True)
class Winner:
    """The config best.yaml reports, with the figures it is judged on."""

    trial: FrozenTrial
    throughput: float
    baseline: float | None
    confirmation: list[dict[str, Any]] | None
    """Repeated runs of the top configs after the search (None until confirmed)."""

    @property
    def speedup(self) -> float | None:
        return self.throughput / self.baseline if self.baseline else None


def pick_winner(trials: Sequence[FrozenTrial], study_attrs: dict[str, Any]) -> Winner | None:
    """The confirmed winner when the last run confirmed, else the search's fastest trial."""
    best, baseline = best_and_baseline(trials)
    confirmation = study_attrs.get("confirmation")
    if confirmation:
        ranked = [c for c in confirmation if c["median"]]
        by_number = {t.number: t for t in trials}
        if ranked and ranked[0]["trial"] in by_number:
            base = next((c["median"] for c in ranked if c["baseline"]), baseline)
            return Winner(by_number[ranked[0]["trial"]], ranked[0]["median"], base, confirmation)
    if best is None:
        return None
    return Winner(best, float(best.value or 0.0), baseline, None)


def _status(trial: FrozenTrial) -> str | None:
    result = trial.user_attrs.get("result")
    return result.get("status") if result else None


def rows_to_csv(rows: Sequence[dict[str, Any]]) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=COLUMNS, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: _csv_value(row.get(k)) for k in COLUMNS})
    return buf.getvalue()


def _csv_value(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.6g}"
    return value


def _round(value: float | None, digits: int = 4) -> float | None:
    if value is None:
        return None
    return float(f"{value:.{digits}g}") if abs(value) < 1e4 else round(value, 1)


def _yaml_header(doc: dict[str, Any]) -> str:
    speed = f" ({doc['speedup']}x the baseline)" if doc.get("speedup") else ""
    return (
        f"# autotune: fastest measured configuration{speed}.\n"
        "# Apply it: autotune.load_config(\"best.yaml\") in your training script, or\n"
        "#           autotune apply best.yaml -- python train.py  (sets the allocator env)\n"
    )
