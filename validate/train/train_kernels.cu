// Training-step kernels (see train_kernels.cuh). Simple grid-stride or block-per-row kernels:
// all are memory-bound and small next to the GEMMs and attention.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <cuda_bf16.h>
#include <initializer_list>
#include <limits>

#include "kernels/check.hpp"
#include "kernels/dtype_cuda.cuh"
#include "validate/train/train_kernels.cuh"

namespace trainsim::val::train {
namespace {

using kern::from_float;
using kern::to_float;
using Index = std::int64_t;

constexpr int kThreads = 256;

unsigned blocks_for(Index n) {
  const Index b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 65535 * 16 ? (b > 0 ? b : 1) : 65535 * 16);
}

#define GRID_STRIDE(i, n)                                                                          \
  for (Index i = blockIdx.x * static_cast<Index>(blockDim.x) + threadIdx.x; i < (n);               \
       i += static_cast<Index>(gridDim.x) * blockDim.x)

template <class T>
__global__ void embedding_kernel(const std::int32_t* tok, const T* table, T* out, Index rows,
                                 Index cols) {
  GRID_STRIDE(i, rows * cols) {
    const Index r = i / cols, c = i % cols;
    out[i] = table[static_cast<Index>(tok[r]) * cols + c];
  }
}

template <class T>
__global__ void embedding_backward_kernel(const std::int32_t* tok, const T* dout, float* dtable,
                                          Index rows, Index cols) {
  GRID_STRIDE(i, rows * cols) {
    const Index r = i / cols, c = i % cols;
    atomicAdd(dtable + static_cast<Index>(tok[r]) * cols + c, to_float(dout[i]));
  }
}

template <class T> __global__ void cast_kernel(const float* src, T* dst, Index n, bool acc) {
  GRID_STRIDE(i, n) { dst[i] = from_float<T>(acc ? to_float(dst[i]) + src[i] : src[i]); }
}

__global__ void fill_kernel(float* out, Index n, float value) {
  GRID_STRIDE(i, n) { out[i] = value; }
}

// One thread per rotation pair (or v pair): i over [batch, seq, 3, heads, head_dim / 2].
template <class T, bool kBackward>
__global__ void rope_kernel(const T* qkv_in, T* q, T* k, T* v, T* qkv_out, Index batch, Index seq,
                            Index heads, Index d, float log2_theta) {
  const Index half = d / 2;
  GRID_STRIDE(i, batch * seq * 3 * heads * half) {
    const Index p = i % half;
    const Index h = (i / half) % heads;
    const Index which = (i / (half * heads)) % 3;
    const Index t = (i / (half * heads * 3)) % seq;
    const Index b = i / (half * heads * 3 * seq);
    const Index fused = ((b * seq + t) * 3 + which) * heads * d + h * d + 2 * p;
    const Index split = ((b * heads + h) * seq + t) * d + 2 * p;
    T* dst = which == 0 ? q : which == 1 ? k : v;
    float x0, x1;
    if (kBackward) {
      x0 = to_float(dst[split]);
      x1 = to_float(dst[split + 1]);
    } else {
      x0 = to_float(qkv_in[fused]);
      x1 = to_float(qkv_in[fused + 1]);
    }
    float y0 = x0, y1 = x1;
    if (which < 2) {
      const float freq = exp2f(-2.0f * static_cast<float>(p) / static_cast<float>(d) * log2_theta);
      float s, c;
      sincosf(static_cast<float>(t) * freq, &s, &c);
      if (kBackward)
        s = -s;
      y0 = x0 * c - x1 * s;
      y1 = x0 * s + x1 * c;
    }
    if (kBackward) {
      qkv_out[fused] = from_float<T>(y0);
      qkv_out[fused + 1] = from_float<T>(y1);
    } else {
      dst[split] = from_float<T>(y0);
      dst[split + 1] = from_float<T>(y1);
    }
  }
}

template <class T>
__global__ void permute_kernel(const T* in, T* out, Index batch, Index seq, Index heads, Index d,
                               bool to_tokens) {
  GRID_STRIDE(i, batch * seq * heads * d) { // i over [b, h, t, d]
    const Index e = i % d, t = (i / d) % seq, h = (i / (d * seq)) % heads,
                b = i / (d * seq * heads);
    const Index tok = ((b * seq + t) * heads + h) * d + e;
    if (to_tokens)
      out[tok] = in[i];
    else
      out[i] = in[tok];
  }
}

__device__ __forceinline__ float sigmoidf(float x) { return 1.0f / (1.0f + __expf(-x)); }

template <class T> __global__ void swiglu_kernel(const T* ab, T* g, Index rows, Index f) {
  GRID_STRIDE(i, rows * f) {
    const Index r = i / f, e = i % f;
    const float a = to_float(ab[r * 2 * f + e]), b = to_float(ab[r * 2 * f + f + e]);
    g[i] = from_float<T>(a * sigmoidf(a) * b);
  }
}

template <class T>
__global__ void swiglu_backward_kernel(const T* ab, const T* dg, T* dab, Index rows, Index f) {
  GRID_STRIDE(i, rows * f) {
    const Index r = i / f, e = i % f;
    const float a = to_float(ab[r * 2 * f + e]), b = to_float(ab[r * 2 * f + f + e]);
    const float s = sigmoidf(a), go = to_float(dg[i]);
    dab[r * 2 * f + e] = from_float<T>(go * b * s * (1.0f + a * (1.0f - s)));
    dab[r * 2 * f + f + e] = from_float<T>(go * a * s);
  }
}

template <bool kMax> __device__ float block_reduce(float x, float* sh) {
  for (int o = 16; o > 0; o /= 2) {
    const float y = __shfl_xor_sync(0xffffffffu, x, o);
    x = kMax ? fmaxf(x, y) : x + y;
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();
  if (lane == 0)
    sh[warp] = x;
  __syncthreads();
  const int nw = blockDim.x / 32;
  x = lane < nw ? sh[lane] : (kMax ? -INFINITY : 0.0f);
  for (int o = 16; o > 0; o /= 2) {
    const float y = __shfl_xor_sync(0xffffffffu, x, o);
    x = kMax ? fmaxf(x, y) : x + y;
  }
  return x;
}

template <class T>
__global__ void cross_entropy_kernel(T* logits, const std::int32_t* targets, float* losses,
                                     Index vocab, float grad_scale) {
  __shared__ float sh[32];
  const Index row = blockIdx.x;
  T* x = logits + row * vocab;
  float m = -INFINITY;
  for (Index c = threadIdx.x; c < vocab; c += blockDim.x)
    m = fmaxf(m, to_float(x[c]));
  m = block_reduce<true>(m, sh);
  float s = 0.0f;
  for (Index c = threadIdx.x; c < vocab; c += blockDim.x)
    s += expf(to_float(x[c]) - m);
  s = block_reduce<false>(s, sh);
  const float lse = m + logf(s);
  const Index target = targets[row];
  if (threadIdx.x == 0)
    losses[row] = lse - to_float(x[target]);
  __syncthreads(); // the loss read x[target] before it is overwritten
  for (Index c = threadIdx.x; c < vocab; c += blockDim.x) {
    const float p = expf(to_float(x[c]) - lse);
    x[c] = from_float<T>((p - (c == target ? 1.0f : 0.0f)) * grad_scale);
  }
}

template <class T> __global__ void adamw_kernel(AdamWArgs a) {
  const T* grad = static_cast<const T*>(a.grad);
  T* weight = static_cast<T*>(a.weight);
  GRID_STRIDE(i, a.n) {
    const float g = to_float(grad[i]);
    const float m = a.beta1 * a.m[i] + (1.0f - a.beta1) * g;
    const float v = a.beta2 * a.v[i] + (1.0f - a.beta2) * g * g;
    a.m[i] = m;
    a.v[i] = v;
    float p = a.master[i];
    p -= a.lr * a.weight_decay * p;
    p -= a.lr * (m / a.bias_correction1) / (sqrtf(v / a.bias_correction2) + a.eps);
    a.master[i] = p;
    if (weight != nullptr)
      weight[i] = from_float<T>(p);
  }
}

// ---- 16-byte vectorised variants (V = 16 / sizeof(T) elements per access) ----
// The scalar kernels above decompose a 64-bit flat index per element (five 64-bit divisions per
// element in rope); the variants below do one 32-bit decomposition per 16-byte vector and issue
// 16-byte loads and stores. The launchers use them when the shapes divide into vectors, the
// pointers are 16-byte aligned and the index fits in 32 bits; otherwise the scalar kernels run.

template <class T> struct Vec16 {
  static constexpr int V = 16 / sizeof(T);
  T e[V];
};
template <class T> __device__ __forceinline__ Vec16<T> ld16(const T* p) {
  const uint4 u = *reinterpret_cast<const uint4*>(p);
  Vec16<T> r;
  static_assert(sizeof(r) == sizeof(u));
  memcpy(&r, &u, sizeof u);
  return r;
}
template <class T> __device__ __forceinline__ void st16(T* p, const Vec16<T>& v) {
  uint4 u;
  memcpy(&u, &v, sizeof u);
  *reinterpret_cast<uint4*>(p) = u;
}

#define GRID_STRIDE32(i, n)                                                                        \
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += gridDim.x * blockDim.x)

// i over [b, t, which, h, vec] vectors of the fused layout (consecutive threads: consecutive
// 16 bytes of the fused row; each vector lands in one contiguous 16 bytes of q, k or v).
template <class T, bool kBackward>
__global__ void rope_vec_kernel(const T* qkv_in, T* q, T* k, T* v, T* qkv_out, unsigned seq,
                                unsigned heads, unsigned d, unsigned total, float log2_theta) {
  constexpr int V = Vec16<T>::V;
  const unsigned vpr = d / V;
  GRID_STRIDE32(i, total) {
    const unsigned vec = i % vpr;
    unsigned r = i / vpr;
    const unsigned h = r % heads;
    r /= heads;
    const unsigned which = r % 3;
    r /= 3;
    const unsigned t = r % seq, b = r / seq;
    const std::size_t fused =
        (static_cast<std::size_t>(b * seq + t) * 3 + which) * heads * d + h * d + vec * V;
    const std::size_t split = (static_cast<std::size_t>(b * heads + h) * seq + t) * d + vec * V;
    T* part = which == 0 ? q : which == 1 ? k : v;
    Vec16<T> x = kBackward ? ld16(part + split) : ld16(qkv_in + fused);
    if (which < 2) {
#pragma unroll
      for (int j = 0; j < V / 2; ++j) {
        const unsigned p = vec * (V / 2) + j;
        const float freq =
            exp2f(-2.0f * static_cast<float>(p) / static_cast<float>(d) * log2_theta);
        float sn, cs;
        sincosf(static_cast<float>(t) * freq, &sn, &cs);
        if (kBackward)
          sn = -sn;
        const float x0 = to_float(x.e[2 * j]), x1 = to_float(x.e[2 * j + 1]);
        x.e[2 * j] = from_float<T>(x0 * cs - x1 * sn);
        x.e[2 * j + 1] = from_float<T>(x0 * sn + x1 * cs);
      }
    }
    st16(kBackward ? qkv_out + fused : part + split, x);
  }
}

// i over [b, h, t, vec]: one 16-byte vector of a head row, contiguous in both layouts.
template <class T>
__global__ void permute_vec_kernel(const T* in, T* out, unsigned seq, unsigned heads, unsigned d,
                                   unsigned total, bool to_tokens) {
  constexpr int V = Vec16<T>::V;
  const unsigned vpr = d / V;
  GRID_STRIDE32(i, total) {
    const unsigned vec = i % vpr;
    unsigned r = i / vpr;
    const unsigned t = r % seq;
    r /= seq;
    const unsigned h = r % heads, b = r / heads;
    const std::size_t heads_major = static_cast<std::size_t>(i) * V;
    const std::size_t tokens_major =
        (static_cast<std::size_t>(b * seq + t) * heads + h) * d + vec * V;
    if (to_tokens)
      st16(out + tokens_major, ld16(in + heads_major));
    else
      st16(out + heads_major, ld16(in + tokens_major));
  }
}

template <class T>
__global__ void swiglu_vec_kernel(const T* ab, T* g, unsigned f, unsigned total) {
  constexpr int V = Vec16<T>::V;
  const unsigned fv = f / V;
  GRID_STRIDE32(i, total) {
    const unsigned r = i / fv, e = (i % fv) * V;
    const std::size_t row = static_cast<std::size_t>(r) * 2 * f;
    const Vec16<T> a = ld16(ab + row + e), b = ld16(ab + row + f + e);
    Vec16<T> out;
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const float x = to_float(a.e[j]);
      out.e[j] = from_float<T>(x * sigmoidf(x) * to_float(b.e[j]));
    }
    st16(g + static_cast<std::size_t>(i) * V, out);
  }
}

