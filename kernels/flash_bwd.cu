// FlashAttention-2 backward (Dao 2023, Algorithm 2), register-level on mma.sync (sm_80+ tensor
// cores, run on sm_90). A CTA of 8 warps owns 128 keys, 16 per warp (one m16 tile), so each warp
// keeps its dK and dV accumulators in registers (D/2 fp32 each per thread) for the whole pass
// over the queries. For each 64-row query tile (Q, dO, lse, delta double-buffered by cp.async
// into swizzled shared memory) a warp computes S^T = K Q^T and dP^T = V dO^T in 32- or 64-query
// slices, so that P^T = exp(scale S^T - lse) and dS^T = P^T (dP^T - delta) come out of the
// accumulators already laid out as A fragments for dV += P^T dO and dK += dS^T Q. dS^T goes once
// to swizzled shared memory for dQ += dS K, added to an fp32 workspace with float2 atomics.
// A preprocess computes delta = rowsum(dO * O) with 16-byte loads; a postprocess scales dQ and
// converts it to the input dtype. D = 128: 145 KB shared memory, one CTA per SM.
// Measured on the H200 (validate/results/runs-2026-11-29/h200-flash-bwd-v2.log.gz):
// bf16, b 2, h 16, s 4096, d 128: 218 TFLOP/s non-causal, 183 causal (3.0x and 2.6x the WMMA
// kernel it replaced).
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "kernels/attention.cuh"
#include "kernels/check.hpp"
#include "kernels/dtype_cuda.cuh"
#include "kernels/mma_sm80.cuh"

namespace trainsim::kern {
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
    flash_bwd_kernel(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
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
  auto kernel = flash_bwd_kernel<T, D, Causal>;
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

void launch_flash_attention_backward(const AttentionBackwardArgs& a, cudaStream_t stream) {
  const float scale =
      a.softmax_scale > 0 ? a.softmax_scale : 1.0f / std::sqrt(static_cast<float>(a.head_dim));
  dispatch_flash(a.dtype, a.head_dim, a.causal, "flash attention backward",
                 [&](auto tag, auto d, auto causal) {
                   if (a.batch * a.heads <= 0 || a.seq_len <= 0)
                     return;
                   launch_typed<decltype(tag), decltype(d)::value, decltype(causal)::value>(
                       a, scale, stream);
                 });
}

} // namespace trainsim::kern
