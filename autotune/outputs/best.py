"""`best.yaml`: the winner's config, its figures, the diagnosis and where it was measured."""

from __future__ import annotations

import dataclasses
import datetime
import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from autotune.adapter import Adapter, defines
from autotune.contract.allocator import ALLOC_ENV, host_heap_env
from autotune.contract.fmt import rounded
from autotune.contract.noise import likely_cause
from autotune.contract.recompiles import divisor
from autotune.contract.result import Fingerprint, Status, TrialResult
from autotune.contract.shapes import shapes_block
from autotune.outputs.batch_note import effective_batch
from autotune.outputs.decision import decision_block
from autotune.study.confirmation.winner import Winner
from autotune.study.store.records import TrialRecord
from autotune.study.store.storage import shown
from autotune.study.store.study_attrs import StudyInfo

if TYPE_CHECKING:
    from autotune.study.search import SearchSettings

__all__ = ["best_document", "items_note", "params_not_measured", "params_note", "yaml_header"]

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
    how = ("median of the confirmation runs" if winner.decision and winner.decision.runs
           else HOW_SEARCH)
    return {
        "config": {k: v for k, v in config.to_dict().items() if k != "params"},
        # The adapter's own knobs: `load_config("best.yaml").params`, as its methods read them.
        **({"params": dict(config.params)} if config.params else {}),
        "env": {ALLOC_ENV: config.alloc_conf, **host_heap_env(settings.device)},
        "effective_batch": effective_batch(config, adapter_batch, result.epoch_batches),
        "throughput": {"value": rounded(winner.throughput), "unit": f"{unit}/s", "from": how},
        "baseline": ({"value": rounded(winner.baseline), "unit": f"{unit}/s"}
                     if winner.baseline else None),
        "speedup": rounded(winner.speedup),
        **decision_block(winner, unit),
        "confirmation": [
            {"trial": c.trial, "baseline": c.baseline,
             "runs": [rounded(v) for v in c.throughputs], "median": rounded(c.median),
             "spread": rounded(c.spread), "search": rounded(c.search_throughput)}
            for c in winner.confirmation
        ] if winner.confirmation else None,
        "study": _study_block(winner),
        "diagnosis": _diagnosis(_diagnosed(winner) or result, searched=result,
                                confirmed=winner.throughput if how != HOW_SEARCH else None),
        "shapes": shapes_block(vary=result.shapes_vary, shape_range=result.shape_range,
                               count=result.shape_count, dynamic=result.dynamic_shapes,
                               batch_size=config.batch_size, padded=result.shape_count_padded,
                               recompile_multiple=divisor(result.recompile_reason),
                               cuda=_on_gpu(result), compiled=config.compile != "none"),
        "measurement": {
            "trial": best.number,
            "spread": None if result.windows == 1 else rounded(result.spread),  # none in one
            "converged": result.converged,
            "windows": result.windows,
            "step_seconds": rounded(result.step_seconds),
            "compile_seconds": rounded(result.compile_seconds),
            "recompiles": result.recompiles,
            "recompile_seconds": rounded(result.recompile_seconds),
            "recompile_reason": result.recompile_reason or None,
            "data_wait_fraction": rounded(result.data_wait_fraction),
            "peak_allocated_mb": rounded(result.peak_allocated_mb),
            "peak_reserved_mb": rounded(result.peak_reserved_mb),
            **_host_cpu(result),
        },
        # Which layout the result holds for: a config found with 1/N of the cores is the one
        # for an N-rank job on this host, not for one GPU with every core.
        "layout": (settings.layout.describe(ranks=settings.nproc_per_node,
                                            device=settings.device)
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


def params_not_measured(declared: Mapping[str, Sequence[Any]], recs: Sequence[TrialRecord]
                        ) -> dict[str, list[Any]]:
    """Each of the adapter's knobs (`declared`: its values as the space samples them) with the
    values no trial measured ok. A 150-s search of a transformers classifier on a 2-CPU VM
    ran its tool knobs and never `pad_to_multiple_of` 8 or 128, and best.yaml's `params:`
    read as if its default had won (2026-11-28). A trial pruned once it ran measured its value
    too: slower (a two-tower model's pad_to_multiple_of 64, pruned four times, was listed)."""
    ran = [r.config.params for r in recs if r.config is not None and r.result is not None
           and (r.ok or (r.status is Status.PRUNED and r.result.ran))]
    missing = {}
    for name, values in declared.items():
        seen = [params.get(name) for params in ran if name in params]
        left = [v for v in values if v not in seen]
        if left:
            missing[name] = left
    return missing


def params_note(missing: Mapping[str, Sequence[Any]]) -> str | None:
    """`params_not_measured`'s result in words, None when every value was measured."""
    if not missing:
        return None
    said = "; ".join(f"{name} {', '.join(json.dumps(v) for v in values)}"
                     for name, values in missing.items())
    return (f"params: is the best of the values measured, and the search ended before it "
            f"measured these of the adapter's knobs: {said}. A longer --timeout measures "
            "them, or a space file can narrow them (under `adapter:`)")


ITEMS_SLACK = 0.1
"""How far the baseline's items a batch may sit from its batch_size before `items_note` speaks:
the tool's loader drops a last partial batch, so its batches hold batch_size samples."""


def items_note(adapter: type[Adapter], recs: Sequence[TrialRecord], unit: str) -> str | None:
    """One line when the adapter left `items` to its default and the baseline's batches of
    `batch_size` samples counted more or fewer: the default counts the first tensor's rows,
    which for a graph batch are its nodes (a held-out GNN's 64 graphs counted 2,090 "graphs",
    2-CPU VM, 2026-11-28). Nothing for an adapter that builds its own loader."""
    if defines(adapter, "items") or defines(adapter, "make_loader"):
        return None
    base = next((r for r in recs if r.baseline and r.config is not None and r.result is not None
                 and r.result.batch_items), None)
    if base is None or base.config is None or base.result is None:
        return None
    per, size = base.result.batch_items or 0.0, base.config.batch_size
    if abs(per - size) <= ITEMS_SLACK * size:
        return None
    return (f"items() is not defined, so a batch counted its first tensor's rows: {per:.4g} "
            f"{unit} on average in a batch of {size} samples. Where a row is not one of your "
            f"{unit} (a graph's nodes, a packed sequence's tokens), define items(self, batch) to "
            f"count them: every rate here is in those rows")


def optimizer_note(result: TrialResult | None, impls: Sequence[str]) -> str | None:
    """One line when the space searches `optimizer_impl` but the adapter's optimizer, as built,
    takes neither flag, so the search held it at default: a held-out fine-tune (2-CPU VM,
    2026-11-28) attached its LR scheduler in optimizer(), and nothing said why the knob never
    moved. None otherwise."""
    if result is None or result.optimizer_impls != ("default",) or len(impls) < 2:
        return None
    return ("optimizer_impl stayed at default: the adapter's optimizer as built takes neither "
            "foreach nor fused here (a class without the flags, or an LR scheduler or step hooks "
            "attached in optimizer(): a rebuild would drop them; build the optimizer alone there)")


def conv_note(result: TrialResult | None, memory_formats: Sequence[str]) -> str | None:
    """One line when the model has convolutions and the space left the memory format out
    (`memory_formats`: the values it searched), else None."""
    if result is None or not result.conv_weights or "channels_last" in memory_formats:
        return None
    return (f"the model has {result.conv_weights} convolution weights and this space does not "
            "search memory_format: the default space does, with cuDNN's benchmark "
            "(torchvision ResNet-50, bf16, H100: NHWC 1.60x eager, 1.04x compiled)")


def _host_cpu(result: TrialResult) -> dict[str, Any]:
    """The CPUs' busy and steal shares while the winner was timed, with a warning when the
    hypervisor took enough to make CPU-bound rates unrepeatable."""
    usage = result.host_cpu
    if usage is None:
        return {}
    out: dict[str, Any] = {"cpu_busy_fraction": rounded(usage.busy_fraction),
                           "cpu_steal_fraction": rounded(usage.steal_fraction)}
    if usage.steal_fraction >= STEAL_WARNING:
        out["warning"] = (f"the hypervisor took {usage.steal_fraction:.0%} of the CPUs' time "
                          "while this was measured: CPU-bound rates vary between runs here")
    return out


def _on_gpu(result: TrialResult) -> bool:
    """Measured on a GPU (not known: assumed so), where CUDA graphs are in the space."""
    return result.fingerprint is None or result.fingerprint.gpu is not None


HOW_SEARCH = "the search trial's median window"

OFF = 1.5
"""A search reading this far from the confirmed throughput, either way, does not describe the
winner's runs: a held-out user's baseline read 125 images/s beside a pytest holding one of 2
CPUs, 3.2-3.65k fresh, and best.yaml gave its "the model itself is the limit" (2026-11-28)."""


def _off(result: TrialResult, confirmed: float | None) -> bool:
    """Whether `result`'s rate is `OFF` or more from `confirmed` either way."""
    rate = result.throughput
    return bool(rate and confirmed and max(rate / confirmed, confirmed / rate) >= OFF)


def _diagnosed(winner: Winner) -> TrialResult | None:
    """Where the winner's diagnosis is: its search trial, else (a trial that did not beat the
    best when it ran is not diagnosed, or read `OFF` from the confirmed rate) the first of its
    confirmation runs that was."""
    result = winner.record.result
    runs = [r for r in (winner.runs or {}).get(winner.record.number, ()) if r.diagnosis]
    if result is not None and result.diagnosis is not None \
            and not (runs and winner.decision and _off(result, winner.throughput)):
        return result
    return next(iter(runs), None)


def _diagnosis(result: TrialResult, *, searched: TrialResult,
               confirmed: float | None) -> dict[str, Any] | None:
    """The diagnosis block, saying which run its rates are from: they sit beside the confirmed
    `throughput` and read as its parts (a user took a search trial's 50k beside a confirmed
    40.2k for one run's figures, 2026-11-28); a search trial's `OFF` from it says so, and why
    where that was measured."""
    d = result.diagnosis
    if d is None:
        return None
    data = {**dataclasses.asdict(d), "verdict": d.verdict.value}
    # The op counts are the search's prior on a compile (`trial.opcount`), not a verdict.
    block = {k: (rounded(v) if isinstance(v, float) else v) for k, v in data.items()
             if k not in ("step_ops", "distinct_ops")}
    block["from"] = ("the search trial (its own rates, not the confirmed throughput)"
                     if result is searched else "a confirmation run of the winner")
    if result is searched and confirmed and result.throughput and _off(result, confirmed):
        cause = likely_cause([result])
        block["from"] = (f"the search trial, which read {result.throughput / confirmed:.2g}x the "
                         f"confirmed throughput{': measured while ' + cause if cause else ''}; "
                         "its rates do not describe the winner's runs")
    return block


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
    scope = ("# compile_scope is loss: the loss was compiled with the model; call your loss "
             "through cfg.wrap_loss(fn)\n#   (cfg.wrap_model leaves the model uncompiled then).\n"
             ) if (doc.get("config") or {}).get("compile_scope") == "loss" else ""
    stopped = f"# STOPPED: {doc['stopped']}.\n" if doc.get("stopped") else ""
    return (
        stopped + f"# autotune: fastest measured configuration{speed}.\n"
        "# Apply it: autotune.load_config(\"best.yaml\") in your training script, or\n"
        "#           autotune apply best.yaml -- python train.py  (sets the allocator env)\n"
        + batch + scope
    )
