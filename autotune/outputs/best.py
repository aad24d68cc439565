"""`best.yaml`: the winner's config, its figures, the diagnosis and where it was measured."""

from __future__ import annotations

import dataclasses
import datetime
import math
from typing import TYPE_CHECKING, Any

from autotune.contract.allocator import ALLOC_ENV, host_heap_env
from autotune.contract.config import TrainConfig
from autotune.contract.fmt import human
from autotune.contract.noise import SPREAD_WARNING, spread_warning
from autotune.contract.result import Fingerprint, TrialResult
from autotune.contract.shapes import shapes_block
from autotune.study.records import StudyInfo
from autotune.study.lead import DISAGREE, disagreement, evidence
from autotune.study.storage import shown
from autotune.study.winner import Winner

if TYPE_CHECKING:
    from autotune.study.search import SearchSettings

__all__ = ["batch_change", "best_document", "decision_block", "decision_note", "effective_batch",
           "speedup_note", "spread_warnings", "winner_phrases", "yaml_header"]

# Above this share of CPU time taken by the hypervisor, best.yaml warns that CPU-bound rates
# will move between runs (steal is time this VM was ready to run and was not allowed to).
STEAL_WARNING = 0.05


def best_document(winner: Winner, info: StudyInfo | None, fingerprint: Fingerprint | None,
                  settings: SearchSettings, *, adapter_batch: int | None = None
                  ) -> dict[str, Any]:
    """The contents of best.yaml; `adapter_batch` is the baseline's effective batch (what the
    adapter trains with), to say when the winner's differs."""
    best = winner.record
    config = best.config
    result = best.result
    assert config is not None and result is not None  # a winner ran ok
    unit = info.unit if info else result.unit
    fp = fingerprint or Fingerprint()
    how = ("median of the confirmation runs" if winner.confirmation
           else "the search trial's median window")
    return {
        "config": config.to_dict(),
        "env": {ALLOC_ENV: config.alloc_conf, **host_heap_env(settings.device)},
        "effective_batch": effective_batch(config, adapter_batch),
        "throughput": {"value": _round(winner.throughput), "unit": f"{unit}/s", "from": how},
        "baseline": ({"value": _round(winner.baseline), "unit": f"{unit}/s"}
                     if winner.baseline else None),
        "speedup": _round(winner.speedup),
        **decision_block(winner, unit),
        "confirmation": [
            {"trial": c.trial, "baseline": c.baseline,
             "runs": [_round(v) for v in c.throughputs], "median": _round(c.median),
             "spread": _round(c.spread), "search": _round(c.search_throughput)}
            for c in winner.confirmation
        ] if winner.confirmation else None,
        "study": _study_block(winner),
        "diagnosis": _diagnosis(_diagnosed(winner) or result),
        "shapes": shapes_block(vary=result.shapes_vary, shape_range=result.shape_range,
                               count=result.shape_count, dynamic=result.dynamic_shapes),
        "measurement": {
            "trial": best.number,
            "spread": _round(result.spread),
            "converged": result.converged,
            "windows": result.windows,
            "step_seconds": _round(result.step_seconds),
            "compile_seconds": _round(result.compile_seconds),
            "recompiles": result.recompiles,
            "recompile_seconds": _round(result.recompile_seconds),
            "data_wait_fraction": _round(result.data_wait_fraction),
            "peak_allocated_mb": _round(result.peak_allocated_mb),
            "peak_reserved_mb": _round(result.peak_reserved_mb),
            **_host_cpu(result),
        },
        # Which layout the result holds for: a config found with 1/N of the cores is the one
        # for an N-rank job on this host, not for one GPU with every core.
        "layout": (settings.layout.describe(ranks=settings.nproc_per_node)
                   if settings.layout is not None else None),
        "provenance": {
            "device": fp.device,
            "device_kind": settings.device,
            # DDP ranks per trial: the throughput is all ranks' items per second, the batch
            # and the loader knobs are each rank's.
            "nproc_per_node": settings.nproc_per_node,
            "gpu_memory_gb": fp.gpu_memory_gb,
            "driver": fp.driver,
            "torch": fp.torch,
            "cuda": fp.cuda,
            "cudnn": fp.cudnn,
            "cpu_count": fp.cpu_count,
            "cpus_available": fp.cpus_available,
            "cpu_model": fp.cpu_model,
            "cgroup_cpu_limit": fp.cgroup_cpu_limit,
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "adapter": str(settings.adapter),
            "space": info.space if info else None,
            "study_name": settings.study_name,
            "storage": shown(settings.storage),  # a database URL without its password
        },
    }


