// FlashAttention-2 backward (Dao 2023, Algorithm 2): a block owns 64 keys (K, V and the dK, dV
// accumulators), loops over 64-row query tiles, recomputes P = exp(scale S - lse) and
// dS = P (dP - delta), accumulates dV += P^T dO, dK += dS^T Q on chip and adds dQ += dS K to an
// fp32 workspace with atomics. Matrix products use tensor cores through WMMA (m16n16k16,
// fp32 accumulation); a preprocess computes delta = rowsum(dO * O), a postprocess scales dQ.
#include <mma.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "kernels/attention.cuh"
#include "kernels/check.hpp"
#include "kernels/dtype_cuda.cuh"

namespace trainsim::kern {
namespace {

namespace wmma = nvcuda::wmma;

constexpr int kTile = 64; // keys per block and query rows per inner step
constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kLdS = kTile + 4; // fp32 [64, 64] tiles, padded

template <int D> struct BwdSmem {
  static constexpr int kLdT = D + 8; // 16-bit [64, D] tiles, padded (multiple of 8)
  static constexpr int kLdP = kTile + 8;
  static constexpr int kLdF = D + 4; // fp32 [64, D] staging
  // Offsets in bytes.
  static constexpr int kK = 0;
  static constexpr int kV = kK + kTile * kLdT * 2;
  static constexpr int kQ = kV + kTile * kLdT * 2;
  static constexpr int kDO = kQ + kTile * kLdT * 2;
  static constexpr int kS = kDO + kTile * kLdT * 2;
  static constexpr int kDP = kS + kTile * kLdS * 4;
  static constexpr int kP = kDP + kTile * kLdS * 4;
  static constexpr int kDS = kP + kTile * kLdP * 2;
  static constexpr int kF = kDS + kTile * kLdP * 2;
  static constexpr int kLse = kF + kTile * kLdF * 4;
  static constexpr int kDelta = kLse + kTile * 4;
  static constexpr int kBytes = kDelta + kTile * 4;
};

/// Copies a [64, D] tile (rows from row0, zero beyond seq_len) into padded shared memory.
template <class T, int D, int kLd>
__device__ __forceinline__ void copy_tile(T* smem, const T* gmem, int row0, int seq_len) {
  constexpr int kChunksPerRow = D / 8;
  for (int i = threadIdx.x; i < kTile * kChunksPerRow; i += kThreads) {
    const int r = i / kChunksPerRow, c = (i % kChunksPerRow) * 8;
    uint4 val = make_uint4(0, 0, 0, 0);
    if (row0 + r < seq_len)
      val = *reinterpret_cast<const uint4*>(gmem + static_cast<std::int64_t>(row0 + r) * D + c);
    *reinterpret_cast<uint4*>(smem + r * kLd + c) = val;
  }
}

template <class T, int D, bool Causal>
__global__ void __launch_bounds__(kThreads)
    flash_bwd_kernel(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                     const T* __restrict__ dout, const float* __restrict__ lse,
                     const float* __restrict__ delta, float* __restrict__ dq_accum,
                     T* __restrict__ dk, T* __restrict__ dv, int seq_len, float scale) {
  using L = BwdSmem<D>;
  extern __shared__ __align__(128) unsigned char smem[];
  T* sK = reinterpret_cast<T*>(smem + L::kK);
  T* sV = reinterpret_cast<T*>(smem + L::kV);
  T* sQ = reinterpret_cast<T*>(smem + L::kQ);
  T* sDO = reinterpret_cast<T*>(smem + L::kDO);
  float* sS = reinterpret_cast<float*>(smem + L::kS);
  float* sDP = reinterpret_cast<float*>(smem + L::kDP);
  T* sP = reinterpret_cast<T*>(smem + L::kP);
  T* sDS = reinterpret_cast<T*>(smem + L::kDS);
  float* sF = reinterpret_cast<float*>(smem + L::kF);
  float* sLse = reinterpret_cast<float*>(smem + L::kLse);
  float* sDelta = reinterpret_cast<float*>(smem + L::kDelta);

  const int n_block = blockIdx.x;
  const int k0 = n_block * kTile;
  const std::int64_t head_off = static_cast<std::int64_t>(blockIdx.y) * seq_len * D;
  const std::int64_t row_off = static_cast<std::int64_t>(blockIdx.y) * seq_len;
  const int warp = threadIdx.x / 32;

  copy_tile<T, D, L::kLdT>(sK, k + head_off, k0, seq_len);
  copy_tile<T, D, L::kLdT>(sV, v + head_off, k0, seq_len);

  // dK, dV accumulators: [64 keys, D] = 4 x D/16 tiles of 16x16; warp owns kPerWarp of them.
  constexpr int kOutTiles = 4 * (D / 16);
  constexpr int kPerWarp = kOutTiles / kWarps;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc_dk[kPerWarp], acc_dv[kPerWarp];
#pragma unroll
  for (int t = 0; t < kPerWarp; ++t) {
    wmma::fill_fragment(acc_dk[t], 0.0f);
    wmma::fill_fragment(acc_dv[t], 0.0f);
  }

  const int num_m_blocks = (seq_len + kTile - 1) / kTile;
  const int first_m = Causal ? n_block : 0;
  for (int mb = first_m; mb < num_m_blocks; ++mb) {
    const int q0 = mb * kTile;
    __syncthreads(); // previous iteration's readers of sQ, sDO, sF are done
    copy_tile<T, D, L::kLdT>(sQ, q + head_off, q0, seq_len);
    copy_tile<T, D, L::kLdT>(sDO, dout + head_off, q0, seq_len);
    if (threadIdx.x < kTile) {
      const int r = q0 + threadIdx.x;
      sLse[threadIdx.x] = r < seq_len ? lse[row_off + r] : 0.0f;
      sDelta[threadIdx.x] = r < seq_len ? delta[row_off + r] : 0.0f;
    }
    __syncthreads();

    // S = Q K^T and dP = dO V^T: 16 tiles of 16x16 each; warp owns 2 of each.
#pragma unroll
    for (int t2 = 0; t2 < 2; ++t2) {
      const int t = warp * 2 + t2, tm = t / 4, tn = t % 4;
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> s_acc, dp_acc;
      wmma::fill_fragment(s_acc, 0.0f);
      wmma::fill_fragment(dp_acc, 0.0f);
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> a;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> b;
        wmma::load_matrix_sync(a, sQ + tm * 16 * L::kLdT + kk * 16, L::kLdT);
        wmma::load_matrix_sync(b, sK + tn * 16 * L::kLdT + kk * 16, L::kLdT);
        wmma::mma_sync(s_acc, a, b, s_acc);
        wmma::load_matrix_sync(a, sDO + tm * 16 * L::kLdT + kk * 16, L::kLdT);
        wmma::load_matrix_sync(b, sV + tn * 16 * L::kLdT + kk * 16, L::kLdT);
        wmma::mma_sync(dp_acc, a, b, dp_acc);
      }
      wmma::store_matrix_sync(sS + tm * 16 * kLdS + tn * 16, s_acc, kLdS, wmma::mem_row_major);
      wmma::store_matrix_sync(sDP + tm * 16 * kLdS + tn * 16, dp_acc, kLdS, wmma::mem_row_major);
    }
    __syncthreads();

    // P = exp(scale S - lse), dS = P (dP - delta); masked entries are 0.
    for (int i = threadIdx.x; i < kTile * kTile; i += kThreads) {
      const int r = i / kTile, c = i % kTile;
      const int qr = q0 + r, kc = k0 + c;
      float p = __expf(sS[r * kLdS + c] * scale - sLse[r]);
      if (qr >= seq_len || kc >= seq_len || (Causal && kc > qr))
        p = 0.0f;
      const float ds = p * (sDP[r * kLdS + c] - sDelta[r]);
      sP[r * L::kLdP + c] = from_float<T>(p);
      sDS[r * L::kLdP + c] = from_float<T>(ds);
    }
    __syncthreads();

    // dV += P^T dO, dK += dS^T Q (A = P^T: column-major view of sP).
#pragma unroll
    for (int t = 0; t < kPerWarp; ++t) {
      const int tile = warp * kPerWarp + t, tm = tile / (D / 16), tn = tile % (D / 16);
#pragma unroll
      for (int kk = 0; kk < kTile / 16; ++kk) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::col_major> a;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> b;
        wmma::load_matrix_sync(a, sP + kk * 16 * L::kLdP + tm * 16, L::kLdP);
        wmma::load_matrix_sync(b, sDO + kk * 16 * L::kLdT + tn * 16, L::kLdT);
        wmma::mma_sync(acc_dv[t], a, b, acc_dv[t]);
        wmma::load_matrix_sync(a, sDS + kk * 16 * L::kLdP + tm * 16, L::kLdP);
        wmma::load_matrix_sync(b, sQ + kk * 16 * L::kLdT + tn * 16, L::kLdT);
        wmma::mma_sync(acc_dk[t], a, b, acc_dk[t]);
      }
      // dQ tile (tm: query rows, tn: head dim) = dS K, staged in sF for the atomics.
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> dq_acc;
      wmma::fill_fragment(dq_acc, 0.0f);
#pragma unroll
      for (int kk = 0; kk < kTile / 16; ++kk) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> a;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> b;
        wmma::load_matrix_sync(a, sDS + tm * 16 * L::kLdP + kk * 16, L::kLdP);
        wmma::load_matrix_sync(b, sK + kk * 16 * L::kLdT + tn * 16, L::kLdT);
        wmma::mma_sync(dq_acc, a, b, dq_acc);
      }
      wmma::store_matrix_sync(sF + tm * 16 * L::kLdF + tn * 16, dq_acc, L::kLdF,
                              wmma::mem_row_major);
    }
    __syncthreads();
    // dQ partial sums into the fp32 workspace: 16-byte vector atomics on sm_90 (4x fewer ops).
    for (int i = threadIdx.x; i < kTile * D / 4; i += kThreads) {
      const int r = (i * 4) / D, c = (i * 4) % D;
      if (q0 + r < seq_len) {
        float* dst = dq_accum + head_off + static_cast<std::int64_t>(q0 + r) * D + c;
        const float4 val = *reinterpret_cast<const float4*>(sF + r * L::kLdF + c);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
        atomicAdd(reinterpret_cast<float4*>(dst), val);
#else
        atomicAdd(dst, val.x);
        atomicAdd(dst + 1, val.y);
        atomicAdd(dst + 2, val.z);
        atomicAdd(dst + 3, val.w);
#endif
      }
    }
  }

  // Write dV then dK (scaled) through the fp32 staging tile.
