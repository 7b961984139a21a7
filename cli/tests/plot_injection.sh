#!/usr/bin/env bash
# End-to-end plot-injection corpus: hostile model names (a Hugging Face config's _name_or_path),
# GPU preset names and --plot paths go through every plotting command; no marker file may
# appear, and every plot is either written or refused with exit 1.
# Usage: plot_injection.sh TRAINSIM_BINARY
set -u
bin=$(realpath "$1")
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$dir" || exit 2
fail=0
marker="$dir/PWNED"

python_free_json() { # name -> config.json with that _name_or_path (JSON-escaped by printf %s)
  printf '{"model_type":"llama","hidden_size":512,"intermediate_size":1376,"num_attention_heads":8,'
  printf '"num_key_value_heads":8,"num_hidden_layers":4,"vocab_size":32000,'
  printf '"max_position_embeddings":4096,"_name_or_path":"%s"}\n' "$1"
}
names=(
  "evil'\\nsystem(\\\"touch $marker\\\")\\n'"
  "\`touch $marker\`"
  "x'\\r\\nset output '|touch $marker'\\n"
  "back\\\\slash' \\u0001 \\u001b"
  "@a \\\"q\\\" # \\t tab"
)
i=0
for n in "${names[@]}"; do
  i=$((i + 1))
  python_free_json "$n" > "m$i.json"
  printf '{"name":"%s","source":"test","memory_gb":80,"hbm_bandwidth_gb_per_s":3350,"peak_tflops":{"bf16":989.5,"fp16":989.5,"fp32":67,"tf32":494.7,"fp8":1979},"num_sms":132,"l2_mb":50,"nvlink_bandwidth_gb_per_s":450,"pcie_bandwidth_gb_per_s":64}\n' "$n" > "g$i.json"
done

run() { # expect exit 0 or 1, never anything else; never the marker
  "$bin" "$@" > out.txt 2> err.txt
  local rc=$?
  if [ $rc -ne 0 ] && [ $rc -ne 1 ]; then
    echo "FAIL exit $rc: $*"; cat err.txt; fail=1
  fi
  if [ -e "$marker" ]; then
    echo "FAIL: injected command ran: $*"; fail=1; rm -f "$marker"
  fi
  return $rc
}

for j in $(seq 1 $i); do
  m="m$j.json"
  run model --model "$m" -q || { echo "FAIL: model $m refused"; cat err.txt; fail=1; }
  for cmd in "estimate --gpu h100-sxm --num-gpus 8" "memory --gpu h100-sxm --num-gpus 8" \
             "plan --gpu h100-sxm --num-gpus 8 --global-batch 64" \
             "sweep --gpu h100-sxm --num-gpus 8 --global-batch 64 --vary num-gpus --values 8,16" \
             "roofline --gpu h100-sxm"; do
    # shellcheck disable=SC2086
    if run $cmd --model "$m" --plot "$dir/p$j.png" -q; then
      [ -s "$dir/p$j.png" ] || { echo "FAIL: no plot from $cmd"; fail=1; }
      rm -f "$dir/p$j.png"
    else
      echo "FAIL: $cmd --model $m exited 1:"; cat err.txt; fail=1
    fi
  done
  # hostile GPU preset name
  run estimate --model llama3-8b --gpu "g$j.json" --num-gpus 8 --plot "$dir/g$j.png" -q ||
    { echo "FAIL: gpu g$j.json refused"; cat err.txt; fail=1; }
done

# hostile --plot paths: refused with exit 1 and a message, never run
for p in "|touch $marker; echo .png" "$dir/a'
system(\"touch $marker\")
'.png" "$dir/\`touch $marker\`.png" "/proc/x.png" "/nonexistent/x.png" "$dir"; do
  if run estimate --model llama3-8b --gpu h100-sxm --num-gpus 8 --plot "$p" -q; then
    case "$p" in
      *'`'*) [ -s "$p" ] || { echo "FAIL: backquote path not written"; fail=1; } ;;
      *) echo "FAIL: accepted --plot $p"; fail=1 ;;
    esac
  else
    grep -q -- "--plot" err.txt || { echo "FAIL: message does not name --plot: $(cat err.txt)"; fail=1; }
  fi
done
# A failed -o write is an error.
if run estimate --model llama3-8b --gpu h100-sxm --num-gpus 8 -o /dev/full; then
  echo "FAIL: -o /dev/full accepted"; fail=1
fi
[ $fail -eq 0 ] && echo "plot injection corpus: PASS"
exit $fail
