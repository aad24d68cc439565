#!/usr/bin/env bash
# GPU call: fidelity of the searched winners (results/h100/search/) with today's measurement:
# ResNet (input-bound) with 4 estimates, then GPT-2 (compute-bound) with what time is left.
#   bash benchmarks/gpu_fidelity.sh
set -u
. benchmarks/device_env.sh
timeout 330 python3 benchmarks/fidelity.py --adapter adapters/resnet.py \
  --config results/h100/search/resnet/best.yaml --repeats 4 --warmup 30 --seconds 60 \
  --json $OUT/resnet-fidelity.json 2>&1 | tee $OUT/resnet-fidelity.log | tail -8
timeout $((580 - SECONDS)) python3 benchmarks/fidelity.py --adapter adapters/gpt.py \
  --config results/h100/search/gpt/best.yaml --repeats 2 --warmup 20 --seconds 45 \
  --json $OUT/gpt-fidelity.json 2>&1 | tee $OUT/gpt-fidelity.log | tail -8
