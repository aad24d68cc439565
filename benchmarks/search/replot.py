"""Draw throughput.png again from a results folder's stored files (trials.csv and best.yaml).

    python benchmarks/search/replot.py results/h100/search/gpt [more folders...]

For folders whose study database was not kept: the points come from trials.csv, the winner and
the confirmation runs from best.yaml. Without the study's trial times the time axis sums the
trials' durations (the plot says so).
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import yaml

from autotune.outputs.draw import save_plot
from autotune.outputs.plot import plot_data
from autotune.study.store.study_attrs import ConfirmationEntry


def replot(folder: Path) -> Path:
    with (folder / "trials.csv").open(newline="") as f:
        # The search's trials: confirmation runs are drawn from best.yaml's confirmation.
        rows = [r for r in csv.DictReader(f) if r.get("role") not in ("confirm", "winner")]
    if not rows:
        raise SystemExit(f"{folder}/trials.csv: no trials")
    best = yaml.safe_load((folder / "best.yaml").read_text()) or {}
    confirmation = [
        ConfirmationEntry(trial=int(c["trial"]), baseline=bool(c["baseline"]),
                          search_throughput=float(c["search"]),
                          throughputs=tuple(float(v) for v in c.get("runs") or ()),
                          median=c.get("median"), spread=c.get("spread"), statuses=())
        for c in best.get("confirmation") or ()]
    winner = (best.get("measurement") or {}).get("trial")
    verdict = (best.get("decision") or {}).get("verdict")
    standing = f"confidence {best['confidence']}: {verdict}" if best.get("confidence") else ""
    path = folder / "throughput.png"
    save_plot(plot_data(rows, unit=rows[0].get("unit") or "items", confirmation=confirmation,
                        winner=winner, standing=standing), path)
    return path


if __name__ == "__main__":
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    for name in sys.argv[1:]:
        print(replot(Path(name)))
