#!/usr/bin/env bash
# GPU call: one search over the default space.
#   bash benchmarks/gpu_search.sh NAME TIMEOUT [extra search flags...]
# Returns $OUT/NAME.tgz (the whole output folder but compile caches and artifacts) and, beside
# it, $OUT/NAME-best.yaml, $OUT/NAME-trials.csv and $OUT/NAME-throughput.png.
set -u
name=$1; budget=$2; shift 2
. benchmarks/device_env.sh
work=/tmp/search-$name; rm -rf $work; mkdir -p $work
timeout $((budget + 25)) python3 -m autotune search --adapter adapters/$name.py --space default \
  --timeout $budget --seed 0 --out $work "$@" 2>&1 | tee $work/search.log | tail -45
COLUMNS=200 python3 -m autotune show $work 2>&1 | tail -22
for f in best.yaml trials.csv throughput.png; do cp $work/$f $OUT/$name-$f 2>/dev/null; done
tar czf $OUT/$name.tgz -C /tmp --exclude='*.bin' --exclude='compile-cache' search-$name
