#!/usr/bin/env bash
# GPU call B: the GPT-2-small search with a 9-minute budget (one device call is capped at 10).
set -u
. benchmarks/device_env.sh
mkdir -p $OUT/gpt /root/keep
timeout 575 python3 -m autotune search --adapter adapters/gpt.py --space default --timeout 540 \
  --confirm 1 --confirm-repeats 2 --seed 0 --out $OUT/gpt 2>&1 | tee $OUT/gpt/search.log | tail -25
COLUMNS=200 python3 -m autotune show $OUT/gpt 2>&1 | tail -22
tar czf $OUT/gpt/trials.tgz -C $OUT/gpt trials confirm && rm -rf $OUT/gpt/trials $OUT/gpt/confirm
cp -r $OUT/gpt /root/keep/
