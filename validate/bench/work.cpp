// Flop and byte counts per benchmark case (work.hpp). Each formula says what it counts.
#include "validate/bench/work.hpp"

#include <fmt/format.h>

#include <array>

namespace trainsim::val {

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

KernelWork kernel_work(const KernelShape& s) {
  const double e = dtype_bytes(s.dtype);
  KernelWork w;
  switch (s.op) {
  case BenchOp::gemm: {
    const double m = s.m, n = s.n, k = s.k;
    w.flops = 2.0 * m * n * k; // one multiply and one add per (i, j, l)
    w.bytes_read = (m * k + k * n) * e;
    w.bytes_written = m * n * e; // beta = 0: C is not read
    break;
  }
  case BenchOp::relu:
  case BenchOp::scale:
  case BenchOp::gelu:
  case BenchOp::add: {
    const double n = s.num_elements;
    // relu: 1 compare; scale: 1 multiply; add: 1 add; gelu (tanh form): x^3 (2), fma (2),
    // multiply by sqrt(2/pi) (1), tanh (1), 1 + t (1), 0.5 x * (.) (2) = 9.
    const double per = s.op == BenchOp::gelu ? 9.0 : 1.0;
    w.flops = per * n;
    w.bytes_read = (s.op == BenchOp::add ? 2.0 : 1.0) * n * e;
    w.bytes_written = n * e;
    break;
  }
  case BenchOp::copy:
    w.bytes_read = static_cast<double>(s.num_elements) * e;
    w.bytes_written = static_cast<double>(s.num_elements) * e;
    break;
  case BenchOp::empty: break;
  case BenchOp::softmax: {
    const double n = static_cast<double>(s.rows) * s.cols;
    if (!s.backward) {
      w.flops = 5.0 * n; // scale, max, exp, sum, normalise
      w.bytes_read = n * e;
      w.bytes_written = n * e;
    } else {
      w.flops = 4.0 * n;          // y*dy, sum, dy - dot, y * (.)
      w.bytes_read = 2.0 * n * e; // y, dy
      w.bytes_written = n * e;    // dx
    }
    break;
  }
  case BenchOp::layernorm:
  case BenchOp::rmsnorm: {
    const bool ln = s.op == BenchOp::layernorm;
    const double rows = s.rows, cols = s.cols, n = rows * cols;
    const double params = (ln ? 2.0 : 1.0) * cols;      // gamma (+ beta)
    const double stats = (ln ? 2.0 : 1.0) * rows * 4.0; // fp32 mean (+ rstd)
    if (!s.backward) {
      w.flops = (ln ? 8.0 : 6.0) * n; // sums, centre, scale, affine
      w.bytes_read = n * e + params * e;
      w.bytes_written = n * e + stats;
    } else {
      w.flops = (ln ? 12.0 : 10.0) * n;
      w.bytes_read = 2.0 * n * e + cols * e + stats; // x, dy, gamma, saved stats
      w.bytes_written = n * e + params * 4.0;        // dx, fp32 dgamma (+ dbeta)
    }
    break;
  }
  case BenchOp::attention: {
    const double bh = static_cast<double>(s.batch_size) * s.num_heads;
    const double sd = static_cast<double>(s.seq_len) * s.head_dim;
    const double ss = static_cast<double>(s.seq_len) * s.seq_len;
    // Two GEMMs of 2 s^2 d each per head; causal halves the useful work (FlashAttention-2
    // convention). Naive attention computes the full square even when causal.
    const bool half = s.causal && s.impl == AttentionImpl::flash;
    const double fwd = 4.0 * bh * ss * s.head_dim * (half ? 0.5 : 1.0);
    const double lse = bh * s.seq_len * 4.0;
    if (!s.backward) {
      w.flops = fwd;
      w.bytes_read = 3.0 * bh * sd * e; // q, k, v
      w.bytes_written = bh * sd * e + (s.impl == AttentionImpl::flash ? lse : 0.0);
      if (s.impl == AttentionImpl::naive) {
        // scores written by GEMM 1, read + written by softmax, read by GEMM 2.
        w.bytes_read += 2.0 * bh * ss * e;
        w.bytes_written += 2.0 * bh * ss * e;
      }
    } else {
      w.flops = 2.5 * fwd;                    // 5 GEMMs instead of 2 (recompute S, dV, dP, dQ, dK)
      w.bytes_read = 5.0 * bh * sd * e + lse; // q, k, v, o, dO, lse
      w.bytes_written = 3.0 * bh * sd * e;    // dq, dk, dv
    }
    break;
  }
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

} // namespace trainsim::val