#pragma unroll
  for (int which = 0; which < 2; ++which) {
    __syncthreads();
#pragma unroll
    for (int t = 0; t < kPerWarp; ++t) {
      const int tile = warp * kPerWarp + t, tm = tile / (D / 16), tn = tile % (D / 16);
      wmma::store_matrix_sync(sF + tm * 16 * L::kLdF + tn * 16, which == 0 ? acc_dv[t] : acc_dk[t],
                              L::kLdF, wmma::mem_row_major);
    }
    __syncthreads();
    T* out = which == 0 ? dv : dk;
    const float mul = which == 0 ? 1.0f : scale;
    for (int i = threadIdx.x; i < kTile * D; i += kThreads) {
      const int r = i / D, c = i % D;
      if (k0 + r < seq_len)
        out[head_off + static_cast<std::int64_t>(k0 + r) * D + c] =
            from_float<T>(sF[r * L::kLdF + c] * mul);
    }
  }
}

/// delta[row] = sum_d dO[row, d] * O[row, d]; one warp per row.
template <class T>
__global__ void bwd_delta_kernel(const T* __restrict__ o, const T* __restrict__ dout,
                                 float* __restrict__ delta, std::int64_t rows, int d) {
  const std::int64_t row =
      static_cast<std::int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  if (row >= rows)
    return;
  float acc = 0.0f;
  for (int c = threadIdx.x % 32; c < d; c += 32)
    acc += to_float(o[row * d + c]) * to_float(dout[row * d + c]);
#pragma unroll
  for (int off = 16; off > 0; off >>= 1)
    acc += __shfl_xor_sync(0xffffffffu, acc, off);
  if (threadIdx.x % 32 == 0)
    delta[row] = acc;
}