template <class T>
__global__ void swiglu_backward_vec_kernel(const T* ab, const T* dg, T* dab, unsigned f,
                                           unsigned total) {
  constexpr int V = Vec16<T>::V;
  const unsigned fv = f / V;
  GRID_STRIDE32(i, total) {
    const unsigned r = i / fv, e = (i % fv) * V;
    const std::size_t row = static_cast<std::size_t>(r) * 2 * f;
    const Vec16<T> a = ld16(ab + row + e), b = ld16(ab + row + f + e),
                   go = ld16(dg + static_cast<std::size_t>(i) * V);
    Vec16<T> da, db;
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const float x = to_float(a.e[j]), y = to_float(b.e[j]), gj = to_float(go.e[j]);
      const float sg = sigmoidf(x);
      da.e[j] = from_float<T>(gj * y * sg * (1.0f + x * (1.0f - sg)));
      db.e[j] = from_float<T>(gj * x * sg);
    }
    st16(dab + row + e, da);
    st16(dab + row + f + e, db);
  }
}

/// AdamW on 4 parameters per thread: float4 master/m/v, 4 gradient (and weight) elements.
template <class T> __global__ void adamw_vec4_kernel(AdamWArgs a, unsigned n4) {
  struct alignas(4 * sizeof(T)) T4 {
    T x[4];
  };
  const T4* grad = static_cast<const T4*>(a.grad);
  T4* weight = static_cast<T4*>(a.weight);
  float4* master = reinterpret_cast<float4*>(a.master);
  float4* mom = reinterpret_cast<float4*>(a.m);
  float4* var = reinterpret_cast<float4*>(a.v);
  GRID_STRIDE32(i, n4) {
    const T4 g4 = grad[i];
    float4 m4 = mom[i], v4 = var[i], p4 = master[i];
    float* m = &m4.x;
    float* v = &v4.x;
    float* p = &p4.x;
    T4 w4;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float g = to_float(g4.x[j]);
      m[j] = a.beta1 * m[j] + (1.0f - a.beta1) * g;
      v[j] = a.beta2 * v[j] + (1.0f - a.beta2) * g * g;
      p[j] -= a.lr * a.weight_decay * p[j];
      p[j] -= a.lr * (m[j] / a.bias_correction1) / (sqrtf(v[j] / a.bias_correction2) + a.eps);
      w4.x[j] = from_float<T>(p[j]);
    }
    mom[i] = m4;
    var[i] = v4;
    master[i] = p4;
    if (weight != nullptr)
      weight[i] = w4;
  }
}

