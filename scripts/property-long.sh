#!/usr/bin/env bash
# The long run of the command-line property test (cli/README.md): N invocations split over
# JOBS processes with seeds SEED0, SEED0+1, ... Builds cli_property (CPU only) when BUILD has
# none. Writes one log per process and a summary to OUT.
# Usage: scripts/property-long.sh [RUNS] ; env JOBS (default nproc), SEED0 (default 1000),
#        BUILD (default build-prop), OUT (default out/property-long)
set -uo pipefail
cd "$(dirname "$0")/.."
runs=${1:-1000000}
JOBS=${JOBS:-$(nproc)}
SEED0=${SEED0:-1000}
BUILD=${BUILD:-build-prop}
OUT=${OUT:-out/property-long}
mkdir -p "$OUT"
if [ ! -x "$BUILD/cli/cli_property" ]; then
  cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DTRAINSIM_CUDA=OFF >"$OUT/configure.log" 2>&1 &&
    cmake --build "$BUILD" -j"$JOBS" --target cli_property >"$OUT/build.log" 2>&1 ||
    { echo "build failed (see $OUT/build.log)"; exit 2; }
fi
per=$(((runs + JOBS - 1) / JOBS))
start=$(date +%s)
for ((i = 0; i < JOBS; ++i)); do
  "$BUILD/cli/cli_property" --runs "$per" --seed $((SEED0 + i)) >"$OUT/seed-$((SEED0 + i)).log" 2>&1 &
done
wait
end=$(date +%s)
fails=$(cat "$OUT"/seed-*.log | grep -c '^FAIL run')
{
  echo "property test long run: $((per * JOBS)) invocations in $JOBS processes (seeds $SEED0..$((SEED0 + JOBS - 1))), $((end - start)) s wall, $fails failures"
  grep -h '^property test:' "$OUT"/seed-*.log
} | tee "$OUT/summary.txt"
[ "$fails" = 0 ]
