#!/usr/bin/env bash
# The combined GPU run (one call of the device tool): build trainsim with CUDA, NCCL and MPI
# from the carried source, run every GPU test, refresh the kernel calibration and held-out
# measurements, measure NCCL collectives on all local GPUs (single process and under mpirun),
# the PyTorch SDPA peer for attention and, when the training workload is built, the
# training-step benchmark with its PyTorch peer. Everything lands in
# $OUT (default out/device-run); each step is time-boxed so a slow step cannot eat the rest.
# Usage: scripts/device-run.sh [all|build|tests|kernels|train|dp|collectives|fp8]
# fp8 (not in `all`): the fp8-shapes and fp8-held-out suites (FP8 GEMMs at training
# shapes) and the calibration and held-out suites again in the same call, for the FP8
# size-curve trials (docs/frameworks.md, "Fit/test split").
# Order in `all`: build, tests, kernels (fits the H200 profile), train (single GPU: predicts
# with that profile; also `train-step --trace`), dp (data parallel on all local GPUs, each DDP
# variant and bucket size and ZeRO-1, parameters checked against one GPU), collectives. Split over calls on one warm machine, run
# `kernels` before `train`: the fitted profile is kept in the build folder.
# Knobs: PERF=0 skips the perf suite and SDPA peer; TESTS_LIMIT_S, TRAIN_LIMIT_S time-box steps;
# MODELS, DP_MODELS, PEER_MODELS, PEERS, TABLES, STEPS, WARMUP, RECOMPUTES pass to
# scripts/train-step-bench.sh.
set -uo pipefail
cd "$(dirname "$0")/.."
mode=${1:-all}
OUT=${OUT:-out/device-run}
BUILD=${TRAINSIM_DEVICE_BUILD:-build-dev}
JOBS=${JOBS:-$(nproc)}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
log="$OUT/device-run.log"
say() { echo "# $(date -u +%H:%M:%S) $*" | tee -a "$log"; }
step() { local limit=$1; shift; timeout "$limit" "$@"; local rc=$?; [ $rc = 124 ] && say "TIMED OUT after ${limit}s: $*"; return $rc; }

say "device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1), $(nvidia-smi -L | wc -l) GPU(s)"
nvidia-smi topo -m > "$OUT/topology.txt" 2>&1
nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1

if [ "$mode" = all ] || [ "$mode" = build ]; then
  say "build ($JOBS jobs)"
  cmake -S . -B "$BUILD" -DTRAINSIM_CUDA=ON -DCMAKE_BUILD_TYPE=Release >"$OUT/configure.log" 2>&1 || { say "configure failed"; tail -20 "$OUT/configure.log"; exit 1; }
  grep "trainsim:" "$OUT/configure.log" | tee -a "$log"
  step 400 cmake --build "$BUILD" -j"$JOBS" >"$OUT/build.log" 2>&1 || { say "build failed"; grep -E "error" "$OUT/build.log" | head -20; exit 1; }
fi
T="$BUILD/cli/trainsim"

if [ "$mode" = all ] || [ "$mode" = tests ]; then
  say "GPU tests"
  (cd "$BUILD" && step "${TESTS_LIMIT_S:-300}" ctest -L gpu --output-on-failure) >"$OUT/gpu-tests.log" 2>&1
  tail -15 "$OUT/gpu-tests.log" | tee -a "$log"
fi

# The calibration and held-out suites, as JSON under $OUT (kernels and fp8 modes).
fit_suites() {
  step 120 "$T" bench kernels --suite calibration --timeout-s 0.5 --format json -o "$OUT/h200-calibration.json" 2>>"$log"
  step 90 "$T" bench kernels --suite held-out --timeout-s 0.5 --format json -o "$OUT/h200-held-out.json" 2>>"$log"
}

if [ "$mode" = fp8 ]; then
  say "fp8-shapes, fp8-held-out, calibration and held-out suites"
  for s in fp8-shapes fp8-held-out; do
    step 120 "$T" bench kernels --suite "$s" --timeout-s 0.5 --format json -o "$OUT/h200-$s.json" 2>>"$log"
  done
  fit_suites
fi

