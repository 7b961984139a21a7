// Naive attention (attention.cuh): S = scale Q K^T with cublasGemmStridedBatchedEx, our row
// softmax (causal mask optional), O = P V. Materialises [batch, heads, seq, seq] scores, so its
// memory grows with seq^2; it is the unfused baseline the calibration compares against.
#include <cmath>

#include "common/errors.hpp"
#include "kernels/attention.cuh"
#include "kernels/check.hpp"
#include "kernels/softmax.cuh"

namespace trainsim::kern {

void launch_naive_attention(const AttentionArgs& a, cudaStream_t stream) {
  if (a.dtype != Dtype::bf16 && a.dtype != Dtype::fp16)
    throw ConfigError("naive attention: dtype must be bf16 or fp16");
  if (a.cublas == nullptr || a.scores == nullptr)
    throw ConfigError("naive attention: needs a cuBLAS handle and a scores buffer");
  const std::int64_t bh = a.batch * a.heads, s = a.seq_len, d = a.head_dim;
  if (bh <= 0 || s <= 0)
    return;
  const float scale =
      a.softmax_scale > 0 ? a.softmax_scale : 1.0f / std::sqrt(static_cast<float>(d));
  const cudaDataType_t t = a.dtype == Dtype::bf16 ? CUDA_R_16BF : CUDA_R_16F;
  const int si = static_cast<int>(s), di = static_cast<int>(d);
  CUBLAS_CHECK(cublasSetStream(a.cublas, stream));
  // Column-major X[j, i] = S[i, j] = sum_d K[j, d] Q[i, d]: X = K'^T Q' with K', Q' [d x s].
  const float one = 1.0f, zero = 0.0f;
  CUBLAS_CHECK(cublasGemmStridedBatchedEx(a.cublas, CUBLAS_OP_T, CUBLAS_OP_N, si, si, di, &scale,
                                          a.k, t, di, s * d, a.q, t, di, s * d, &zero, a.scores, t,
                                          si, s * s, static_cast<int>(bh), CUBLAS_COMPUTE_32F,
                                          CUBLAS_GEMM_DEFAULT));
  SoftmaxArgs sm;
  sm.dtype = a.dtype;
  sm.x = a.scores;
  sm.y = a.scores;
  sm.rows = bh * s;
  sm.cols = s;
  sm.causal = a.causal;
  launch_softmax(sm, stream);
  // Column-major Y[d, i] = O[i, d] = sum_j V[j, d] P[i, j]: Y = V' P' with V' [d x s], P' [s x s].
  CUBLAS_CHECK(cublasGemmStridedBatchedEx(a.cublas, CUBLAS_OP_N, CUBLAS_OP_N, di, si, si, &one, a.v,
                                          t, di, s * d, a.scores, t, si, s * s, &zero, a.o, t, di,
                                          s * d, static_cast<int>(bh), CUBLAS_COMPUTE_32F,
                                          CUBLAS_GEMM_DEFAULT));
}

} // namespace trainsim::kern
