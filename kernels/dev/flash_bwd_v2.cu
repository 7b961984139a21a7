// flash_bwd_v2: experimental FlashAttention-2 backward (Dao 2023, Alg. 2) in registers;
// self-checking. Tiling: 8 warps own 128 keys, 16 per warp (one m16 tile), so dK and dV stay in
// registers (D/2 fp32 each per thread); computing S^T = K Q^T and dP^T = V dO^T in 32/64-query
// slices makes P^T and dS^T A fragments for dV += P^T dO and dK += dS^T Q. dS^T goes once to
// swizzled smem for dQ = dS K (float2 atomics). Q/dO/lse/delta double-buffered by cp.async. D=128:
// 145 KB smem, 1 CTA/SM.
//
// Build: cmake --build build --target flash_bwd_v2 ; run: build/kernels/flash_bwd_v2
// Exit 0 all checks pass, 1 a check failed, 77 no GPU.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <type_traits>
#include <vector>

#include "kernels/attention.cuh"
#include "kernels/check.hpp"
#include "kernels/device.hpp"
#include "kernels/dtype_cuda.cuh"
#include "kernels/mma_sm80.cuh"

namespace trainsim::kern::dev {
namespace {

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kBlockN = 16 * kWarps; // keys per CTA (one m16 tile per warp)
constexpr int kBlockM = 64;          // query rows per inner step

/// Swizzled element offset of (row, col) in a [rows, W] 16-bit tile: 16-byte chunk c of row r is
/// stored at chunk c ^ (r % 8), so 8 ldmatrix row addresses (or 8 quads' stores) hit 8 bank groups.
template <int W> __device__ __forceinline__ int swz(int row, int col) {
  return row * W + ((((col >> 3) ^ (row & 7))) << 3) + (col & 7);
}

__device__ __forceinline__ void cp_async4(void* smem, const void* gmem, bool valid) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  const int src_bytes = valid ? 4 : 0;
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(s), "l"(gmem),
               "r"(src_bytes));
}

template <class T, int D, int kRows>
__device__ __forceinline__ void load_tile(T* smem, const T* gmem, int row0, int seq_len) {
  constexpr int kChunksPerRow = D / 8;
#pragma unroll
  for (int i = threadIdx.x; i < kRows * kChunksPerRow; i += kThreads) {
    const int r = i / kChunksPerRow, c = (i % kChunksPerRow) * 8;
    const bool valid = row0 + r < seq_len;
    const T* src = valid ? gmem + static_cast<std::int64_t>(row0 + r) * D + c : gmem;
    cp_async16(smem + swz<D>(r, c), src, valid);
  }
}

template <int D> struct Smem {
  static constexpr int kK = 0;                             // [kBlockN, D] 16-bit
  static constexpr int kV = kK + kBlockN * D * 2;          // [kBlockN, D]
  static constexpr int kQ = kV + kBlockN * D * 2;          // [2][kBlockM, D]
  static constexpr int kDO = kQ + 2 * kBlockM * D * 2;     // [2][kBlockM, D]
  static constexpr int kDS = kDO + 2 * kBlockM * D * 2;    // [kBlockN, kBlockM] dS^T
  static constexpr int kLse = kDS + kBlockN * kBlockM * 2; // [2][kBlockM] fp32
  static constexpr int kDelta = kLse + 2 * kBlockM * 4;    // [2][kBlockM] fp32
  static constexpr int kBytes = kDelta + 2 * kBlockM * 4;
};

