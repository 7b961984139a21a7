// Device-side helpers shared by the kernels: float <-> storage type conversions for
// fp32 / fp16 / bf16 / fp8 (e4m3), and a dispatch from trainsim::Dtype to the C++ storage type.
#pragma once

#include <cstdint>
#include <type_traits>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "common/dtype.hpp"
#include "common/errors.hpp"

namespace trainsim::kern {

template <class T> __device__ __forceinline__ float to_float(T v);
template <> __device__ __forceinline__ float to_float<float>(float v) { return v; }
template <> __device__ __forceinline__ float to_float<__half>(__half v) { return __half2float(v); }
template <> __device__ __forceinline__ float to_float<__nv_bfloat16>(__nv_bfloat16 v) {
  return __bfloat162float(v);
}
template <> __device__ __forceinline__ float to_float<__nv_fp8_e4m3>(__nv_fp8_e4m3 v) {
  return static_cast<float>(v);
}

template <class T> __device__ __forceinline__ T from_float(float v);
template <> __device__ __forceinline__ float from_float<float>(float v) { return v; }
template <> __device__ __forceinline__ __half from_float<__half>(float v) {
  return __float2half_rn(v);
}
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}
/// fp8 e4m3: round to nearest even, saturating to +-448 (e4m3 has no infinity).
template <> __device__ __forceinline__ __nv_fp8_e4m3 from_float<__nv_fp8_e4m3>(float v) {
  return __nv_fp8_e4m3(v);
}

/// Calls f(T{}) with T the storage type of `dtype` (fp32/tf32 -> float); fp8 is rejected.
template <class F> void dispatch_float_dtype(Dtype dtype, const char* what, F&& f) {
  switch (dtype) {
  case Dtype::fp32:
  case Dtype::tf32: f(float{}); return;
  case Dtype::fp16: f(__half{}); return;
  case Dtype::bf16: f(__nv_bfloat16{}); return;
  default: break;
  }
  throw ConfigError(std::string(what) + ": dtype " + std::string(dtype_name(dtype)) +
                    " is not supported (fp32, fp16, bf16)");
}

/// FlashAttention launchers: checks dtype (bf16/fp16) and head_dim (64/128), then calls
/// f(T{}, std::integral_constant<int, D>{}, std::bool_constant<causal>{}) for the kernel
/// instantiation to launch.
template <class F>
void dispatch_flash(Dtype dtype, std::int64_t head_dim, bool causal, const char* what, F&& f) {
  if (dtype != Dtype::bf16 && dtype != Dtype::fp16)
    throw ConfigError(std::string(what) + ": dtype must be bf16 or fp16");
  if (head_dim != 64 && head_dim != 128)
    throw ConfigError(std::string(what) + ": head_dim must be 64 or 128");
  dispatch_float_dtype(dtype, what, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!std::is_same_v<T, float>) {
      auto with_causal = [&](auto d) {
        causal ? f(tag, d, std::true_type{}) : f(tag, d, std::false_type{});
      };
      head_dim == 64 ? with_causal(std::integral_constant<int, 64>{})
                     : with_causal(std::integral_constant<int, 128>{});
    }
  });
}

} // namespace trainsim::kern
