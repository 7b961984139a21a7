// Kernel-level calibration and comparison (kernel_fit.hpp).
#include "simulate/fit/kernel_fit.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>

#include "common/errors.hpp"
#include "common/json_io.hpp"
#include "common/stats.hpp"

namespace trainsim::fitting {

using model::Op;
using model::OpKind;
using sim::Pass;

namespace {

// A measured shape's integer field, in the range a GPU kernel can have.
std::int64_t get_int(const nlohmann::json& j, const char* key, const std::string& where,
                     std::int64_t hi) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number_integer())
    throw ConfigError(fmt::format("{}: {}: missing or not an integer", where, key));
  const auto v = it->get<std::int64_t>();
  if (v < 1 || v > hi)
    throw ConfigError(fmt::format("{}: {} = {}: must be in 1..{}", where, key, v, hi));
  return v;
}

// A measured time (seconds): one clock tick of a GPU event is 0.5 us, no kernel case runs an hour.
double get_seconds(const nlohmann::json& j, const char* key, const std::string& where) {
  constexpr double kMinSeconds = 1e-9, kMaxSeconds = 3600;
  auto it = j.find(key);
  if (it == j.end() || !it->is_number())
    throw ConfigError(fmt::format("{}: {}: missing or not a number", where, key));
  const double v = it->get<double>();
  if (!(v >= kMinSeconds && v <= kMaxSeconds))
    throw ConfigError(fmt::format("{}: {} = {:g}: must be in [{:g}, {:g}] s", where, key, v,
                                  kMinSeconds, kMaxSeconds));
  return v;
}

bool get_bool(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_boolean() && it->get<bool>();
}

} // namespace

MeasurementSet read_measurements(const nlohmann::json& doc, const std::string& source) {
  MeasurementSet ms;
  ms.source = source;
  if (!doc.is_object() || !doc.contains("measurements") || !doc["measurements"].is_array())
    throw ConfigError(source + ": measurements: expected the JSON of `trainsim bench kernels "
                               "--format json`");
  if (doc.contains("device"))
    ms.device = doc["device"];
  if (doc.contains("command_line") && doc["command_line"].is_string())
    ms.command_line = doc["command_line"].get<std::string>();
  std::size_t i = 0;
  for (const auto& m : doc["measurements"]) {
    const std::string where = fmt::format("{}: measurements[{}]", source, i++);
    if (!m.is_object())
      throw ConfigError(where + ": expected an object");
    KernelMeasurement k;
    k.name = optional_string(m, "name", "", where);
    const std::string op = optional_string(m, "op", "", where);
    const auto parsed = parse_op(op);
    if (!parsed)
      throw ConfigError(fmt::format("{}: op = {}: unknown op", where, json_brief(op)));
    k.shape.op = *parsed;
    const auto dt = parse_dtype(optional_string(m, "dtype", "bf16", where));
    if (!dt)
      throw ConfigError(where + ": dtype: unknown");
    k.shape.dtype = *dt;
    k.median_s = get_seconds(m, "median_s", where);
    k.min_s = m.contains("min_s") ? get_seconds(m, "min_s", where) : k.median_s;
    k.noise_pct = optional_number(m, "noise_pct", 0, where);
    if (!(k.noise_pct >= 0 && k.noise_pct <= 1e4))
      throw ConfigError(
          fmt::format("{}: noise_pct = {:g}: must be in [0, 1e4] %", where, k.noise_pct));
    if (k.min_s > k.median_s)
      throw ConfigError(fmt::format("{}: min_s = {:g} s: must not exceed median_s = {:g} s", where,
                                    k.min_s, k.median_s));
    if (m.contains("check_passed") && !m["check_passed"].is_boolean())
      throw ConfigError(where + ": check_passed: expected true or false");
    if (m.contains("check_passed") && !get_bool(m, "check_passed"))
      throw ConfigError(where + ": check_passed = false: a wrong result is not a measurement");
    k.shape.backward = get_bool(m, "backward");
    constexpr std::int64_t kDim = std::int64_t{1} << 31, kElements = std::int64_t{1} << 40;
    switch (k.shape.op) {
    case BenchOp::gemm:
      k.shape.m = get_int(m, "m", where, kDim);
      k.shape.n = get_int(m, "n", where, kDim);
      k.shape.k = get_int(m, "k", where, kDim);
      k.shape.gemm_impl = optional_string(m, "impl", "cublaslt", where) == "cublas"
                              ? GemmImpl::cublas
                              : GemmImpl::cublaslt;
      break;
    case BenchOp::softmax:
    case BenchOp::layernorm:
    case BenchOp::rmsnorm:
      k.shape.rows = get_int(m, "rows", where, kDim);
      k.shape.cols = get_int(m, "cols", where, kDim);
      break;
    case BenchOp::attention:
      k.shape.batch_size = get_int(m, "batch_size", where, 1 << 20);
      k.shape.num_heads = get_int(m, "num_heads", where, 1 << 16);
      k.shape.seq_len = get_int(m, "seq_len", where, 1 << 24);
      k.shape.head_dim = get_int(m, "head_dim", where, 1 << 12);
      k.shape.causal = get_bool(m, "causal");
      k.shape.impl = optional_string(m, "impl", "flash", where) == "naive" ? AttentionImpl::naive
                                                                           : AttentionImpl::flash;
      break;
    case BenchOp::empty: break;
    default: k.shape.num_elements = get_int(m, "num_elements", where, kElements); break;
    }
    ms.items.push_back(k);
  }
  if (ms.items.empty())
    throw ConfigError(source + ": measurements: empty");
  return ms;
}

