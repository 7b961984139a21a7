// The work one benchmark case does, in flops and bytes (read once, written once), computed from
// the case's shape: the single place these counts live for kernels/ cases (no CUDA here).
// Conventions: GEMM 2mnk; attention forward 4 b h s^2 d (halved when causal, FlashAttention-2
// paper convention), backward 2.5x forward; element-wise and row ops count DRAM traffic only.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/dtype.hpp"

namespace trainsim::val {

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
  std::int64_t m = 0, n = 0, k = 0; // gemm: [m,k] x [k,n]
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

/// Flops and the fewest bytes the op must move through device memory.
[[nodiscard]] KernelWork kernel_work(const KernelShape& shape);

[[nodiscard]] std::string_view op_name(BenchOp op);
[[nodiscard]] std::optional<BenchOp> parse_op(std::string_view name);
[[nodiscard]] std::string_view impl_name(AttentionImpl impl);

/// A stable case name, e.g. "gemm.cublaslt.bf16.m4096.n4096.k4096" or
/// "attention.flash.bwd.bf16.b2.h16.s4096.d128.causal".
[[nodiscard]] std::string case_name(const KernelShape& shape);

} // namespace trainsim::val
