#!/usr/bin/env bash
# Data files are untrusted input and no output destroys an input: one hostile case per call,
# each checked whole (exit code, message, and the files left behind).
# Usage: hostile_files.sh TRAINSIM_BINARY SOURCE_DIR CASE
set -u
bin=$(realpath "$1")
src=$(realpath "$2")
case_name=$3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$dir" || exit 2
runs="$src/validate/results/runs-2026-12-05/runs-l.jsonl"
trace="$src/validate/results/allocator-traces-2026-12-05-capped2/$(ls "$src/validate/results/allocator-traces-2026-12-05-capped2" | grep -m1 '[.]trace[.]gz$')"

fail() { echo "FAIL ($case_name): $*"; exit 1; }
# refuses REGEX CMD...: exit code 1 and a message line matching REGEX, within 20 s.
refuses() {
  local regex=$1
  shift
  local out rc
  out=$(timeout 20 "$@" 2>&1)
  rc=$?
  printf '%s\n' "$out" | cut -c1-300
  [ "$rc" = 1 ] || fail "exit code $rc (expected 1) from: $*"
  grep -qE -- "$regex" <<< "$out" || fail "no line matches '$regex'"
  [ "${#out}" -lt 4000 ] || fail "message of ${#out} bytes: values must not be echoed whole"
}
deep() { python3 -c "import sys; n=int(sys.argv[1]); sys.stdout.write(sys.argv[2] % ('['*n + ']'*n))" "$@"; }

case "$case_name" in
deep_json) # row 1: a value nested 100,000 deep in every kind of loaded file
  deep 100000 '{"name": %s}' > deep.json
  refuses 'nested deeper than 64 levels' "$bin" model --model deep.json
  refuses 'nested deeper than 64 levels' "$bin" estimate --model llama3-8b --gpu deep.json
  refuses 'nested deeper than 64 levels' "$bin" estimate --model llama3-8b --cluster deep.json
  refuses 'nested deeper than 64 levels' "$bin" estimate --model llama3-8b --gpu h100-sxm --framework deep.json
  refuses 'nested deeper than 64 levels' "$bin" estimate --model llama3-8b --gpu h100-sxm --calibration deep.json
  refuses 'nested deeper than 64 levels' "$bin" memory --model llama3-8b --gpu h100-sxm --deepspeed deep.json
  deep 100000 '{"id": "x", "framework": "pytorch", "model": %s}' > deep.jsonl
  refuses 'deep.jsonl:1: arrays and objects nested deeper' "$bin" compare --framework-runs deep.jsonl
  deep 100000 '# {"framework": %s}' > deep.trace
  refuses 'deep.trace:1: arrays and objects nested deeper' "$bin" compare --allocator-traces deep.trace
  deep 50000 '{"name": %s}' > deep50k.json
  refuses 'nested deeper than 64 levels' "$bin" model --model deep50k.json
  ;;
duplicate_key) # row 16: duplicate keys are refused, not "last wins"
  printf '{"name": "a", "name": "b"}\n' > dup.json
  refuses 'dup.json: name: key given twice' "$bin" model --model dup.json
  ;;
endless_runs_file) # row 2: a runs file that never ends is cut at the size limit
  refuses '/dev/zero: more than 16 MiB' "$bin" compare --framework-runs /dev/zero
  refuses '/dev/zero: more than 16 MiB' "$bin" calibrate --framework-runs /dev/zero --framework pytorch --out x.json
  refuses '/dev/zero: more than 16 MiB' "$bin" compare --framework-runs "$runs" --repeat-runs /dev/zero
  [ ! -e x.json ] || fail "calibrate left x.json"
  ;;
