"""One workload's search efficiency: what a budgeted search found against its grid's optimum.

    python benchmarks/search/efficiency.py --search OUT_DIR --grid GRID.json --bound compute \
        --budget 570 [--append results/h100/search-efficiency.json]

Reads the search's study (through its output folder) and best.yaml, and the grid measured on
the same machine; prints one JSON object and, with --append, adds or replaces it (by adapter)
in a list. `trials` counts configurations the search evaluated: trials that ran (pruned ones
included) and memory-wall, implied-slow or known-incompatible refusals, not re-used duplicates
nor configs the budget's end left unstarted (a timeout "not run": its first compile would not
have finished). `pruned` counts trials that ran, `implied_slow` those judged without running.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import optuna  # noqa: E402
import yaml  # noqa: E402

from autotune.contract.result import Status  # noqa: E402
from autotune.study.store import records  # noqa: E402


def summarize(search: Path, grid: Path, bound: str, budget: float) -> dict[str, object]:
    # The folder may have moved since the search (fetched from the GPU machine): open the
    # study file inside it rather than the path study.yaml recorded.
    name = yaml.safe_load((search / "study.yaml").read_text())["study_name"]
    study = optuna.load_study(study_name=name, storage=f"sqlite:///{(search / 'study.db').resolve()}")
    recs = [r for r in records.read_records(study) if r.result is not None and r.search]
    evaluated = [r for r in recs if r.duplicate_of is None
                 and r.result.status is not Status.INTERRUPTED
                 and not (r.result.status is Status.TIMEOUT
                          and not r.result.ran)]
    # Launched on the device: pruned ones too (their results carry no phases), not refusals.
    ran = [r for r in evaluated if r.result.ran]
    fixed = [r.result.fixed_seconds for r in ran if r.result.fixed_seconds is not None]
    best = yaml.safe_load((search / "best.yaml").read_text())
    cells = json.loads(grid.read_text())
    ok = [c for c in cells["cells"] if c["result"]["status"] == "ok"]
    top = max(ok, key=lambda c: c["result"]["throughput"])
    fp = best["provenance"]
    return {
        "adapter": str(cells["adapter"]),
        "bound": bound,
        "budget_seconds": budget,
        "trials": len(evaluated),
        "trials_ran": len(ran),
        "pruned": sum(r.result.status is Status.PRUNED for r in ran),
        "implied_slow": sum(r.result.status is Status.PRUNED for r in evaluated) - sum(
            r.result.status is Status.PRUNED for r in ran),
        "best": best["throughput"]["value"],
        "best_from": best["throughput"]["from"],
        "best_config": best["config"],
        "optimum": round(top["result"]["throughput"], 1),
        "optimum_config": top["config"],
        "ratio": round(best["throughput"]["value"] / top["result"]["throughput"], 4),
        "unit": best["throughput"]["unit"],
        "fixed_seconds_median": round(statistics.median(fixed), 2) if fixed else None,
        "device": fp["device"],
        "torch": fp["torch"],
        "date": fp["date"],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--search", type=Path, required=True)
    parser.add_argument("--grid", type=Path, required=True)
    parser.add_argument("--bound", required=True, choices=("compute", "input", "launch"))
    parser.add_argument("--budget", type=float, required=True)
    parser.add_argument("--append", type=Path, default=None)
    args = parser.parse_args()
    row = summarize(args.search, args.grid, args.bound, args.budget)
    print(json.dumps(row, indent=1))
    if args.append is not None:
        rows = json.loads(args.append.read_text()) if args.append.is_file() else []
        rows = [r for r in rows if r.get("adapter") != row["adapter"]] + [row]
        args.append.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
