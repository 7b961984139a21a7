#!/usr/bin/env bash
# One script for the GPU machine: build trainsim's CUDA parts, run the GPU tests, the kernel
# benchmarks (perf, calibration, held-out suites) and the PyTorch SDPA peer; logs and JSON go to
# $OUT (default out/gpu-run). Usage: scripts/gpu-run.sh [build|test|perf|all] (default all).
# A build directory carried from another machine is reused (set TRAINSIM_GPU_BUILD to it); its
# lib-carry/ folder, if any, is put on LD_LIBRARY_PATH (e.g. libfmt where the image lacks it).
set -uo pipefail
cd "$(dirname "$0")/.."
mode=${1:-all}
case "$mode" in build | test | perf | all) ;; *) echo "usage: $0 [build|test|perf|all]" >&2; exit 1 ;; esac
OUT=${OUT:-out/gpu-run}
mkdir -p "$OUT"
BUILD=${TRAINSIM_GPU_BUILD:-build-gpu}
JOBS=${JOBS:-16}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
log="$OUT/run.log"
say() { echo "# $(date -u +%H:%M:%S) $*" | tee -a "$log"; }

if [ -x "$BUILD/validate/bench/bench_kernels_dev" ] && [ "${REBUILD:-0}" = 0 ]; then
  say "using the existing build in $BUILD"
else
  say "building in $BUILD"
  cmake -S . -B "$BUILD" -DTRAINSIM_CUDA=ON -DCMAKE_BUILD_TYPE=Release >>"$log" 2>&1 || {
    say "configure failed (see $log)"; exit 1; }
  cmake --build "$BUILD" -j"$JOBS" --target bench_kernels_dev bench_gpu_test bench_reference_test \
    >>"$log" 2>&1 || { say "build failed (see $log)"; exit 1; }
  cmake --build "$BUILD" -j"$JOBS" --target trainsim >>"$log" 2>&1 || say "trainsim CLI did not build"
fi
[ "$mode" = build ] && exit 0

[ -d "$BUILD/lib-carry" ] && export LD_LIBRARY_PATH="$PWD/$BUILD/lib-carry:${LD_LIBRARY_PATH:-}"
# cuBLAS 13 from the toolkit, or from PyTorch's wheel when the toolkit has no lib64.
export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}:/usr/local/cuda/lib64"
if ldd "$BUILD/validate/bench/bench_kernels_dev" 2>/dev/null | grep -q "not found"; then
  pylib=$(python3 -c 'import nvidia.cublas, os; print(os.path.dirname(nvidia.cublas.__file__) + "/lib")' 2>/dev/null)
  [ -n "$pylib" ] && export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$pylib"
  ldd "$BUILD/validate/bench/bench_kernels_dev" | grep "not found" | tee -a "$log"
fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw \
  --format=csv >>"$log" 2>&1
bench="$BUILD/cli/trainsim"
if ! "$bench" bench kernels --help >/dev/null 2>&1; then bench="$BUILD/validate/bench/bench_kernels_dev"; fi
say "bench binary: $bench"

status=0
if [ "$mode" = all ] || [ "$mode" = test ]; then
  say "GPU tests"
  "$BUILD/validate/bench/bench_reference_test" >"$OUT/gpu-tests.log" 2>&1 || status=3
  "$BUILD/validate/bench/bench_gpu_test" >>"$OUT/gpu-tests.log" 2>&1 || status=3
  tail -4 "$OUT/gpu-tests.log" | tee -a "$log"
fi
if [ "$mode" = all ] || [ "$mode" = perf ]; then
  say "perf suite"
  "$bench" bench kernels --suite perf --timeout-s "${PERF_TIMEOUT_S:-3}" \
    >"$OUT/h200-perf.txt" 2>>"$log" || status=$?
  cat "$OUT/h200-perf.txt"
  say "PyTorch SDPA peer"
  PYTHONUNBUFFERED=1 python3 scripts/peer_sdpa.py --output "$OUT/peer-sdpa.json" 2>>"$log" || status=$?
fi
if [ "$mode" = all ]; then
  for suite in calibration held-out; do
    say "$suite suite"
    "$bench" bench kernels --suite "$suite" --timeout-s "${SUITE_TIMEOUT_S:-1}" --format json \
      -o "$OUT/h200-$suite.json" 2>>"$log" || status=$?
  done
fi
say "done, status $status"
exit $status
