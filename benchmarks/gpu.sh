#!/usr/bin/env bash
# One GPU-machine call: one job or several, joined by "+", run in order.
#   bash benchmarks/gpu.sh JOB[:LIMIT] [ARGS...] [+ JOB[:LIMIT] [ARGS...] ...]
# e.g. bash benchmarks/gpu.sh fidelity:330 resnet - 4 30 60 + fidelity gpt - 2 20 45
# A job's time limit is LIMIT seconds, or what is left of the call (CALL_SECONDS, default 590:
# a device command may take 600 s), whichever is less. Output goes to $OUT.
#
# Jobs (ADAPTER is a name in adapters/, e.g. gpt, resnet, tinyblocks):
#   search ADAPTER[:TAG] SECONDS [search flags...]  a search of the default space, --seed 0, in
#       /tmp/search-ADAPTER[-TAG]: $OUT/ADAPTER[-TAG].tgz (the output folder without caches) and
#       ADAPTER[-TAG]-{best.yaml,trials.csv,throughput.png}
#   grid ADAPTER:BOUND[:CAP] ...               benchmarks/search/grid.py over
#       benchmarks/grids/BOUND.yaml: $OUT/grid-ADAPTER.{json,log} (a BOUND ending in -vary:
#       every batch factor, --vary-global-batch, $OUT/grid-ADAPTER-vary.*)
#   (CONFIG "-" is results/h100/search/ADAPTER/best.yaml, "@" this call's search of ADAPTER)
#   fidelity ADAPTER [CONFIG|-] [REPEATS=3] [WARMUP=30] [SECONDS=60] [flags]  benchmarks/
#       measurement/fidelity.py (flags: e.g. --long-runs 2); CONFIG "-" is
#       results/h100/search/ADAPTER/best.yaml: $OUT/ADAPTER-fidelity.*
#   versus ADAPTER [RUNS=2] [CONFIG] [GRID] [flags]  benchmarks/search/versus.py: CONFIG (as
#       below; "@TAG" is this call's search ADAPTER:TAG) against GRID's optimum (this call's
#       grid of ADAPTER, else results/h100/grids/ADAPTER.json): $OUT/versus-ADAPTER[-TAG].* (a
#       CONFIG path .../NAME/best.yaml: $OUT/versus-NAME.*)
#   lab ADAPTER [CONFIG|-] [REPEATS=2] [MEASURE_SECONDS=8]   autotune lab: $OUT/ADAPTER-lab/
#   profile ADAPTER [CONFIG|-|""] [FLAGS...]  autotune profile --tensorboard on CUDA; CONFIG "-"
#       (or none) is results/h100/search/ADAPTER/best.yaml, "" is none (then e.g. --compare
#       A.yaml B.yaml): $OUT/profile-ADAPTER.tgz (trace.json, memory-snapshot.pickle,
#       tensorboard/, breakdown.md/.json, log.txt) and $OUT/ADAPTER-breakdown.md
#   checks                                     tests/gpu, then spare runs on compiled GPT-2:
#       $OUT/gpu-tests.log, $OUT/spare-runs-gpt.{json,log}
#   kbench ADAPTER BASE [knobs.py flags...]    benchmarks/measurement/knobs.py, BASE a YAML of
#       knobs or a best.yaml: $OUT/knobs-ADAPTER.{json,log}
#   knobs [-k EXPR]                            tests/gpu -s -v, the KNOB lines: $OUT/knobs.log
#   smoke                                      first look: knobs, a small GPT-2 search, the
#       ResNet baseline and recipe with their diagnosis
#   multi [BUDGET=200] [ADAPTER=gpt]           2-GPU host: configurations per minute, 1 GPU vs 2
#   ddp [all|search|sweep|test]                2-GPU host: DDP scaling (see ddp_job below)
# tinyblocks runs with TINY_BATCH=64 (as every committed tinyblocks result) unless TINY_BATCH is
# set. GPU_DRY_RUN=1 prints each command instead of running it, without the device set-up.
set -u
CALL_SECONDS=${CALL_SECONDS:-590}
DRY=${GPU_DRY_RUN:-}
OUT=${OUT:-/tmp/gpu-out}
here=benchmarks

