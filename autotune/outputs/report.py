"""Write a study's outputs: `best.yaml`, `trials.csv`, `throughput.png` and `study.yaml`.

Everything is computed from the study's storage (the single source of truth, so a resumed or
shared study reports every trial) and written atomically after each finished trial: a kill at
any moment leaves the last complete versions.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from autotune.contract.files import atomic_write_bytes, atomic_write_text
from autotune.outputs.best import (best_document, params_not_measured, params_note,
                                   yaml_header)
from autotune.outputs.decision import speedup_note
from autotune.outputs.table import rows_to_csv, trial_rows
from autotune.study.confirmation.winner import Winner, best_and_baseline, pick_winner
from autotune.study.policy.batching import (loader_on_device, loader_sets_batch, on_device_note,
                                             unbatched_note)
from autotune.study.store import records, study_attrs

if TYPE_CHECKING:
    import optuna

    from autotune.study.search import SearchSettings

__all__ = ["OutputWriter", "declared_values", "write_outputs"]

ARTIFACTS = "compile-artifacts.bin"


class OutputWriter:
    """The search's `on_change`: best.yaml and trials.csv after every trial, the plot at most
    every `plot_seconds` (drawing it costs a few tenths of a second, a trial's fixed cost on a
    short budget); `finish` writes everything."""

    def __init__(self, settings: SearchSettings, *, plot_seconds: float = 20.0) -> None:
        self.settings = settings
        self.plot_seconds = plot_seconds
        self._plotted = -math.inf

    def __call__(self, study: optuna.Study) -> None:
        plot = time.monotonic() - self._plotted >= self.plot_seconds
        write_outputs(study, self.settings, plot=plot)
        if plot:
            self._plotted = time.monotonic()

    def finish(self, study: optuna.Study, *, stopped: str | None = None) -> Winner | None:
        return write_outputs(study, self.settings, stopped=stopped)


def write_outputs(study: optuna.Study, settings: SearchSettings, *, plot: bool = True,
                  stopped: str | None = None) -> Winner | None:
    """Write best.yaml (when a trial ran ok), trials.csv and throughput.png into `settings.out`.
    `stopped`: why the search did not finish ("interrupted by SIGINT"), said first in best.yaml
    (a stopped search's best.yaml read as its answer: a held-out user's, 2026-11-28)."""
    from autotune.outputs.draw import save_plot
    from autotune.outputs.plot import plot_data, search_clock

    out = settings.out
    recs = records.read_records(study)
    _, baseline = best_and_baseline(recs)
    winner = pick_winner(recs, study_attrs.read_confirmation(study))
    info = study_attrs.read_info(study)
    rows = trial_rows(recs, baseline, winner, info.unit if info else None)
    atomic_write_text(out / "study.yaml", yaml.safe_dump(
        {"study_name": settings.study_name, "storage": settings.storage}, sort_keys=False))
    atomic_write_text(out / "trials.csv", rows_to_csv(rows))
    if winner is not None:
        # The baseline runs the adapter's own batch: what a changed effective batch is told against.
        base = next((r.config for r in recs if r.baseline and r.config is not None), None)
        doc = best_document(winner, info, study_attrs.read_fingerprint(study), settings,
                            adapter_batch=base.effective_batch if base else None)
        doc["compile_artifacts"] = _copy_artifacts(winner, out)
        if stopped:
            doc = {"stopped": f"{stopped} before the search finished: the best so far, not its "
                              "answer; run the same command again to continue", **doc}
        unbatched = loader_sets_batch(recs)
        if unbatched is not None:  # what batch_size in this file is worth
            doc["effective_batch"]["loader"] = unbatched_note(
                unbatched, info.unit if info else winner.record.result.unit)
        device = loader_on_device(recs)
        if device is not None:  # why the loader knobs in this file are PyTorch's defaults
            doc["loader_on_device"] = on_device_note(device)
        missing = params_not_measured(declared_values(study, doc.get("params", {})), recs)
        if missing:  # right under params:, the values it qualifies
            doc = _after(doc, "params", "params_not_measured",
                         {**missing, "note": params_note(missing)})
        atomic_write_text(out / "best.yaml", yaml_header(doc) + yaml.safe_dump(doc, sort_keys=False))
    if plot and any(r["status"] == "ok" for r in rows):  # nothing ran ok: nothing to draw
        # The search's trials; confirmation runs are drawn from the confirmation's entries.
        searched = {r.number for r in recs if r.search}
        ends, resumes = search_clock([s for s in _spans(study) if s[0] in searched])
        save_plot(plot_data([r for r in rows if r["number"] in searched],
                            unit=info.unit if info else "items",
                            confirmation=study_attrs.read_confirmation(study),
                            winner=winner.record.number if winner else None,
                            ends=ends, resumes=resumes, **_standing(winner)),
                  out / "throughput.png")
    return winner


def declared_values(study: optuna.Study, params: Mapping[str, Any]) -> dict[str, list[Any]]:
    """The values the study's trials were offered for each of the adapter's knobs in `params`
    (their Optuna distributions' choices, in order; a knob of an int range is left out): what
    `params_not_measured` holds the measured values against, in best.yaml and on the console."""
    from optuna.distributions import CategoricalDistribution

    declared: dict[str, list[Any]] = {}
    for trial in study.get_trials(deepcopy=False):
        for name in params:
            dist = trial.distributions.get(name)
            if isinstance(dist, CategoricalDistribution):
                values = declared.setdefault(name, [])
                values.extend(v for v in dist.choices if v not in values)
    return declared


def _after(doc: dict[str, Any], key: str, new: str, value: Any) -> dict[str, Any]:
    """`doc` with `new: value` placed right after `key`."""
    out: dict[str, Any] = {}
    for k, v in doc.items():
        out[k] = v
        if k == key:
            out[new] = value
    return out


def _standing(winner: Winner | None) -> dict[str, Any]:
    """What best.yaml says of the winner, for the plot's title: the same words."""
    if winner is None:
        return {}
    d = winner.decision
    return {"standing": f"confidence {d.confidence}: {d.verdict}" if d else "",
            "ratio_note": speedup_note(winner)}


def _spans(study: optuna.Study) -> list[tuple[int, float, float]]:
    """(number, start, end) timestamps of the finished trials: the search's clock."""
    return [(t.number, t.datetime_start.timestamp(), t.datetime_complete.timestamp())
            for t in study.get_trials(deepcopy=False)
            if t.datetime_start is not None and t.datetime_complete is not None]


def _copy_artifacts(winner: Winner, out: Path) -> str | None:
    """The winner's compiled artifacts beside best.yaml (the name best.yaml gives), if a
    confirmation run of it saved some."""
    entry = next((c for c in winner.confirmation or () if c.trial == winner.record.number), None)
    if entry is None or not entry.compile_artifacts or not Path(entry.compile_artifacts).is_file():
        return None
    atomic_write_bytes(out / ARTIFACTS, Path(entry.compile_artifacts).read_bytes())
    return ARTIFACTS
