#!/usr/bin/env bash
# GPU call: measure grids (benchmarks/grid.py) for the given workloads, each capped in time.
#   bash benchmarks/gpu_grids.sh "resnet:input:280 tinyblocks:launch:280"
# Writes $OUT/grid-ADAPTER.json and $OUT/grid-ADAPTER.log per workload.
set -u
. benchmarks/device_env.sh
for spec in $1; do
  IFS=: read -r name bound cap <<< "$spec"
  timeout "$cap" python3 benchmarks/grid.py --adapter adapters/$name.py \
    --space benchmarks/grids/$bound.yaml --out $OUT/grid-$name.json --bound $bound \
    > $OUT/grid-$name.log 2>&1
  echo "== $name ($bound): exit $?"; tail -4 $OUT/grid-$name.log
done