MeasurementSet load_measurements(const std::string& path) {
  return read_measurements(load_json_file(path), path);
}

double predict_kernel_s(const KernelShape& shape, const hw::GpuSpec& gpu,
                        const hw::HardwareProfile& profile) {
  double t = 0;
  for (const auto& [op, backward] : kernel_ops(shape))
    t += sim::op_cost(op, backward ? Pass::backward : Pass::forward, gpu, profile).time_s;
  return t;
}

namespace {

// Achieved fraction of datasheet HBM bandwidth of a memory-bound case: its bytes over its
// measured time less the launch overhead.
double bw_fraction_of(const KernelMeasurement& m, const hw::GpuSpec& gpu, double launch_s) {
  double bytes = 0;
  for (const auto& [op, backward] : kernel_ops(m.shape))
    bytes += backward ? op.bwd_bytes : op.fwd_bytes;
  return bytes / (std::max(m.median_s - launch_s, 1e-9) * gpu.hbm_bandwidth_bytes_per_s);
}

// Cases smaller than this are dominated by launch and L2 effects, not bandwidth.
constexpr double kMinBytesForBandwidth = 64e6;
constexpr double kMinGemmSeconds = 20e-6;
// Below this, launch overhead dominates even an L2-resident op.
constexpr double kMinBytesForL2 = 4e6;

double case_bytes(const KernelMeasurement& m) {
  double bytes = 0;
  for (const auto& [op, backward] : kernel_ops(m.shape))
    bytes += backward ? op.bwd_bytes : op.fwd_bytes;
  return bytes;
}

} // namespace