left() {  # LIMIT: the seconds a job may take, its own limit or what is left of the call
  local rest=$((CALL_SECONDS - SECONDS))
  if [ -n "${1:-}" ] && [ "$1" -lt "$rest" ]; then echo "$1"; else echo "$rest"; fi
}

run() {  # LOG TAIL SECONDS CMD...: run CMD under a time limit, its output to LOG, its tail shown
  local log=$1 tail=$2 secs=$3; shift 3
  if [ -n "$DRY" ]; then echo "+ timeout $secs $* > $log"; return 0; fi
  timeout "$secs" "$@" 2>&1 | tee "$log" | tail -n "$tail"
  return "${PIPESTATUS[0]}"
}

adapter_env() {  # NAME: the environment its committed results ran with (used unquoted: no spaces)
  if [ "$1" = tinyblocks ]; then echo "TINY_BATCH=${TINY_BATCH:-64}"; fi
  # The quick start's example at a GPU host's size: 64-px crops of 72-px images, batch 128
  # (issue 24's input-bound class). 128-px crops of 144 ran 3.8k images/s with 16 workers on
  # the H100 host (about 4 ms of NumPy an image a worker; 1.2 ms on the 2-CPU VM). 4096 images
  # (32 steps an epoch): what the 2026-11-26 results ran with; the example's default is larger.
  if [ "$1" = augment ]; then
    echo "AUGMENT_STORED=${AUGMENT_STORED:-72} AUGMENT_CROP=${AUGMENT_CROP:-64}" \
      "AUGMENT_IMAGES=${AUGMENT_IMAGES:-4096}" \
      "AUGMENT_WIDTH=${AUGMENT_WIDTH:-64} AUGMENT_BATCH=${AUGMENT_BATCH:-128}"
  fi
}

config_of() {  # NAME CONFIG: "-" or empty means the searched winner in results/h100/search/;
  # "@" or "@TAG" the winner of this call's `search NAME[:TAG]` (/tmp/search-NAME[-TAG]/)
  case "${2:-}" in
    ""|-) echo "results/h100/search/$1/best.yaml" ;;
    @) echo "/tmp/search-$1/best.yaml" ;;
    @*) echo "/tmp/search-$1-${2#@}/best.yaml" ;;
    *) echo "$2" ;;
  esac
}

search_job() {  # ADAPTER[:TAG] SECONDS [flags...]: a TAG keeps two searches of one adapter apart
  local name=${1%%:*} key=${1/:/-} budget=$2; shift 2
  local work=/tmp/search-$key
  [ -z "$DRY" ] && { rm -rf "$work"; mkdir -p "$work"; }
  run "$work/search.log" 45 "$(left $((budget + 25)))" env $(adapter_env "$name") \
    python3 -m autotune search --adapter "adapters/$name.py" --space default --timeout "$budget" \
    --seed 0 --out "$work" "$@"
  [ -n "$DRY" ] && return 0
  COLUMNS=200 python3 -m autotune show "$work" 2>&1 | tail -22
  for f in best.yaml trials.csv throughput.png; do cp "$work/$f" "$OUT/$key-$f" 2>/dev/null; done
  tar czf "$OUT/$key.tgz" -C /tmp --exclude='*.bin' --exclude='compile-cache' "search-$key"
}

grid_job() {  # ADAPTER:BOUND[:CAP] ...: a BOUND ending in -vary keeps every batch factor
  # (grid.py --vary-global-batch) and writes grid-ADAPTER-vary.json
  local spec name bound cap key flags
  for spec in "$@"; do
    IFS=: read -r name bound cap <<< "$spec"
    key=$name flags=()
    case $bound in *-vary) key=$name-vary flags=(--vary-global-batch) ;; esac
    run "$OUT/grid-$key.log" 4 "$(left "$cap")" env $(adapter_env "$name") \
      python3 $here/search/grid.py --adapter "adapters/$name.py" "${flags[@]}" \
      --space "$here/grids/$bound.yaml" --out "$OUT/grid-$key.json" --bound "$bound"
    echo "== $name ($bound): exit $?"
  done
}

