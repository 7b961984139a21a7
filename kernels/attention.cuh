// Scaled dot-product attention over [batch, heads, seq_len, head_dim] tensors (fp16/bf16):
// our FlashAttention-2 forward (mma.sync m16n8k16 + ldmatrix + cp.async double buffering) and
// backward (tensor cores through WMMA, recomputing P tile by tile; Dao 2023, Alg. 1 and 2), and
// a naive version (cuBLAS GEMM, our softmax, GEMM) that materialises the [seq, seq] scores.
#pragma once

#include <cstdint>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "common/dtype.hpp"

namespace trainsim::kern {

struct AttentionArgs {
  Dtype dtype = Dtype::bf16; // fp16 or bf16
  const void* q = nullptr;   // [batch, heads, seq_len, head_dim]
  const void* k = nullptr;   // [batch, heads, seq_len, head_dim]
  const void* v = nullptr;   // [batch, heads, seq_len, head_dim]
  void* o = nullptr;         // [batch, heads, seq_len, head_dim]
  float* lse = nullptr;      // [batch, heads, seq_len] natural-log logsumexp of scaled scores
  std::int64_t batch = 0, heads = 0, seq_len = 0, head_dim = 0; // head_dim 64 or 128 (flash)
  bool causal = false;        // key j attends to query i only when j <= i
  float softmax_scale = 0.0f; // 0 = 1 / sqrt(head_dim)
  int block_m = 128;          // flash: query rows per block, 128 (two m-tiles per warp) or 64
  // naive only:
  cublasHandle_t cublas = nullptr;
  void* scores = nullptr; // [batch, heads, seq_len, seq_len] scratch in dtype
};

struct AttentionBackwardArgs {
  Dtype dtype = Dtype::bf16;
  const void* q = nullptr;    // [batch, heads, seq_len, head_dim]
  const void* k = nullptr;    // [batch, heads, seq_len, head_dim]
  const void* v = nullptr;    // [batch, heads, seq_len, head_dim]
  const void* o = nullptr;    // [batch, heads, seq_len, head_dim] forward output
  const void* dout = nullptr; // [batch, heads, seq_len, head_dim]
  const float* lse = nullptr; // [batch, heads, seq_len] from the forward
  void* dq = nullptr;         // [batch, heads, seq_len, head_dim]
  void* dk = nullptr;         // [batch, heads, seq_len, head_dim]
  void* dv = nullptr;         // [batch, heads, seq_len, head_dim]
  float* dq_accum = nullptr;  // [batch, heads, seq_len, head_dim] fp32 workspace
  float* delta = nullptr;     // [batch, heads, seq_len] fp32 workspace: rowsum(dout * o)
  std::int64_t batch = 0, heads = 0, seq_len = 0, head_dim = 0;
  bool causal = false;
  float softmax_scale = 0.0f; // 0 = 1 / sqrt(head_dim)
};

/// O = softmax(scale * Q K^T [+ causal mask]) V, and lse per query row. No allocation.
void launch_flash_attention(const AttentionArgs& args, cudaStream_t stream);
/// dQ, dK, dV from dO, recomputing P from Q, K and lse. Uses only the given workspaces.
void launch_flash_attention_backward(const AttentionBackwardArgs& args, cudaStream_t stream);
/// O through S = scale Q K^T (cuBLAS strided batched), row softmax, O = P V; lse not written.
void launch_naive_attention(const AttentionArgs& args, cudaStream_t stream);

} // namespace trainsim::kern
