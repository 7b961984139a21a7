// Kernels the training step needs that kernels/ does not have: embedding gather and
// scatter-add, RoPE on the fused QKV projection (with the [batch, heads, seq, head_dim]
// split), head/token permutes, SwiGLU, fused cross-entropy forward+backward, AdamW, and the
// fp32 <-> storage casts and accumulations. Storage dtype fp32 or bf16; math in fp32.
#pragma once

#include <cstdint>
#include <cuda_runtime.h>

#include "common/dtype.hpp"

namespace trainsim::val::train {

struct EmbeddingArgs {
  Dtype dtype = Dtype::bf16;
  const std::int32_t* tokens = nullptr; // [rows]
  const void* table = nullptr;          // [vocab, cols]
  void* out = nullptr;                  // [rows, cols]
  std::int64_t rows = 0, cols = 0;
};
/// out[r, :] = table[tokens[r], :].
void launch_embedding(const EmbeddingArgs& a, cudaStream_t stream);

struct EmbeddingBackwardArgs {
  Dtype dtype = Dtype::bf16;
  const std::int32_t* tokens = nullptr; // [rows]
  const void* dout = nullptr;           // [rows, cols]
  float* dtable = nullptr;              // [vocab, cols] fp32, accumulated (atomics)
  std::int64_t rows = 0, cols = 0;
};
/// dtable[tokens[r], :] += dout[r, :].
void launch_embedding_backward(const EmbeddingBackwardArgs& a, cudaStream_t stream);

struct CastArgs {
  Dtype dtype = Dtype::bf16;  // dst storage dtype
  const float* src = nullptr; // [n]
  void* dst = nullptr;        // [n]
  std::int64_t n = 0;
  bool accumulate = false; // dst += src instead of dst = src
};
void launch_cast(const CastArgs& a, cudaStream_t stream);

struct FillArgs {
  float* out = nullptr; // [n]
  std::int64_t n = 0;
  float value = 0.0f;
};
void launch_fill(const FillArgs& a, cudaStream_t stream);

struct RopeArgs {
  Dtype dtype = Dtype::bf16;
  const void* qkv = nullptr; // [batch, seq, 3, heads, head_dim] (fused projection output)
  void* q = nullptr;         // [batch, heads, seq, head_dim], rotated
  void* k = nullptr;         // [batch, heads, seq, head_dim], rotated
  void* v = nullptr;         // [batch, heads, seq, head_dim]
  std::int64_t batch = 0, seq_len = 0, heads = 0, head_dim = 0;
  float theta = 10000.0f;
};
/// Splits the fused QKV and rotates pairs (2i, 2i+1) of q and k by t * theta^(-2i/D).
void launch_rope_split(const RopeArgs& a, cudaStream_t stream);

struct RopeBackwardArgs {
  Dtype dtype = Dtype::bf16;
  const void *dq = nullptr, *dk = nullptr, *dv = nullptr; // [batch, heads, seq, head_dim]
  void* dqkv = nullptr;                                   // [batch, seq, 3, heads, head_dim]
  std::int64_t batch = 0, seq_len = 0, heads = 0, head_dim = 0;
  float theta = 10000.0f;
};
/// The transpose of launch_rope_split: rotates dq, dk back by -angle and fuses.
void launch_rope_split_backward(const RopeBackwardArgs& a, cudaStream_t stream);

struct PermuteArgs {
  Dtype dtype = Dtype::bf16;
  const void* in = nullptr;
  void* out = nullptr;
  std::int64_t batch = 0, seq_len = 0, heads = 0, head_dim = 0;
  bool to_tokens = true; // [b, h, t, d] -> [b, t, h, d]; false: the reverse
};
void launch_permute(const PermuteArgs& a, cudaStream_t stream);

struct SwigluArgs {
  Dtype dtype = Dtype::bf16;
  const void* ab = nullptr; // [rows, 2 ffn]: gate a = x W1^T | up b = x W3^T
  void* g = nullptr;        // [rows, ffn] silu(a) * b
  std::int64_t rows = 0, ffn = 0;
};
void launch_swiglu(const SwigluArgs& a, cudaStream_t stream);

struct SwigluBackwardArgs {
  Dtype dtype = Dtype::bf16;
  const void* ab = nullptr; // [rows, 2 ffn]
  const void* dg = nullptr; // [rows, ffn]
  void* dab = nullptr;      // [rows, 2 ffn]
  std::int64_t rows = 0, ffn = 0;
};
void launch_swiglu_backward(const SwigluBackwardArgs& a, cudaStream_t stream);

struct CrossEntropyArgs {
  Dtype dtype = Dtype::bf16;
  void* logits = nullptr;                // [rows, vocab]; overwritten with dlogits
  const std::int32_t* targets = nullptr; // [rows]
  float* losses = nullptr;               // [rows] lse - logit[target], fp32
  std::int64_t rows = 0, vocab = 0;
  float grad_scale = 1.0f; // dlogits = (softmax - onehot) * grad_scale
};
/// Fused forward and backward in fp32, one block per row.
void launch_cross_entropy(const CrossEntropyArgs& a, cudaStream_t stream);

struct AdamWArgs {
  Dtype dtype = Dtype::bf16;        // storage of grad and of the compute weight copy
  float* master = nullptr;          // [n] fp32 parameters, updated
  const void* grad = nullptr;       // [n]
  float *m = nullptr, *v = nullptr; // [n] fp32 moments
  void* weight = nullptr;           // [n] compute copy written from master (null: none)
  std::int64_t n = 0;
  float lr = 1e-3f, beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f, weight_decay = 0.0f;
  float bias_correction1 = 1.0f, bias_correction2 = 1.0f; // 1 - beta^t
};
/// p -= lr wd p; p -= lr (m / bc1) / (sqrt(v / bc2) + eps) (PyTorch AdamW order).
void launch_adamw(const AdamWArgs& a, cudaStream_t stream);

} // namespace trainsim::val::train
