#!/usr/bin/env bash
# Docs that run. Every figure block of README.md and docs/*.md that trainsim prints is preceded
# by a marker line holding the exact command:
#   <!-- run: trainsim estimate --model llama3-70b ... -->        checked and regenerated
#   <!-- run-update-only: trainsim plan ... --bench -->            regenerated, not checked
#                                                                  (timings: machine-dependent)
# followed by a fenced block (``` ... ```) with its output. And every `trainsim ...` command
# shown inline or in ```sh blocks must run (exit 0), except the GPU commands and placeholders
# listed in skip() below; a command shown as an error is marked `<!-- fails: CMD -->` and must
# exit 1 with a message.
#   scripts/docs-run.sh check  BINARY FILE...   fail (exit 1) on any difference or failure
#   scripts/docs-run.sh update BINARY FILE...   rewrite the blocks from the commands' output
#   scripts/docs-run.sh help   BINARY           every `--help` example runs (GPU ones skipped)
# Commands run from the repository root with `trainsim` on PATH (a link to BINARY).
set -uo pipefail
mode=$1
bin=$(realpath "$2")
shift 2
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ln -s "$bin" "$tmp/trainsim"
export PATH="$tmp:$PATH"
fail=0

run_cmd() { # prints the command's stdout; stderr and exit code reported on failure
  bash -c "set -o pipefail; $1" 2>"$tmp/err"
}

# GPU-only commands and placeholders (they need a device or stand for the user's own files).
skip() {
  # Mentions of a command rather than commands ("trainsim plan", "trainsim roofline --model").
  local words
  read -r -a words <<<"$1"
  if [ ${#words[@]} -le 2 ] || { [ ${#words[@]} -eq 3 ] && [[ ${words[2]} == --* ]]; }; then
    return 0
  fi
  # Files a skipped (GPU) command writes, which later shown commands read.
  local f
  for f in $(cat "$tmp/written" 2>/dev/null); do
    [[ $1 == *"$f"* ]] && return 0
  done
  case "$1" in
    *"..."*|*"["*|*my-gpu*|*my-node*|*cal.json*|*coll.json*|*"FILE"*|*"NAME"*) return 0 ;;
    "trainsim bench "*|"trainsim train-step "*|"trainsim compare --calibration my"*) return 0 ;;
    "trainsim calibrate --from"*|"trainsim calibrate --collectives"*) return 0 ;;
    "trainsim calibrate --out"*) return 0 ;; # measures on this machine's GPU
  esac
  return 1
}

# help mode: every example in `trainsim CMD --help` (and its subcommands' help) runs like a
# doc's shown command, and a figure it promises ("-> ~143.9 days") is in its output.
if [ "$mode" = help ]; then
  subcommands() { "$bin" "$@" --help | awk '/^Subcommands:/ {f = 1; next} f && /^  [a-z]/ {print $1} f && /^$/ {f = 0}'; }
  help_doc="$tmp/help.md"
  printf '# trainsim --help examples\n```sh\n' >"$help_doc"
  : >"$tmp/promises"
  for c in "" $(subcommands); do
    for s in "" $( [ -n "$c" ] && subcommands "$c"); do
      # shellcheck disable=SC2086
      "$bin" $c $s --help | sed -nE 's/^(Examples?[^:]*:)?[[:space:]]*(trainsim .*)$/\2/p' |
        while IFS= read -r ex; do
          cmd=$(printf '%s' "$ex" | sed -E 's/[[:space:]]+(->|#).*$//')
          printf '%s\n' "$cmd" >>"$help_doc"
          if [[ $ex =~ \-\>\ ~?([^ ].*)$ ]]; then
            printf '%s\t%s\n' "$cmd" "${BASH_REMATCH[1]}" >>"$tmp/promises"
          fi
        done
    done
  done
  printf '```\n' >>"$help_doc"
  while IFS=$'\t' read -r cmd want; do
    want=${want% days}; want=${want%% *}
    if ! run_cmd "$cmd" | grep -qF -- "$want"; then
      echo "--help example does not print what it promises ($want): $cmd"
      fail=1
    fi
  done <"$tmp/promises"
  set -- "$help_doc"
  mode=check
fi

