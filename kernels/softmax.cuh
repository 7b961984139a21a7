// Row softmax, forward and backward, over a row-major [rows, cols] matrix (rows of any width;
// fp32 accumulation). Forward: y = softmax(scale * x) with an optional causal mask for
// attention scores; backward: dx = y * (dy - sum(dy * y)).
#pragma once

#include <cstdint>
#include <cuda_runtime.h>

#include "common/dtype.hpp"

namespace trainsim::kern {

struct SoftmaxArgs {
  Dtype dtype = Dtype::bf16; // fp32, fp16 or bf16 (x and y)
  const void* x = nullptr;   // [rows, cols]
  void* y = nullptr;         // [rows, cols]; may alias x
  std::int64_t rows = 0, cols = 0;
  float scale = 1.0f;  // applied to x before the exponential
  bool causal = false; // mask col > (row % cols): rows are stacked square [seq, seq] blocks
};

struct SoftmaxBackwardArgs {
  Dtype dtype = Dtype::bf16;
  const void* y = nullptr;  // [rows, cols] forward output
  const void* dy = nullptr; // [rows, cols]
  void* dx = nullptr;       // [rows, cols] gradient wrt the (scaled) input: scale not applied
  std::int64_t rows = 0, cols = 0;
};

void launch_softmax(const SoftmaxArgs& args, cudaStream_t stream);
void launch_softmax_backward(const SoftmaxBackwardArgs& args, cudaStream_t stream);

} // namespace trainsim::kern
