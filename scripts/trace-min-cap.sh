#!/usr/bin/env bash
# The smallest allocator cap (to 0.1 GB) under which trainsim's replay of a recorded PyTorch
# allocator trace fits its first N steps, the cache emptied at the start as the OOM probes do
# (docs/frameworks.md, "The caching allocator": a third step can need more than the second).
# Usage: scripts/trace-min-cap.sh TRAINSIM_BINARY TRACE [N ...]   (default N: 2 3)
# Prints: TRACE  cap for N steps (GB) ...
set -euo pipefail
bin=$1; trace=$2; shift 2
steps=("$@"); [ ${#steps[@]} -gt 0 ] || steps=(2 3)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
out="$(basename "$trace")"
zcat -f "$trace" >"$tmp/whole.trace" # recorded traces are stored gzip-compressed
trace=$tmp/whole.trace
for n in "${steps[@]}"; do
  line=$(grep -n "^m $((n - 1)) zero_grad\$" "$trace" | cut -d: -f1 || true)
  if [ -z "$line" ]; then out+="  -"; continue; fi
  # the trace's header and phase marks travel with the cut; the replay reads both
  head -n "$line" "$trace" >"$tmp/cut.trace"
  lo=0; hi=2000 # tenths of GB
  while [ $((hi - lo)) -gt 1 ]; do
    mid=$(((lo + hi) / 2))
    cap=$(awk -v m="$mid" 'BEGIN { printf "%.1f", m / 10 }')
    verdict=$("$bin" compare --allocator-traces "$tmp/cut.trace" --allocator-cap-gb "$cap" \
      --empty-cache-at-start --format json |
      python3 -c 'import json,sys; t=json.load(sys.stdin)["allocator_traces"][0]; print(t["fits_under_cap_cache_emptied"])')
    if [ "$verdict" = True ]; then hi=$mid; else lo=$mid; fi
  done
  if [ "$hi" -ge 2000 ]; then out+="  >200"; continue; fi # not even under 200 GB
  out+="  $(awk -v m="$hi" 'BEGIN { printf "%.1f", m / 10 }')"
done
echo "$out"