/// Grid for a 32-bit grid-stride loop over n items.
unsigned blocks32(std::uint64_t n) {
  const std::uint64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(std::min<std::uint64_t>(std::max<std::uint64_t>(b, 1), 65535 * 16));
}
bool vec_ok(std::int64_t items, std::initializer_list<const void*> ptrs, std::size_t align = 16) {
  if (items <= 0 || items > static_cast<std::int64_t>(std::numeric_limits<unsigned>::max() / 2))
    return false;
  for (const void* p : ptrs)
    if (p != nullptr && reinterpret_cast<std::uintptr_t>(p) % align != 0)
      return false;
  return true;
}

} // namespace

void launch_embedding(const EmbeddingArgs& a, cudaStream_t stream) {
  kern::dispatch_float_dtype(a.dtype, "embedding", [&](auto tag) {
    using T = decltype(tag);
    embedding_kernel<T><<<blocks_for(a.rows * a.cols), kThreads, 0, stream>>>(
        a.tokens, static_cast<const T*>(a.table), static_cast<T*>(a.out), a.rows, a.cols);
  });
  CUDA_CHECK_LAUNCH();
}

void launch_embedding_backward(const EmbeddingBackwardArgs& a, cudaStream_t stream) {
  kern::dispatch_float_dtype(a.dtype, "embedding backward", [&](auto tag) {
    using T = decltype(tag);
    embedding_backward_kernel<T><<<blocks_for(a.rows * a.cols), kThreads, 0, stream>>>(
        a.tokens, static_cast<const T*>(a.dout), a.dtable, a.rows, a.cols);
  });
  CUDA_CHECK_LAUNCH();
}