names_not_paths) # row 3: a name in a data file never opens a file
  mkfifo fifo
  head -n 1 "$runs" > one.jsonl
  sed 's#"model": *"[^"]*"#"model": "'"$dir"'/fifo"#' one.jsonl > r1.jsonl
  refuses 'r1.jsonl:1: model = ".*fifo": must be a preset.s name, not a path' "$bin" compare --framework-runs r1.jsonl
  sed 's#"gpu": *"[^"]*"#"gpu": "/dev/urandom"#' one.jsonl > r2.jsonl
  refuses 'gpu = "/dev/urandom": must be a preset.s name' "$bin" compare --framework-runs r2.jsonl
  sed 's#"framework": *"[^"]*"#"framework": "/etc/passwd"#' one.jsonl > r3.jsonl
  refuses 'framework = "/etc/passwd": must be a preset.s name' "$bin" compare --framework-runs r3.jsonl
  sed '1s#"framework": *"[^"]*"#"framework": "'"$dir"'/fifo"#' <(zcat "$trace") > t.trace
  refuses 'framework = ".*fifo": must be a preset.s name' "$bin" compare --allocator-traces t.trace --with-prediction
  mkdir mapdir && cp one.jsonl mapdir/ && mkfifo mapdir/model-map.json
  refuses 'model-map.json: not a regular file' "$bin" compare --framework-runs mapdir/one.jsonl
  printf '{"models": {"x": "/etc/passwd"}}\n' > map2.json
  mkdir mapdir2 && cp one.jsonl mapdir2/ && cp map2.json mapdir2/model-map.json
  refuses 'models.x = "/etc/passwd": must be a preset.s name' "$bin" compare --framework-runs mapdir2/one.jsonl
  ;;
output_is_input) # row 4: an output that names an input is refused and the input kept
  cp "$runs" r.jsonl
  before=$(md5sum < r.jsonl)
  refuses '--output r.jsonl: is also this command.s input \(--framework-runs r.jsonl\)' "$bin" compare --framework-runs r.jsonl -o r.jsonl
  refuses '--output \./r.jsonl: is also this command.s input' "$bin" compare --framework-runs r.jsonl --output ./r.jsonl
  refuses '--out r.jsonl: is also this command.s input' "$bin" calibrate --framework-runs r.jsonl --framework pytorch --out r.jsonl
  [ "$(md5sum < r.jsonl)" = "$before" ] || fail "the input was changed"
  cp "$src/validate/results/runs-2026-12-05/train-step-selective.jsonl" t.jsonl
  refuses '--output t.jsonl: is also' "$bin" compare --calibration h200 --train-step t.jsonl -o t.jsonl
  cp "$src/presets/frameworks/megatron.json" fw.json
  refuses '--output fw.json: is also this command.s input \(--framework fw.json\)' "$bin" validate-published --framework fw.json -o fw.json
  cmp -s fw.json "$src/presets/frameworks/megatron.json" || fail "fw.json was changed"
  refuses 'both write' "$bin" estimate --model gpt2 --gpu h100-sxm -o same.png --plot same.png
  ;;
failed_command_keeps_output) # row 4: a command that fails leaves its output file as it was
  echo "keep me" > out.txt
  refuses 'unknown model preset' "$bin" estimate --model no-such-model --gpu h100-sxm -o out.txt
  [ "$(cat out.txt)" = "keep me" ] || fail "out.txt was changed by a failed command"
  "$bin" model --model gpt2 -o out.txt > /dev/null || fail "model -o failed"
  grep -q 124439808 out.txt || grep -q "124.44 M" out.txt || fail "out.txt lacks the result"
  [ -z "$(ls -A | grep -v '^out.txt$')" ] || fail "files left behind: $(ls -A)"
  ;;
write_errors) # row 9: every write error exits 1 with a message
  m="$src/validate/results/kernel-suites-2026-12-05-h100-sxm/h100-sxm-calibration.json"
  refuses '--out /dev/full: write failed' "$bin" calibrate --from "$m" --gpu h100-sxm --out /dev/full
  refuses '--out /proc/version: cannot' "$bin" calibrate --from "$m" --gpu h100-sxm --out /proc/version
  refuses '--output /dev/full: write failed' "$bin" model --model gpt2 -o /dev/full
  refuses '--allocator-trace-out: needs --model' "$bin" memory --params 7e9 --framework pytorch --allocator-trace-out F
  [ ! -e F ] || fail "F written"
  ;;
