#!/usr/bin/env bash
# The main job on the default preset: Llama-3-8B trained on one DGX H100 node (8 GPUs).
# How big is it, does it fit, how long does a step take and where does the time go,
# which layout is best, and how many days for 1T tokens.
set -euo pipefail
bin=${1:-build/cli/trainsim}
model=${TRAINSIM_DEMO_MODEL:-llama3-8b}
cluster=${TRAINSIM_DEMO_CLUSTER:-dgx-h100}
run() { echo; echo "\$ trainsim $*"; "$bin" "$@"; }
run model --model "$model" --seq-len 8192
run memory --model "$model" --cluster "$cluster" --num-gpus 8 --zero 3 --seq-len 8192 --micro-batch 1
run estimate --model "$model" --cluster "$cluster" --num-gpus 8 --zero 3 --seq-len 8192 \
  --micro-batch 1 --global-batch 128 --tokens 1T
run plan --model "$model" --cluster "$cluster" --num-gpus 8 --seq-len 8192 --global-batch 128 \
  --tokens 1T --top 5
run time --model "$model" --tokens 1T --gpu h100-sxm --num-gpus 8 --mfu 0.45