void launch_cast(const CastArgs& a, cudaStream_t stream) {
  kern::dispatch_float_dtype(a.dtype, "cast", [&](auto tag) {
    using T = decltype(tag);
    cast_kernel<T><<<blocks_for(a.n), kThreads, 0, stream>>>(a.src, static_cast<T*>(a.dst), a.n,
                                                             a.accumulate);
  });
  CUDA_CHECK_LAUNCH();
}

void launch_fill(const FillArgs& a, cudaStream_t stream) {
  fill_kernel<<<blocks_for(a.n), kThreads, 0, stream>>>(a.out, a.n, a.value);
  CUDA_CHECK_LAUNCH();
}

namespace {

/// Forward (split + rotate) or backward (rotate back + fuse) of RoPE: the vectorised kernel when
/// the head dimension divides into 16-byte vectors and the pointers allow it, else the scalar one.
template <bool kBackward>
void launch_rope(Dtype dtype, const void* qkv_in, const void* q, const void* k, const void* v,
                 void* qkv_out, std::int64_t batch, std::int64_t seq, std::int64_t heads,
                 std::int64_t d, float theta, cudaStream_t stream) {
  kern::dispatch_float_dtype(dtype, kBackward ? "rope backward" : "rope", [&](auto tag) {
    using T = decltype(tag);
    // The backward reads dq/dk/dv through the (non-const) split pointers; it never writes them.
    T* tq = const_cast<T*>(static_cast<const T*>(q));
    T* tk = const_cast<T*>(static_cast<const T*>(k));
    T* tv = const_cast<T*>(static_cast<const T*>(v));
    const T* in = static_cast<const T*>(qkv_in);
    T* out = static_cast<T*>(qkv_out);
    constexpr int V = Vec16<T>::V;
    const std::int64_t vecs = batch * seq * 3 * heads * d / V;
    if (d % V == 0 && vec_ok(vecs, {qkv_in, q, k, v, qkv_out})) {
      rope_vec_kernel<T, kBackward><<<blocks32(vecs), kThreads, 0, stream>>>(
          in, tq, tk, tv, out, static_cast<unsigned>(seq), static_cast<unsigned>(heads),
          static_cast<unsigned>(d), static_cast<unsigned>(vecs), log2f(theta));
      return;
    }
    rope_kernel<T, kBackward><<<blocks_for(batch * seq * 3 * heads * d / 2), kThreads, 0, stream>>>(
        in, tq, tk, tv, out, batch, seq, heads, d, log2f(theta));
  });
  CUDA_CHECK_LAUNCH();
}

} // namespace