template <class T, int D, bool Causal, int kSub = (D == 128 ? 32 : 64)>
__global__ void __launch_bounds__(kThreads, 1)
    flash_bwd_v2_kernel(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                        const T* __restrict__ dout, const float* __restrict__ lse,
                        const float* __restrict__ delta, float* __restrict__ dq_accum,
                        T* __restrict__ dk, T* __restrict__ dv, int seq_len, float scale) {
  using L = Smem<D>;
  extern __shared__ __align__(128) unsigned char smem[];
  T* sK = reinterpret_cast<T*>(smem + L::kK);
  T* sV = reinterpret_cast<T*>(smem + L::kV);
  T* sQ = reinterpret_cast<T*>(smem + L::kQ);
  T* sDO = reinterpret_cast<T*>(smem + L::kDO);
  T* sDS = reinterpret_cast<T*>(smem + L::kDS);
  float* sLse = reinterpret_cast<float*>(smem + L::kLse);
  float* sDelta = reinterpret_cast<float*>(smem + L::kDelta);

  const int k0 = blockIdx.x * kBlockN; // causal: blockIdx.x 0 (most query tiles) starts first
  const std::int64_t head_off = static_cast<std::int64_t>(blockIdx.y) * seq_len * D;
  const std::int64_t row_off = static_cast<std::int64_t>(blockIdx.y) * seq_len;
  const T* qh = q + head_off;
  const T* doh = dout + head_off;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const float scale_log2 = scale * 1.4426950408889634f;

  const int num_m = (seq_len + kBlockM - 1) / kBlockM;
  const int first_m = Causal ? k0 / kBlockM : 0;

  auto load_q_tile = [&](int mb) {
    const int buf = mb & 1, q0 = mb * kBlockM;
    load_tile<T, D, kBlockM>(sQ + buf * kBlockM * D, qh, q0, seq_len);
    load_tile<T, D, kBlockM>(sDO + buf * kBlockM * D, doh, q0, seq_len);
    if (threadIdx.x < 2 * kBlockM) {
      const int i = threadIdx.x % kBlockM;
      const bool valid = q0 + i < seq_len;
      const float* src = threadIdx.x < kBlockM ? lse : delta;
      float* dst = threadIdx.x < kBlockM ? sLse : sDelta;
      cp_async4(dst + buf * kBlockM + i, valid ? src + row_off + q0 + i : src, valid);
    }
  };

  load_tile<T, D, kBlockN>(sK, k + head_off, k0, seq_len);
  load_tile<T, D, kBlockN>(sV, v + head_off, k0, seq_len);
  if (first_m < num_m)
    load_q_tile(first_m);
  cp_async_commit();

  // dK, dV accumulators: this warp's 16 keys x D, m16n8 layout (rows lane/4 and lane/4 + 8).
  float acc_dk[D / 8][4], acc_dv[D / 8][4];
#pragma unroll
  for (int i = 0; i < D / 8; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e)
      acc_dk[i][e] = acc_dv[i][e] = 0.0f;

  const int key_row0 = warp * 16; // this warp's rows inside the CTA's key block

  for (int mb = first_m; mb < num_m; ++mb) {
    cp_async_wait<0>();
    __syncthreads(); // tile mb landed; everyone is done with tile mb-1's buffer and sDS
    if (mb + 1 < num_m) {
      load_q_tile(mb + 1); // overlaps with the whole of this iteration
      cp_async_commit();
    }
    const int buf = mb & 1, q0 = mb * kBlockM;
    const T* cQ = sQ + buf * kBlockM * D;
    const T* cDO = sDO + buf * kBlockM * D;
    const float* cLse = sLse + buf * kBlockM;
    const float* cDelta = sDelta + buf * kBlockM;

    const bool need_mask =
        q0 + kBlockM > seq_len || k0 + kBlockN > seq_len || (Causal && q0 < k0 + kBlockN);
    const int key_base = k0 + key_row0 + lane / 4;
    // Steps 1-6 run on kSub-query slices of the tile (kSub = 32 at D = 128: S^T and dP^T then
    // take 16 registers each next to the 128 dK/dV accumulators instead of 32 each).
#pragma unroll 1
    for (int qs = 0; qs < kBlockM; qs += kSub) {
      // 1. S^T = K Q^T: 16 keys x kSub queries per warp (A = K rows, B = Q rows, plain ldmatrix).
      float s[kSub / 8][4];
#pragma unroll
      for (int i = 0; i < kSub / 8; ++i)
        s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0.0f;
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        unsigned a[4];
        ldmatrix_x4(a, sK + swz<D>(key_row0 + lane % 16, kk * 16 + (lane / 16) * 8));
#pragma unroll
        for (int p = 0; p < kSub / 16; ++p) {
          unsigned b[4];
          ldmatrix_x4(b, cQ + swz<D>(qs + p * 16 + (lane % 8) + 8 * (lane / 16),
                                     kk * 16 + ((lane / 8) % 2) * 8));
          mma_16816<T>(s[2 * p], a, b[0], b[1]);
          mma_16816<T>(s[2 * p + 1], a, b[2], b[3]);
        }
      }

      // 2. P^T = exp2(S^T scale log2e - lse log2e) with masking (row = key, col = query).
#pragma unroll
      for (int nt = 0; nt < kSub / 8; ++nt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int col = qs + nt * 8 + 2 * (lane % 4) + (e & 1);
          float p = fast_exp2(s[nt][e] * scale_log2 - cLse[col] * 1.4426950408889634f);
          if (need_mask) {
            const int kr = key_base + (e >= 2 ? 8 : 0), qc = q0 + col;
            if (qc >= seq_len || kr >= seq_len || (Causal && qc < kr))
              p = 0.0f;
          }
          s[nt][e] = p;
        }
      }

      // 3. dV += P^T dO: P^T re-packed from the accumulators as A (k = queries), B = dO via .trans.
      {
        unsigned pa[kSub / 16][4];
#pragma unroll
        for (int kk = 0; kk < kSub / 16; ++kk) {
          pa[kk][0] = pack2<T>(s[2 * kk][0], s[2 * kk][1]);
          pa[kk][1] = pack2<T>(s[2 * kk][2], s[2 * kk][3]);
          pa[kk][2] = pack2<T>(s[2 * kk + 1][0], s[2 * kk + 1][1]);
          pa[kk][3] = pack2<T>(s[2 * kk + 1][2], s[2 * kk + 1][3]);
        }
#pragma unroll
        for (int kk = 0; kk < kSub / 16; ++kk) {
#pragma unroll
          for (int dp = 0; dp < D / 16; ++dp) {
            unsigned b[4];
            ldmatrix_x4_trans(b, cDO + swz<D>(qs + kk * 16 + (lane % 8) + 8 * ((lane / 8) % 2),
                                              dp * 16 + (lane / 16) * 8));
            mma_16816<T>(acc_dv[2 * dp], pa[kk], b[0], b[1]);
            mma_16816<T>(acc_dv[2 * dp + 1], pa[kk], b[2], b[3]);
          }
        }
      }

      // 4. dP^T = V dO^T (A = V rows, B = dO rows, plain ldmatrix).
      float dpt[kSub / 8][4];
#pragma unroll
      for (int i = 0; i < kSub / 8; ++i)
        dpt[i][0] = dpt[i][1] = dpt[i][2] = dpt[i][3] = 0.0f;
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        unsigned a[4];
        ldmatrix_x4(a, sV + swz<D>(key_row0 + lane % 16, kk * 16 + (lane / 16) * 8));
#pragma unroll
        for (int p = 0; p < kSub / 16; ++p) {
          unsigned b[4];
          ldmatrix_x4(b, cDO + swz<D>(qs + p * 16 + (lane % 8) + 8 * (lane / 16),
                                      kk * 16 + ((lane / 8) % 2) * 8));
          mma_16816<T>(dpt[2 * p], a, b[0], b[1]);
          mma_16816<T>(dpt[2 * p + 1], a, b[2], b[3]);
        }
      }

      // 5. dS^T = P^T (dP^T - delta[query]); packed once, used for dK here and dQ below.
      unsigned dsa[kSub / 16][4];
