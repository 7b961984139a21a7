// RMSNorm forward and backward over the last dimension of a row-major [rows, cols] tensor
// (rows of any width; fp32 accumulation; Zhang and Sennrich 2019).
#pragma once

#include <cstdint>
#include <cuda_runtime.h>

#include "common/dtype.hpp"

namespace trainsim::kern {

struct RmsNormArgs {
  Dtype dtype = Dtype::bf16;   // x, gamma, y
  const void* x = nullptr;     // [rows, cols]
  const void* gamma = nullptr; // [cols]
  void* y = nullptr;           // [rows, cols]
  float* rstd = nullptr;       // [rows] 1 / sqrt(mean(x^2) + eps), saved for backward
  std::int64_t rows = 0, cols = 0;
  float eps = 1e-6f;
};

struct RmsNormBackwardArgs {
  Dtype dtype = Dtype::bf16;   // x, gamma, dy, dx
  const void* x = nullptr;     // [rows, cols]
  const void* gamma = nullptr; // [cols]
  const void* dy = nullptr;    // [rows, cols]
  const float* rstd = nullptr; // [rows]
  void* dx = nullptr;          // [rows, cols]
  float* dgamma = nullptr;     // [cols] fp32, overwritten
  std::int64_t rows = 0, cols = 0;
};

/// y = x * rstd * gamma.
void launch_rmsnorm(const RmsNormArgs& args, cudaStream_t stream);
/// dx = rstd * (g - xhat * mean(g * xhat)), g = dy * gamma, xhat = x * rstd;
/// dgamma = sum_rows dy * xhat.
void launch_rmsnorm_backward(const RmsNormBackwardArgs& args, cudaStream_t stream);

} // namespace trainsim::kern