void launch_rope_split(const RopeArgs& a, cudaStream_t stream) {
  launch_rope<false>(a.dtype, a.qkv, a.q, a.k, a.v, nullptr, a.batch, a.seq_len, a.heads,
                     a.head_dim, a.theta, stream);
}

void launch_rope_split_backward(const RopeBackwardArgs& a, cudaStream_t stream) {
  launch_rope<true>(a.dtype, nullptr, a.dq, a.dk, a.dv, a.dqkv, a.batch, a.seq_len, a.heads,
                    a.head_dim, a.theta, stream);
}

void launch_permute(const PermuteArgs& a, cudaStream_t stream) {
  kern::dispatch_float_dtype(a.dtype, "permute", [&](auto tag) {
    using T = decltype(tag);
    constexpr int V = Vec16<T>::V;
    const std::int64_t vecs = a.batch * a.seq_len * a.heads * a.head_dim / V;
    if (a.head_dim % V == 0 && vec_ok(vecs, {a.in, a.out})) {
      permute_vec_kernel<T><<<blocks32(vecs), kThreads, 0, stream>>>(
          static_cast<const T*>(a.in), static_cast<T*>(a.out), static_cast<unsigned>(a.seq_len),
          static_cast<unsigned>(a.heads), static_cast<unsigned>(a.head_dim),
          static_cast<unsigned>(vecs), a.to_tokens);
      return;
    }
    permute_kernel<T>
        <<<blocks_for(a.batch * a.seq_len * a.heads * a.head_dim), kThreads, 0, stream>>>(
            static_cast<const T*>(a.in), static_cast<T*>(a.out), a.batch, a.seq_len, a.heads,
            a.head_dim, a.to_tokens);
  });
  CUDA_CHECK_LAUNCH();
}

