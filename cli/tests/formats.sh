#!/usr/bin/env bash
# --format is honoured by every command or refused: JSON output parses as one document, CSV
# output is one table (RFC 4180, every row as wide as the header, no comment lines). Also:
# `plan --micro-batch N` searches that micro-batch only.
# Usage: formats.sh TRAINSIM_BINARY SOURCE_DIR
set -u
bin=$(realpath "$1")
src=$(realpath "$2")
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$dir" || exit 2
fail=0
trace=$(ls "$src"/validate/results/allocator-traces-2026-12-05-capped2/*.trace.gz | head -n 1)
profile=$(ls "$src"/validate/results/kernel-profiles-2026-12-05/*.json | head -n 1)
commands=(
  "model --model llama3-8b"
  "time --params 70e9 --tokens 15T --gpu h100-sxm --num-gpus 1024 --mfu 0.5"
  "memory --params 7e9"
  "memory --gpu h100-sxm --num-gpus 8 --max-params"
  "memory --model llama3-8b --gpu h100-sxm --framework fsdp --num-gpus 8"
  "estimate --model llama3-8b --gpu h100-sxm"
  "plan --model llama3-8b --gpu h100-sxm --num-gpus 8 --global-batch 64"
  "plan --model llama3-8b --gpu h100-sxm --num-gpus 8 --global-batch 64 --bench"
  "plan --model llama3-8b --cluster dgx-h100 --num-gpus 16 --global-batch 64 --framework fsdp --fix cp=2 --top 2"
  "sweep --model llama3-8b --gpu h100-sxm --vary num-gpus --values 8,16"
  "roofline --gpu h100-sxm --op gemm --m 4096 --n 4096 --k 4096"
  "roofline --gpu h100-sxm --model llama3-8b"
  "collective --gpu h100-sxm --num-gpus 8 --op all-reduce --bytes 1G"
  "validate-published"
  "presets list models"
  "calibrate --from $src/validate/results/kernel-suites-2026-12-05-h100-sxm/h100-sxm-calibration.json --gpu h100-sxm --out o.json"
  "calibrate --framework-runs $src/validate/results/runs-2026-12-05/runs-l.jsonl --framework pytorch --out o2.json"
  "compare --framework-runs $src/validate/results/runs-2026-12-05/runs-l.jsonl"
  "compare --calibration h100-sxm --measurements $src/validate/results/kernel-suites-2026-12-05-h100-sxm/h100-sxm-held-out.json --gpu h100-sxm"
  "compare --calibration h200 --train-step $src/validate/results/runs-2026-12-05/train-step-selective.jsonl"
  "compare --allocator-traces $trace"
  "compare --kernel-profiles $profile"
  "train-step --model cs336-small --predict-only"
)
for c in "${commands[@]}"; do
  for f in json csv; do
    # shellcheck disable=SC2086
    out=$("$bin" $c --format "$f" 2> err)
    rc=$?
    if [ "$rc" != 0 ]; then
      echo "FAIL ($f, exit $rc): trainsim $c: $(head -c 300 err)"
      fail=1
      continue
    fi
    if [ "$f" = json ]; then
      python3 -c "import json, sys; json.load(sys.stdin)" <<< "$out" ||
        { echo "FAIL: trainsim $c --format json is not one JSON document"; fail=1; }
    else
      python3 -c "
import csv, sys
rows = list(csv.reader(sys.stdin))
assert rows, 'no rows'
assert not any(r and r[0].startswith('#') for r in rows), 'a comment line'
widths = {len(r) for r in rows}
assert len(widths) == 1, 'rows of widths %s' % sorted(widths)
" <<< "$out" || { echo "FAIL: trainsim $c --format csv is not one table"; fail=1; }
    fi
  done
done
# plan --micro-batch N: every plan listed has that micro-batch.
"$bin" plan --model llama3-8b --gpu h100-sxm --num-gpus 8 --global-batch 64 --micro-batch 4 \
  --format json | python3 -c "
import json, sys
plans = json.load(sys.stdin)['plans']
assert plans and all(p['micro_batch'] == 4 for p in plans), plans
" || { echo "FAIL: plan --micro-batch 4 listed other micro-batches"; fail=1; }
[ "$fail" = 0 ] && echo "ok: ${#commands[@]} commands, json and csv"
exit "$fail"
