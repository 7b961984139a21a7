// GEMM through cuBLASLt (and the plain cublasGemmEx it is compared against), row-major
// convention: C[m, n] = alpha * A[m, k] * B[k, n] + beta * C. Row-major C = A B is computed as
// the column-major product C^T = B^T A^T, so no transpose flags are needed. fp8 (e4m3, sm_89
// and later) is the exception: cuBLASLt runs it only in the "TN" layout, so there B is stored
// transposed, [n, k] (a linear layer's weight, y = x W^T), and C is bf16.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "common/dtype.hpp"

namespace trainsim::kern {

struct GemmArgs {
  /// fp32 (fp32 math), tf32 (fp32 storage, tf32 math), fp16, bf16, or fp8: e4m3 a and b, bf16 c,
  /// cuBLASLt only, m, n and k multiples of 16 (cuBLASLt's fp8 alignment rules).
  Dtype dtype = Dtype::bf16;
  std::int64_t m = 0, n = 0, k = 0;
  const void* a = nullptr; // [m, k] row-major
  const void* b = nullptr; // [k, n] row-major; fp8: [n, k] row-major (B transposed)
  void* c = nullptr;       // [m, n] row-major, same dtype as a and b (fp8: bf16); fp32 accumulation
  float alpha = 1.0f, beta = 0.0f;
  cublasLtHandle_t lt = nullptr;   // launch_gemm
  cublasHandle_t cublas = nullptr; // launch_gemm_cublas
  void* workspace = nullptr;       // cuBLASLt workspace (may be null)
  std::size_t workspace_bytes = 0;
};

/// cuBLASLt matmul; the algorithm is chosen by the heuristic once per (dtype, m, n, k) and
/// cached (descriptors are created once, not per launch). Throws ConfigError for an fp8 shape
/// that is not a multiple of 16.
void launch_gemm(const GemmArgs& args, cudaStream_t stream);

/// The same product through one plain cublasGemmEx call (CUBLAS_GEMM_DEFAULT): the baseline.
/// Not for fp8 (ConfigError: cublasGemmEx has no fp8 path).
void launch_gemm_cublas(const GemmArgs& args, cudaStream_t stream);

} // namespace trainsim::kern
