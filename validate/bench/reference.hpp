// float64 CPU specifications of every kernel in kernels/ (llm.c's CPU reference habit): the
// GPU results are checked against these. Pure C++, no CUDA; tested in bench_reference_test.
// Tensors are flat row-major std::vector<double>; shapes are given next to each function.
#pragma once

#include <cstdint>
#include <vector>

#include "common/dtype.hpp"

namespace trainsim::val {

using Vec = std::vector<double>;

/// Storage bits to value: IEEE binary16 and bfloat16.
[[nodiscard]] double half_bits_to_double(std::uint16_t bits);
[[nodiscard]] double bf16_bits_to_double(std::uint16_t bits);
/// fp8 e4m3 (OCP FP8 / cuda_fp8.h __nv_fp8_e4m3): 1 sign, 4 exponent (bias 7), 3 mantissa
/// bits; no infinities, S.1111.111 is NaN, largest finite 448, smallest subnormal 2^-9.
[[nodiscard]] double fp8_e4m3_bits_to_double(std::uint8_t bits);
/// Value to storage bits, round to nearest even (NaN stays NaN).
[[nodiscard]] std::uint16_t double_to_bf16_bits(double v);
[[nodiscard]] std::uint16_t double_to_half_bits(double v);

/// Element-wise: out = relu(x) | gelu_tanh(x) | x + y | alpha x.
enum class ElementwiseKind { relu, gelu, add, scale };
[[nodiscard]] Vec elementwise_reference(ElementwiseKind kind, const Vec& x, const Vec& y,
                                        double alpha);

/// GEMM C[m,n] = A[m,k] B[k,n]; one entry, or all.
[[nodiscard]] double gemm_reference_entry(const Vec& a, const Vec& b, std::int64_t n,
                                          std::int64_t k, std::int64_t i, std::int64_t j);
[[nodiscard]] Vec gemm_reference(const Vec& a, const Vec& b, std::int64_t m, std::int64_t n,
                                 std::int64_t k);
/// GEMM with B stored transposed (the fp8 "TN" layout): C[m,n] = A[m,k] B^T with b [n, k]
/// row-major; one entry.
[[nodiscard]] double gemm_bt_reference_entry(const Vec& a, const Vec& b, std::int64_t k,
                                             std::int64_t i, std::int64_t j);

/// Softmax over rows of x [rows, cols] of scale * x; causal masks col > row % cols.
[[nodiscard]] Vec softmax_reference(const Vec& x, std::int64_t rows, std::int64_t cols,
                                    double scale, bool causal);
/// dx = y * (dy - sum(y * dy)) per row.
[[nodiscard]] Vec softmax_backward_reference(const Vec& y, const Vec& dy, std::int64_t rows,
                                             std::int64_t cols);

struct NormForward {
  Vec y;          // [rows, cols]
  Vec mean, rstd; // [rows] (mean empty for RMSNorm)
};
struct NormBackward {
  Vec dx;            // [rows, cols]
  Vec dgamma, dbeta; // [cols] (dbeta empty for RMSNorm)
};
[[nodiscard]] NormForward layernorm_reference(const Vec& x, const Vec& gamma, const Vec& beta,
                                              std::int64_t rows, std::int64_t cols, double eps);
[[nodiscard]] NormBackward layernorm_backward_reference(const Vec& x, const Vec& gamma,
                                                        const Vec& dy, std::int64_t rows,
                                                        std::int64_t cols, double eps);
[[nodiscard]] NormForward rmsnorm_reference(const Vec& x, const Vec& gamma, std::int64_t rows,
                                            std::int64_t cols, double eps);
[[nodiscard]] NormBackward rmsnorm_backward_reference(const Vec& x, const Vec& gamma, const Vec& dy,
                                                      std::int64_t rows, std::int64_t cols,
                                                      double eps);

/// Attention for ONE head: q, k, v [seq, head_dim]; scores scaled by `scale`.
/// Returns O row i [head_dim] and writes the natural-log logsumexp of row i to *lse.
[[nodiscard]] Vec attention_row_reference(const double* q, const double* k, const double* v,
                                          std::int64_t seq_len, std::int64_t head_dim, bool causal,
                                          double scale, std::int64_t i, double* lse);

struct AttentionForward {
  Vec o;   // [batch, heads, seq, head_dim]
  Vec lse; // [batch, heads, seq]
};
[[nodiscard]] AttentionForward attention_reference(const Vec& q, const Vec& k, const Vec& v,
                                                   std::int64_t batch_heads, std::int64_t seq_len,
                                                   std::int64_t head_dim, bool causal,
                                                   double scale);

struct AttentionBackward {
  Vec dq, dk, dv; // [seq, head_dim] for one head
};
/// Gradients for ONE head (pointers to [seq, head_dim]); row by row, O(seq * head_dim) memory.
[[nodiscard]] AttentionBackward
attention_backward_head_reference(const double* q, const double* k, const double* v,
                                  const double* dout, std::int64_t seq_len, std::int64_t head_dim,
                                  bool causal, double scale);

/// Comparison of a measured output with its reference.
struct ErrorStats {
  double max_abs_err = 0;
  double rel_l2_err = 0;    // ||out - ref||_2 / ||ref||_2
  std::int64_t num_nan = 0; // non-finite outputs (never pass)
  std::int64_t num_elements = 0;
};
[[nodiscard]] ErrorStats compare_to_reference(const Vec& out, const Vec& ref);
/// Relative L2 error limit per dtype of the checked output: fp32 1e-5, tf32 2e-3, fp16 5e-3,
/// bf16 2e-2, fp8 1e-1 (an output stored in fp8; the fp8 GEMM writes bf16 and uses bf16's).
[[nodiscard]] double relative_error_limit(Dtype dtype);
[[nodiscard]] bool passes(const ErrorStats& e, Dtype dtype);

} // namespace trainsim::val
