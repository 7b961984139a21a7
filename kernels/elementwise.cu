// Vectorised element-wise kernels (elementwise.cuh). Each thread moves kUnroll 16-byte
// vectors, issuing all loads before the first use; a scalar tail covers n % vector width.
#include <cstdint>

#include "kernels/check.hpp"
#include "kernels/dtype_cuda.cuh"
#include "kernels/elementwise.cuh"

namespace trainsim::kern {
namespace {

constexpr int kThreads = 256;
constexpr int kUnroll = 4;

template <ElementwiseOp Op> __device__ __forceinline__ float apply(float x, float y, float alpha) {
  if constexpr (Op == ElementwiseOp::relu) {
    return x > 0.0f ? x : 0.0f;
  } else if constexpr (Op == ElementwiseOp::gelu) {
    const float k0 = 0.7978845608028654f; // sqrt(2/pi)
    return 0.5f * x * (1.0f + tanhf(k0 * (x + 0.044715f * x * x * x)));
  } else if constexpr (Op == ElementwiseOp::add) {
    return x + y;
  } else {
    return alpha * x;
  }
}

template <class T, ElementwiseOp Op>
__global__ void elementwise_vec_kernel(const T* __restrict__ x, const T* __restrict__ y,
                                       T* __restrict__ out, std::int64_t n, float alpha) {
  constexpr int kVec = 16 / sizeof(T);
  const std::int64_t num_vec = n / kVec;
  const auto* xv = reinterpret_cast<const uint4*>(x);
  const auto* yv = reinterpret_cast<const uint4*>(y);
  auto* ov = reinterpret_cast<uint4*>(out);
  const std::int64_t base =
      static_cast<std::int64_t>(blockIdx.x) * kThreads * kUnroll + threadIdx.x;
  uint4 a[kUnroll], b[kUnroll];
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    const std::int64_t i = base + u * kThreads;
    if (i < num_vec) {
      a[u] = xv[i];
      if constexpr (Op == ElementwiseOp::add)
        b[u] = yv[i];
    }
  }
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    const std::int64_t i = base + u * kThreads;
    if (i < num_vec) {
      uint4 r;
      const T* ae = reinterpret_cast<const T*>(&a[u]);
      const T* be = reinterpret_cast<const T*>(&b[u]);
      T* re = reinterpret_cast<T*>(&r);
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        const float yy = Op == ElementwiseOp::add ? to_float(be[e]) : 0.0f;
        re[e] = from_float<T>(apply<Op>(to_float(ae[e]), yy, alpha));
      }
      ov[i] = r;
    }
  }
  // Tail: the last n % kVec elements, done by the first threads of block 0.
  if (blockIdx.x == 0 && threadIdx.x < n - num_vec * kVec) {
    const std::int64_t i = num_vec * kVec + threadIdx.x;
    const float yy = Op == ElementwiseOp::add ? to_float(y[i]) : 0.0f;
    out[i] = from_float<T>(apply<Op>(to_float(x[i]), yy, alpha));
  }
}

template <class T, ElementwiseOp Op>
__global__ void elementwise_scalar_kernel(const T* x, const T* y, T* out, std::int64_t n,
                                          float alpha) {
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const float yy = Op == ElementwiseOp::add ? to_float(y[i]) : 0.0f;
    out[i] = from_float<T>(apply<Op>(to_float(x[i]), yy, alpha));
  }
}

bool aligned16(const void* p) { return (reinterpret_cast<std::uintptr_t>(p) & 15u) == 0; }

template <class T, ElementwiseOp Op>
void launch_typed(const ElementwiseArgs& a, cudaStream_t stream) {
  const T* x = static_cast<const T*>(a.x);
  const T* y = static_cast<const T*>(a.y);
  T* out = static_cast<T*>(a.out);
  const bool vec = aligned16(x) && aligned16(out) && (Op != ElementwiseOp::add || aligned16(y));
  if (vec) {
    constexpr int kVec = 16 / sizeof(T);
    const std::int64_t num_vec = a.num_elements / kVec;
    std::int64_t blocks = (num_vec + kThreads * kUnroll - 1) / (kThreads * kUnroll);
    if (blocks == 0)
      blocks = 1;
    elementwise_vec_kernel<T, Op><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
        x, y, out, a.num_elements, a.alpha);
  } else {
    elementwise_scalar_kernel<T, Op>
        <<<1024, kThreads, 0, stream>>>(x, y, out, a.num_elements, a.alpha);
  }
  CUDA_CHECK_LAUNCH();
}

__device__ __forceinline__ std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

template <class T>
__global__ void fill_random_kernel(T* out, std::int64_t n, std::uint64_t seed, float lo, float hi) {
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::uint64_t h = mix64(seed * 0x9e3779b97f4a7c15ULL + static_cast<std::uint64_t>(i));
    const float u = static_cast<float>(h >> 40) * (1.0f / 16777216.0f); // [0, 1)
    out[i] = from_float<T>(lo + (hi - lo) * u);
  }
}

__global__ void empty_kernel() {}

} // namespace

void launch_elementwise(const ElementwiseArgs& args, cudaStream_t stream) {
  if (args.num_elements <= 0)
    return;
  dispatch_float_dtype(args.dtype, "elementwise", [&](auto tag) {
    using T = decltype(tag);
    switch (args.op) {
    case ElementwiseOp::relu: launch_typed<T, ElementwiseOp::relu>(args, stream); break;
    case ElementwiseOp::gelu: launch_typed<T, ElementwiseOp::gelu>(args, stream); break;
    case ElementwiseOp::add: launch_typed<T, ElementwiseOp::add>(args, stream); break;
    case ElementwiseOp::scale: launch_typed<T, ElementwiseOp::scale>(args, stream); break;
    }
  });
}

void launch_fill_random(const FillRandomArgs& args, cudaStream_t stream) {
  if (args.num_elements <= 0)
    return;
  auto fill = [&](auto tag) {
    using T = decltype(tag);
    fill_random_kernel<T><<<2048, 256, 0, stream>>>(static_cast<T*>(args.out), args.num_elements,
                                                    args.seed, args.lo, args.hi);
    CUDA_CHECK_LAUNCH();
  };
  if (args.dtype == Dtype::fp8) // e4m3 (GEMM inputs only); values rounded to the e4m3 grid
    fill(__nv_fp8_e4m3{});
  else
    dispatch_float_dtype(args.dtype, "fill_random", fill);
}

void launch_empty(cudaStream_t stream) {
  empty_kernel<<<1, 1, 0, stream>>>();
  CUDA_CHECK_LAUNCH();
}

} // namespace trainsim::kern
