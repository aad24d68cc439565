#!/usr/bin/env bash
# GPU call: the lab (rows 1-5 interleaved, 2 rounds) and the fidelity benchmark for one adapter.
#   bash benchmarks/gpu_call_lab.sh gpt|resnet LAB_TIMEOUT FIDELITY_REPEATS LONG_SECONDS
set -u
name=$1; lab_timeout=$2; reps=$3; long=$4
. benchmarks/device_env.sh
best=/root/keep/$name/best.yaml; [ -f $best ] || best=results/$name/best.yaml
echo "tuned config: $best"; mkdir -p $OUT/$name-lab
[ -n "${KNOB_TEST:-}" ] && timeout 90 python3 -m pytest tests/gpu -s -v -p no:cacheprovider -k "$KNOB_TEST" 2>&1 | grep -E "KNOB|PASSED|FAILED|^E " | head
timeout $lab_timeout python3 -m autotune lab --adapter adapters/$name.py --config $best --repeats 2 \
  --measure-seconds 8 --out $OUT/$name-lab 2>&1 | tee $OUT/$name-lab/lab.log | tail -14
rm -rf $OUT/$name-lab/runs
timeout $((590 - SECONDS)) python3 benchmarks/fidelity.py --adapter adapters/$name.py --config $best \
  --repeats $reps --warmup 30 --seconds $long --json $OUT/$name-fidelity.json 2>&1 | tee $OUT/$name-fidelity.log | tail -6
