// Command-line flags of `bench collectives`, shared by cli/cmd_bench_collectives.cpp and the
// test driver comm_bench (so ctest exercises the same argument handling). Header-only, CLI11;
// no CUDA or NCCL. Sizes accept K/M/G (binary).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "common/units.hpp"
#include "validate/comm/collectives.hpp"

namespace trainsim::val {

/// Flag values as typed; resolve_bench_flags() turns them into CollectiveBenchOptions.
struct CollectiveBenchFlags {
  std::string ops = "all";
  std::string min_bytes = "8";
  std::string max_bytes = "128M";
  double factor = 2;
  std::string dtype = "fp32";
  std::int64_t num_gpus = 0;
  std::int64_t iters = 20;
  std::int64_t repeats = 1;
  std::int64_t warmup = 5;
  double timeout_s = 300;
  bool no_check = false;
  bool mpi = false;
  bool bootstrap_only = false;
};

inline void add_bench_flags(CLI::App& cmd, CollectiveBenchFlags& f) {
  cmd.add_option("--ops", f.ops,
                 "Comma-separated collectives: all, all-reduce, all-gather, reduce-scatter, "
                 "broadcast, all-to-all, send-recv")
      ->capture_default_str();
  cmd.add_option("--min-bytes,-b", f.min_bytes, "Smallest size in bytes (K/M/G = binary)")
      ->capture_default_str();
  cmd.add_option("--max-bytes,-e", f.max_bytes,
                 "Largest size in bytes (K/M/G = binary); buffers are allocated once for it")
      ->capture_default_str();
  cmd.add_option("--factor,-f", f.factor, "Multiply the size by this between steps")
      ->capture_default_str();
  cmd.add_option("--dtype", f.dtype, "Element type: fp32, bf16 or fp16")->capture_default_str();
  cmd.add_option("--gpus,-g", f.num_gpus,
                 "Single process: local GPUs to drive (0 = all visible); under MPI one per rank")
      ->capture_default_str();
  cmd.add_option("--iters,-n", f.iters, "Timed iterations per size")->capture_default_str();
  cmd.add_option("--repeats", f.repeats,
                 "Time each size this many times (batches of --iters); report the median batch "
                 "(1 = nccl-tests' single mean; more resists a stray slow batch)")
      ->capture_default_str();
  cmd.add_option("--warmup,-w", f.warmup, "Untimed warm-up iterations per size")
      ->capture_default_str();
  cmd.add_option("--timeout-s", f.timeout_s,
                 "Abort the NCCL communicator if one wait exceeds this (seconds)")
      ->capture_default_str();
  cmd.add_flag("--no-check", f.no_check, "Skip the correctness pass after timing");
  cmd.add_flag("--mpi", f.mpi,
               "One rank per MPI process (default: detected from mpirun's environment)");
  cmd.add_flag("--bootstrap-only", f.bootstrap_only,
               "Test aid: MPI init and broadcast of a 128-byte id from rank 0, check every rank "
               "got it, then stop (needs no GPU)");
}

/// Converts and validates the flags (ConfigError naming the flag on bad input).
[[nodiscard]] inline CollectiveBenchOptions resolve_bench_flags(const CollectiveBenchFlags& f) {
  CollectiveBenchOptions o;
  o.ops = parse_collective_list(f.ops, "--ops");
  o.min_bytes = parse_bytes(f.min_bytes, "--min-bytes");
  o.max_bytes = parse_bytes(f.max_bytes, "--max-bytes");
  o.factor = f.factor;
  const auto dtype = parse_dtype(f.dtype);
  if (!dtype || (*dtype != Dtype::fp32 && *dtype != Dtype::bf16 && *dtype != Dtype::fp16))
    throw ConfigError("--dtype = '" + f.dtype + "': must be fp32, bf16 or fp16");
  o.dtype = *dtype;
  o.num_gpus = f.num_gpus;
  o.iters = f.iters;
  o.repeats = f.repeats;
  o.warmup = f.warmup;
  o.timeout_s = f.timeout_s;
  o.check = !f.no_check;
  o.mpi = f.mpi;
  o.bootstrap_only = f.bootstrap_only;
  o.command_line = current_command_line();
  validate(o);
  return o;
}

} // namespace trainsim::val
