#!/usr/bin/env bash
# GPU call (a 2-GPU machine, e.g. nvidia-h200-x2): configurations per minute, 1 GPU vs 2 GPUs.
#   bash benchmarks/gpu_multi.sh [BUDGET_SECONDS=200] [ADAPTER=gpt]
# Two searches of adapters/ADAPTER.py over the default space with the same budget and seed, no
# confirmation: `--gpus 0`, then `--gpus 0,1`. Both give each trial the same CPUs (half the
# host's: what each of the 2 GPUs gets), so the space (num_workers up to the share) and every
# trial's resources are the same and only the concurrency differs. Writes $OUT/gpu_multi.json
# (trials_per_minute_1gpu, trials_per_minute_2gpu, trials_per_minute_ratio, the counts behind
# them, device, torch, date) and each run's trials.csv and log. Two runs of BUDGET + start-up
# each: keep 2 x (BUDGET + 40) under the 600 s a device command may take.
set -u
budget=${1:-200}; adapter=${2:-gpt}
. benchmarks/device_env.sh
cpus=$(python3 -c "import os; print(len(os.sched_getaffinity(0)))")
share=$((cpus / 2))
for n in 1 2; do
  gpus=$([ $n = 1 ] && echo 0 || echo 0,1)
  work=/tmp/multi-$n; rm -rf $work; mkdir -p $work
  start=$(date +%s)
  timeout $((budget + 60)) python3 -m autotune search --adapter adapters/$adapter.py \
    --space default --timeout $budget --trials 1000 --confirm 0 --seed 0 --out $work \
    --study-name multi-$n --gpus $gpus --cpus-per-trial $share 2>&1 | tee $work/search.log | tail -25
  echo "$n GPU(s): $(( $(date +%s) - start )) s"
  cp $work/trials.csv $OUT/multi-$n-trials.csv 2>/dev/null
  cp $work/search.log $OUT/multi-$n-search.log
  cp $work/best.yaml $OUT/multi-$n-best.yaml 2>/dev/null
done
python3 - "$budget" "$adapter" "$share" <<'EOF'
import datetime, json, os, sys
import optuna, torch
from optuna.trial import TrialState
from autotune.study.store.records import read_records

budget, adapter, share = float(sys.argv[1]), sys.argv[2], int(sys.argv[3])


def figures(n):
    study = optuna.load_study(study_name=f"multi-{n}", storage=f"sqlite:////tmp/multi-{n}/study.db")
    recs = {r.number: r for r in read_records(study)}
    trials = [t for t in study.get_trials(deepcopy=False) if t.datetime_start
              and t.datetime_complete and recs[t.number].search]  # not confirmation runs
    # A configuration measured: a process ran it to an outcome (ok, pruned, oom, error,
    # timeout...), not a copy of an earlier trial, not refused unrun, not cut by the budget.
    measured = [t for t in trials if t.state in (TrialState.COMPLETE, TrialState.PRUNED)
                and recs[t.number].duplicate_of is None and recs[t.number].result is not None
                and not recs[t.number].result.reason.startswith("not run")]
    first = min(t.datetime_start for t in trials)
    last = max(t.datetime_complete for t in trials)
    minutes = (last - first).total_seconds() / 60
    best = max((t.value for t in trials if t.state == TrialState.COMPLETE and t.value), default=None)
    return {"gpus": n, "measured": len(measured), "finished": sum(
                t.state in (TrialState.COMPLETE, TrialState.PRUNED) for t in trials),
            "minutes": round(minutes, 2), "per_minute": round(len(measured) / minutes, 3),
            "best_throughput": best}


one, two = figures(1), figures(2)
doc = {
    "trials_per_minute_1gpu": one["per_minute"],
    "trials_per_minute_2gpu": two["per_minute"],
    "trials_per_minute_ratio": round(two["per_minute"] / one["per_minute"], 3),
    "runs": [one, two],
    "what": "configurations measured (a trial process ran them to an outcome; copies and "
            "refusals not counted) per minute of search, first trial start to last trial end",
    "adapter": f"adapters/{adapter}.py", "space": "default", "budget_seconds": budget,
    "cpus_per_trial": share, "seed": 0,
    "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu",
    "gpus_visible": torch.cuda.device_count(),
    "torch": torch.__version__,
    "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
}
out = os.path.join(os.environ.get("OUT", "."), "gpu_multi.json")
with open(out, "w") as f:
    json.dump(doc, f, indent=2)
print(json.dumps(doc, indent=2))
EOF
