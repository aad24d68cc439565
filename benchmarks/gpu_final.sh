#!/usr/bin/env bash
# GPU call: the tinyblocks winner side by side with its grid's optimum config, then fidelity of
# the ResNet winner (both from results/h100/search/).
#   bash benchmarks/gpu_final.sh
set -u
. benchmarks/device_env.sh
TINY_BATCH=64 timeout 240 python3 benchmarks/versus.py --adapter adapters/tinyblocks.py \
  --best results/h100/search/tinyblocks/best.yaml --grid results/h100/grids/tinyblocks.json \
  --device cuda --runs 3 --json $OUT/versus-tinyblocks.json 2>&1 | tee $OUT/versus-tinyblocks.log | tail -6
timeout $((585 - SECONDS)) python3 benchmarks/fidelity.py --adapter adapters/resnet.py \
  --config results/h100/search/resnet/best.yaml --repeats 3 --warmup 30 --seconds 90 \
  --json $OUT/resnet-fidelity.json 2>&1 | tee $OUT/resnet-fidelity.log | tail -6
