"""Write a study's outputs: `best.yaml`, `trials.csv`, `throughput.png` and `study.yaml`.

Everything is computed from the study's storage (the single source of truth, so a resumed or
shared study reports every trial) and written atomically after each finished trial: a kill at
any moment leaves the last complete versions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import yaml

from autotune.contract.files import atomic_write_text
from autotune.outputs.best import best_document, yaml_header
from autotune.outputs.table import rows_to_csv, trial_rows
from autotune.study import records
from autotune.study.winner import Winner, best_and_baseline, pick_winner

if TYPE_CHECKING:
    import optuna

    from autotune.study.search import SearchSettings

__all__ = ["write_outputs"]


def write_outputs(study: optuna.Study, settings: SearchSettings) -> Winner | None:
    """Write best.yaml (when a trial ran ok), trials.csv and throughput.png into `settings.out`."""
    from autotune.outputs.plot import plot_data, save_plot

    out = settings.out
    recs = records.read_records(study)
    _, baseline = best_and_baseline(recs)
    winner = pick_winner(recs, records.read_confirmation(study))
    rows = trial_rows(recs, baseline)
    atomic_write_text(out / "study.yaml", yaml.safe_dump(
        {"study_name": settings.study_name, "storage": settings.storage}, sort_keys=False))
    atomic_write_text(out / "trials.csv", rows_to_csv(rows))
    info = records.read_info(study)
    if winner is not None:
        doc = best_document(winner, info, records.read_fingerprint(study), settings)
        atomic_write_text(out / "best.yaml", yaml_header(doc) + yaml.safe_dump(doc, sort_keys=False))
    if rows:
        save_plot(plot_data(rows, unit=info.unit if info else "items"), out / "throughput.png")
    return winner