#pragma unroll
      for (int nt = 0; nt < kSub / 8; ++nt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int col = qs + nt * 8 + 2 * (lane % 4) + (e & 1);
          dpt[nt][e] = s[nt][e] * (dpt[nt][e] - cDelta[col]);
        }
      }
#pragma unroll
      for (int kk = 0; kk < kSub / 16; ++kk) {
        dsa[kk][0] = pack2<T>(dpt[2 * kk][0], dpt[2 * kk][1]);
        dsa[kk][1] = pack2<T>(dpt[2 * kk][2], dpt[2 * kk][3]);
        dsa[kk][2] = pack2<T>(dpt[2 * kk + 1][0], dpt[2 * kk + 1][1]);
        dsa[kk][3] = pack2<T>(dpt[2 * kk + 1][2], dpt[2 * kk + 1][3]);
      }
      // dS^T to shared memory [key][query] (swizzled: the 8 quads of a store hit 8 bank groups).
#pragma unroll
      for (int kk = 0; kk < kSub / 16; ++kk) {
#pragma unroll
        for (int half = 0; half < 2; ++half) { // n-tile 2kk + half
          const int col = qs + (2 * kk + half) * 8 + 2 * (lane % 4);
          const int r = key_row0 + lane / 4;
          *reinterpret_cast<unsigned*>(sDS + swz<kBlockM>(r, col)) = dsa[kk][2 * half];
          *reinterpret_cast<unsigned*>(sDS + swz<kBlockM>(r + 8, col)) = dsa[kk][2 * half + 1];
        }
      }

      // 6. dK += dS^T Q (A = dS^T from registers, B = Q via .trans).
