// FlashAttention-2 forward (Dao 2023, Algorithm 1) for sm_80+/sm_90: a block of 4 warps owns
// 128 query rows (each warp two 16-row m-tiles, so every K/V fragment feeds two mma
// instructions), streams 64-key K/V tiles through double-buffered, XOR-swizzled shared memory
// with cp.async, computes S = Q K^T and O += P V with ldmatrix + mma.sync m16n8k16 (P is
// re-packed from the S accumulators in registers) and keeps an online softmax in the exp2
// domain. Writes O and the natural-log logsumexp. block_m = 64 selects one m-tile per warp.
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "kernels/attention.cuh"
#include "kernels/check.hpp"
#include "kernels/dtype_cuda.cuh"
#include "kernels/mma_sm80.cuh"

namespace trainsim::kern {
namespace {

constexpr int kBlockM = 64; // query rows per block
constexpr int kBlockN = 64; // keys per K/V tile
constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;

/// Swizzled offset (elements) of (row, col) in a [rows, D] tile: 16-byte chunk c of row r is
/// stored at chunk c ^ (r % 8), so ldmatrix's 8 row addresses hit 8 different bank groups.
template <int D> __device__ __forceinline__ int swz(int row, int col) {
  return row * D + ((((col >> 3) ^ (row & 7))) << 3) + (col & 7);
}

/// cp.async a [kRows, D] tile starting at global row `row0` (rows >= seq_len are zero-filled).
template <class T, int D, int kRows>
__device__ __forceinline__ void load_tile(T* smem, const T* gmem, int row0, int seq_len) {
  constexpr int kChunksPerRow = D / 8;
  constexpr int kChunks = kRows * kChunksPerRow;
#pragma unroll
  for (int i = threadIdx.x; i < kChunks; i += kThreads) {
    const int r = i / kChunksPerRow, c = (i % kChunksPerRow) * 8;
    const bool valid = row0 + r < seq_len;
    const T* src = valid ? gmem + static_cast<std::int64_t>(row0 + r) * D + c : gmem;
    cp_async16(smem + swz<D>(r, c), src, valid);
  }
}

template <class T, int D, bool Causal, int kM>
__global__ void __launch_bounds__(kThreads)
    flash_fwd_kernel(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                     T* __restrict__ o, float* __restrict__ lse, int seq_len, float scale_log2) {
  // kM m16 row tiles per warp: warp w owns rows w*16 + t*64 (t < kM) of the kM*64-row block, so
  // every K/V fragment read from shared memory feeds kM mma instructions.
  constexpr int kBlockRows = kM * kBlockM;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* sQ = reinterpret_cast<T*>(smem_raw);
  T* sK = sQ + kBlockRows * D;  // [2][kBlockN * D]
  T* sV = sK + 2 * kBlockN * D; // [2][kBlockN * D]

  const int num_m_blocks = gridDim.x;
  // Causal: the heaviest query blocks (last rows) are scheduled first.
  const int m_block = Causal ? num_m_blocks - 1 - static_cast<int>(blockIdx.x) : blockIdx.x;
  const std::int64_t head_off = static_cast<std::int64_t>(blockIdx.y) * seq_len * D;
  const T* qh = q + head_off;
  const T* kh = k + head_off;
  const T* vh = v + head_off;
  const int q0 = m_block * kBlockRows;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

  int num_n_blocks = (seq_len + kBlockN - 1) / kBlockN;
  if (Causal)
    num_n_blocks = min(num_n_blocks, (q0 + kBlockRows + kBlockN - 1) / kBlockN);

  load_tile<T, D, kBlockRows>(sQ, qh, q0, seq_len);
  load_tile<T, D, kBlockN>(sK, kh, 0, seq_len);
  load_tile<T, D, kBlockN>(sV, vh, 0, seq_len);
  cp_async_commit();

  float acc_o[kM][D / 8][4];
#pragma unroll
  for (int t = 0; t < kM; ++t)
#pragma unroll
    for (int i = 0; i < D / 8; ++i)
      acc_o[t][i][0] = acc_o[t][i][1] = acc_o[t][i][2] = acc_o[t][i][3] = 0.0f;
  float row_max[kM][2], row_sum[kM][2];
#pragma unroll
  for (int t = 0; t < kM; ++t) {
    row_max[t][0] = row_max[t][1] = -INFINITY;
    row_sum[t][0] = row_sum[t][1] = 0.0f;
  }

  for (int nb = 0; nb < num_n_blocks; ++nb) {
    cp_async_wait<0>();
    __syncthreads();
    if (nb + 1 < num_n_blocks) {
      const int buf = (nb + 1) & 1;
      load_tile<T, D, kBlockN>(sK + buf * kBlockN * D, kh, (nb + 1) * kBlockN, seq_len);
      load_tile<T, D, kBlockN>(sV + buf * kBlockN * D, vh, (nb + 1) * kBlockN, seq_len);
      cp_async_commit();
    }
    const T* cK = sK + (nb & 1) * kBlockN * D;
    const T* cV = sV + (nb & 1) * kBlockN * D;

    // S = Q K^T: per m-tile 16 rows x 64 keys = 8 n-tiles of m16n8.
    float s[kM][kBlockN / 8][4];
#pragma unroll
    for (int t = 0; t < kM; ++t)
#pragma unroll
      for (int i = 0; i < kBlockN / 8; ++i)
        s[t][i][0] = s[t][i][1] = s[t][i][2] = s[t][i][3] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      unsigned qa[kM][4];
#pragma unroll
      for (int t = 0; t < kM; ++t)
        ldmatrix_x4(qa[t],
                    sQ + swz<D>(t * kBlockM + warp * 16 + lane % 16, kk * 16 + (lane / 16) * 8));
#pragma unroll
      for (int p = 0; p < kBlockN / 16; ++p) {
        unsigned b[4];
        ldmatrix_x4(
            b, cK + swz<D>(p * 16 + (lane % 8) + 8 * (lane / 16), kk * 16 + ((lane / 8) % 2) * 8));
#pragma unroll
        for (int t = 0; t < kM; ++t) {
          mma_16816<T>(s[t][2 * p], qa[t], b[0], b[1]);
          mma_16816<T>(s[t][2 * p + 1], qa[t], b[2], b[3]);
        }
      }
    }

    // Online softmax in the log2 domain; mask where needed (causal diagonal, sequence tail).
    const int k0 = nb * kBlockN;
    const bool need_mask = k0 + kBlockN > seq_len || (Causal && k0 + kBlockN > q0);
    unsigned pa[kM][kBlockN / 16][4];
#pragma unroll
    for (int t = 0; t < kM; ++t) {
      const int row_base = q0 + t * kBlockM + warp * 16 + lane / 4;
      float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
      for (int nt = 0; nt < kBlockN / 8; ++nt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          float x = s[t][nt][e] * scale_log2;
          if (need_mask) {
            const int col = k0 + nt * 8 + 2 * (lane % 4) + (e & 1);
            const int row = row_base + (e >= 2 ? 8 : 0);
            if (col >= seq_len || (Causal && col > row))
              x = -INFINITY;
          }
          s[t][nt][e] = x;
          tile_max[e / 2] = fmaxf(tile_max[e / 2], x);
        }
      }
      float alpha[2], ref[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        tile_max[h] = fmaxf(tile_max[h], __shfl_xor_sync(0xffffffffu, tile_max[h], 1));
        tile_max[h] = fmaxf(tile_max[h], __shfl_xor_sync(0xffffffffu, tile_max[h], 2));
        const float new_max = fmaxf(row_max[t][h], tile_max[h]);
        ref[h] = new_max == -INFINITY ? 0.0f : new_max;
        alpha[h] = fast_exp2(row_max[t][h] - ref[h]); // exp2(-inf) = 0 on the first tile
        row_max[t][h] = new_max;
        row_sum[t][h] *= alpha[h];
      }
#pragma unroll
      for (int nt = 0; nt < kBlockN / 8; ++nt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float p = fast_exp2(s[t][nt][e] - ref[e / 2]);
          s[t][nt][e] = p;
          row_sum[t][e / 2] += p;
        }
      }
#pragma unroll
      for (int dt = 0; dt < D / 8; ++dt) {
        acc_o[t][dt][0] *= alpha[0];
        acc_o[t][dt][1] *= alpha[0];
        acc_o[t][dt][2] *= alpha[1];
        acc_o[t][dt][3] *= alpha[1];
      }
      // P's m16n8 accumulators re-packed as m16k16 A fragments.
#pragma unroll
      for (int kk = 0; kk < kBlockN / 16; ++kk) {
        pa[t][kk][0] = pack2<T>(s[t][2 * kk][0], s[t][2 * kk][1]);
        pa[t][kk][1] = pack2<T>(s[t][2 * kk][2], s[t][2 * kk][3]);
        pa[t][kk][2] = pack2<T>(s[t][2 * kk + 1][0], s[t][2 * kk + 1][1]);
        pa[t][kk][3] = pack2<T>(s[t][2 * kk + 1][2], s[t][2 * kk + 1][3]);
      }
    }