template <class T>
__global__ void bwd_dq_convert_kernel(const float* __restrict__ acc, T* __restrict__ dq,
                                      std::int64_t n, float scale) {
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    dq[i] = from_float<T>(acc[i] * scale);
}

template <class T, int D, bool Causal>
void launch_typed(const AttentionBackwardArgs& a, float scale, cudaStream_t stream) {
  const std::int64_t rows = a.batch * a.heads * a.seq_len;
  const std::int64_t n = rows * D;
  CUDA_CHECK(cudaMemsetAsync(a.dq_accum, 0, n * sizeof(float), stream));
  bwd_delta_kernel<T><<<static_cast<unsigned>((rows + 7) / 8), 256, 0, stream>>>(
      static_cast<const T*>(a.o), static_cast<const T*>(a.dout), a.delta, rows, D);
  CUDA_CHECK_LAUNCH();
  constexpr int smem = BwdSmem<D>::kBytes;
  auto kernel = flash_bwd_kernel<T, D, Causal>;
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  const dim3 grid(static_cast<unsigned>((a.seq_len + kTile - 1) / kTile),
                  static_cast<unsigned>(a.batch * a.heads));
  kernel<<<grid, kThreads, smem, stream>>>(
      static_cast<const T*>(a.q), static_cast<const T*>(a.k), static_cast<const T*>(a.v),
      static_cast<const T*>(a.dout), a.lse, a.delta, a.dq_accum, static_cast<T*>(a.dk),
      static_cast<T*>(a.dv), static_cast<int>(a.seq_len), scale);
  CUDA_CHECK_LAUNCH();
  bwd_dq_convert_kernel<T><<<2048, 256, 0, stream>>>(a.dq_accum, static_cast<T*>(a.dq), n, scale);
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