#pragma unroll
      for (int kk = 0; kk < kSub / 16; ++kk) {
#pragma unroll
        for (int dp = 0; dp < D / 16; ++dp) {
          unsigned b[4];
          ldmatrix_x4_trans(b, cQ + swz<D>(qs + kk * 16 + (lane % 8) + 8 * ((lane / 8) % 2),
                                           dp * 16 + (lane / 16) * 8));
          mma_16816<T>(acc_dk[2 * dp], dsa[kk], b[0], b[1]);
          mma_16816<T>(acc_dk[2 * dp + 1], dsa[kk], b[2], b[3]);
        }
      }
    }                // query slices
    __syncthreads(); // sDS complete

    // 7. dQ[64 queries, D] += dS K over all 128 keys. Warp: 16 query rows (rg) x D/2 columns
    // (cs), in 32-column chunks (16 accumulators); A = dS via .trans of dS^T, B = K via .trans.
    {
      constexpr int kColSplit = kWarps / (kBlockM / 16);
      constexpr int kCols = D / kColSplit;
      const int rg = warp % (kBlockM / 16), cs = warp / (kBlockM / 16);
#pragma unroll
      for (int c0 = cs * kCols; c0 < (cs + 1) * kCols; c0 += 32) {
        float acc[4][4];
#pragma unroll
        for (int i = 0; i < 4; ++i)
          acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.0f;
#pragma unroll
        for (int kk = 0; kk < kBlockN / 16; ++kk) {
          unsigned a[4];
          ldmatrix_x4_trans(a, sDS + swz<kBlockM>(kk * 16 + (lane % 8) + 8 * (lane / 16),
                                                  rg * 16 + 8 * ((lane / 8) % 2)));
#pragma unroll
          for (int dp = 0; dp < 2; ++dp) {
            unsigned b[4];
            ldmatrix_x4_trans(b, sK + swz<D>(kk * 16 + (lane % 8) + 8 * ((lane / 8) % 2),
                                             c0 + dp * 16 + (lane / 16) * 8));
            mma_16816<T>(acc[2 * dp], a, b[0], b[1]);
            mma_16816<T>(acc[2 * dp + 1], a, b[2], b[3]);
          }
        }
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int row = q0 + rg * 16 + lane / 4 + 8 * h;
          if (row < seq_len) {
            float* dst =
                dq_accum + head_off + static_cast<std::int64_t>(row) * D + c0 + 2 * (lane % 4);
#pragma unroll
            for (int nt = 0; nt < 4; ++nt) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
              atomicAdd(reinterpret_cast<float2*>(dst + nt * 8),
                        make_float2(acc[nt][2 * h], acc[nt][2 * h + 1]));
#else
              atomicAdd(dst + nt * 8, acc[nt][2 * h]);
              atomicAdd(dst + nt * 8 + 1, acc[nt][2 * h + 1]);
#endif
            }
          }
        }
      }
    }
  }

  // Epilogue: dV and scale * dK straight from the accumulators (one 4-byte store per pair).
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = k0 + key_row0 + lane / 4 + 8 * h;
    if (row < seq_len) {
      const std::int64_t off = head_off + static_cast<std::int64_t>(row) * D + 2 * (lane % 4);
#pragma unroll
      for (int dt = 0; dt < D / 8; ++dt) {
        *reinterpret_cast<unsigned*>(dv + off + dt * 8) =
            pack2<T>(acc_dv[dt][2 * h], acc_dv[dt][2 * h + 1]);
        *reinterpret_cast<unsigned*>(dk + off + dt * 8) =
            pack2<T>(acc_dk[dt][2 * h] * scale, acc_dk[dt][2 * h + 1] * scale);
      }
    }
  }
}

/// delta[row] = sum_d dO[row, d] O[row, d]; one warp per row, 16-byte loads (D = 64 or 128).
template <class T, int D>
__global__ void delta_kernel(const T* __restrict__ o, const T* __restrict__ dout,
                             float* __restrict__ delta, std::int64_t rows) {
  const std::int64_t row =
      static_cast<std::int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows)
    return;
  float acc = 0.0f;
  if (lane < D / 8) {
    const uint4 a = *reinterpret_cast<const uint4*>(o + row * D + lane * 8);
    const uint4 b = *reinterpret_cast<const uint4*>(dout + row * D + lane * 8);
    const T* pa = reinterpret_cast<const T*>(&a);
    const T* pb = reinterpret_cast<const T*>(&b);
#pragma unroll
    for (int i = 0; i < 8; ++i)
      acc += to_float(pa[i]) * to_float(pb[i]);
  }
#pragma unroll
  for (int off = 16; off > 0; off >>= 1)
    acc += __shfl_xor_sync(0xffffffffu, acc, off);
  if (lane == 0)
    delta[row] = acc;
}

