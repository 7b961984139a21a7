// HardwareProfile: achieved efficiencies of one GPU (and its links) that turn datasheet
// peaks into predicted times. Defaults come from presets/profiles/*.json (documented public
// figures); calibrated profiles are written by `trainsim calibrate` from measurements.
// Nothing here is a tuning constant in code: every field is loaded from a JSON file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/dtype.hpp"
#include "hardware/collective.hpp"
#include "hardware/gpu.hpp"

namespace trainsim::hw {

/// One size regime of a fitted collective. NCCL picks an algorithm (ring, tree) and a protocol
/// (LL, LL128, Simple) per call by message size, each with its own latency and bandwidth (its
/// tuning model is latency + bytes / bandwidth per algorithm and protocol: NCCL's
/// src/graph/tuning.cc, and the NCCL_ALGO / NCCL_PROTO docs); a regime is the line of one choice:
///   time(bytes) = alpha_s + bytes * busbw_factor(P) / busbw_bytes_per_s.
struct CollectiveRegime {
  double min_bytes = 0;         // first message size (bytes) of the regime; it ends where the
                                // next regime's min_bytes begins (the first regime starts at 0)
  double alpha_s = 0;           // fixed latency per call
  double busbw_bytes_per_s = 0; // bus bandwidth (nccl-tests' busbw) of the regime
};

/// One fitted collective: contiguous size regimes (simulate/fit/collective_fit.hpp explains the
/// fit).
struct CollectiveFit {
  Collective op = Collective::all_reduce;  // JSON: "all-reduce", ... (collective.hpp)
  LinkLevel level = LinkLevel::intra_node; // JSON: "intra-node" or "inter-node"
  // The largest-size regime (the only one of a one-line fit); a summary for callers that want
  // one line. Predictions go through regime_for(), which uses `regimes` when there are any.
  double alpha_s = 0;
  double busbw_bytes_per_s = 0;
  std::int64_t num_ranks = 0;            // ranks the fit was measured with
  std::vector<CollectiveRegime> regimes; // sorted by min_bytes, first at 0; empty: one regime
                                         // (0, alpha_s, busbw_bytes_per_s)
};

/// The regime of `fit` that covers a message of `bytes`: the last with min_bytes <= bytes.
[[nodiscard]] CollectiveRegime regime_for(const CollectiveFit& fit, double bytes);

/// Predicted time (s) of `bytes` under `fit`: alpha_s + bytes * busbw_factor / busbw of the
/// regime covering `bytes`; `busbw_factor` is nccl-tests' factor for the op at the fit's P.
[[nodiscard]] double collective_fit_time_s(const CollectiveFit& fit, double bytes,
                                           double busbw_factor);

/// GEMM time model (simulate/roofline): a GEMM [m,k]x[k,n] is cut into output tiles of
/// gemm_tile_m x gemm_tile_n; tiles run in waves of num_sms; efficiency =
///   peak_fraction[dtype] * (tiles / (waves * num_sms)) * k / (k + gemm_k_half * r),
/// r = peak[dtype] / peak[bf16]: the per-tile fixed cost is a time, so the K that amortises it
/// scales with the dtype's compute rate (gemm_k_half is stated at the bf16 rate).
/// Wave quantization and fixed per-tile costs (prologue, epilogue) are what make small
/// and skinny GEMMs slow; big square GEMMs approach peak_fraction.
struct HardwareProfile {
  std::string name;   // e.g. "h200 datasheet defaults" or "h200 calibrated"
  std::string source; // where the numbers come from (document, or device + date + versions)
  std::string gpu;    // GPU preset handle this profile was made for ("" = any)

  PerDtype<double> gemm_peak_fraction{}; // achieved / datasheet peak for large GEMMs
  double gemm_tile_m = 128;              // output tile rows
  double gemm_tile_n = 128;              // output tile columns
  double gemm_k_half = 128; // K (elements, at the bf16 rate) at which per-tile overhead halves
                            // efficiency