if [ "$mode" = all ] || [ "$mode" = kernels ]; then
  say "kernel suites"
  fit_suites
  if [ "${PERF:-1}" = 1 ]; then
    step 120 "$T" bench kernels --suite perf --timeout-s 2 >"$OUT/h200-perf.txt" 2>>"$log"; cat "$OUT/h200-perf.txt" >> "$log"
    # The measuring peer for attention (PyTorch exists only on the device; not a dependency).
    PYTHONUNBUFFERED=1 step 120 python3 scripts/peer_sdpa.py --output "$OUT/h200-peer-sdpa.json" 2>>"$log"
  fi
  # Diagnostic: where a short-row norm backward's time goes (kernels/dev/norm_bwd_probe.cu).
  cmake --build "$BUILD" --target norm_bwd_probe -j"$JOBS" >/dev/null 2>&1 &&
    step 60 "$BUILD/kernels/norm_bwd_probe" >"$OUT/norm-bwd-probe.txt" 2>&1
  cat "$OUT/norm-bwd-probe.txt" >>"$log" 2>/dev/null
  # What a launch costs inside a queue of launches vs alone (kernels/dev/launch_probe.cu).
  cmake --build "$BUILD" --target launch_probe -j"$JOBS" >/dev/null 2>&1 &&
    step 60 "$BUILD/kernels/launch_probe" "$OUT/h200-launch-probe.json" >"$OUT/h200-launch-probe.txt" 2>&1
  cat "$OUT/h200-launch-probe.txt" >>"$log" 2>/dev/null
  # The profile: kernel fit, plus the queued-launch costs, plus the overlap rates (measured by the
  # dp step of an earlier call on this machine, else the recorded 2x H200 probe).
  probes=()
  [ -f "$OUT/h200-launch-probe.json" ] && probes+=(--launch-probe "$OUT/h200-launch-probe.json")
  ov=$(ls "$BUILD"/overlap-probe-x*.json 2>/dev/null | head -1)
  probes+=(--overlap-probe "${ov:-validate/results/fixtures/overlap-probe-x2.json}")
  "$T" calibrate --from "$OUT/h200-calibration.json" --base h200-datasheet --gpu h200 "${probes[@]}" --out "$OUT/h200-profile.json" >>"$log" 2>&1
  "$T" compare --calibration "$OUT/h200-profile.json" --measurements "$OUT/h200-held-out.json" --base h200-datasheet >"$OUT/h200-compare.txt" 2>&1
  tail -1 "$OUT/h200-compare.txt" | tee -a "$log"
  # Kept in the build folder too, so a later `train` call on the same machine predicts with it.
  cp "$OUT/h200-profile.json" "$BUILD/h200-profile.json" 2>/dev/null
fi

profile=${PROFILE:-$BUILD/h200-profile.json}
[ -f "$profile" ] || profile=
if { [ "$mode" = all ] || [ "$mode" = train ]; } && [ -x scripts/train-step-bench.sh ]; then
  say "training step, single GPU"
  # Predictions use the profile fitted by the `kernels` step of this machine when there is one.
  [ -n "$profile" ] && say "train-step predictions with --calibration $profile"
  step "${TRAIN_LIMIT_S:-540}" env TRAINSIM_BIN="$T" BUILD="$BUILD" OUT="$OUT" CALIBRATION="$profile" \
    DP_MODELS= scripts/train-step-bench.sh >>"$log" 2>&1
  grep -E "step .* ms \(pred|FAILED|peer" "$OUT/train-step.log" | tee -a "$log" | head -40
  # Per-launch trace of one step next to the per-op prediction (where the step-time error is).
  for cfg in "--precision bf16-mixed --attention flash" "--precision fp32 --attention naive"; do
    # shellcheck disable=SC2086
    step 120 "$T" train-step --model "${TRACE_MODEL:-cs336-xl}" --batch 4 --seq-len 512 $cfg --steps 3 --warmup 2 --trace ${profile:+--calibration "$profile"} >>"$OUT/train-step-trace.txt" 2>&1
  done
  grep -A16 "^# by category" "$OUT/train-step-trace.txt" | tee -a "$log"
