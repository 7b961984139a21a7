#!/usr/bin/env bash
# A refusal, checked whole: the command ($2...) exits with code 1 (usage or bad input) and its
# message matches the extended regular expression $1.
regex=$1
shift
out=$("$@" 2>&1)
rc=$?
printf '%s\n' "$out"
[ "$rc" = 1 ] || { echo "refuses.sh: exit code $rc, expected 1"; exit 1; }
grep -qE -- "$regex" <<< "$out" || { echo "refuses.sh: no line matches: $regex"; exit 1; }