hw::HardwareProfile fit_profile(const MeasurementSet& ms, const hw::GpuSpec& gpu,
                                const hw::HardwareProfile& base, FitReport& report) {
  hw::HardwareProfile p = base;
  auto note = [&](std::string s) { report.lines.push_back(std::move(s)); };

  // Launch overhead: the empty kernel.
  for (const auto& m : ms.items)
    if (m.shape.op == BenchOp::empty) {
      p.launch_overhead_s = m.median_s;
      note(fmt::format("launch_overhead_us = {:.2f} (median of the empty kernel)",
                       m.median_s * 1e6));
    }
  const double launch = p.launch_overhead_s;

  // Bandwidth fractions: medians over large memory-bound cases of each class and pass;
  // cases that fit in L2 (hot, as the bench runs them) give the L2-resident bandwidth.
  std::vector<double> copy, elem, red_fwd, red_bwd, norm_fwd, norm_bwd, l2;
  for (const auto& m : ms.items) {
    const double bytes = case_bytes(m);
    const bool memory_bound = m.shape.op != BenchOp::gemm && m.shape.op != BenchOp::attention &&
                              m.shape.op != BenchOp::empty;
    if (memory_bound && bytes <= gpu.l2_bytes && bytes >= kMinBytesForL2) {
      l2.push_back(bw_fraction_of(m, gpu, launch));
      continue;
    }
    if (bytes < kMinBytesForBandwidth)
      continue;
    const double f = bw_fraction_of(m, gpu, launch);
    switch (m.shape.op) {
    case BenchOp::copy: copy.push_back(f); break;
    case BenchOp::relu:
    case BenchOp::gelu:
    case BenchOp::add:
    case BenchOp::scale: elem.push_back(f); break;
    case BenchOp::softmax: (m.shape.backward ? red_bwd : red_fwd).push_back(f); break;
    case BenchOp::layernorm:
    case BenchOp::rmsnorm: (m.shape.backward ? norm_bwd : norm_fwd).push_back(f); break;
    default: break;
    }
  }
  auto set_fraction = [&](const char* field, double& out, const std::vector<double>& v,
                          double cap = 1.0) {
    if (v.empty())
      return;
    out = std::min(cap, median(v));
    note(fmt::format("{} = {:.3f} (median of {} cases)", field, out, v.size()));
  };
  set_fraction("copy_bw_fraction", p.copy_bw_fraction, copy);
  set_fraction("elementwise_bw_fraction", p.elementwise_bw_fraction, elem);
  set_fraction("reduction_bw_fraction", p.reduction_bw_fraction, red_fwd);
  set_fraction("reduction_bwd_bw_fraction", p.reduction_bwd_bw_fraction, red_bwd);
  set_fraction("norm_bw_fraction", p.norm_bw_fraction, norm_fwd);
  set_fraction("norm_bwd_bw_fraction", p.norm_bwd_bw_fraction, norm_bwd);
  set_fraction("l2_resident_bw_fraction", p.l2_resident_bw_fraction, l2, 10.0);
  if (!elem.empty()) {
    // A fused AdamW update is an elementwise kernel over several streams.
    p.optimizer_bw_fraction = p.elementwise_bw_fraction;
    note("optimizer_bw_fraction = elementwise_bw_fraction (no optimizer kernel measured)");
  }

  // FlashAttention: a grid search of attention_kv_half (the loop length that halves the
  // efficiency, shared by forward and backward) and, for each, the fractions of the 16-bit peak
  // with wave quantization and the loop factor divided out (the roofline applies them again):
  // medians over the flash cases; the kv_half with the least squared log error wins.
  struct FlashCase {
    model::Op op;
    bool backward;
    double measured_s;
  };
  std::vector<FlashCase> flash;
  for (const auto& m : ms.items)
    if (m.shape.op == BenchOp::attention && m.shape.impl == AttentionImpl::flash)
      for (const auto& [op, backward] : kernel_ops(m.shape))
        flash.push_back({op, backward, m.median_s});
  if (!flash.empty()) {
    double best_err = 1e300, best_kh = 0;
    std::vector<double> best_fwd, best_bwd;
    for (double kh = 0; kh <= 2048; kh += 32) {
      hw::HardwareProfile unit = p;
      unit.attention_fwd_peak_fraction = unit.attention_bwd_peak_fraction = 1.0;
      unit.attention_kv_half = kh;
      std::vector<double> fwd, bwd;
      for (const FlashCase& f : flash) {
        const auto c = sim::op_cost(f.op, f.backward ? Pass::backward : Pass::forward, gpu, unit);
        const double flops = f.backward ? f.op.bwd_exec_flops : f.op.fwd_exec_flops;
        const double peak = sim::effective_peak_flops_per_s(gpu, f.op.dtype);
        (f.backward ? bwd : fwd)
            .push_back(flops / (std::max(f.measured_s - launch, 1e-9) * peak * c.efficiency));
      }
      hw::HardwareProfile trial = unit;
      trial.attention_fwd_peak_fraction =
          fwd.empty() ? p.attention_fwd_peak_fraction : std::min(1.0, median(fwd));
      trial.attention_bwd_peak_fraction =
          bwd.empty() ? p.attention_bwd_peak_fraction : std::min(1.0, median(bwd));
      double err = 0;
      for (const FlashCase& f : flash) {
        const double t =
            sim::op_cost(f.op, f.backward ? Pass::backward : Pass::forward, gpu, trial).time_s;
        err += std::pow(std::log(t / f.measured_s), 2);
      }
      if (err < best_err) {
        best_err = err;
        best_kh = kh;
        best_fwd = fwd;
        best_bwd = bwd;
      }
    }
    p.attention_kv_half = best_kh;
    note(fmt::format("attention_kv_half = {:.0f} (least squares on log time over {} flash "
                     "cases)",
                     best_kh, flash.size()));
    set_fraction("attention_fwd_peak_fraction", p.attention_fwd_peak_fraction, best_fwd);
    set_fraction("attention_bwd_peak_fraction", p.attention_bwd_peak_fraction, best_bwd);
  }

  // GEMMs: grid search of the tile and k_half shared by all dtypes and, for each, the peak
  // fraction per dtype, minimising the squared log error of predicted vs measured time.
  std::vector<const KernelMeasurement*> gemms;
  // GEMMs shorter than kMinGemmSeconds are launch- and tail-bound: the tile model does not
  // describe them (cuBLAS switches to small tiles and split-K there).
  for (const auto& m : ms.items)
    if (m.shape.op == BenchOp::gemm && m.shape.gemm_impl == GemmImpl::cublaslt &&
        m.median_s >= kMinGemmSeconds)
      gemms.push_back(&m);
  if (!gemms.empty()) {
    double best_err = 1e300;
    hw::HardwareProfile best = p;
    const double tiles[] = {64, 128, 256};
    for (double tm : tiles)
      for (double tn : tiles)
        for (double kh = 0; kh <= 512; kh += 16) {
          hw::HardwareProfile trial = p;
          trial.gemm_tile_m = tm;
          trial.gemm_tile_n = tn;
          trial.gemm_k_half = kh;
          double total = 0;
          for (Dtype dt : kAllDtypes) {
            const bool any = std::any_of(gemms.begin(), gemms.end(),
                                         [&](const auto* m) { return m->shape.dtype == dt; });
            if (!any)
              continue; // keep the base profile's value
            double best_dt = 1e300, best_f = 0;
            for (double f = 0.2; f <= 1.0; f += 0.005) {
              trial.gemm_peak_fraction[dt] = f;
              double err = 0;
              for (const auto* m : gemms) {
                if (m->shape.dtype != dt)
                  continue;
                const double r = std::log(predict_kernel_s(m->shape, gpu, trial) / m->median_s);
                err += r * r;
              }
              if (err < best_dt) {
                best_dt = err;
                best_f = f;
              }
            }
            trial.gemm_peak_fraction[dt] = best_f;
            total += best_dt;
          }
          if (total < best_err) {
            best_err = total;
            best = trial;
          }
        }
    p = best;
    std::string per_dtype;
    for (Dtype dt : kAllDtypes)
      if (std::any_of(gemms.begin(), gemms.end(),
                      [&](const auto* m) { return m->shape.dtype == dt; }))
        per_dtype += fmt::format(" {} {:.3f}", dtype_name(dt), p.gemm_peak_fraction[dt]);
    note(fmt::format("gemm tile {}x{}, k_half {}, peak fraction{} (least squares on log time over "
                     "{} cuBLASLt cases of >= 20 us)",
                     p.gemm_tile_m, p.gemm_tile_n, p.gemm_k_half, per_dtype, gemms.size()));
  }
  return p;
}

