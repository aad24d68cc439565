#!/usr/bin/env bash
# GPU call: (optionally the CUDA knob tests, then) one search over the default space.
#   bash benchmarks/gpu_search.sh NAME TIMEOUT [extra search flags...]
# Writes $OUT/NAME/{best.yaml,trials.csv,throughput.png,search.log} (+ $OUT/knobs.log with
# KNOBS=1) and keeps a copy in /root/keep for a later call on the same machine.
set -u
name=$1; budget=$2; shift 2
. benchmarks/device_env.sh
mkdir -p $OUT/$name /root/keep
if [ -n "${KNOBS:-}" ]; then
  timeout 150 python3 -m pytest tests/gpu -s -v -p no:cacheprovider > $OUT/knobs.log 2>&1
  grep -E "KNOB|PASSED|FAILED|passed|failed" $OUT/knobs.log
fi
timeout $((budget + 40)) python3 -m autotune search --adapter adapters/$name.py --space default \
  --timeout $budget --seed 0 --out $OUT/$name "$@" 2>&1 | tee $OUT/$name/search.log | tail -30
COLUMNS=200 python3 -m autotune show $OUT/$name 2>&1 | tail -22
rm -rf /root/keep/$name; cp -r $OUT/$name /root/keep/
rm -rf $OUT/$name/trials $OUT/$name/confirm $OUT/$name/study.db
