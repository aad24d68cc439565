#!/usr/bin/env bash
# GPU call: the fidelity benchmark for the GPT and the ResNet winners of results/h100/.
#   bash benchmarks/gpu_fidelity.sh
set -u
. benchmarks/device_env.sh
timeout 280 python3 benchmarks/fidelity.py --adapter adapters/gpt.py --config results/h100/gpt/best.yaml \
  --repeats 2 --warmup 40 --seconds 90 --json $OUT/gpt-fidelity.json 2>&1 | tee $OUT/gpt-fidelity.log | tail -4
timeout $((585 - SECONDS)) python3 benchmarks/fidelity.py --adapter adapters/resnet.py \
  --config results/h100/resnet/best.yaml --repeats 3 --warmup 30 --seconds 90 \
  --json $OUT/resnet-fidelity.json 2>&1 | tee $OUT/resnet-fidelity.log | tail -5
