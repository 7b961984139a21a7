// Roofline time of one operator on one GPU (Williams et al. 2009; docs/model.md):
// time = max(FLOPs / (peak[dtype] x compute efficiency), bytes / (HBM bandwidth x memory
// efficiency)) + launch overhead. Efficiencies come from the HardwareProfile; GEMM compute
// efficiency depends on the shape through wave quantization and per-tile fixed costs.
#pragma once

#include <string>

#include "hardware/gpu.hpp"
#include "hardware/profile.hpp"
#include "model/ops.hpp"

namespace trainsim::sim {

enum class Pass { forward, backward };

struct OpCost { // one operator, one GPU, one micro-batch, one pass
  std::string name;
  double flops = 0;     // executed FLOPs
  double bytes = 0;     // HBM bytes read + written
  double compute_s = 0; // FLOPs / achieved FLOP/s
  double memory_s = 0;  // bytes / achieved bandwidth
  double launch_s = 0;  // fixed launch overhead
  double time_s = 0;    // max(compute, memory) + launch: the op alone (as a benchmark times it)
  // In a step's stream of queued launches: max(max(compute, memory) + GPU launch gap, host
  // issue time of its launches) when the profile measured the host side, else time_s.
  double queued_s = 0;
  double efficiency = 0; // achieved fraction of the dtype peak while computing
  bool compute_bound = false;
};

/// Achieved fraction of peak for a GEMM [m,k]x[k,n] (count independent copies) of `dtype`.
[[nodiscard]] double gemm_efficiency(double m, double n, double k, double count, Dtype dtype,
                                     const hw::GpuSpec& gpu, const hw::HardwareProfile& profile);

/// Peak FLOP/s a dtype runs at on this GPU (fp32 falls back for formats it lacks, e.g.
/// bf16 on Turing, which frameworks emulate in fp32).
[[nodiscard]] double effective_peak_flops_per_s(const hw::GpuSpec& gpu, Dtype dtype);
/// The dtype whose peak that is: `dtype`, or fp32 where the GPU has no units for it.
[[nodiscard]] Dtype effective_peak_dtype(const hw::GpuSpec& gpu, Dtype dtype);

/// Throws ConfigError when `precision` needs units the GPU lacks: fp8 and fp8-cs need an FP8
/// tensor-core peak (Hopper, Ada, Blackwell, MI300), mxfp8 also per-block scaling in the tensor
/// cores (Blackwell). Emulating them at another dtype's rate would be a number of no use.
void check_precision_supported(const hw::GpuSpec& gpu, model::Precision precision);

/// Peak FLOP/s that MFU and HFU are stated against: the dense peak of the dtype the linear
/// GEMMs run in (FP8 for the FP8 precisions, so that MFU <= 1 holds; BF16-referenced figures
/// are the achieved TFLOP/s per GPU over the BF16 peak).
[[nodiscard]] double mfu_peak_flops_per_s(const hw::GpuSpec& gpu, model::Precision precision);
/// The dtype whose peak that is.
[[nodiscard]] Dtype mfu_peak_dtype(model::Precision precision);

/// Why an MFU can exceed 100%, said wherever one does (estimate, plan, sweep): model FLOPs
/// count the whole s x s attention product (Narayanan et al. 2021, Eq. 3) while a causal kernel
/// executes half of it, and PyTorch's fp32 attention is its memory-efficient kernel, which runs
/// on TF32 tensor cores with 3xTF32 correction (OpMultiplyAddFastF32), faster than the fp32
/// CUDA-core peak an fp32 step's MFU is stated against. Neither happens at 16-bit or FP8, where
/// the GEMM peak bounds every kernel.
inline constexpr const char* kMfuAbovePeakNote =
    "an MFU or HFU above 100% is possible at long sequences in fp32: model FLOPs count the whole "
    "s x s "
    "attention product (Megatron-LM's convention) while the causal kernel executes half of it, "
    "and PyTorch's fp32 attention runs on TF32 tensor cores (3xTF32), faster than the fp32 "
    "CUDA-core peak MFU is stated against";

/// The time of a tensor-parallel comm op is the collectives' business: returns zero here.
[[nodiscard]] OpCost op_cost(const model::Op& op, Pass pass, const hw::GpuSpec& gpu,
                             const hw::HardwareProfile& profile);

/// A standalone GEMM (for `trainsim roofline --op gemm`).
[[nodiscard]] OpCost gemm_cost(std::int64_t m, std::int64_t n, std::int64_t k, Dtype dtype,
                               const hw::GpuSpec& gpu, const hw::HardwareProfile& profile);

} // namespace trainsim::sim