    // O += P V.
#pragma unroll
    for (int kk = 0; kk < kBlockN / 16; ++kk) {
#pragma unroll
      for (int dp = 0; dp < D / 16; ++dp) {
        unsigned b[4];
        ldmatrix_x4_trans(
            b, cV + swz<D>(kk * 16 + (lane % 8) + 8 * ((lane / 8) % 2), dp * 16 + (lane / 16) * 8));
#pragma unroll
        for (int t = 0; t < kM; ++t) {
          mma_16816<T>(acc_o[t][2 * dp], pa[t][kk], b[0], b[1]);
          mma_16816<T>(acc_o[t][2 * dp + 1], pa[t][kk], b[2], b[3]);
        }
      }
    }
  }

  // Finish: full row sums across the quad, normalise, store O and lse.
  T* oh = o + head_off;
#pragma unroll
  for (int t = 0; t < kM; ++t) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float sum = row_sum[t][h];
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2);
      const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
      const int row = q0 + t * kBlockM + warp * 16 + lane / 4 + h * 8;
      if (row < seq_len) {
#pragma unroll
        for (int dt = 0; dt < D / 8; ++dt) {
          const int col = dt * 8 + 2 * (lane % 4);
          *reinterpret_cast<unsigned*>(oh + static_cast<std::int64_t>(row) * D + col) =
              pack2<T>(acc_o[t][dt][2 * h] * inv, acc_o[t][dt][2 * h + 1] * inv);
        }
        if (lane % 4 == 0 && lse != nullptr) {
          const float l2 = row_max[t][h] + log2f(sum);
          lse[static_cast<std::int64_t>(blockIdx.y) * seq_len + row] = l2 * 0.6931471805599453f;
        }
      }
    }
  }
}

