// The work one benchmark case does, in flops and bytes, derived from the model's op factories
// (model/ops.hpp), the same description the simulator times (no CUDA here). Conventions: GEMM
// 2mnk; attention forward 4 b h s^2 d (halved when causal, FlashAttention-2 convention),
// backward 2.5x forward; memory-bound ops count each tensor read or written once. fp8 GEMMs
// read 1-byte A and B and write a 2-byte (bf16) C.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <vector>

#include "common/dtype.hpp"
#include "model/ops.hpp"

namespace trainsim::fitting {

enum class BenchOp {
  gemm,
  relu,
  gelu,
  add,
  scale,
  softmax,
  layernorm,
  rmsnorm,
  attention,
  copy,
  empty
};

enum class AttentionImpl { flash, naive };

/// gemm: cuBLASLt (ours) or one plain cublasGemmEx call (the baseline it must match).
enum class GemmImpl { cublaslt, cublas };

/// One benchmark problem: which fields matter depends on op.
struct KernelShape {
  BenchOp op = BenchOp::gemm;
  Dtype dtype = Dtype::bf16;
  bool backward = false;            // softmax, layernorm, rmsnorm, attention
  std::int64_t m = 0, n = 0, k = 0; // gemm: [m,k] x [k,n] (fp8: B stored [n,k], C bf16)
  GemmImpl gemm_impl = GemmImpl::cublaslt;
  std::int64_t num_elements = 0;              // relu, gelu, add, scale, copy
  std::int64_t rows = 0, cols = 0;            // softmax, layernorm, rmsnorm: [rows, cols]
  std::int64_t batch_size = 0, num_heads = 0; // attention: [batch, heads, seq, head_dim]
  std::int64_t seq_len = 0, head_dim = 0;
  bool causal = false;
  AttentionImpl impl = AttentionImpl::flash;
  std::int64_t block_m = 128; // flash forward: query rows per block (128 or 64), a kernel variant
};

struct KernelWork {
  double flops = 0, bytes_read = 0, bytes_written = 0;
};

/// One op a case runs, described by the model's op factories (model/ops.hpp), so that the
/// benchmark's work and the simulator's prediction come from one description.
struct KernelOp {
  model::Op op;
  bool backward = false; // which pass of the op the case runs
};

/// The dtype a GEMM writes C in: bf16 for fp8 (e4m3) inputs (cuBLASLt's fp8 GEMM with a bf16
/// output), otherwise the inputs' dtype.
[[nodiscard]] Dtype gemm_output_dtype(Dtype input);

/// The ops of a case: one for most; naive attention is GEMM + softmax + GEMM.
[[nodiscard]] std::vector<KernelOp> kernel_ops(const KernelShape& shape);

/// Executed flops and bytes moved through device memory: sums over kernel_ops().
[[nodiscard]] KernelWork kernel_work(const KernelShape& shape);

[[nodiscard]] std::string_view op_name(BenchOp op);
[[nodiscard]] std::optional<BenchOp> parse_op(std::string_view name);
[[nodiscard]] std::string_view impl_name(AttentionImpl impl);

/// A stable case name, e.g. "gemm.cublaslt.bf16.m4096.n4096.k4096" or
/// "attention.flash.bwd.bf16.b2.h16.s4096.d128.causal".
[[nodiscard]] std::string case_name(const KernelShape& shape);

} // namespace trainsim::fitting