std::vector<Comparison> compare_kernels(const MeasurementSet& ms, const hw::GpuSpec& gpu,
                                        const hw::HardwareProfile& base,
                                        const hw::HardwareProfile& calibrated) {
  std::vector<Comparison> out;
  for (const auto& m : ms.items) {
    Comparison c;
    c.name = m.name;
    c.op = std::string(op_name(m.shape.op));
    c.measured_s = m.median_s;
    c.predicted_base_s = predict_kernel_s(m.shape, gpu, base);
    c.predicted_calibrated_s = predict_kernel_s(m.shape, gpu, calibrated);
    out.push_back(c);
  }
  return out;
}

double mape(const std::vector<Comparison>& cs, bool calibrated) {
  if (cs.empty())
    return 0;
  double s = 0;
  for (const auto& c : cs)
    s += std::fabs(calibrated ? c.error_calibrated_pct() : c.error_base_pct());
  return s / static_cast<double>(cs.size());
}

void apply_launch_probe(const nlohmann::json& probe, const std::string& source,
                        hw::HardwareProfile& profile, FitReport& report) {
  if (!probe.is_object() || !probe.contains("ops") || !probe["ops"].is_array())
    throw ConfigError(fmt::format("{}: ops: expected an array of {{name, host_us}}", source));
  std::vector<double> ours, gemm;
  double gap_us = -1;
  for (const auto& op : probe["ops"]) {
    if (!op.is_object() || !op.contains("name") || !op["name"].is_string() ||
        !op.contains("host_us") || !op["host_us"].is_number())
      throw ConfigError(
          fmt::format("{}: ops[]: each needs a string name and a number host_us", source));
    const auto name = op["name"].get<std::string>();
    const double us = op["host_us"].get<double>();
    if (!(us > 0 && us < 1000))
      throw ConfigError(
          fmt::format("{}: ops[{}].host_us = {}: must be in (0, 1000)", source, name, us));
    if (name == "empty" && op.contains("gpu_us") && op["gpu_us"].is_number())
      gap_us = op["gpu_us"].get<double>();
    if (name.rfind("gemm.cublas.", 0) == 0)
      gemm.push_back(us);
    else if (name.rfind("gemm.", 0) != 0)
      ours.push_back(us);
  }
  if (ours.empty() || gemm.empty())
    throw ConfigError(fmt::format("{}: ops: need at least one gemm.cublas.* op and one other op "
                                  "(found {} and {})",
                                  source, gemm.size(), ours.size()));
  if (!(gap_us >= 0 && gap_us < 1000))
    throw ConfigError(fmt::format("{}: ops[empty].gpu_us: missing or outside [0, 1000) (the "
                                  "GPU-side cost of a queued empty kernel)",
                                  source));
  profile.host_launch_s = median(ours) * 1e-6;
  profile.host_gemm_launch_s = median(gemm) * 1e-6;
  profile.gpu_launch_gap_s = gap_us * 1e-6;
  report.lines.push_back(fmt::format("host_launch_us = {:.2f} (median host time of {} queued "
                                     "launches of our kernels), host_gemm_launch_us = {:.2f} ({} "
                                     "cublasGemmEx shapes), gpu_launch_gap_us = {:.2f} (empty "
                                     "kernels queued behind GEMMs), from {}",
                                     profile.host_launch_s * 1e6, ours.size(),
                                     profile.host_gemm_launch_s * 1e6, gemm.size(), gap_us,
                                     source));
}

