"""Configurations per minute of two searches, 1 GPU against 2 (`benchmarks/gpu.sh multi`).

    python3 benchmarks/scale/multi_summary.py --budget 170 --adapter gpt --cpus-per-trial 16 \\
        [--work /tmp] [--out $OUT/gpu_multi.json]

Reads the studies `multi-1` and `multi-2` from WORK/multi-1/study.db and WORK/multi-2/study.db
and writes trials_per_minute_1gpu, trials_per_minute_2gpu, their ratio, the counts behind them,
device, torch and date. Was the inline summary of benchmarks/gpu_multi.sh; same figures.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import optuna  # noqa: E402
import torch  # noqa: E402
from optuna.trial import TrialState  # noqa: E402

from autotune.study.store.records import read_records  # noqa: E402


def figures(work: Path, n: int) -> dict[str, Any]:
    study = optuna.load_study(study_name=f"multi-{n}",
                              storage=f"sqlite:///{work / f'multi-{n}' / 'study.db'}")
    recs = {r.number: r for r in read_records(study)}
    trials = [t for t in study.get_trials(deepcopy=False) if t.datetime_start
              and t.datetime_complete and recs[t.number].search]  # not confirmation runs
    # A configuration measured: a process ran it to an outcome (ok, pruned, oom, error,
    # timeout...), not a copy of an earlier trial, not refused unrun, not cut by the budget.
    measured = [t for t in trials if t.state in (TrialState.COMPLETE, TrialState.PRUNED)
                and recs[t.number].duplicate_of is None and recs[t.number].result is not None
                and recs[t.number].result.ran]
    first = min(t.datetime_start for t in trials)
    last = max(t.datetime_complete for t in trials)
    minutes = (last - first).total_seconds() / 60
    best = max((t.value for t in trials if t.state == TrialState.COMPLETE and t.value),
               default=None)
    return {"gpus": n, "measured": len(measured), "finished": sum(
                t.state in (TrialState.COMPLETE, TrialState.PRUNED) for t in trials),
            "minutes": round(minutes, 2), "per_minute": round(len(measured) / minutes, 3),
            "best_throughput": best}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--budget", type=float, required=True, help="each search's --timeout")
    p.add_argument("--adapter", required=True, help="the adapter's name (adapters/NAME.py)")
    p.add_argument("--cpus-per-trial", type=int, required=True)
    p.add_argument("--work", type=Path, default=Path("/tmp"), help="holds multi-1/ and multi-2/")
    p.add_argument("--out", type=Path, default=Path("gpu_multi.json"))
    args = p.parse_args()
    one, two = figures(args.work, 1), figures(args.work, 2)
    doc = {
        "trials_per_minute_1gpu": one["per_minute"],
        "trials_per_minute_2gpu": two["per_minute"],
        "trials_per_minute_ratio": round(two["per_minute"] / one["per_minute"], 3),
        "runs": [one, two],
        "what": "configurations measured (a trial process ran them to an outcome; copies and "
                "refusals not counted) per minute of search, first trial start to last trial end",
        "adapter": f"adapters/{args.adapter}.py", "space": "default",
        "budget_seconds": args.budget, "cpus_per_trial": args.cpus_per_trial, "seed": 0,
        "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu",
        "gpus_visible": torch.cuda.device_count(),
        "torch": torch.__version__,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }
    args.out.write_text(json.dumps(doc, indent=2))
    print(json.dumps(doc, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