template <class T>
__global__ void dq_convert_kernel(const float* __restrict__ acc, T* __restrict__ dq,
                                  std::int64_t n4, float scale) {
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n4;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const float4 x = reinterpret_cast<const float4*>(acc)[i];
    uint2 out;
    out.x = pack2<T>(x.x * scale, x.y * scale);
    out.y = pack2<T>(x.z * scale, x.w * scale);
    reinterpret_cast<uint2*>(dq)[i] = out;
  }
}

template <class T, int D, bool Causal>
void launch_typed(const AttentionBackwardArgs& a, float scale, cudaStream_t stream) {
  const std::int64_t rows = a.batch * a.heads * a.seq_len;
  const std::int64_t n = rows * D;
  CUDA_CHECK(cudaMemsetAsync(a.dq_accum, 0, n * sizeof(float), stream));
  delta_kernel<T, D><<<static_cast<unsigned>((rows + 7) / 8), 256, 0, stream>>>(
      static_cast<const T*>(a.o), static_cast<const T*>(a.dout), a.delta, rows);
  CUDA_CHECK_LAUNCH();
  constexpr int smem = Smem<D>::kBytes;
  auto kernel = flash_bwd_v2_kernel<T, D, Causal>;
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  const dim3 grid(static_cast<unsigned>((a.seq_len + kBlockN - 1) / kBlockN),
                  static_cast<unsigned>(a.batch * a.heads));
  kernel<<<grid, kThreads, smem, stream>>>(
      static_cast<const T*>(a.q), static_cast<const T*>(a.k), static_cast<const T*>(a.v),
      static_cast<const T*>(a.dout), a.lse, a.delta, a.dq_accum, static_cast<T*>(a.dk),
      static_cast<T*>(a.dv), static_cast<int>(a.seq_len), scale);
  CUDA_CHECK_LAUNCH();
  dq_convert_kernel<T><<<2048, 256, 0, stream>>>(a.dq_accum, static_cast<T*>(a.dq), n / 4, scale);
  CUDA_CHECK_LAUNCH();
}

} // namespace

/// Same contract as kern::launch_flash_attention_backward.
void launch_flash_attention_backward_v2(const AttentionBackwardArgs& a, cudaStream_t stream) {
  if (a.dtype != Dtype::bf16 && a.dtype != Dtype::fp16)
    throw ConfigError("flash attention backward v2: dtype must be bf16 or fp16");
  if (a.head_dim != 64 && a.head_dim != 128)
    throw ConfigError("flash attention backward v2: head_dim must be 64 or 128");
  if (a.batch * a.heads <= 0 || a.seq_len <= 0)
    return;
  const float scale =
      a.softmax_scale > 0 ? a.softmax_scale : 1.0f / std::sqrt(static_cast<float>(a.head_dim));
  dispatch_float_dtype(a.dtype, "flash attention backward v2", [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!std::is_same_v<T, float>) {
      if (a.head_dim == 64)
        a.causal ? launch_typed<T, 64, true>(a, scale, stream)
                 : launch_typed<T, 64, false>(a, scale, stream);
      else
        a.causal ? launch_typed<T, 128, true>(a, scale, stream)
                 : launch_typed<T, 128, false>(a, scale, stream);
    }
  });
}

} // namespace trainsim::kern::dev