void apply_overlap_probe(const nlohmann::json& probe, const std::string& source,
                         hw::HardwareProfile& profile, FitReport& report) {
  // The step-like scenario (a training step's GEMM shapes and 25 MiB buckets) when present.
  const bool step_like =
      probe.is_object() && probe.contains("step_like") && probe["step_like"].is_object();
  const nlohmann::json& q = step_like ? probe["step_like"] : probe;
  auto rate = [&](const char* field) {
    if (!q.is_object() || !q.contains(field) || !q[field].is_number())
      throw ConfigError(fmt::format("{}: {}: missing (a number in (0, 1])", source, field));
    const double v = q[field].get<double>();
    // A rate a little above 1 is timing noise (the other stream idle for a moment): clamp it.
    if (!(v > 0 && v <= 1.05))
      throw ConfigError(fmt::format("{}: {} = {}: must be in (0, 1.05]", source, field, v));
    return std::min(v, 1.0);
  };
  profile.overlap_compute_rate = rate("compute_rate_gemm");
  profile.overlap_comm_rate = rate("comm_rate_gemm");
  if (!probe.contains("num_gpus") || !probe["num_gpus"].is_number_integer() ||
      probe["num_gpus"].get<std::int64_t>() < 1 || probe["num_gpus"].get<std::int64_t>() > 4096)
    throw ConfigError(fmt::format("{}: num_gpus: missing (an integer in 1..4096)", source));
  const auto gpus = probe["num_gpus"].get<std::int64_t>();
  if (gpus < 2)
    report.lines.push_back(fmt::format("warning: {} was measured on {} GPU(s): the all-reduce "
                                       "was a local copy, not communication",
                                       source, gpus));
  report.lines.push_back(fmt::format("overlap_compute_rate = {:.3f}, overlap_comm_rate = {:.3f} "
                                     "(GEMM beside an all-reduce on {} GPUs, {} scenario, from {})",
                                     profile.overlap_compute_rate, profile.overlap_comm_rate, gpus,
                                     step_like ? "step_like" : "large", source));
}

