#!/usr/bin/env bash
# First look on the GPU machine: knob tests, a small GPT search over the default space, and the
# ResNet baseline + hand recipe with their bottleneck diagnosis. Writes under $OUT.
set -u
. benchmarks/device_env.sh
timeout 200 python3 -m pytest tests/gpu -s -v -p no:cacheprovider 2>&1 | tee $OUT/knobs.log | grep -E "KNOB|PASS|FAIL|Error|error" | head -60
export GPT_N_LAYER=2 GPT_N_EMBD=256 GPT_N_HEAD=4 GPT_BLOCK=256 GPT_VOCAB=8192
timeout 200 python3 -m autotune search --adapter adapters/gpt.py --trials 7 --trial-timeout 100 \
  --measure-seconds 3 --confirm 1 --confirm-repeats 1 --seed 0 --out $OUT/gpt-smoke 2>&1 | tail -25
unset GPT_N_LAYER GPT_N_EMBD GPT_N_HEAD GPT_BLOCK GPT_VOCAB
timeout 150 python3 -m autotune search --adapter adapters/resnet.py --trials 2 --confirm 0 \
  --measure-seconds 5 --out $OUT/resnet-smoke 2>&1 | tail -8
python3 - <<'PY'
import json, glob, os
for f in sorted(glob.glob(os.environ["OUT"] + "/*-smoke/trials/*/result.json")):
    d = json.load(open(f)); x = d.get("extra", {})
    print(f.split("/")[-4], f.split("/")[-2], d["status"], d.get("reason", "")[:150], "| diag:", x.get("diagnosis", {}).get("verdict"),
          {k: round(v) for k, v in x.get("diagnosis", {}).items() if k in ("loader_rate", "compute_rate")}, x.get("diagnosis", {}).get("gpu_busy_fraction"))
PY
rm -rf $OUT/*-smoke/trials $OUT/*-smoke/study.db
