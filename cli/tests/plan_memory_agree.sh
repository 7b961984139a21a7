#!/usr/bin/env bash
# `plan` and `memory` give the same bytes for the same plan: the search sizes a plan as
# `memory` does (the caching allocator under the GPU's capacity), partial recompute included.
# Usage: plan_memory_agree.sh TRAINSIM_BINARY
set -u
bin=$1
plans=$("$bin" plan --model llama3-8b --gpu h200 --num-gpus 8 --global-batch 64 --seq-len 8192 \
  --framework fsdp --search-recompute-layers --top 10 --format json) || exit 1
n=0
while read -r tp pp dp cp mb zero rc layers sp v split mem; do
  extra="--interleave $v"
  [ "$split" != - ] && extra="$extra --pp-layers $split"
  [ "$layers" -gt 0 ] && extra="--recompute-layers $layers"
  [ "$sp" = True ] && extra="$extra --sequence-parallel"
  # shellcheck disable=SC2086
  got=$("$bin" memory --model llama3-8b --gpu h200 --num-gpus 8 --global-batch 64 --seq-len 8192 \
    --framework fsdp --tp "$tp" --pp "$pp" --dp "$dp" --cp "$cp" --micro-batch "$mb" \
    --zero "$zero" --recompute "$rc" $extra --format json |
    python3 -c "import json, sys; print(json.load(sys.stdin)['per_gpu_bytes']['total'])") || exit 1
  python3 -c "import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); sys.exit(abs(a - b) > 1e-9 * b)" "$mem" "$got" ||
    { echo "FAIL: tp $tp pp $pp dp $dp cp $cp mb $mb zero $zero $rc($layers) sp $sp v $v: plan $mem, memory $got"; exit 1; }
  n=$((n + 1))
done < <(python3 -c "
import json, sys
for p in json.loads(sys.argv[1])['plans']:
    print(p['tp'], p['pp'], p['dp'], p['cp'], p['micro_batch'], p['zero'], p['recompute'],
          p['recompute_layers'], p['sequence_parallel'], p['interleave'],
          ','.join(map(str, p['stage_layers'])) if 'stage_layers' in p else '-',
          p['per_gpu_bytes_total'])
" "$plans")
[ "$n" -ge 5 ] || { echo "FAIL: only $n plans compared"; exit 1; }
echo "ok: $n plans, the same bytes"
