#!/usr/bin/env bash
# GPU call: the GPU tests, then what starting confirmation runs ahead saves on GPT-2 (compiled).
#   bash benchmarks/gpu_checks.sh
# Returns $OUT/gpu-tests.log, $OUT/spare-runs-gpt.json and $OUT/spare-runs-gpt.log.
set -u
. benchmarks/device_env.sh
timeout 200 python3 -m pytest -q -p no:cacheprovider tests/gpu 2>&1 | tee $OUT/gpu-tests.log | tail -15
timeout $((585 - SECONDS)) python3 benchmarks/spare_runs.py --adapter adapters/gpt.py --device cuda \
  --compile default --runs 3 --rounds 2 --json $OUT/spare-runs-gpt.json 2>&1 \
  | tee $OUT/spare-runs-gpt.log | tail -30