for doc in "$@"; do
  out="$tmp/doc.md"
  : >"$out"
  pending="" # command of the marker just read
  update_only=0
  state=text # text | await_fence | in_block
  while IFS= read -r line || [ -n "$line" ]; do
    case $state in
      text)
        printf '%s\n' "$line" >>"$out"
        if [[ $line =~ ^\<!--\ run(-update-only)?:\ (.*)\ --\>$ ]]; then
          update_only=$([ -n "${BASH_REMATCH[1]}" ] && echo 1 || echo 0)
          pending=${BASH_REMATCH[2]}
          state=await_fence
        fi
        ;;
      await_fence)
        printf '%s\n' "$line" >>"$out"
        if [[ $line == '```'* ]]; then
          state=in_block
          : >"$tmp/shown"
        else
          echo "$doc: marker for '$pending' is not followed by a fenced block"
          fail=1
          state=text
        fi
        ;;
      in_block)
        if [[ $line == '```' ]]; then
          if run_cmd "$pending" >"$tmp/actual"; then
            if [ "$mode" = update ]; then
              cat "$tmp/actual" >>"$out"
            else
              cat "$tmp/shown" >>"$out"
              if [ "$update_only" = 0 ] && ! diff -u "$tmp/shown" "$tmp/actual" >"$tmp/diff"; then
                echo "$doc: output of '$pending' differs from the doc (scripts/docs-run.sh update regenerates it):"
                head -40 "$tmp/diff"
                fail=1
              fi
            fi
          else
            echo "$doc: '$pending' failed: $(head -c 600 "$tmp/err")"
            cat "$tmp/shown" >>"$out"
            fail=1
          fi
          printf '%s\n' "$line" >>"$out"
          state=text
        else
          printf '%s\n' "$line" >>"$tmp/shown"
        fi
        ;;
    esac
  done <"$doc"
  if [ "$mode" = update ] && ! cmp -s "$out" "$doc"; then
    cp "$out" "$doc"
    echo "updated $doc"
  fi

  # Every trainsim command shown (inline `trainsim ...` or lines of ```sh blocks) must run.
  awk '
    /^```sh/ {sh = 1; cmd = ""; next}
    /^```/ {sh = 0; next}
    sh {
      line = $0; sub(/[ \t]+#.*$/, "", line)
      if (line ~ /\\$/) { sub(/\\$/, "", line); cmd = cmd line; next }
      cmd = cmd line; if (cmd ~ /^trainsim /) print cmd; cmd = ""; next
    }
    {
      s = $0
      while (match(s, /`trainsim [^`]*`/)) {
        print substr(s, RSTART + 1, RLENGTH - 2); s = substr(s, RSTART + RLENGTH)
      }
    }' "$doc" | sed 's/[[:space:]]\+/ /g' | sort -u >"$tmp/commands"
  # Commands shown as an error (marked `<!-- fails: CMD -->`) must exit 1 with a message.
  sed -nE 's/^[[:space:]]*<!-- fails: (.*) -->$/\1/p' "$doc" | sed 's/[[:space:]]\+/ /g' | sort -u >"$tmp/fails"
  while IFS= read -r cmd; do
    rc=0
    run_cmd "$cmd" >/dev/null || rc=$?
    if [ $rc != 1 ] || [ ! -s "$tmp/err" ]; then
      echo "$doc: command shown as an error exited $rc (wanted 1 and a message): $cmd"
      fail=1
    fi
  done <"$tmp/fails"
  grep -vxF -f "$tmp/fails" "$tmp/commands" >"$tmp/commands.ok" || true
  mv "$tmp/commands.ok" "$tmp/commands"
  # What the shown commands write (--out FILE, -o FILE): a later command may read it.
  grep -oE -- '(--out|-o) [^ ]+' "$tmp/commands" | awk '{print $2}' >"$tmp/written"
  while IFS= read -r cmd; do
    skip "$cmd" && continue
    # Plots go to a scratch directory; the doc's own image is regenerated by `update`.
    c=$(printf '%s' "$cmd" | sed -E "s#--plot [^ ]+#--plot $tmp/plot.png#")
    if ! run_cmd "$c" >/dev/null; then
      echo "$doc: shown command failed: $cmd: $(head -c 400 "$tmp/err")"
      fail=1
    fi
  done <"$tmp/commands"
done
[ $fail = 0 ] && echo "docs-run $mode: ok ($*)"
exit $fail
