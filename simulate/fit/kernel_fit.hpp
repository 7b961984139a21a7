// Calibration: turn kernel measurements (from `trainsim bench kernels --format json`) into a
// HardwareProfile, and compare predictions against measurements. Pure C++ (no CUDA): the
// same functions run on recorded measurements on any machine. Each benchmark case is
// described by the model's op factories (model/ops.hpp) and timed by simulate/roofline, so
// predicted and measured speak one language.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "hardware/gpu.hpp"
#include "hardware/profile.hpp"
#include "model/ops.hpp"
#include "simulate/fit/kernel_cases.hpp"
#include "simulate/roofline.hpp"

namespace trainsim::fitting {

struct KernelMeasurement {
  std::string name;
  KernelShape shape;
  double median_s = 0;
  double min_s = 0;
  double noise_pct = 0;
};

struct MeasurementSet {
  std::string source;       // file it came from
  nlohmann::json device;    // the bench's device block (GPU, driver, CUDA, cuBLAS versions)
  std::string command_line; // of the bench run
  std::vector<KernelMeasurement> items;
};

/// Reads a `bench kernels --format json` document; throws ConfigError naming file and field.
[[nodiscard]] MeasurementSet read_measurements(const nlohmann::json& doc,
                                               const std::string& source);
[[nodiscard]] MeasurementSet load_measurements(const std::string& path);

/// Predicted time of a case: sum of its ops' roofline times.
[[nodiscard]] double predict_kernel_s(const KernelShape& shape, const hw::GpuSpec& gpu,
                                      const hw::HardwareProfile& profile);

struct FitReport {
  std::vector<std::string> lines; // what was fitted from which cases, human readable
};

/// Fits the profile's kernel efficiencies (GEMM fraction per dtype, tile size and k_half;
/// attention fractions; elementwise, reduction, copy bandwidth fractions; launch overhead)
/// to the measurements; fields without measurements keep `base`'s values.
[[nodiscard]] hw::HardwareProfile fit_profile(const MeasurementSet& ms, const hw::GpuSpec& gpu,
                                              const hw::HardwareProfile& base, FitReport& report);

/// Host cost of a queued launch from kernels/dev/launch_probe's JSON ("ops": name, host_us):
/// host_launch_s = median host_us of our kernels (every op not named "gemm.*"),
/// host_gemm_launch_s = median host_us of the "gemm.cublas.*" ops (cublasGemmEx: what
/// validate/train issues), gpu_launch_gap_s = gpu_us of "empty" (queued behind GEMMs, so the
/// host is ahead). ConfigError naming `source` and the field when one is missing.
void apply_launch_probe(const nlohmann::json& probe, const std::string& source,
                        hw::HardwareProfile& profile, FitReport& report);

/// Compute / collective interference from validate/comm/overlap_probe's JSON:
/// overlap_compute_rate = compute_rate_gemm, overlap_comm_rate = comm_rate_gemm of the
/// "step_like" scenario when present (else the top-level, large one): the backward pass that
/// DDP overlaps is GEMM-dominated; the copy rates are recorded in the probe's file.
/// ConfigError naming `source` and the field when one is missing or outside (0, 1.05].
void apply_overlap_probe(const nlohmann::json& probe, const std::string& source,
                         hw::HardwareProfile& profile, FitReport& report);

/// Host-link bandwidth from scripts/peer_offload_overlap.py's JSON: host_link_bw_fraction =
/// the slower direction of pinned copies alone (d2h_alone_gb_per_s, h2d_alone_gb_per_s) over
/// the GPU preset's one-way host link, `pcie_bytes_per_s`. The copies' rate beside GEMMs and the
/// GEMMs' slowdown beside copies are reported, not fitted. ConfigError naming `source` and the
/// field when one is missing or not a positive number.
void apply_host_link_probe(const nlohmann::json& probe, const std::string& source,
                           double pcie_bytes_per_s, hw::HardwareProfile& profile,
                           FitReport& report);

struct Comparison {
  std::string name;
  std::string op;
  double measured_s = 0;
  double predicted_base_s = 0;       // with the datasheet/default profile
  double predicted_calibrated_s = 0; // with the calibrated profile
  [[nodiscard]] double error_base_pct() const { return 100 * (predicted_base_s / measured_s - 1); }
  [[nodiscard]] double error_calibrated_pct() const {
    return 100 * (predicted_calibrated_s / measured_s - 1);
  }
};

[[nodiscard]] std::vector<Comparison> compare_kernels(const MeasurementSet& ms,
                                                      const hw::GpuSpec& gpu,
                                                      const hw::HardwareProfile& base,
                                                      const hw::HardwareProfile& calibrated);

/// Mean absolute percentage error of a list (calibrated or base).
[[nodiscard]] double mape(const std::vector<Comparison>& c, bool calibrated);

} // namespace trainsim::fitting