def decision_block(winner: Winner, unit: str) -> dict[str, Any]:
    """`confidence` (high or low) and the numbers behind it: how the confirmation decided,
    and whether the ratio to the baseline stands."""
    d = winner.decision
    if d is None or not winner.confirmation:
        return {"confidence": "low", "decision": {
            "verdict": "not confirmed",
            "note": "one search measurement: no fresh runs re-measured it (--confirm 0, or the "
                    "budget ended first)"}}
    block: dict[str, Any] = {
        "verdict": d.verdict,
        "note": decision_note(winner),
        "runs": d.runs,
        "spread": _round(d.spread),
        "runner_up": d.runner_up,
        "runner_up_runs": d.runner_up_runs,
        "ratio": _round(d.ratio),
        "interval": [_round(v) for v in d.interval] if d.interval else None,
    }
    if d.tied:
        block["tied"] = list(d.tied)
        block["picked"] = ("the cheapest of the tied configs whose median is as near the "
                           "highest as that config's own runs are to each other: less peak "
                           "memory, then fewer workers, then no compile")
    block["baseline_spread"] = _round(d.baseline_spread)
    block["speedup_confirmed"] = d.speedup_confirmed
    block["speedup_interval"] = ([_round(v) for v in d.speedup_interval]
                                 if d.speedup_interval else None)
    note = speedup_note(winner)
    if note:
        block["speedup_note"] = note
    warnings = spread_warnings(winner, unit)
    if warnings:
        block["warnings"] = warnings
    return {"confidence": d.confidence, "decision": block}


def spread_warnings(winner: Winner, unit: str) -> list[str]:
    """One line per confirmed config whose runs disagree, naming the cause measured during
    them (`contract.noise`); a config run once fresh is compared with its search trial."""
    out = []
    for c in winner.confirmation or ():
        results = (winner.runs or {}).get(c.trial, ())
        text = spread_warning(results, unit=unit) if len(c.throughputs) >= 2 and results else None
        runs = evidence(c)
        if text is None and disagreement(runs) >= DISAGREE:
            with_search = " counting its search trial" if len(c.throughputs) < 2 else ""
            text = (f"runs disagree by {disagreement(runs):.3g}x ({human(min(runs))} to "
                    f"{human(max(runs))} {unit}/s{with_search}): something besides the config "
                    "changed the rate between runs")
        if text is not None:
            out.append(f"trial {c.trial}: {text}")
    return out


def _study_block(winner: Winner) -> dict[str, Any]:
    """Where the winner is in the Optuna study: its best trial, with the value it was told."""
    if winner.study_trial is None:
        return {"best_trial": winner.record.number, "value": winner.record.value}
    block: dict[str, Any] = {"best_trial": winner.study_trial, "value": winner.study_value,
                             "search_trial": winner.record.number}
    if not winner.confirmation:
        if winner.study_trial != winner.record.number:
            block["note"] = (f"Optuna's best trial is trial {winner.study_trial}, from an "
                             "earlier run's confirmation: this run's winner is not confirmed")
        return block
    if winner.study_value is not None and winner.study_value > winner.throughput * (1 + 1e-9):
        block["note"] = ("the value told to Optuna is raised to just above the study's highest "
                         "single measurement, so that its best trial (and optuna-dashboard's) is "
                         "this winner; the confirmed rate is throughput.value")
    return block


def decision_note(winner: Winner) -> str:
    d = winner.decision
    assert d is not None  # checked by the caller
    if d.verdict == "clear lead":
        lead = (f"trial {winner.record.number} leads trial {d.runner_up} by {d.ratio:.3g}x "
                f"(95% interval {d.interval[0]:.3g}-{d.interval[1]:.3g}) over {d.runs} and "
                f"{d.runner_up_runs} fresh runs" if d.interval and d.ratio else "clear lead")
        if d.confidence == "low" and d.own_spread > SPREAD_WARNING:
            lead += (f"; but its own runs are {d.spread:.3g}x apart, so its rate is known no "
                     "better than that")
        return lead
    if d.verdict == "tie within noise":
        how = ("are as fast as each other (their ratio within 2% of 1)" if d.confidence == "high"
               else "are within the noise of their runs")
        picked = (f"the cheapest, trial {winner.record.number}, is picked" if d.leader is not None
                  else f"trial {winner.record.number}, the highest median and the cheapest of "
                  "those as near it as its own runs are to each other, is picked")
        return f"trials {', '.join(map(str, d.tied))} {how}; {picked}"
    if d.verdict == "too few runs":
        return f"ahead, but the budget allowed {d.runs} fresh run(s) of it"
    return "the only config whose fresh runs were ok"


def winner_phrases(winner: Winner) -> tuple[str, str]:
    """", 2.50x the baseline" (saying so when the baseline's runs disagree) and
    " (confidence high: clear lead)": how the end of a search names the winner's standing."""
    d = winner.decision
    speed = f", {winner.speedup:.2f}x the baseline" if winner.speedup else ""
    note = speedup_note(winner)
    if speed and note:
        speed += f" ({note})"
    if d is not None:
        return speed, f" (confidence {d.confidence}: {d.verdict})"
    if not winner.confirmation:
        return speed, " (not confirmed)"
    return speed, "" if note else " (confirmed by repeated runs)"


