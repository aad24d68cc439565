#!/usr/bin/env bash
# GPU call A: the CUDA knob tests, then the ResNet search (input-bound case).
set -u
. benchmarks/device_env.sh
mkdir -p $OUT/resnet /root/keep
timeout 150 python3 -m pytest tests/gpu -s -v -p no:cacheprovider > $OUT/knobs.log 2>&1
grep -E "KNOB|PASSED|FAILED|passed|failed" $OUT/knobs.log
timeout 375 python3 -m autotune search --adapter adapters/resnet.py --space default --timeout 350 \
  --confirm 1 --confirm-repeats 2 --seed 0 --out $OUT/resnet 2>&1 | tee $OUT/resnet/search.log | tail -25
COLUMNS=200 python3 -m autotune show $OUT/resnet 2>&1 | tail -22
tar czf $OUT/resnet/trials.tgz -C $OUT/resnet trials confirm && rm -rf $OUT/resnet/trials $OUT/resnet/confirm
cp -r $OUT/resnet /root/keep/