  double attention_fwd_peak_fraction = 0; // FlashAttention forward, of the 16-bit peak
  double attention_bwd_peak_fraction = 0; // FlashAttention backward, of the 16-bit peak

  double elementwise_bw_fraction = 0; // relu/gelu/add/scale... of datasheet HBM bandwidth
  double reduction_bw_fraction = 0;   // softmax, loss (forward; and norms unless set below)
  // Optional refinements (0 = fall back as noted), set by calibration where kernels differ:
  double reduction_bwd_bw_fraction = 0; // softmax/loss backward (0: reduction_bw_fraction)
  double norm_bw_fraction = 0;          // LayerNorm/RMSNorm forward (0: reduction_bw_fraction)
  double norm_bwd_bw_fraction = 0;      // norm backward (0: reduction_bwd_bw_fraction)
  double l2_resident_bw_fraction = 0;   // memory-bound ops whose bytes fit in L2, of HBM
                                        // bandwidth (may exceed 1; 0: no L2 model)
  double attention_block_rows = 128;    // query rows per FlashAttention block (wave quantization)
  double attention_kv_half = 0; // keys (queries, backward) a FlashAttention block must loop over
                                // for its fixed per-block cost to halve the efficiency (0: off)
  double copy_bw_fraction = 0;  // device-to-device copy: of HBM bandwidth
  double optimizer_bw_fraction = 0; // fused optimizer update (memory-bound): of HBM bandwidth
  double launch_overhead_s = 0;     // per kernel launch (CPU issue + GPU ramp)
  // Inside a step kernels are queued back to back: an op then costs max(its body + the GPU's
  // gap per launch, the host's time to issue its launches), not body + launch_overhead
  // (kernels/dev/launch_probe.cu measures all three). host_*launch_s = 0 (not measured): steps
  // add launch_overhead_s per launch instead.
  double host_launch_s = 0;      // host time to issue one of our kernels (queued)
  double host_gemm_launch_s = 0; // host time to issue one cuBLAS GEMM (queued)
  double gpu_launch_gap_s = 0;   // GPU-side cost of a launch with the queue full (empty kernel)
  // Overlapped collectives and compute share SMs and HBM (validate/comm/overlap_probe.cpp):
  // throughput of each while the other runs, as a fraction of alone (1 = no interference).
  double overlap_compute_rate = 1;
  double overlap_comm_rate = 1;
  // Pinned host <-> device copies (activation offload, ZeRO-Offload): achieved bandwidth of one
  // direction, of the GPU preset's pcie_bandwidth_gb_per_s (scripts/peer_offload_overlap.py
  // through `calibrate --host-link-probe`; 1 = the datasheet's).
  double host_link_bw_fraction = 1;
  double context_overhead_bytes = 0; // CUDA context, library workspaces, NCCL buffers

  // Collectives (alpha-beta, simulate/collectives): achieved bus bandwidth as a fraction of
  // the link bandwidth, and latency per algorithm step, per level.
  double intra_node_busbw_fraction = 0;
  double inter_node_busbw_fraction = 0;
  double intra_node_step_latency_s = 0;
  double inter_node_step_latency_s = 0;
  std::vector<CollectiveFit> collective_fits; // measured fits, preferred when present
};

/// Throws ConfigError listing every field outside its range (fractions in (0, 1], ...).
void validate(const HardwareProfile& profile, const std::string& source);

/// One direction of the GPU's host link as this profile measured it: the preset's
/// pcie_bandwidth_gb_per_s (PCIe, or GB200's NVLink-C2C) times host_link_bw_fraction.
[[nodiscard]] inline double host_link_bytes_per_s(const GpuSpec& gpu, const HardwareProfile& p) {
  return gpu.pcie_bandwidth_bytes_per_s * p.host_link_bw_fraction;
}

} // namespace trainsim::hw
