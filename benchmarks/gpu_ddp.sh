#!/usr/bin/env bash
# GPU call (a host with 2 GPUs, e.g. nvidia-h200-x2): DDP scaling of adapters/gpt.py. A 1-rank and
# a 2-rank (--nproc-per-node 2) search of the same space and budget, their scaling efficiency
# (2-rank throughput / (2 x 1-rank throughput)), then the 2-rank winner with each DDP knob changed
# alone. Figures and numbers go to $OUT: ddp.json, ddp-knobs.png, each search's best.yaml,
# trials.csv, throughput.png and search log.
#   bash benchmarks/gpu_ddp.sh [all|search|sweep|test]
# "all" fits one 10-minute device call with the default budgets; with longer budgets run
# "search" and then "sweep" as two calls on the same warm machine (the work stays in $WORK).
# "test" runs the 2-GPU tests (tests/gpu/test_ddp_cuda.py: NCCL ranks, the multicast settings
# in every rank, an OOM on rank 1) and nothing else.
#   ADAPTER (default adapters/gpt.py), DEVICE (default cuda; cpu runs gloo ranks, for a dry run),
#   BUDGET (seconds per search, default 150), SWEEP_SECONDS (timed seconds per sweep run,
#   default 6; 0 skips it), SPACE (default "default"), WORK (default /tmp/gpu_ddp)
set -u
phase=${1:-all}
BUDGET=${BUDGET:-150}; SWEEP_SECONDS=${SWEEP_SECONDS:-6}; SPACE=${SPACE:-default}
WORK=${WORK:-/tmp/gpu_ddp}; OUT=${OUT:-$WORK/out}
ADAPTER=${ADAPTER:-adapters/gpt.py}; DEVICE=${DEVICE:-cuda}
. benchmarks/device_env.sh
# The multi-GPU machines keep NVLink multicast off; autotune only adds to the environment, so
# every rank inherits these (set them here too when the machine does not).
export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0} TORCH_SYMM_MEM_DISABLE_MULTICAST=${TORCH_SYMM_MEM_DISABLE_MULTICAST:-1} \
  NVSHMEM_DISABLE_NVLS=${NVSHMEM_DISABLE_NVLS:-1}
mkdir -p "$WORK" "$OUT"
if [ "$phase" = test ]; then
  timeout 500 python3 -m pytest -v -p no:cacheprovider tests/gpu/test_ddp_cuda.py 2>&1 | tee "$OUT/test.log" | tail -15
  exit "${PIPESTATUS[0]}"
fi

search() {  # NAME NPROC
  local name=$1 nproc=$2 dir=$WORK/$1
  rm -rf "$dir"
  timeout $((BUDGET + 60)) python3 -m autotune search --adapter "$ADAPTER" --device "$DEVICE" --space "$SPACE" \
    --timeout "$BUDGET" --seed 0 --nproc-per-node "$nproc" --confirm 2 --confirm-repeats 1 \
    --confirm-measure-seconds 8 --study-name "ddp-$name" --out "$dir" 2>&1 | tee "$OUT/$name-search.log" | tail -25
  for f in best.yaml trials.csv throughput.png; do cp "$dir/$f" "$OUT/$name-$f" 2>/dev/null; done
}

if [ "$phase" = all ] || [ "$phase" = search ]; then
  search 1rank 1
  search 2rank 2
fi
sweep=0
if [ "$phase" = all ] || [ "$phase" = sweep ]; then sweep=$SWEEP_SECONDS; fi
python3 benchmarks/ddp_scaling.py --one "$WORK/1rank" --many "$WORK/2rank" --nproc 2 \
  --adapter "$ADAPTER" --device "$DEVICE" --sweep-seconds "$sweep" --out "$OUT" 2>&1 | tee "$OUT/ddp.log"