measurement_types) # rows 8 and 13: wrong types and absurd figures in measurement files
  m="$src/validate/results/kernel-suites-2026-12-05-h100-sxm/h100-sxm-held-out.json"
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); d['measurements'][0]['op']=5; json.dump(d,open('op.json','w'))" "$m"
  refuses 'measurements\[0\]: op: expected a string' "$bin" compare --calibration h100-sxm --measurements op.json --gpu h100-sxm
  for v in 1e-300 1e308; do
    python3 -c "import json,sys; d=json.load(open(sys.argv[1])); d['measurements'][0]['median_s']=float(sys.argv[2]); json.dump(d,open('t.json','w'))" "$m" "$v"
    refuses 'measurements\[0\]: median_s = .*: must be in \[1e-09, 3600\] s' "$bin" compare --calibration h100-sxm --measurements t.json --gpu h100-sxm
  done
  ;;
run_numbers) # rows 13 and 16: absurd numbers in runs and traces, repeated run ids
  head -n 1 "$runs" > one.jsonl
  sed 's#"seq_len": *[0-9]*#"seq_len": 1000000000#' one.jsonl > s.jsonl
  refuses 's.jsonl:1: seq_len = 1000000000: absurdly large' "$bin" compare --framework-runs s.jsonl
  sed 's#"step_time_s": *[0-9.e-]*#"step_time_s": 1e300#' one.jsonl > st.jsonl
  refuses 'measured.step_time_s = 1e\+300: must be 0 or in' "$bin" compare --framework-runs st.jsonl
  cat one.jsonl one.jsonl > twice.jsonl
  refuses 'twice.jsonl:2: id ".*": given twice \(first at twice.jsonl:1\)' "$bin" compare --framework-runs twice.jsonl
  sed '1s#"seq_len": *[0-9]*#"seq_len": 99999999999#' <(zcat "$trace") > s.trace
  refuses 'seq_len = 99999999999: absurdly large' "$bin" compare --allocator-traces s.trace --with-prediction
  python3 -c "
print('# {\"id\": \"t\"}')
for i in range(9000): print('a', 2**50, i)" > big.trace
  refuses 'big.trace:3: .*exceed 2\^50 bytes' "$bin" compare --allocator-traces big.trace
  printf 'a 100 1 0 junk\n' > junk.trace
  refuses "junk.trace:1: .*unexpected text after" "$bin" compare --allocator-traces junk.trace
  printf 'a 100 1\nf 1 2\n' > junkf.trace
  refuses "junkf.trace:2: .*expected 'f ID'" "$bin" compare --allocator-traces junkf.trace
  ;;
jsonl_positions) # row 18: a runs-file error names file:line:column once
  printf '{"id": 1,\n' > bad.jsonl
  refuses '^error: bad.jsonl:1:10: malformed JSON' "$bin" compare --framework-runs bad.jsonl
  ;;
control_characters) # row 7: names with ESC, CR, LF are shown, never sent; CSV per RFC 4180
  head -n 1 "$runs" | python3 -c "import json,sys; d=json.loads(sys.stdin.read()); d['id']='x\x1b[31mRED\r\nforged, \"line\"'; print(json.dumps(d))" > esc.jsonl
  out=$("$bin" compare --framework-runs esc.jsonl) || fail "compare failed"
  ! grep -q $'\x1b' <<< "$out" || fail "ESC reached the table"
  ! grep -q $'\r' <<< "$out" || fail "CR reached the table"
  grep -qF 'x\x1b[31mRED\r\nforged, "line"' <<< "$out" || fail "the name is not shown escaped"
  csv=$("$bin" compare --framework-runs esc.jsonl --format csv) || fail "csv failed"
  ! grep -q $'\x1b' <<< "$csv" || fail "ESC reached the CSV"
  python3 -c "