template <class T, int D, bool Causal>
void launch_typed(const AttentionArgs& a, float scale, cudaStream_t stream) {
  // Two 64-row tiles per block (128 query rows) unless the caller asks for 64.
  const bool two = a.block_m != 64;
  const int rows = two ? 2 * kBlockM : kBlockM;
  const int smem = (rows + 4 * kBlockN) * D * static_cast<int>(sizeof(T));
  auto kernel = two ? flash_fwd_kernel<T, D, Causal, 2> : flash_fwd_kernel<T, D, Causal, 1>;
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  const dim3 grid(static_cast<unsigned>((a.seq_len + rows - 1) / rows),
                  static_cast<unsigned>(a.batch * a.heads));
  kernel<<<grid, kThreads, smem, stream>>>(
      static_cast<const T*>(a.q), static_cast<const T*>(a.k), static_cast<const T*>(a.v),
      static_cast<T*>(a.o), a.lse, static_cast<int>(a.seq_len), scale * 1.4426950408889634f);
  CUDA_CHECK_LAUNCH();
}

} // namespace

void launch_flash_attention(const AttentionArgs& a, cudaStream_t stream) {
  const float scale =
      a.softmax_scale > 0 ? a.softmax_scale : 1.0f / std::sqrt(static_cast<float>(a.head_dim));
  dispatch_flash(
      a.dtype, a.head_dim, a.causal, "flash attention", [&](auto tag, auto d, auto causal) {
        if (a.batch * a.heads <= 0 || a.seq_len <= 0)
          return;
        launch_typed<decltype(tag), decltype(d)::value, decltype(causal)::value>(a, scale, stream);
      });
}

} // namespace trainsim::kern
