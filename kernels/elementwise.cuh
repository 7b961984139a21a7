// Element-wise memory-bound ops written here: relu, gelu (tanh approximation), add, scale,
// plus the fill kernels the validation uses (random inputs, NaN poison) and an empty kernel
// for launch overhead. All use 16-byte vectorised loads/stores when pointers are 16B aligned.
#pragma once

#include <cstdint>
#include <cuda_runtime.h>

#include "common/dtype.hpp"

namespace trainsim::kern {

enum class ElementwiseOp { relu, gelu, add, scale };

struct ElementwiseArgs {
  ElementwiseOp op = ElementwiseOp::relu;
  Dtype dtype = Dtype::bf16; // fp32, fp16 or bf16; inputs and output share it
  const void* x = nullptr;   // [num_elements]
  const void* y = nullptr;   // [num_elements], add only
  void* out = nullptr;       // [num_elements]; may alias x
  std::int64_t num_elements = 0;
  float alpha = 1.0f; // scale only: out = alpha * x
};

/// out = op(x[, y]); gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
void launch_elementwise(const ElementwiseArgs& args, cudaStream_t stream);

struct FillRandomArgs {
  Dtype dtype = Dtype::bf16; // fp32, fp16, bf16 or fp8 (e4m3)
  void* out = nullptr;       // [num_elements]
  std::int64_t num_elements = 0;
  std::uint64_t seed = 1;
  float lo = -1.0f, hi = 1.0f; // uniform in [lo, hi), never all zeros
};

/// Fills with hash-based uniform random values (deterministic in seed and index).
void launch_fill_random(const FillRandomArgs& args, cudaStream_t stream);

/// Empty kernel, one block of one thread: measures launch overhead.
void launch_empty(cudaStream_t stream);

} // namespace trainsim::kern