import csv, sys
rows = list(csv.reader(sys.stdin))
assert len(rows) == 2, rows
assert rows[1][0] == 'x\\\\x1b[31mRED\r\nforged, \"line\"', repr(rows[1][0])
" <<< "$csv" || fail "CSV does not read back as 2 rows with the name in one field"
  printf '{"model_type":"llama","hidden_size":512,"intermediate_size":1376,"num_attention_heads":8,"num_key_value_heads":8,"num_hidden_layers":4,"vocab_size":32000,"_name_or_path":"a\\u001b]0;owned\\u0007b"}\n' > m.json
  out=$("$bin" model --model m.json 2>&1) || fail "model failed"
  ! grep -q $'\x1b' <<< "$out" || fail "ESC reached the terminal: $out"
  err=$("$bin" estimate --model m.json --gpu "x$(printf '\033')[2J" 2>&1)
  ! grep -q $'\x1b' <<< "$err" || fail "ESC reached the error message"
  ;;
interrupted) # row 18: SIGTERM while an output is being made leaves nothing behind
  # An exhaustive search (objective memory: nothing pruned) runs for seconds; its output file
  # is open from the start.
  "$bin" plan --model llama3-70b --cluster dgx-h100 --num-gpus 1024 --global-batch 1024 \
    --framework fsdp --objective memory --threads 1 -o out.txt &
  pid=$!
  for _ in $(seq 50); do ls -A | grep -q trainsim && break; sleep 0.1; done
  ls -A | grep -q '^[.]out[.]trainsim-' || fail "no temporary output while the command ran"
  kill -TERM "$pid"
  wait "$pid"
  rc=$?
  [ "$rc" = 143 ] || fail "exit code $rc after SIGTERM (expected 143: still running when killed)"
  [ -z "$(ls -A)" ] || fail "left behind after SIGTERM: $(ls -A)"
  ;;
plot_tmpdir) # row 8: a missing TMPDIR does not matter to a plot, and leaves nothing behind
  if command -v gnuplot > /dev/null; then
    TMPDIR=/nonexistent "$bin" estimate --model gpt2 --gpu h100-sxm --plot x.png > /dev/null ||
      fail "plot with TMPDIR=/nonexistent failed"
    [ -s x.png ] || fail "no plot written"
  else
    refuses 'gnuplot is not installed' env TMPDIR=/nonexistent "$bin" estimate --model gpt2 --gpu h100-sxm --plot x.png
  fi
  [ -z "$(ls -A | grep -v '^x[.]png$')" ] || fail "left behind: $(ls -A)"
  ;;
gzip_inputs) # compressed inputs are read, under the same limit and never half-read
  head -c 20000000 /dev/zero | gzip -c > bomb.trace.gz
  refuses 'bomb.trace.gz: inflates to more than 16 MiB' "$bin" compare --allocator-traces bomb.trace.gz
  printf '\037\213\010\000not a deflate stream' > bad.jsonl.gz
  refuses 'bad.jsonl.gz: not a valid gzip stream' "$bin" compare --framework-runs bad.jsonl.gz
  gzip -c "$runs" | head -c 300 > cut.jsonl.gz
  refuses 'cut.jsonl.gz: not a valid gzip stream \(cut short\)' "$bin" compare --framework-runs cut.jsonl.gz
  gzip -c "$runs" > r.jsonl.gz
  "$bin" compare --framework-runs r.jsonl.gz > gz.txt || fail "a gzip-compressed runs file was refused"
  "$bin" compare --framework-runs "$runs" | diff - gz.txt > /dev/null || fail "gzip changed the result"
  ;;
*)
  echo "unknown case $case_name"
  exit 2
  ;;
esac
echo "ok: $case_name"
