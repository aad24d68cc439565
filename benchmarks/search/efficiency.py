"""One workload's search efficiency: what a budgeted search found against its grid's optimum.

    python benchmarks/search/efficiency.py --search OUT_DIR --grid GRID.json --bound compute \
        --budget 570 [--versus VERSUS.json] [--vary-global-batch] \
        [--append results/h100/search-efficiency.json]

`--versus` adds the side-by-side figures of `versus.py` (the winner and the optimum's config in
alternating fresh runs). When versus.py ran the grid's top configs (its `--grid-top`), the
optimum is the highest median among them, and the ratio the winner's median in that run over it. Without `--grid` the optimum is the config versus.py ran against (a
space with no grid: the best config known, measured side by side).

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
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import optuna  # noqa: E402
import yaml  # noqa: E402

from autotune.contract.result import Status  # noqa: E402
from autotune.study.store import records  # noqa: E402


def summarize(search: Path, grid: Path | None, bound: str, budget: float,
              versus: dict[str, Any] | None = None, vary: bool = False) -> dict[str, object]:
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
    if grid is not None:
        cells = json.loads(grid.read_text())
        ok = [c for c in cells["cells"] if c["result"]["status"] == "ok"]
        top = max(ok, key=lambda c: c["result"]["throughput"])
        adapter, optimum, optimum_config = cells["adapter"], top["result"]["throughput"], \
            top["config"]
    elif versus is not None and versus.get("optimum_median"):
        adapter, optimum, optimum_config = versus["adapter"], versus["optimum_median"], \
            versus["optimum_config"]
    else:
        raise ValueError("need a grid, or a versus.py JSON whose optimum ran (optimum_median)")
    if versus is not None and "ratio" not in versus and not versus.get("grid_best_median"):
        raise ValueError("the versus.py JSON holds no comparison (a call cut short, or a config "
                         "with no ok run): complete it from its 'runs' first")
    ratio = best["throughput"]["value"] / optimum
    optimum_from = f"grid {grid}" if grid is not None else \
        f"the median of versus.py's runs of {versus['grid'] if versus else '-'} (no grid)"
    if versus is not None and versus.get("grid_best_median"):
        # The grid's top configs re-run beside the winner (versus.py --grid-top): a cell is one
        # short window, and the highest of many is as often the luckiest as the fastest.
        optimum, optimum_config = versus["grid_best_median"], versus["grid_best_config"]
        ratio = versus["ratio_to_grid_best"]
        ran = sum(1 for t in versus["grid_top"] if t.get("median"))
        optimum_from = (f"the highest median of grid {versus['grid']}'s top "
                        f"{ran} configs, run side by side with the winner "
                        "(versus.py --grid-top); ratio: the winner's median there over it")
    fp = best["provenance"]
    side = None if versus is None else {
        "winner_runs": [round(v, 1) for v in versus.get("winner_runs", [])],
        "optimum_runs": [round(v, 1) for v in versus.get("optimum_runs", [])],
        "ratio": round(versus["ratio"], 4) if "ratio" in versus else None,
        "optimum_config": versus["optimum_config"],
        "date": versus.get("date"),
    }
    return {
        "adapter": str(adapter),
        "bound": bound,
        "vary_global_batch": vary,
        "budget_seconds": budget,
        "configs": len({json.dumps(r.config.to_dict(), sort_keys=True) for r in evaluated}),
        "trials": len(evaluated),
        "trials_ran": len(ran),
        "pruned": sum(r.result.status is Status.PRUNED for r in ran),
        "implied_slow": sum(r.result.status is Status.PRUNED for r in evaluated) - sum(
            r.result.status is Status.PRUNED for r in ran),
        "best": best["throughput"]["value"],
        "best_from": best["throughput"]["from"],
        "best_config": best["config"],
        "optimum": round(optimum, 1),
        "optimum_from": optimum_from,
        "optimum_config": optimum_config,
        "ratio": round(ratio, 4),
        "side_by_side": side,
        "compile_seconds": round(sum(r.result.compile_seconds or 0.0 for r in ran), 1),
        "recompiles": sum(r.result.recompiles or 0 for r in ran),
        "recompiles_max": max((r.result.recompiles or 0 for r in ran), default=0),
        "unit": best["throughput"]["unit"],
        "fixed_seconds_median": round(statistics.median(fixed), 2) if fixed else None,
        "device": fp["device"],
        "torch": fp["torch"],
        "date": fp["date"],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--search", type=Path, required=True)
    parser.add_argument("--grid", type=Path, default=None)
    parser.add_argument("--bound", required=True,
                        choices=("compute", "compute-variable", "input", "launch"))
    parser.add_argument("--budget", type=float, required=True)
    parser.add_argument("--versus", type=Path, default=None, help="versus.py's JSON")
    parser.add_argument("--vary-global-batch", action="store_true",
                        help="the search ran with --vary-global-batch (recorded)")
    parser.add_argument("--append", type=Path, default=None)
    args = parser.parse_args()
    if args.grid is None and args.versus is None:
        parser.error("give --grid, or --versus with the config that stands for the optimum")
    versus = json.loads(args.versus.read_text()) if args.versus is not None else None
    row = summarize(args.search, args.grid, args.bound, args.budget, versus,
                    args.vary_global_batch)
    print(json.dumps(row, indent=1))
    if args.append is not None:
        rows = json.loads(args.append.read_text()) if args.append.is_file() else []
        key = (row["adapter"], row["bound"], row["vary_global_batch"])
        rows = [r for r in rows if (r.get("adapter"), r.get("bound"),
                                    r.get("vary_global_batch", False)) != key] + [row]
        args.append.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