fi
if { [ "$mode" = all ] || [ "$mode" = dp ]; } && [ -x scripts/train-step-bench.sh ]; then
  n=$(nvidia-smi -L | wc -l)
  say "training step, data parallel on $n GPU(s)"
  # Compute / all-reduce interference (validate/comm/overlap_probe.cpp): what overlap costs.
  cmake --build "$BUILD" --target overlap_probe -j"$JOBS" >/dev/null 2>&1 &&
    step 120 "$BUILD/validate/comm/overlap_probe" "$OUT/overlap-probe-x$n.json" >"$OUT/overlap-probe-x$n.txt" 2>&1
  cat "$OUT/overlap-probe-x$n.txt" | tee -a "$log"
  cp "$OUT/overlap-probe-x$n.json" "$BUILD/" 2>/dev/null # for a later `kernels` call's profile
  step "${DP_LIMIT_S:-540}" env TRAINSIM_BIN="$T" BUILD="$BUILD" OUT="$OUT/dp" CALIBRATION="$profile" \
    MODELS= PEERS=0 TABLES="${TABLES:-0}" CHECK_MODELS="${CHECK_MODELS-cs336-xl}" scripts/train-step-bench.sh >>"$log" 2>&1
  grep -E "step .* ms \(pred|FAILED|DIFFER" "$OUT/dp/train-step.log" | tee -a "$log" | head -40
  # One bucketed step traced: where the exposed communication sits.
  step 120 "$T" train-step --model cs336-xl --batch 4 --seq-len 512 --num-gpus "$n" --ddp bucketed --bucket-mb 100 --steps 3 --warmup 2 --trace ${profile:+--calibration "$profile"} >"$OUT/dp/train-step-trace-dp.txt" 2>&1
fi
if [ "$mode" = all ] || [ "$mode" = collectives ]; then
  n=$(nvidia-smi -L | wc -l)
  say "collectives on $n GPU(s), single process: timing 8 B .. 4 GiB (no check), then 8 B .. 256 MiB checked"
  # 5 batches of 10 iterations per size, median batch: one slow batch (2026-11-29: all-to-all at
  # 16 MiB) no longer sets the figure.
  step 240 "$T" bench collectives --gpus "$n" --min-bytes 8 --max-bytes 4G --iters 10 --repeats 5 --warmup 5 --no-check --format json -o "$OUT/collectives-x$n.json" 2>>"$log"
  step 150 "$T" bench collectives --gpus "$n" --min-bytes 8 --max-bytes 256M --iters 10 --warmup 3 >"$OUT/collectives-x$n-checked.txt" 2>>"$log"
  tail -5 "$OUT/collectives-x$n-checked.txt" >> "$log"
  if command -v mpirun >/dev/null && [ "$n" -gt 1 ]; then
    say "collectives under mpirun -np $n"
    step 240 mpirun --allow-run-as-root -np "$n" -x NCCL_NVLS_ENABLE "$T" bench collectives --min-bytes 8 --max-bytes 4G --iters 10 --repeats 5 --warmup 5 --no-check --format json -o "$OUT/collectives-x$n-mpi.json" >"$OUT/collectives-x$n-mpi.log" 2>&1
    tail -3 "$OUT/collectives-x$n-mpi.log" >> "$log"
  fi
  base=$OUT/h200-profile.json
  [ -f "$base" ] || base=${profile:-presets/profiles/h200.json}
  # The profile comes from the mpirun sweep when there is one (one process per GPU, as training
  # runs); the topology is recorded in it when nvidia-smi printed one.
  coll=$OUT/collectives-x$n.json
  [ -f "$OUT/collectives-x$n-mpi.json" ] && coll=$OUT/collectives-x$n-mpi.json
  topo=()
  grep -q 'GPU1' "$OUT/topology.txt" 2>/dev/null && topo=(--topology "$OUT/topology.txt")
  "$T" calibrate --collectives "$coll" --base "$base" "${topo[@]}" --out "$OUT/h200x$n-profile.json" >>"$log" 2>&1
  "$T" compare --calibration "$OUT/h200x$n-profile.json" --collectives "$coll" >"$OUT/collectives-x$n-compare.txt" 2>&1
  tail -1 "$OUT/collectives-x$n-compare.txt" | tee -a "$log"
fi

say "done"
