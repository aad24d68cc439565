#!/usr/bin/env bash
# GPU call: the ResNet and tinyblocks winners side by side with their grid's optimum config
# (2 alternating fresh runs each), then fidelity of the ResNet winner (results/h100/search/).
#   bash benchmarks/gpu_final.sh
set -u
. benchmarks/device_env.sh
timeout 180 python3 benchmarks/versus.py --adapter adapters/resnet.py \
  --best results/h100/search/resnet/best.yaml --grid results/h100/grids/resnet.json \
  --device cuda --runs 2 --json $OUT/versus-resnet.json 2>&1 | tee $OUT/versus-resnet.log | tail -6
TINY_BATCH=64 timeout 160 python3 benchmarks/versus.py --adapter adapters/tinyblocks.py \
  --best results/h100/search/tinyblocks/best.yaml --grid results/h100/grids/tinyblocks.json \
  --device cuda --runs 2 --json $OUT/versus-tinyblocks.json 2>&1 | tee $OUT/versus-tinyblocks.log | tail -6
timeout $((585 - SECONDS)) python3 benchmarks/fidelity.py --adapter adapters/resnet.py \
  --config results/h100/search/resnet/best.yaml --repeats 2 --warmup 20 --seconds 60 \
  --json $OUT/resnet-fidelity.json 2>&1 | tee $OUT/resnet-fidelity.log | tail -6