// ------------------------------------------------------------------------------------------------
// Self-check and benchmark (host).
namespace {

using namespace trainsim;
using kern::DeviceBuffer;

std::uint16_t to_bits(double x, Dtype dt) {
  if (dt == Dtype::bf16) {
    __nv_bfloat16 h = __float2bfloat16_rn(static_cast<float>(x));
    return *reinterpret_cast<std::uint16_t*>(&h);
  }
  __half h = __float2half_rn(static_cast<float>(x));
  return *reinterpret_cast<std::uint16_t*>(&h);
}
double from_bits(std::uint16_t b, Dtype dt) {
  if (dt == Dtype::bf16) {
    __nv_bfloat16 h;
    *reinterpret_cast<std::uint16_t*>(&h) = b;
    return __bfloat162float(h);
  }
  __half h;
  *reinterpret_cast<std::uint16_t*>(&h) = b;
  return __half2float(h);
}

/// float64 attention forward + backward for one head (x: [s, d] row-major).
void reference_head(const double* q, const double* k, const double* v, const double* dout, int s,
                    int d, bool causal, double scale, double* o, double* lse, double* dq,
                    double* dk, double* dv) {
  std::vector<double> p(static_cast<std::size_t>(s) * s, 0.0), dp(p.size(), 0.0);
  for (int i = 0; i < s; ++i) {
    double mx = -INFINITY;
    for (int j = 0; j < s; ++j) {
      if (causal && j > i)
        continue;
      double acc = 0;
      for (int c = 0; c < d; ++c)
        acc += q[i * d + c] * k[j * d + c];
      p[i * s + j] = acc * scale;
      mx = std::max(mx, acc * scale);
    }
    double sum = 0;
    for (int j = 0; j < s; ++j)
      if (!(causal && j > i))
        sum += std::exp(p[i * s + j] - mx);
    lse[i] = mx + std::log(sum);
    for (int j = 0; j < s; ++j)
      p[i * s + j] = (causal && j > i) ? 0.0 : std::exp(p[i * s + j] - lse[i]);
    for (int c = 0; c < d; ++c) {
      double acc = 0;
      for (int j = 0; j < s; ++j)
        acc += p[i * s + j] * v[j * d + c];
      o[i * d + c] = acc;
    }
  }
  std::fill(dq, dq + s * d, 0.0);
  std::fill(dk, dk + s * d, 0.0);
  std::fill(dv, dv + s * d, 0.0);
  for (int i = 0; i < s; ++i) {
    double dl = 0;
    for (int c = 0; c < d; ++c)
      dl += dout[i * d + c] * o[i * d + c];
    for (int j = 0; j < s; ++j) {
      const double pij = p[i * s + j];
      if (pij == 0.0)
        continue;
      double acc = 0;
      for (int c = 0; c < d; ++c)
        acc += dout[i * d + c] * v[j * d + c];
      const double ds = pij * (acc - dl) * scale;
      for (int c = 0; c < d; ++c) {
        dv[j * d + c] += pij * dout[i * d + c];
        dq[i * d + c] += ds * k[j * d + c];
        dk[j * d + c] += ds * q[i * d + c];
      }
    }
  }
}

struct Err {
  double rel = 0, max_abs = 0;
  long nan = 0;
};
Err compare(const std::vector<std::uint16_t>& got, const std::vector<double>& ref, Dtype dt) {
  Err e;
  double num = 0, den = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const double g = from_bits(got[i], dt);
    if (!std::isfinite(g)) {
      ++e.nan;
      continue;
    }
    num += (g - ref[i]) * (g - ref[i]);
    den += ref[i] * ref[i];
    e.max_abs = std::max(e.max_abs, std::abs(g - ref[i]));
  }
  e.rel = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  return e;
}

