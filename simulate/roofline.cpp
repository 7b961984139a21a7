// Roofline per operator (roofline.hpp).
#include "simulate/roofline.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "common/errors.hpp"

namespace trainsim::sim {

Dtype effective_peak_dtype(const hw::GpuSpec& gpu, Dtype dtype) {
  // A dtype without its own units (bf16 on a V100) runs at fp32 speed.
  return gpu.peak_flops_per_s[dtype] > 0 ? dtype : Dtype::fp32;
}

double effective_peak_flops_per_s(const hw::GpuSpec& gpu, Dtype dtype) {
  return gpu.peak_flops_per_s[effective_peak_dtype(gpu, dtype)];
}

void check_precision_supported(const hw::GpuSpec& gpu, model::Precision precision) {
  if (!model::is_fp8(precision))
    return;
  if (gpu.peak_flops_per_s[Dtype::fp8] <= 0)
    throw ConfigError(fmt::format(
        "--precision = {}: {} has no FP8 tensor cores (its preset has no fp8 peak); FP8 training "
        "needs Hopper, Ada, Blackwell or MI300 (use bf16-mixed)",
        model::to_string(precision), gpu.name));
  if (precision == model::Precision::mxfp8 && !gpu.mx_block_scaling)
    throw ConfigError(fmt::format(
        "--precision = mxfp8: {} has no per-block (MX) scaling in its tensor cores (preset field "
        "mx_block_scaling); MXFP8 needs Blackwell (use fp8 or fp8-cs)",
        gpu.name));
}

Dtype mfu_peak_dtype(model::Precision precision) {
  return model::is_fp8(precision) ? Dtype::fp8 : model::compute_dtype(precision);
}

double mfu_peak_flops_per_s(const hw::GpuSpec& gpu, model::Precision precision) {
  return effective_peak_flops_per_s(gpu, mfu_peak_dtype(precision));
}

double gemm_efficiency(double m, double n, double k, double count, Dtype dtype,
                       const hw::GpuSpec& gpu, const hw::HardwareProfile& profile) {
  double peak_fraction = profile.gemm_peak_fraction[dtype];
  if (peak_fraction <= 0)
    peak_fraction = profile.gemm_peak_fraction[Dtype::fp32];
  if (m <= 0 || n <= 0 || k <= 0)
    return peak_fraction;
  // Wave quantization: output tiles run in waves of num_sms; a partial last wave idles SMs.
  const double tiles = std::ceil(m / profile.gemm_tile_m) * std::ceil(n / profile.gemm_tile_n) *
                       std::max(count, 1.0);
  const double sms = static_cast<double>(std::max<std::int64_t>(gpu.num_sms, 1));
  const double waves = std::ceil(tiles / sms);
  const double wave_fraction = tiles / (waves * sms);
  // Partial tiles at the edges compute padding.
  const double pad = (m / (std::ceil(m / profile.gemm_tile_m) * profile.gemm_tile_m)) *
                     (n / (std::ceil(n / profile.gemm_tile_n) * profile.gemm_tile_n));
  // Per-tile fixed costs (prologue, epilogue) amortised over the K loop. The fixed cost is a
  // time, so the K that amortises it scales with the dtype's compute rate: gemm_k_half is
  // stated at the 16-bit tensor-core rate (bf16); an fp32 GEMM, ~15x slower per K step on an
  // H100/H200, amortises the same prologue over a ~15x shorter K (and fp8 needs twice the K).
  const double ref_peak = effective_peak_flops_per_s(gpu, Dtype::bf16);
  const double rate = ref_peak > 0 ? effective_peak_flops_per_s(gpu, dtype) / ref_peak : 1.0;
  const double k_fraction = k / (k + profile.gemm_k_half * rate);
  return peak_fraction * wave_fraction * pad * k_fraction;
}

namespace {

double bw_fraction(model::OpKind kind, Pass pass, const hw::HardwareProfile& p) {
  const bool bwd = pass == Pass::backward;
  const double reduction_bwd =
      p.reduction_bwd_bw_fraction > 0 ? p.reduction_bwd_bw_fraction : p.reduction_bw_fraction;
  switch (kind) {
  case model::OpKind::elementwise: return p.elementwise_bw_fraction;
  case model::OpKind::reduction: return bwd ? reduction_bwd : p.reduction_bw_fraction;
  case model::OpKind::norm:
    if (bwd)
      return p.norm_bwd_bw_fraction > 0 ? p.norm_bwd_bw_fraction : reduction_bwd;
    return p.norm_bw_fraction > 0 ? p.norm_bw_fraction : p.reduction_bw_fraction;
  case model::OpKind::embedding: return p.elementwise_bw_fraction;
  case model::OpKind::gemm:
  case model::OpKind::attention_core: return p.copy_bw_fraction;
  case model::OpKind::tp_comm:
  case model::OpKind::ep_comm: return 1.0;
  }
  return p.copy_bw_fraction;
}

} // namespace

OpCost op_cost(const model::Op& op, Pass pass, const hw::GpuSpec& gpu,
               const hw::HardwareProfile& profile) {
  OpCost c;
  c.name = op.name + (pass == Pass::forward ? ".fwd" : ".bwd");
  if (model::is_communication(op.kind))
    return c;
  c.flops = pass == Pass::forward ? op.fwd_exec_flops : op.bwd_exec_flops;
  c.bytes = pass == Pass::forward ? op.fwd_bytes : op.bwd_bytes;
  const double peak = effective_peak_flops_per_s(gpu, op.dtype);
  if (op.kind == model::OpKind::gemm) {
    c.efficiency = gemm_efficiency(static_cast<double>(op.m), static_cast<double>(op.n),
                                   static_cast<double>(op.k), op.count, op.dtype, gpu, profile);
    // Backward = dgrad [m,n]x[n,k] and wgrad [k,m]x[m,n]: the same tile counts in total
    // up to transposition; use the forward shape's efficiency for both.
  } else if (op.kind == model::OpKind::attention_core) {
    // FlashAttention runs one block of attention_block_rows query (forward) or key
    // (backward) rows per SM at a time: a partial last wave idles SMs.
    const double rows = static_cast<double>(pass == Pass::forward ? op.seq_q : op.seq_kv);
    const double blocks = static_cast<double>(op.batch * op.heads) *
                          std::ceil(rows / std::max(profile.attention_block_rows, 1.0));
    const double sms = static_cast<double>(std::max<std::int64_t>(gpu.num_sms, 1));
    const double waves = blocks > 0 ? blocks / (std::ceil(blocks / sms) * sms) : 1.0;
    c.efficiency = waves * (pass == Pass::forward ? profile.attention_fwd_peak_fraction
                                                  : profile.attention_bwd_peak_fraction);
    // A block's fixed cost (loading its own tile, writing O and lse, or dK and dV) is
    // amortised over the keys (forward) or queries (backward) it loops over; a causal block
    // visits about half of them on average, a sliding-window block about the window.
    if (profile.attention_kv_half > 0) {
      const double loop = model::executed_keys_per_query(
          static_cast<double>(pass == Pass::forward ? op.seq_kv : op.seq_q),
          static_cast<double>(op.window), op.causal);
      c.efficiency *= loop / (loop + profile.attention_kv_half);
    }
  } else {
    c.efficiency = profile.gemm_peak_fraction[Dtype::fp32]; // scalar math, never the limit
  }
  c.compute_s = c.flops > 0 ? c.flops / (peak * c.efficiency) : 0;
  double bandwidth = gpu.hbm_bandwidth_bytes_per_s * bw_fraction(op.kind, pass, profile);
  const bool memory_class = op.kind == model::OpKind::elementwise ||
                            op.kind == model::OpKind::reduction || op.kind == model::OpKind::norm;
  if (memory_class && profile.l2_resident_bw_fraction > 0 && c.bytes <= gpu.l2_bytes)
    bandwidth = gpu.hbm_bandwidth_bytes_per_s * profile.l2_resident_bw_fraction; // hot in L2
  c.memory_s = c.bytes / bandwidth;
  // GEMM backward is two kernels (dgrad, wgrad); everything else one per pass.
  const double launches = op.kind == model::OpKind::gemm && pass == Pass::backward ? 2 : 1;
  c.launch_s = launches * profile.launch_overhead_s;
  c.compute_bound = c.compute_s >= c.memory_s;
  c.time_s = std::max(c.compute_s, c.memory_s) + c.launch_s;
  // Queued back to back, most of the launch latency hides behind the previous kernel: the GPU
  // still spends a small gap per launch, and the host must have issued it (cuBLAS's host path
  // is longer than a plain kernel launch's); whichever side is slower sets the pace.
  const double host =
      op.kind == model::OpKind::gemm ? profile.host_gemm_launch_s : profile.host_launch_s;
  c.queued_s =
      host > 0 ? std::max(std::max(c.compute_s, c.memory_s) + launches * profile.gpu_launch_gap_s,
                          launches * host)
               : c.time_s;
  return c;
}

OpCost gemm_cost(std::int64_t m, std::int64_t n, std::int64_t k, Dtype dtype,
                 const hw::GpuSpec& gpu, const hw::HardwareProfile& profile) {
  model::Op op;
  op.name = "gemm";
  op.kind = model::OpKind::gemm;
  op.dtype = dtype;
  op.m = m;
  op.n = n;
  op.k = k;
  const double md = static_cast<double>(m), nd = static_cast<double>(n),
               kd = static_cast<double>(k);
  op.fwd_exec_flops = op.fwd_flops = 2 * md * nd * kd;
  op.fwd_bytes = dtype_bytes(dtype) * (md * kd + kd * nd + md * nd);
  OpCost c = op_cost(op, Pass::forward, gpu, profile);
  c.name = "gemm";
  return c;
}

} // namespace trainsim::sim
