// `bench kernels` as a library: the case list (from flags or a named suite), the measurement
// protocol (check first, warm up, CUDA-event samples until min-samples and noise target, or
// timeout) and the device description. No CUDA in this header: cli/ includes it; without CUDA
// the run functions throw DeviceError (bench_stub.cpp).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "simulate/fit/kernel_cases.hpp"

namespace trainsim::val {

// The cases a benchmark runs are the ones the kernel fit reads back
// (simulate/fit/kernel_cases.hpp): one description for the measurement and the fit.
using fitting::AttentionImpl;
using fitting::BenchOp;
using fitting::GemmImpl;
using fitting::KernelShape;
using fitting::KernelWork;

struct BenchOptions {
  std::vector<KernelShape> cases;
  int warmup = 5;             // untimed runs before sampling
  int min_samples = 20;       // at least this many timed samples
  int max_samples = 10000;    // stop here even if noisy
  double max_noise_pct = 1.0; // stop once stdev / mean * 100 is below this
  double timeout_s = 10.0;    // per case: stop sampling after this much wall time
  bool cold_l2 = false;       // flush L2 (write 2x its size) before each sample
  bool check = true;          // compare with the float64 CPU reference first
  int device = 0;
  std::uint64_t seed = 1;
  std::string command_line; // recorded with each result
};

struct DeviceInfo {
  std::string gpu_name;
  int device = 0;
  int compute_capability_major = 0, compute_capability_minor = 0;
  int num_sms = 0;
  double l2_bytes = 0, memory_bytes = 0;
  int driver_version = 0, runtime_version = 0; // e.g. 13000 = 13.0
  int cublas_version = 0;                      // major * 10000 + minor * 100 + patch
};

struct Measurement {
  std::string name;
  KernelShape shape;
  KernelWork work;
  double median_s = 0, min_s = 0, mean_s = 0, stdev_s = 0, noise_pct = 0;
  std::int64_t samples = 0;
  bool cold_l2 = false;
  bool checked = false, check_passed = true;
  double rel_err = 0, max_abs_err = 0; // worst over the case's checked outputs
  std::string check_note;              // what was compared (all, sampled rows, ...)
  double device_bytes = 0;     // device memory the case allocated (inputs, outputs, workspace)
  double call_alloc_bytes = 0; // device memory taken during the first call (cudaMemGetInfo)
  std::string command_line;
};

using ProgressFn =
    std::function<void(std::size_t done, std::size_t total, const std::string& name)>;

/// Describes the GPU `device`; throws DeviceError without CUDA or without a device.
[[nodiscard]] DeviceInfo query_device(int device);

/// Runs every case in opts.cases in order; throws DeviceError on CUDA failures. Failed checks
/// do not throw here: they are marked in the measurement (the caller decides the exit code).
[[nodiscard]] std::vector<Measurement> run_kernel_benchmarks(const BenchOptions& opts,
                                                             const ProgressFn& progress);

/// Named case lists: "calibration", "held-out" (different shapes, for reporting calibration
/// error), "perf" (the performance targets), "fp8-shapes" and "fp8-held-out" (FP8 GEMMs at
/// training shapes). Throws ConfigError on an unknown name.
[[nodiscard]] std::vector<KernelShape> suite_cases(std::string_view suite);
/// The names suite_cases accepts, in the order help texts list them.
[[nodiscard]] const std::vector<std::string>& suite_names();

} // namespace trainsim::val