fidelity_job() {  # ADAPTER [CONFIG] [REPEATS] [WARMUP] [SECONDS] [fidelity.py flags...]
  local name=$1 config repeats=${3:-3} warmup=${4:-30} seconds=${5:-60}
  config=$(config_of "$name" "${2:-}")
  shift $(( $# < 5 ? $# : 5 ))
  run "$OUT/$name-fidelity.log" 8 "$(left "$LIMIT")" env $(adapter_env "$name") \
    python3 $here/measurement/fidelity.py --adapter "adapters/$name.py" \
    --config "$config" --repeats "$repeats" --warmup "$warmup" \
    --seconds "$seconds" --json "$OUT/$name-fidelity.json" "$@"
}

versus_job() {  # ADAPTER [RUNS] [CONFIG] [GRID] [versus.py flags...]: GRID defaults to this
  # call's grid of ADAPTER ($OUT/grid-ADAPTER.json) when there is one, else the committed one
  local name=$1 runs=${2:-2} best grid=${4:-} key=$1
  best=$(config_of "$name" "${3:-}")
  case "${3:-}" in  # a search's folder names the output: two winners of one adapter apart
    @?*) key=$name-${3#@} ;;
    */best.yaml) key=$(basename "$(dirname "$3")"); [ "$key" = . ] && key=$name ;;
  esac
  if [ -z "$grid" ]; then
    grid=results/h100/grids/$name.json; [ -f "$OUT/grid-$name.json" ] && grid=$OUT/grid-$name.json
  fi
  shift $(( $# < 4 ? $# : 4 ))
  run "$OUT/versus-$key.log" 6 "$(left "$LIMIT")" env $(adapter_env "$name") \
    python3 $here/search/versus.py --adapter "adapters/$name.py" --best "$best" \
    --grid "$grid" --device cuda --runs "$runs" --json "$OUT/versus-$key.json" "$@"
}

lab_job() {  # ADAPTER [CONFIG] [REPEATS] [MEASURE_SECONDS]
  local name=$1
  [ -z "$DRY" ] && mkdir -p "$OUT/$name-lab"
  run "$OUT/$name-lab/lab.log" 14 "$(left "$LIMIT")" env $(adapter_env "$name") \
    python3 -m autotune lab --adapter "adapters/$name.py" --config "$(config_of "$name" "${2:-}")" \
    --repeats "${3:-2}" --measure-seconds "${4:-8}" --out "$OUT/$name-lab"
  [ -z "$DRY" ] && rm -rf "$OUT/$name-lab/runs"
  return 0
}

profile_job() {  # ADAPTER [CONFIG|-|""] [autotune profile flags...]: "" gives no --config
  local name=$1 work=/tmp/profile-$1 config=()
  [ $# -gt 1 ] && [ -z "$2" ] || config=(--config "$(config_of "$name" "${2:-}")")
  shift; [ $# -gt 0 ] && shift
  [ -z "$DRY" ] && rm -rf "$work"
  run "$OUT/profile-$name.log" 30 "$(left "$LIMIT")" env $(adapter_env "$name") \
    python3 -m autotune profile --adapter "adapters/$name.py" "${config[@]}" --device cuda \
    --tensorboard --out "$work" "$@"
  [ -n "$DRY" ] && return 0
  cp "$work/breakdown.md" "$OUT/$name-breakdown.md" 2>/dev/null
  tar czf "$OUT/profile-$name.tgz" -C /tmp "profile-$name"
  ls -la "$OUT/profile-$name.tgz"
}

checks_job() {
  run "$OUT/gpu-tests.log" 15 "$(left 200)" python3 -m pytest -q -p no:cacheprovider tests/gpu
  run "$OUT/spare-runs-gpt.log" 30 "$(left "$LIMIT")" python3 $here/measurement/spare_runs.py \
    --adapter adapters/gpt.py --device cuda --compile default --runs 3 --rounds 2 \
    --json "$OUT/spare-runs-gpt.json"
}

kbench_job() {  # ADAPTER BASE [knobs.py flags...]
  local name=$1 base=$2; shift 2
  run "$OUT/knobs-$name.log" 30 "$(left "$LIMIT")" env $(adapter_env "$name") \
    python3 $here/measurement/knobs.py --adapter "adapters/$name.py" --config "$base" \
    --device cuda --json "$OUT/knobs-$name.json" "$@"
  return 0
}

knobs_job() {  # [-k EXPR]
  run "$OUT/knobs.log" 60 "$(left 200)" python3 -m pytest tests/gpu -s -v -p no:cacheprovider "$@"
  [ -z "$DRY" ] && grep -E "KNOB|PASS|FAIL|Error|error" "$OUT/knobs.log" | head -60
  return 0
}

smoke_job() {
  knobs_job
  run "$OUT/gpt-smoke.log" 25 "$(left 200)" env GPT_N_LAYER=2 GPT_N_EMBD=256 GPT_N_HEAD=4 \
    GPT_BLOCK=256 GPT_VOCAB=8192 python3 -m autotune search --adapter adapters/gpt.py \
    --trials 7 --trial-timeout 100 --measure-seconds 3 --confirm 1 --confirm-repeats 1 --seed 0 \
    --out "$OUT/gpt-smoke"
  run "$OUT/resnet-smoke.log" 8 "$(left 150)" python3 -m autotune search \
    --adapter adapters/resnet.py --trials 2 --confirm 0 --measure-seconds 5 --out "$OUT/resnet-smoke"
  [ -n "$DRY" ] && return 0
  python3 - <<'PY'
import json, glob, os
for f in sorted(glob.glob(os.environ["OUT"] + "/*-smoke/trials/*/result.json")):
    d = json.load(open(f)); x = d.get("extra", {}); g = x.get("diagnosis", {})
    print(f.split("/")[-4], f.split("/")[-2], d["status"], d.get("reason", "")[:150], "| diag:",
          g.get("verdict"), {k: round(v) for k, v in g.items() if k in ("loader_rate", "compute_rate")},
          g.get("gpu_busy_fraction"))
PY
  rm -rf "$OUT"/*-smoke/trials "$OUT"/*-smoke/study.db
}

multi_job() {  # [BUDGET] [ADAPTER]: the same space, budget, seed and CPUs per trial (half the
  # host's: each GPU's share), no confirmation; --gpus 0, then --gpus 0,1. Keep
  # 2 x (BUDGET + 40) under the call.
  local budget=${1:-200} adapter=${2:-gpt} cpus share n gpus work
  cpus=$(python3 -c "import os; print(len(os.sched_getaffinity(0)))"); share=$((cpus / 2))
  for n in 1 2; do
    gpus=$([ $n = 1 ] && echo 0 || echo 0,1); work=/tmp/multi-$n
    [ -z "$DRY" ] && { rm -rf $work; mkdir -p $work; }
    local start=$SECONDS
    run "$work/search.log" 25 "$(left $((budget + 60)))" env $(adapter_env "$adapter") \
      python3 -m autotune search --adapter "adapters/$adapter.py" --space default \
      --timeout "$budget" --trials 1000 --confirm 0 --seed 0 --out $work --study-name multi-$n \
      --gpus $gpus --cpus-per-trial $share
    echo "$n GPU(s): $((SECONDS - start)) s"
    [ -n "$DRY" ] && continue
    cp $work/trials.csv "$OUT/multi-$n-trials.csv" 2>/dev/null
    cp $work/search.log "$OUT/multi-$n-search.log"
    cp $work/best.yaml "$OUT/multi-$n-best.yaml" 2>/dev/null
  done
  run "$OUT/gpu_multi.log" 40 "$(left 60)" python3 $here/scale/multi_summary.py \
    --budget "$budget" --adapter "$adapter" --cpus-per-trial "$share" --out "$OUT/gpu_multi.json"
}

ddp_job() {  # [all|search|sweep|test]: DDP scaling of ADAPTER on a 2-GPU host. A 1-rank and a
  # 2-rank search of the same space and budget, their scaling efficiency (2-rank throughput /
  # (2 x 1-rank)), then the 2-rank winner with each DDP knob changed alone: $OUT/ddp.json,
  # ddp-knobs.png, each search's best.yaml, trials.csv, throughput.png and log. "all" fits one
  # call with the default budgets; with longer ones run "search", then "sweep" on the same warm
  # machine (the work stays in WORK). "test" runs tests/gpu/test_ddp_cuda.py only.
  # Environment: ADAPTER (adapters/gpt.py), DEVICE (cuda; cpu runs gloo ranks, a dry run),
  # BUDGET (seconds per search, 150), SWEEP_SECONDS (timed seconds per sweep run, 6; 0 skips
  # it), SPACE (default), WORK (/tmp/gpu_ddp).
  local phase=${1:-all} budget=${BUDGET:-150} sweep_s=${SWEEP_SECONDS:-6} space=${SPACE:-default}
  local work=${WORK:-/tmp/gpu_ddp} adapter=${ADAPTER:-adapters/gpt.py} device=${DEVICE:-cuda}
  # The multi-GPU machines keep NVLink multicast off; autotune only adds to the environment,
  # so every rank inherits these (set here too where the machine does not).
  export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0} NVSHMEM_DISABLE_NVLS=${NVSHMEM_DISABLE_NVLS:-1} \
    TORCH_SYMM_MEM_DISABLE_MULTICAST=${TORCH_SYMM_MEM_DISABLE_MULTICAST:-1}
  [ -z "$DRY" ] && mkdir -p "$work"
  if [ "$phase" = test ]; then
    run "$OUT/test.log" 15 "$(left 500)" python3 -m pytest -v -p no:cacheprovider \
      tests/gpu/test_ddp_cuda.py
    return
  fi
  local name nproc sweep=0
  if [ "$phase" = all ] || [ "$phase" = search ]; then
    for name in 1rank 2rank; do
      nproc=${name%rank}
      [ -z "$DRY" ] && rm -rf "${work:?}/$name"
      run "$OUT/$name-search.log" 25 "$(left $((budget + 60)))" python3 -m autotune search \
        --adapter "$adapter" --device "$device" --space "$space" --timeout "$budget" --seed 0 \
        --nproc-per-node "$nproc" --confirm 2 --confirm-repeats 1 --confirm-measure-seconds 8 \
        --study-name "ddp-$name" --out "$work/$name"
      [ -n "$DRY" ] && continue
      for f in best.yaml trials.csv throughput.png; do
        cp "$work/$name/$f" "$OUT/$name-$f" 2>/dev/null
      done
    done
  fi
  if [ "$phase" = all ] || [ "$phase" = sweep ]; then sweep=$sweep_s; fi
  run "$OUT/ddp.log" 40 "$(left)" python3 $here/scale/ddp_scaling.py --one "$work/1rank" \
    --many "$work/2rank" --nproc 2 --adapter "$adapter" --device "$device" \
    --sweep-seconds "$sweep" --out "$OUT"
}

main() {
  local job args=()
  [ $# -gt 0 ] || { sed -n '2,/^set -u/p' "$0" | sed '$d'; return 1; }
  if [ -z "$DRY" ]; then . $here/device_env.sh; fi
  mkdir -p "$OUT"
  while [ $# -gt 0 ]; do
    job=$1; shift; args=()
    while [ $# -gt 0 ] && [ "$1" != + ]; do args+=("$1"); shift; done
    [ $# -gt 0 ] && shift  # the "+"
    LIMIT=""; [ "${job#*:}" != "$job" ] && LIMIT=${job#*:}
    echo "=== ${job%%:*} ${args[*]:-} ($(left "$LIMIT") s left)"
    case ${job%%:*} in
      search|grid|fidelity|versus|lab|profile|checks|knobs|kbench|smoke|multi|ddp) "${job%%:*}_job" "${args[@]}" ;;
      *) echo "unknown job: $job (see the head of $0)"; return 1 ;;
    esac
  done
}

main "$@"