void launch_swiglu(const SwigluArgs& a, cudaStream_t stream) {
  kern::dispatch_float_dtype(a.dtype, "swiglu", [&](auto tag) {
    using T = decltype(tag);
    constexpr int V = Vec16<T>::V;
    const std::int64_t vecs = a.rows * a.ffn / V;
    if (a.ffn % V == 0 && vec_ok(vecs, {a.ab, a.g})) {
      swiglu_vec_kernel<T><<<blocks32(vecs), kThreads, 0, stream>>>(
          static_cast<const T*>(a.ab), static_cast<T*>(a.g), static_cast<unsigned>(a.ffn),
          static_cast<unsigned>(vecs));
      return;
    }
    swiglu_kernel<T><<<blocks_for(a.rows * a.ffn), kThreads, 0, stream>>>(
        static_cast<const T*>(a.ab), static_cast<T*>(a.g), a.rows, a.ffn);
  });
  CUDA_CHECK_LAUNCH();
}

void launch_swiglu_backward(const SwigluBackwardArgs& a, cudaStream_t stream) {
  kern::dispatch_float_dtype(a.dtype, "swiglu backward", [&](auto tag) {
    using T = decltype(tag);
    constexpr int V = Vec16<T>::V;
    const std::int64_t vecs = a.rows * a.ffn / V;
    if (a.ffn % V == 0 && vec_ok(vecs, {a.ab, a.dg, a.dab})) {
      swiglu_backward_vec_kernel<T><<<blocks32(vecs), kThreads, 0, stream>>>(
          static_cast<const T*>(a.ab), static_cast<const T*>(a.dg), static_cast<T*>(a.dab),
          static_cast<unsigned>(a.ffn), static_cast<unsigned>(vecs));
      return;
    }
    swiglu_backward_kernel<T><<<blocks_for(a.rows * a.ffn), kThreads, 0, stream>>>(
        static_cast<const T*>(a.ab), static_cast<const T*>(a.dg), static_cast<T*>(a.dab), a.rows,
        a.ffn);
  });
  CUDA_CHECK_LAUNCH();
}

void launch_cross_entropy(const CrossEntropyArgs& a, cudaStream_t stream) {
  if (a.rows <= 0)
    return;
  kern::dispatch_float_dtype(a.dtype, "cross-entropy", [&](auto tag) {
    using T = decltype(tag);
    cross_entropy_kernel<T><<<static_cast<unsigned>(a.rows), 512, 0, stream>>>(
        static_cast<T*>(a.logits), a.targets, a.losses, a.vocab, a.grad_scale);
  });
  CUDA_CHECK_LAUNCH();
}

void launch_adamw(const AdamWArgs& a, cudaStream_t stream) {
  kern::dispatch_float_dtype(a.dtype, "adamw", [&](auto tag) {
    using T = decltype(tag);
    if (a.n % 4 == 0 && vec_ok(a.n / 4, {a.master, a.m, a.v}) &&
        vec_ok(a.n / 4, {a.grad, a.weight}, 4 * sizeof(T))) {
      adamw_vec4_kernel<T>
          <<<blocks32(a.n / 4), kThreads, 0, stream>>>(a, static_cast<unsigned>(a.n / 4));
      return;
    }
    adamw_kernel<T><<<blocks_for(a.n), kThreads, 0, stream>>>(a);
  });
  CUDA_CHECK_LAUNCH();
}

} // namespace trainsim::val::train