void apply_host_link_probe(const nlohmann::json& probe, const std::string& source,
                           double pcie_bytes_per_s, hw::HardwareProfile& profile,
                           FitReport& report) {
  auto gb_per_s = [&](const char* field) {
    if (!probe.is_object() || !probe.contains(field) || !probe[field].is_number() ||
        !(probe[field].get<double>() > 0) || probe[field].get<double>() > 1e4)
      throw ConfigError(
          fmt::format("{}: {}: missing (a bandwidth in GB/s, in (0, 10000])", source, field));
    return probe[field].get<double>();
  };
  if (!(pcie_bytes_per_s > 0))
    throw ConfigError(fmt::format("{}: the GPU preset has no host link bandwidth "
                                  "(pcie_bandwidth_gb_per_s) to take a fraction of",
                                  source));
  const double d2h = gb_per_s("d2h_alone_gb_per_s"), h2d = gb_per_s("h2d_alone_gb_per_s");
  const double fraction = std::min(d2h, h2d) * 1e9 / pcie_bytes_per_s;
  if (fraction > 1.2)
    throw ConfigError(fmt::format("{}: {:.1f} GB/s is {:.2f}x the preset's host link of {:.1f} "
                                  "GB/s: the probe is not of this GPU",
                                  source, std::min(d2h, h2d), fraction, pcie_bytes_per_s / 1e9));
  profile.host_link_bw_fraction = fraction;
  std::string beside;
  if (probe.contains("gemm_slowdown_beside_d2h_pct") &&
      probe["gemm_slowdown_beside_d2h_pct"].is_number() &&
      probe.contains("gemm_slowdown_beside_h2d_pct") &&
      probe["gemm_slowdown_beside_h2d_pct"].is_number())
    beside = fmt::format("; GEMMs beside the copies {:+.1f}% (device to host) and {:+.1f}% (host "
                         "to device), not modelled",
                         probe["gemm_slowdown_beside_d2h_pct"].get<double>(),
                         probe["gemm_slowdown_beside_h2d_pct"].get<double>());
  report.lines.push_back(fmt::format("host_link_bw_fraction = {:.3f} (pinned copies alone: {:.1f} "
                                     "GB/s device to host, {:.1f} host to device, of {:.0f} GB/s; "
                                     "from {}{})",
                                     fraction, d2h, h2d, pcie_bytes_per_s / 1e9, source, beside));
}
} // namespace trainsim::fitting
