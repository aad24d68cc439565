#!/usr/bin/env bash
# GPU call: fidelity again for the input-bound winner (3 estimates), then the launch-bound one.
#   bash benchmarks/gpu_fidelity2.sh
set -u
. benchmarks/device_env.sh
timeout 300 python3 benchmarks/fidelity.py --adapter adapters/resnet.py \
  --config results/h100/search/resnet/best.yaml --repeats 3 --warmup 30 --seconds 60 \
  --json $OUT/resnet-fidelity.json 2>&1 | tee $OUT/resnet-fidelity.log | tail -8
TINY_BATCH=64 timeout $((580 - SECONDS)) python3 benchmarks/fidelity.py --adapter adapters/tinyblocks.py \
  --config results/h100/search/tinyblocks/best.yaml --repeats 3 --warmup 20 --seconds 45 \
  --json $OUT/tinyblocks-fidelity.json 2>&1 | tee $OUT/tinyblocks-fidelity.log | tail -8
