// Flop and byte counts per benchmark case (kernel_cases.hpp). Each formula says what it counts.
#include "simulate/fit/kernel_cases.hpp"

#include <fmt/format.h>

#include <array>

namespace trainsim::fitting {

namespace {
constexpr std::array<std::string_view, 11> kOpNames = {
    "gemm",      "relu",    "gelu",      "add",  "scale", "softmax",
    "layernorm", "rmsnorm", "attention", "copy", "empty"};
} // namespace

std::string_view op_name(BenchOp op) { return kOpNames[static_cast<std::size_t>(op)]; }

std::optional<BenchOp> parse_op(std::string_view name) {
  for (std::size_t i = 0; i < kOpNames.size(); ++i)
    if (kOpNames[i] == name)
      return static_cast<BenchOp>(i);
  return std::nullopt;
}

std::string_view impl_name(AttentionImpl impl) {
  return impl == AttentionImpl::flash ? "flash" : "naive";
}

Dtype gemm_output_dtype(Dtype input) { return input == Dtype::fp8 ? Dtype::bf16 : input; }

std::vector<KernelOp> kernel_ops(const KernelShape& s) {
  using model::OpKind;
  const double e = dtype_bytes(s.dtype);
  const bool bwd = s.backward;
  const double n = static_cast<double>(s.num_elements);
  const double rows_cols = static_cast<double>(s.rows) * static_cast<double>(s.cols);
  std::vector<KernelOp> ops;
  auto memory = [&](const char* name, OpKind kind, double in, double out, double flops) {
    ops.push_back(
        {model::memory_op(name, kind, model::OpRole::other, s.dtype, in, out, e, flops), bwd});
  };
  switch (s.op) {
  case BenchOp::gemm: {
    model::Op op = model::gemm_op("gemm", model::OpRole::other, s.dtype, static_cast<double>(s.m),
                                  static_cast<double>(s.k), static_cast<double>(s.n), 1, 0, e);
    // gemm_op counts C in the inputs' element size; C is wider when the output dtype is (fp8
    // in, bf16 out): add the difference. Only the forward pass is benchmarked.
    const double c_extra = (dtype_bytes(gemm_output_dtype(s.dtype)) - e) *
                           static_cast<double>(s.m) * static_cast<double>(s.n);
    op.fwd_bytes += c_extra;
    op.fwd_bytes_written += c_extra;
    ops.push_back({op, false});
    break;
  }
  // Flops per element: relu 1 compare; scale 1 multiply; add 1 add; gelu (tanh form) 9.
  case BenchOp::relu: memory("relu", OpKind::elementwise, n, n, 1); break;
  case BenchOp::scale: memory("scale", OpKind::elementwise, n, n, 1); break;
  case BenchOp::gelu: memory("gelu", OpKind::elementwise, n, n, 9); break;
  case BenchOp::add: memory("add", OpKind::elementwise, 2 * n, n, 1); break;
  case BenchOp::copy: memory("copy", OpKind::elementwise, n, n, 0); break;
  // Softmax: scale, max, exp, sum, normalise; norms: sums, centre, scale, affine.
  case BenchOp::softmax: memory("softmax", OpKind::reduction, rows_cols, rows_cols, 5); break;
  case BenchOp::layernorm: memory("layernorm", OpKind::norm, rows_cols, rows_cols, 8); break;
  case BenchOp::rmsnorm: memory("rmsnorm", OpKind::norm, rows_cols, rows_cols, 6); break;
  case BenchOp::attention: {
    const double b = static_cast<double>(s.batch_size), h = static_cast<double>(s.num_heads);
    const double seq = static_cast<double>(s.seq_len), d = static_cast<double>(s.head_dim);
    if (s.impl == AttentionImpl::flash) {
      ops.push_back(
          {model::flash_attention_op("attention", s.dtype, b, h, seq, seq, d, h, s.causal), bwd});
    } else { // the op list's naive path: scores GEMM, softmax, GEMM with V (full square)
      ops.push_back({model::gemm_op("scores", model::OpRole::attention_scores, s.dtype, seq, d, seq,
                                    b * h, 0, e),
                     bwd});
      memory("softmax", OpKind::reduction, b * h * seq * seq, b * h * seq * seq, 5);
      ops.push_back(
          {model::gemm_op("pv", model::OpRole::attention_pv, s.dtype, seq, seq, d, b * h, 0, e),
           bwd});
    }
    break;
  }
  case BenchOp::empty: {
    model::Op op;
    op.name = "empty";
    op.kind = OpKind::elementwise;
    op.dtype = s.dtype;
    ops.push_back({op, false});
    break;
  }
  }
  return ops;
}

KernelWork kernel_work(const KernelShape& s) {
  KernelWork w;
  for (const auto& k : kernel_ops(s)) {
    const double total = k.backward ? k.op.bwd_bytes : k.op.fwd_bytes;
    const double written = k.backward ? k.op.bwd_bytes_written : k.op.fwd_bytes_written;
    w.flops += k.backward ? k.op.bwd_exec_flops : k.op.fwd_exec_flops;
    w.bytes_written += written;
    w.bytes_read += total - written;
  }
  return w;
}

std::string case_name(const KernelShape& s) {
  const std::string dt{dtype_name(s.dtype)};
  const std::string dir = s.backward ? "bwd" : "fwd";
  switch (s.op) {
  case BenchOp::gemm:
    return fmt::format("gemm.{}.{}.m{}.n{}.k{}",
                       s.gemm_impl == GemmImpl::cublaslt ? "cublaslt" : "cublas", dt, s.m, s.n,
                       s.k);
  case BenchOp::relu:
  case BenchOp::gelu:
  case BenchOp::add:
  case BenchOp::scale:
  case BenchOp::copy: return fmt::format("{}.{}.n{}", op_name(s.op), dt, s.num_elements);
  case BenchOp::empty: return "empty";
  case BenchOp::softmax:
  case BenchOp::layernorm:
  case BenchOp::rmsnorm:
    return fmt::format("{}.{}.{}.r{}.c{}", op_name(s.op), dir, dt, s.rows, s.cols);
  case BenchOp::attention:
    return fmt::format("attention.{}.{}.{}.b{}.h{}.s{}.d{}{}{}", impl_name(s.impl), dir, dt,
                       s.batch_size, s.num_heads, s.seq_len, s.head_dim, s.causal ? ".causal" : "",
                       s.impl == AttentionImpl::flash && !s.backward && s.block_m != 128
                           ? fmt::format(".bm{}", s.block_m)
                           : std::string());
  }
  return "unknown";
}

} // namespace trainsim::fitting
