// LayerNorm forward and backward over the last dimension of a row-major [rows, cols] tensor
// (rows of any width; fp32 accumulation and fp32 statistics; Ba et al. 2016).
#pragma once

#include <cstdint>
#include <cuda_runtime.h>

#include "common/dtype.hpp"

namespace trainsim::kern {

struct LayerNormArgs {
  Dtype dtype = Dtype::bf16;   // x, gamma, beta, y
  const void* x = nullptr;     // [rows, cols]
  const void* gamma = nullptr; // [cols]
  const void* beta = nullptr;  // [cols]
  void* y = nullptr;           // [rows, cols]
  float* mean = nullptr;       // [rows] saved for backward
  float* rstd = nullptr;       // [rows] 1 / sqrt(var + eps), saved for backward
  std::int64_t rows = 0, cols = 0;
  float eps = 1e-5f;
};

struct LayerNormBackwardArgs {
  Dtype dtype = Dtype::bf16;   // x, gamma, dy, dx
  const void* x = nullptr;     // [rows, cols]
  const void* gamma = nullptr; // [cols]
  const void* dy = nullptr;    // [rows, cols]
  const float* mean = nullptr; // [rows]
  const float* rstd = nullptr; // [rows]
  void* dx = nullptr;          // [rows, cols]
  float* dgamma = nullptr;     // [cols] fp32, overwritten
  float* dbeta = nullptr;      // [cols] fp32, overwritten
  std::int64_t rows = 0, cols = 0;
};

/// y = (x - mean) * rstd * gamma + beta.
void launch_layernorm(const LayerNormArgs& args, cudaStream_t stream);
/// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * gamma; dgamma = sum_rows dy *
/// xhat; dbeta = sum_rows dy.
void launch_layernorm_backward(const LayerNormBackwardArgs& args, cudaStream_t stream);

} // namespace trainsim::kern