bool check_case(Dtype dt, int bh, int s, int d, bool causal, std::uint64_t seed) {
  const std::size_t n = static_cast<std::size_t>(bh) * s * d;
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> nd(0.0, 1.0);
  // Inputs rounded to the storage type first, so the reference sees exactly what the GPU sees.
  std::vector<std::uint16_t> hq(n), hk(n), hv(n), hdo(n), ho(n);
  std::vector<double> q(n), k(n), v(n), dout(n);
  auto fill = [&](std::vector<std::uint16_t>& bits, std::vector<double>& val) {
    for (std::size_t i = 0; i < n; ++i) {
      bits[i] = to_bits(nd(rng), dt);
      val[i] = from_bits(bits[i], dt);
    }
  };
  fill(hq, q);
  fill(hk, k);
  fill(hv, v);
  fill(hdo, dout);
  std::vector<double> o(n), dq(n), dk(n), dv(n), lse(static_cast<std::size_t>(bh) * s);
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  for (int h = 0; h < bh; ++h) {
    const std::size_t off = static_cast<std::size_t>(h) * s * d;
    reference_head(&q[off], &k[off], &v[off], &dout[off], s, d, causal, scale, &o[off],
                   &lse[static_cast<std::size_t>(h) * s], &dq[off], &dk[off], &dv[off]);
  }
  std::vector<float> hlse(lse.begin(), lse.end());
  for (std::size_t i = 0; i < n; ++i)
    ho[i] = to_bits(o[i], dt);

  const std::size_t b16 = n * 2;
  DeviceBuffer dQ(b16), dK(b16), dV(b16), dO(b16), dOut(b16), dDq(b16), dDk(b16), dDv(b16),
      dLse(hlse.size() * 4), dAcc(n * 4), dDelta(hlse.size() * 4);
  CUDA_CHECK(cudaMemcpy(dQ.get(), hq.data(), b16, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(dK.get(), hk.data(), b16, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(dV.get(), hv.data(), b16, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(dO.get(), ho.data(), b16, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(dOut.get(), hdo.data(), b16, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(dLse.get(), hlse.data(), hlse.size() * 4, cudaMemcpyHostToDevice));
  // Poison every output and workspace with NaN (0xFF bytes) before the run.
  for (auto* b : {&dDq, &dDk, &dDv, &dAcc, &dDelta})
    CUDA_CHECK(cudaMemset(b->get(), 0xFF, b->bytes()));

  kern::AttentionBackwardArgs a;
  a.dtype = dt;
  a.q = dQ.get();
  a.k = dK.get();
  a.v = dV.get();
  a.o = dO.get();
  a.dout = dOut.get();
  a.lse = dLse.as<float>();
  a.dq = dDq.get();
  a.dk = dDk.get();
  a.dv = dDv.get();
  a.dq_accum = dAcc.as<float>();
  a.delta = dDelta.as<float>();
  a.batch = 1;
  a.heads = bh;
  a.seq_len = s;
  a.head_dim = d;
  a.causal = causal;
  kern::dev::launch_flash_attention_backward_v2(a, nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());

  std::vector<std::uint16_t> gdq(n), gdk(n), gdv(n);
  CUDA_CHECK(cudaMemcpy(gdq.data(), dDq.get(), b16, cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(gdk.data(), dDk.get(), b16, cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(gdv.data(), dDv.get(), b16, cudaMemcpyDeviceToHost));
  const double limit = dt == Dtype::bf16 ? 2e-2 : 5e-3;
  bool ok = true;
  const char* names[3] = {"dQ", "dK", "dV"};
  const std::vector<std::uint16_t>* got[3] = {&gdq, &gdk, &gdv};
  const std::vector<double>* ref[3] = {&dq, &dk, &dv};
  std::printf("%-4s b1 h%d s%d d%d %-6s:", dt == Dtype::bf16 ? "bf16" : "fp16", bh, s, d,
              causal ? "causal" : "full");
  for (int t = 0; t < 3; ++t) {
    const Err e = compare(*got[t], *ref[t], dt);
    const bool pass = e.nan == 0 && e.rel <= limit;
    ok = ok && pass;
    std::printf("  %s rel %.2e max_abs %.2e nan %ld", names[t], e.rel, e.max_abs, e.nan);
  }
  std::printf("  (limit %.0e) %s\n", limit, ok ? "PASS" : "FAIL");
  return ok;
}

double median(std::vector<float> x) {
  std::sort(x.begin(), x.end());
  return x.size() % 2 ? x[x.size() / 2] : 0.5 * (x[x.size() / 2 - 1] + x[x.size() / 2]);
}

/// Times v1 (kern::launch_flash_attention_backward) and v2 on bf16 b2 h16 s4096 d128.
void bench(bool causal) {
  const int b = 2, h = 16, s = 4096, d = 128;
  const std::size_t n = static_cast<std::size_t>(b) * h * s * d;
  const std::size_t rows = static_cast<std::size_t>(b) * h * s;
  std::vector<std::uint16_t> host(n);
  std::mt19937_64 rng(1234);
  std::normal_distribution<double> nd(0.0, 1.0);
  DeviceBuffer dQ(n * 2), dK(n * 2), dV(n * 2), dO(n * 2), dOut(n * 2), dDq(n * 2), dDk(n * 2),
      dDv(n * 2), dLse(rows * 4), dAcc(n * 4), dDelta(rows * 4);
  for (auto* buf : {&dQ, &dK, &dV, &dOut}) {
    for (auto& x : host)
      x = to_bits(nd(rng), Dtype::bf16);
    CUDA_CHECK(cudaMemcpy(buf->get(), host.data(), n * 2, cudaMemcpyHostToDevice));
  }
  kern::Stream stream;
  kern::AttentionArgs f;
  f.dtype = Dtype::bf16;
  f.q = dQ.get();
  f.k = dK.get();
  f.v = dV.get();
  f.o = dO.get();
  f.lse = dLse.as<float>();
  f.batch = b;
  f.heads = h;
  f.seq_len = s;
  f.head_dim = d;
  f.causal = causal;
  kern::launch_flash_attention(f, stream.get());

  kern::AttentionBackwardArgs a;
  a.dtype = Dtype::bf16;
  a.q = dQ.get();
  a.k = dK.get();
  a.v = dV.get();
  a.o = dO.get();
  a.dout = dOut.get();
  a.lse = dLse.as<float>();
  a.dq = dDq.get();
  a.dk = dDk.get();
  a.dv = dDv.get();
  a.dq_accum = dAcc.as<float>();
  a.delta = dDelta.as<float>();
  a.batch = b;
  a.heads = h;
  a.seq_len = s;
  a.head_dim = d;
  a.causal = causal;

  double flops = 2.5 * 4.0 * b * h * static_cast<double>(s) * s * d;
  if (causal)
    flops *= 0.5;
  cudaEvent_t e0, e1;
  CUDA_CHECK(cudaEventCreate(&e0));
  CUDA_CHECK(cudaEventCreate(&e1));
  double tf[2];
  for (int which = 0; which < 2; ++which) {
    auto run = [&] {
      which == 0 ? kern::launch_flash_attention_backward(a, stream.get())
                 : kern::dev::launch_flash_attention_backward_v2(a, stream.get());
    };
    for (int i = 0; i < 5; ++i)
      run();
    std::vector<float> ms;
    for (int i = 0; i < 20; ++i) {
      CUDA_CHECK(cudaEventRecord(e0, stream.get()));
      run();
      CUDA_CHECK(cudaEventRecord(e1, stream.get()));
      CUDA_CHECK(cudaEventSynchronize(e1));
      float t = 0;
      CUDA_CHECK(cudaEventElapsedTime(&t, e0, e1));
      ms.push_back(t);
    }
    const double med = median(ms);
    const auto [mn, mx] = std::minmax_element(ms.begin(), ms.end());
    tf[which] = flops / (med * 1e-3) / 1e12;
    std::printf("bf16 b2 h16 s4096 d128 %-6s %s: median %.3f ms (min %.3f, max %.3f, n=20, hot) "
                "%.1f TFLOP/s\n",
                causal ? "causal" : "full", which == 0 ? "v1 (flash_bwd.cu)" : "v2 (dev)", med, *mn,
                *mx, tf[which]);
  }
  std::printf("  v2 / v1 = %.2fx\n", tf[1] / tf[0]);
  // Informational: v2 against v1 on the large case (v1 passed its own checks in gpu_test).
  std::vector<std::uint16_t> r1[3], r2[3];
  void* outs[3] = {a.dq, a.dk, a.dv};
  for (int which = 0; which < 2; ++which) {
    for (void* o : outs)
      CUDA_CHECK(cudaMemsetAsync(o, 0xFF, n * 2, stream.get()));
    which == 0 ? kern::launch_flash_attention_backward(a, stream.get())
               : kern::dev::launch_flash_attention_backward_v2(a, stream.get());
    CUDA_CHECK(cudaStreamSynchronize(stream.get()));
    for (int t = 0; t < 3; ++t) {
      auto& dst = which == 0 ? r1[t] : r2[t];
      dst.resize(n);
      CUDA_CHECK(cudaMemcpy(dst.data(), outs[t], n * 2, cudaMemcpyDeviceToHost));
    }
  }
  std::printf("  v2 vs v1 (rel L2):");
  for (int t = 0; t < 3; ++t) {
    std::vector<double> ref(n);
    for (std::size_t i = 0; i < n; ++i)
      ref[i] = from_bits(r1[t][i], Dtype::bf16);
    const Err e = compare(r2[t], ref, Dtype::bf16);
    std::printf(" %s %.2e (nan %ld)", t == 0 ? "dQ" : t == 1 ? "dK" : "dV", e.rel, e.nan);
  }
  std::printf("\n");
  CUDA_CHECK(cudaEventDestroy(e0));
  CUDA_CHECK(cudaEventDestroy(e1));
}

} // namespace

int main() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::printf("flash_bwd_v2: no CUDA device found; skipping (exit 77)\n");
    return 77;
  }
  try {
    cudaDeviceProp prop{};
    CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    int drv = 0, rt = 0;
    CUDA_CHECK(cudaDriverGetVersion(&drv));
    CUDA_CHECK(cudaRuntimeGetVersion(&rt));
    std::printf("flash_bwd_v2 on %s (sm_%d%d, %d SMs), driver %d, runtime %d\n", prop.name,
                prop.major, prop.minor, prop.multiProcessorCount, drv, rt);
    bool ok = true;
    std::uint64_t seed = 1;
    for (Dtype dt : {Dtype::bf16, Dtype::fp16})
      for (int d : {64, 128})
        for (bool causal : {false, true}) {
          ok = check_case(dt, 2, 256, d, causal, seed++) && ok;
        }
    // Odd length: partial key and query tiles.
    ok = check_case(Dtype::bf16, 1, 200, 128, true, seed++) && ok;
    ok = check_case(Dtype::fp16, 1, 136, 64, false, seed++) && ok;
    std::printf("checks: %s\n", ok ? "ALL PASS" : "SOME FAILED");
    bench(false);
    bench(true);
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::printf("flash_bwd_v2: error: %s\n", e.what());
    return 1;
  }
}