def speedup_note(winner: Winner) -> str | None:
    """Why the ratio to the baseline is not confirmed (None when it is, or nothing was
    confirmed): the baseline's own runs disagree 2x or more, or it has no fresh run."""
    base = next((c for c in winner.confirmation or () if c.baseline), None)
    if not winner.confirmation or not winner.baseline:
        return None
    if base is None or not base.throughputs:
        return "not confirmed: the baseline has no fresh run"
    spread = disagreement(evidence(base))
    if spread >= DISAGREE:
        return f"not confirmed: the baseline's own runs disagree {spread:.1f}x"
    return None


def effective_batch(config: TrainConfig, adapter_batch: int | None) -> dict[str, Any]:
    """`batch_size x grad_accum` of `config` beside the adapter's; when they differ (only when
    the search was asked to vary it), the factor and what it means for the learning rate."""
    doc: dict[str, Any] = {"value": config.effective_batch, "adapter": adapter_batch}
    note = batch_change(config, adapter_batch)
    if note is not None:
        doc["factor"] = _round(config.effective_batch / adapter_batch)  # type: ignore[operator]
        doc["note"] = note
    return doc


def batch_change(config: TrainConfig, adapter_batch: int | None) -> str | None:
    """One line on a changed effective batch and the learning rate, or None when unchanged."""
    if adapter_batch is None or config.effective_batch == adapter_batch:
        return None
    factor = config.effective_batch / adapter_batch
    # Linear scaling for SGD (Goyal et al. 2017, "Accurate, Large Minibatch SGD"); square-root
    # scaling for Adam-like optimizers (Malladi et al. 2022, "On the SDEs and Scaling Rules for
    # Adaptive Gradient Algorithms"). Both are starting points, not guarantees.
    return (f"the effective batch (batch_size x grad_accum = {config.effective_batch}) is "
            f"{factor:.3g}x the adapter's {adapter_batch}: scale the learning rate (linear, "
            f"lr x {factor:.3g}, for SGD-like optimizers; square root, lr x "
            f"{math.sqrt(factor):.3g}, for Adam-like ones) or re-tune it")


def _host_cpu(result: TrialResult) -> dict[str, Any]:
    """The CPUs' busy and steal shares while the winner was timed, with a warning when the
    hypervisor took enough to make CPU-bound rates unrepeatable."""
    usage = result.host_cpu
    if usage is None:
        return {}
    out: dict[str, Any] = {"cpu_busy_fraction": _round(usage.busy_fraction),
                           "cpu_steal_fraction": _round(usage.steal_fraction)}
    if usage.steal_fraction >= STEAL_WARNING:
        out["warning"] = (f"the hypervisor took {usage.steal_fraction:.0%} of the CPUs' time "
                          "while this was measured: CPU-bound rates vary between runs here")
    return out


def _diagnosed(winner: Winner) -> TrialResult | None:
    """Where the winner's diagnosis is: its search trial, else (a trial that did not beat the
    best when it ran is not diagnosed) the first of its confirmation runs that was."""
    result = winner.record.result
    if result is not None and result.diagnosis is not None:
        return result
    runs = (winner.runs or {}).get(winner.record.number, ())
    return next((r for r in runs if r.diagnosis is not None), None)


def _diagnosis(result: TrialResult) -> dict[str, Any] | None:
    d = result.diagnosis
    if d is None:
        return None
    data = {**dataclasses.asdict(d), "verdict": d.verdict.value}
    return {k: (_round(v) if isinstance(v, float) else v) for k, v in data.items()}


def _round(value: float | None, digits: int = 4) -> float | None:
    if value is None:
        return None
    return float(f"{value:.{digits}g}") if abs(value) < 1e4 else round(value, 1)


def yaml_header(doc: dict[str, Any]) -> str:
    decision = doc.get("decision") or {}
    speed = f" ({doc['speedup']}x the baseline" if doc.get("speedup") else ""
    if speed:
        note = decision.get("speedup_note")
        speed += f", {note})" if note else ")"
    if doc.get("confidence"):
        speed += f"; confidence {doc['confidence']}: {decision.get('verdict', '')}"
    changed = (doc.get("effective_batch") or {}).get("factor")
    batch = (f"# Note: the effective batch is {changed}x the adapter's: see effective_batch.note "
             "on the learning rate.\n") if changed else ""
    return (
        f"# autotune: fastest measured configuration{speed}.\n"
        "# Apply it: autotune.load_config(\"best.yaml\") in your training script, or\n"
        "#           autotune apply best.yaml -- python train.py  (sets the allocator env)\n"
        + batch
    )
