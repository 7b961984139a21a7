// The CUDA training step: one Rank per GPU (one host thread each) holds the flat parameter,
// gradient and optimizer buffers, runs forward / backward / AdamW with kernels/ (cuBLAS GEMMs,
// RMSNorm, softmax, FlashAttention-2) and train_kernels.cuh, and synchronises gradients over
// NCCL (naive, flat, overlapped, bucketed; ZeRO-1 reduce-scatter + all-gather). Shapes follow
// reference.cpp exactly; N = batch * seq tokens, activations [N, hidden] row-major.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <exception>
#include <string_view>
#include <thread>
#include <unordered_map>

#include "common/errors.hpp"
#include "kernels/attention.cuh"
#include "kernels/check.hpp"
#include "kernels/device.hpp"
#include "kernels/elementwise.cuh"
#include "kernels/rmsnorm.cuh"
#include "kernels/softmax.cuh"
#include "validate/train/allocator.hpp"
#include "validate/train/train.hpp"
#include "validate/train/train_kernels.cuh"

#ifdef TRAINSIM_HAVE_NCCL
#include "validate/nccl_check.hpp"
#include <nccl.h>
#endif

namespace trainsim::val::train {
namespace {

using Index = std::int64_t;
using PL = ParamLayout;

float bf16_to_float(std::uint16_t bits) {
  const std::uint32_t u = static_cast<std::uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

/// Per-step CUDA events of rank 0 (forward/backward per micro-batch).
struct StepEvents {
  std::vector<kern::Event> fwd_start, fwd_end, bwd_end;
  kern::Event start, comm_end, opt_end;
  explicit StepEvents(Index micro) : fwd_start(micro), fwd_end(micro), bwd_end(micro) {}
};

/// --trace: a pair of CUDA events on the compute stream around every launch of one step,
/// summed by name. Gaps between an op's end and the next op's begin are GPU idle time (host
/// launch latency) or launches nobody bracketed; StepTrace reports them as step_s - traced_s.
class Tracer {
 public:
  [[nodiscard]] bool on() const { return on_; }
  void start(cudaStream_t s) {
    on_ = true;
    used_ = 0;
    ops_.clear();
    first_ = record(s);
  }
  void begin(cudaStream_t s) { begin_ = record(s); }
  void end(cudaStream_t s, std::string name, TraceCategory c) {
    ops_.push_back({begin_, record(s), std::move(name), c});
  }
  /// Records the last event, waits for it and sums the ops by name.
  StepTrace finish(cudaStream_t s) {
    const std::size_t last = record(s);
    on_ = false;
    CUDA_CHECK(cudaEventSynchronize(pool_[last].get()));
    StepTrace t;
    t.step_s = elapsed(first_, last);
    t.num_launches = static_cast<std::int64_t>(ops_.size());
    std::unordered_map<std::string, std::size_t> index;
    for (const Op& op : ops_) {
      const auto [it, fresh] = index.emplace(op.name, t.ops.size());
      if (fresh)
        t.ops.push_back({op.name, op.category, 0, 0.0});
      TraceEntry& e = t.ops[it->second];
      e.count += 1;
      const double d = elapsed(op.begin, op.end);
      e.total_s += d;
      t.traced_s += d;
    }
    return t;
  }

 private:
  struct Op {
    std::size_t begin = 0, end = 0; // indices into pool_
    std::string name;
    TraceCategory category = TraceCategory::other;
  };
  std::size_t record(cudaStream_t s) {
    if (used_ == pool_.size())
      pool_.emplace_back();
    CUDA_CHECK(cudaEventRecord(pool_[used_].get(), s));
    return used_++;
  }
  double elapsed(std::size_t a, std::size_t b) const {
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, pool_[a].get(), pool_[b].get()));
    return static_cast<double>(ms) * 1e-3;
  }
  bool on_ = false;
  std::vector<kern::Event> pool_; // reused by later traced steps
  std::size_t used_ = 0, first_ = 0, begin_ = 0;
  std::vector<Op> ops_;
};

/// Which part of the step a launch belongs to: the first word of its trace name.
enum class Pass { step, fwd, bwd, recompute, dp_comm, optimizer };
std::string_view to_string(Pass p) {
  switch (p) {
  case Pass::step: return "step";
  case Pass::fwd: return "fwd";
  case Pass::bwd: return "bwd";
  case Pass::recompute: return "recompute";
  case Pass::dp_comm: return "dp_comm";
  case Pass::optimizer: return "optimizer";
  }
  return "?";
}

struct Shared; // cross-thread state

/// Activations of one transformer block for one micro-batch (owned by the allocator).
struct LayerActs {
  void *h = nullptr, *qkv_split = nullptr, *o = nullptr, *scores = nullptr, *att = nullptr,
       *x2 = nullptr, *h2 = nullptr, *ab = nullptr, *g = nullptr;
  float *rstd1 = nullptr, *rstd2 = nullptr, *lse = nullptr;
};

using Bucket = GradBucket;

class Rank {
 public:
  Rank(const TrainOptions& o, int rank, int device, void* nccl_comm);
  ~Rank();
  Rank(const Rank&) = delete;
  Rank& operator=(const Rank&) = delete;

  /// One optimizer step on `micro` micro-batches of host tokens; returns the summed loss
  /// (sum over micro-batches of the micro-batch mean loss). Events recorded when given; with
  /// `trace`, every launch on the compute stream is timed into it.
  double step(Index step_index, StepEvents* ev, bool record_timeline, TrainResult* capture,
              StepTrace* trace = nullptr);
  void copy_owned(const void* src, bool fp32, bool is_shard, std::vector<float>& dst);
  void copy_master(std::vector<float>& dst);
  [[nodiscard]] CachingAllocator& allocator() { return alloc_; }

 private:
  // ---- building blocks ----
  /// Runs `launch` (kernels on s_); when tracing, brackets it with events under the name
  /// "<pass> <op>" (recompute's category overrides c). Otherwise one bool check.
  template <class Launch> void traced(std::string_view op, TraceCategory c, Launch&& launch) {
    if (!tracer_.on()) {
      launch();
      return;
    }
    tracer_.begin(s_);
    launch();
    tracer_.end(s_, fmt::format("{} {}", to_string(pass_), op),
                pass_ == Pass::recompute ? TraceCategory::recompute : c);
  }
  // `what` names the GEMM's role in the trace ("qkv", "qkv dW"); the layout is appended.
  void gemm(std::string_view what, bool ta, bool tb, Index m, Index n, Index k, const void* a,
            const void* b, void* c, float beta, float alpha = 1.0f);
  void gemm_batched(std::string_view what, bool ta, bool tb, Index m, Index n, Index k,
                    const void* a, Index sa, const void* b, Index sb, void* c, Index sc,
                    Index count, float alpha);
  void* w(const ParamTensor& t) const { return byte_offset(weights_, t.offset); }
  void* gr(const ParamTensor& t) const { return byte_offset(grads_, t.offset); }
  void* byte_offset(void* p, Index elems) const {
    return static_cast<char*>(p) + elems * static_cast<Index>(esz_);
  }
  void* act(Index elems) {
    return alloc_.alloc(static_cast<std::size_t>(elems) * esz_, MemCategory::activations);
  }
  float* actf(Index elems) {
    return alloc_.alloc_as<float>(static_cast<std::size_t>(elems), MemCategory::activations);
  }
  void* wsp(Index elems) {
    return alloc_.alloc(static_cast<std::size_t>(elems) * esz_, MemCategory::workspace);
  }
  void add_inplace(std::string_view what, void* dst, const void* src, Index n);
  void rmsnorm(std::string_view what, const void* x, const ParamTensor& g, void* y, float* rstd);
  void rmsnorm_backward(std::string_view what, const void* x, const ParamTensor& g, const void* dy,
                        const float* rstd, void* dres);

  void layer_forward(Index l, const void* x, LayerActs& a, void* x_out, bool keep_all);
  void attention_core_forward(LayerActs& a);
  void free_layer(LayerActs& a, bool keep_for_backward);
  void layer_backward(Index l, const void* x, LayerActs& a, void* dres, bool last_micro);
  void grad_ready(std::size_t tensor, bool last_micro);
  void sync_after_backward();
  void optimizer_step(Index t);

  const TrainOptions& o_;
  int rank_ = 0, device_ = 0;
  PL L_;
  Dtype dt_;
  std::size_t esz_ = 4;
  Index n_tokens_ = 0, padded_ = 0, shard_ = 0, dp_ = 1;
  CachingAllocator alloc_;
  cudaStream_t s_ = nullptr, comm_s_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  void* nccl_ = nullptr; // ncclComm_t
  void *weights_ = nullptr, *grads_ = nullptr;
  float *master_ = nullptr, *m_ = nullptr, *v_ = nullptr; // master: full, shard, or weights
  float* emb_scratch_ = nullptr;
  std::int32_t *tokens_ = nullptr, *targets_ = nullptr;
  float* losses_ = nullptr;
  std::vector<Bucket> buckets_;
  std::size_t next_bucket_ = 0;
  std::vector<kern::Event> bucket_events_;
  std::vector<kern::Event> comm_done_; // one event, created once the rank's device is set
  std::vector<void*> layer_inputs_;    // per layer input x (saved), plus the final x
  Tracer tracer_;
  Pass pass_ = Pass::step;
};

Rank::Rank(const TrainOptions& o, int rank, int device, void* nccl_comm)
    : o_(o), rank_(rank), device_(device), L_(make_layout(o.model, o.model.name)),
      dt_(model::compute_dtype(o.precision)), esz_(static_cast<std::size_t>(dtype_bytes(dt_))),
      dp_(o.num_gpus), nccl_(nccl_comm) {
  CUDA_CHECK(cudaSetDevice(device_));
  CUDA_CHECK(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking));
  CUDA_CHECK(cudaStreamCreateWithFlags(&comm_s_, cudaStreamNonBlocking));
  CUBLAS_CHECK(cublasCreate(&cublas_));
  CUBLAS_CHECK(cublasSetStream(cublas_, s_));
  n_tokens_ = o.batch_size * o.seq_len;
  const Index align = 16 * dp_;
  padded_ = (L_.num_padded_params + align - 1) / align * align;
  shard_ = padded_ / dp_;
  const bool zero = o.zero_stage == 1, mixed = dt_ != Dtype::fp32;
  const auto P = static_cast<std::size_t>(padded_), S = static_cast<std::size_t>(shard_);

  // Parameters: initialise a full fp32 copy (identical on every rank: same seed).
  weights_ = alloc_.alloc(P * esz_, MemCategory::weights);
  float* full =
      mixed ? alloc_.alloc_as<float>(P, MemCategory::workspace) : static_cast<float*>(weights_);
  kern::FillRandomArgs fr;
  fr.dtype = Dtype::fp32;
  fr.out = full;
  fr.num_elements = padded_;
  fr.seed = o.seed;
  fr.lo = static_cast<float>(-0.02 * std::sqrt(3.0));
  fr.hi = -fr.lo;
  kern::launch_fill_random(fr, s_);
  for (const ParamTensor& t : L_.tensors)
    if (t.is_norm)
      launch_fill({full + t.offset, t.num_elements(), 1.0f}, s_);
  if (mixed) {
    launch_cast({dt_, full, weights_, padded_, false}, s_);
    master_ = alloc_.alloc_as<float>(zero ? S : P, MemCategory::optimizer);
    CUDA_CHECK(cudaMemcpyAsync(master_, full + (zero ? rank_ * shard_ : 0),
                               (zero ? S : P) * sizeof(float), cudaMemcpyDeviceToDevice, s_));
    CUDA_CHECK(cudaStreamSynchronize(s_));
    alloc_.free(full);
  } else {
    master_ = full; // fp32: the weights are the master copy (ZeRO-1 updates its shard of it)
  }
  m_ = alloc_.alloc_as<float>(zero ? S : P, MemCategory::optimizer);
  v_ = alloc_.alloc_as<float>(zero ? S : P, MemCategory::optimizer);
  CUDA_CHECK(cudaMemsetAsync(m_, 0, (zero ? S : P) * sizeof(float), s_));
  CUDA_CHECK(cudaMemsetAsync(v_, 0, (zero ? S : P) * sizeof(float), s_));
  grads_ = alloc_.alloc(P * esz_, MemCategory::gradients);
  emb_scratch_ = alloc_.alloc_as<float>(static_cast<std::size_t>(L_.embedding().num_elements()),
                                        MemCategory::workspace);
  const auto tok = static_cast<std::size_t>(n_tokens_ * o.grad_accumulation);
  tokens_ = alloc_.alloc_as<std::int32_t>(tok, MemCategory::workspace);
  targets_ = alloc_.alloc_as<std::int32_t>(tok, MemCategory::workspace);
  losses_ = alloc_.alloc_as<float>(tok, MemCategory::workspace);

  // Buckets in the order gradients become final (reverse of the layout).
  buckets_ = make_grad_buckets(L_, o.ddp, o.bucket_bytes, esz_);
  bucket_events_ = std::vector<kern::Event>(buckets_.size());
  comm_done_ = std::vector<kern::Event>(1);
  CUDA_CHECK(cudaStreamSynchronize(s_));
}

Rank::~Rank() {
  if (cublas_)
    static_cast<void>(cublasDestroy(cublas_));
  if (s_)
    CUDA_CHECK_NOTHROW(cudaStreamDestroy(s_));
  if (comm_s_)
    CUDA_CHECK_NOTHROW(cudaStreamDestroy(comm_s_));
}

cudaDataType_t cuda_type(Dtype d) { return d == Dtype::fp32 ? CUDA_R_32F : CUDA_R_16BF; }

// Row-major C[m, n] = alpha op(A)[m, k] op(B)[k, n] + beta C, as the column-major product
// C^T = op(B)^T op(A)^T (same memory, same transpose flags, operands swapped).
// In the trace: forward GEMMs are NT (x W^T), weight gradients TN (dy^T x), input gradients NN.
void Rank::gemm(std::string_view what, bool ta, bool tb, Index m, Index n, Index k, const void* a,
                const void* b, void* c, float beta, float alpha) {
  const auto t = cuda_type(dt_);
  auto launch = [&] {
    CUBLAS_CHECK(
        cublasGemmEx(cublas_, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N,
                     static_cast<int>(n), static_cast<int>(m), static_cast<int>(k), &alpha, b, t,
                     static_cast<int>(tb ? k : n), a, t, static_cast<int>(ta ? m : k), &beta, c, t,
                     static_cast<int>(n), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  };
  if (!tracer_.on())
    return launch();
  const TraceCategory cat = pass_ != Pass::bwd ? TraceCategory::gemm_fwd
                            : ta               ? TraceCategory::gemm_bwd_dw
                                               : TraceCategory::gemm_bwd_dx;
  traced(fmt::format("gemm {} ({}{})", what, ta ? 'T' : 'N', tb ? 'T' : 'N'), cat, launch);
}

// Naive attention's batched GEMMs: counted as attention in the trace.
void Rank::gemm_batched(std::string_view what, bool ta, bool tb, Index m, Index n, Index k,
                        const void* a, Index sa, const void* b, Index sb, void* c, Index sc,
                        Index count, float alpha) {
  const auto t = cuda_type(dt_);
  const float beta = 0.0f;
  auto launch = [&] {
    CUBLAS_CHECK(cublasGemmStridedBatchedEx(
        cublas_, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N,
        static_cast<int>(n), static_cast<int>(m), static_cast<int>(k), &alpha, b, t,
        static_cast<int>(tb ? k : n), sb, a, t, static_cast<int>(ta ? m : k), sa, &beta, c, t,
        static_cast<int>(n), sc, static_cast<int>(count), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  };
  if (!tracer_.on())
    return launch();
  traced(fmt::format("gemm {} (batched {}{})", what, ta ? 'T' : 'N', tb ? 'T' : 'N'),
         pass_ == Pass::bwd ? TraceCategory::attention_bwd : TraceCategory::attention_fwd, launch);
}

void Rank::add_inplace(std::string_view what, void* dst, const void* src, Index n) {
  kern::ElementwiseArgs e;
  e.op = kern::ElementwiseOp::add;
  e.dtype = dt_;
  e.x = dst;
  e.y = src;
  e.out = dst;
  e.num_elements = n;
  traced(what, TraceCategory::elementwise, [&] { kern::launch_elementwise(e, s_); });
}

void Rank::rmsnorm(std::string_view what, const void* x, const ParamTensor& g, void* y,
                   float* rstd) {
  kern::RmsNormArgs a;
  a.dtype = dt_;
  a.x = x;
  a.gamma = w(g);
  a.y = y;
  a.rstd = rstd;
  a.rows = n_tokens_;
  a.cols = L_.hidden_size;
  a.eps = static_cast<float>(kRmsNormEps);
  traced(what, TraceCategory::norm, [&] { kern::launch_rmsnorm(a, s_); });
}

// dres += d/dx RMSNorm(x); the gain's gradient is accumulated into the flat gradient.
void Rank::rmsnorm_backward(std::string_view what, const void* x, const ParamTensor& g,
                            const void* dy, const float* rstd, void* dres) {
  void* tmp = wsp(n_tokens_ * L_.hidden_size);
  float* dgamma =
      alloc_.alloc_as<float>(static_cast<std::size_t>(L_.hidden_size), MemCategory::workspace);
  kern::RmsNormBackwardArgs a;
  a.dtype = dt_;
  a.x = x;
  a.gamma = w(g);
  a.dy = dy;
  a.rstd = rstd;
  a.dx = tmp;
  a.dgamma = dgamma;
  a.rows = n_tokens_;
  a.cols = L_.hidden_size;
  traced(what, TraceCategory::norm, [&] { kern::launch_rmsnorm_backward(a, s_); });
  add_inplace("add norm dx to residual grad", dres, tmp, n_tokens_ * L_.hidden_size);
  traced("cast dgamma", TraceCategory::elementwise, [&] {
    launch_cast({dt_, dgamma, gr(g), L_.hidden_size, true}, s_);
  });
  alloc_.free(tmp);
  alloc_.free(dgamma);
}

void Rank::attention_core_forward(LayerActs& a) {
  const Index B = o_.batch_size, T = o_.seq_len, H = L_.num_heads, D = L_.head_dim;
  const Index hd = B * H * T * D;
  void *q = a.qkv_split, *k = byte_offset(a.qkv_split, hd), *v = byte_offset(a.qkv_split, 2 * hd);
  if (!a.o)
    a.o = act(hd);
  if (o_.attention == model::AttentionImpl::flash) {
    if (!a.lse)
      a.lse = actf(B * H * T);
    kern::AttentionArgs f;
    f.dtype = dt_;
    f.q = q;
    f.k = k;
    f.v = v;
    f.o = a.o;
    f.lse = a.lse;
    f.batch = B;
    f.heads = H;
    f.seq_len = T;
    f.head_dim = D;
    f.causal = true;
    traced("flash attention", TraceCategory::attention_fwd,
           [&] { kern::launch_flash_attention(f, s_); });
    return;
  }
  // naive: S = scale Q K^T, P = softmax(S) (causal, in place), O = P V
  if (!a.scores)
    a.scores = act(B * H * T * T);
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  gemm_batched("scores S = Q K^T", false, true, T, T, D, q, T * D, k, T * D, a.scores, T * T, B * H,
               scale);
  kern::SoftmaxArgs sm;
  sm.dtype = dt_;
  sm.x = a.scores;
  sm.y = a.scores;
  sm.rows = B * H * T;
  sm.cols = T;
  sm.causal = true;
  traced("softmax", TraceCategory::attention_fwd, [&] { kern::launch_softmax(sm, s_); });
  gemm_batched("O = P V", false, false, T, D, T, a.scores, T * T, v, T * D, a.o, T * D, B * H,
               1.0f);
}

void Rank::layer_forward(Index l, const void* x, LayerActs& a, void* x_out, bool keep_all) {
  const Index N = n_tokens_, C = L_.hidden_size, F = L_.ffn_hidden_size, B = o_.batch_size,
              T = o_.seq_len, H = L_.num_heads, D = L_.head_dim;
  a.h = act(N * C);
  a.rstd1 = actf(N);
  rmsnorm("rmsnorm ln1", x, L_.layer(l, PL::kLn1), a.h, a.rstd1);
  void* qkv = act(N * 3 * C);
  gemm("qkv", false, true, N, 3 * C, C, a.h, w(L_.layer(l, PL::kWqkv)), qkv, 0.0f);
  a.qkv_split = act(3 * N * C);
  RopeArgs r;
  r.dtype = dt_;
  r.qkv = qkv;
  r.q = a.qkv_split;
  r.k = byte_offset(a.qkv_split, N * C);
  r.v = byte_offset(a.qkv_split, 2 * N * C);
  r.batch = B;
  r.seq_len = T;
  r.heads = H;
  r.head_dim = D;
  r.theta = static_cast<float>(kRopeTheta);
  traced("rope+split", TraceCategory::elementwise, [&] { launch_rope_split(r, s_); });
  alloc_.free(qkv);
  attention_core_forward(a);
  a.att = act(N * C);
  traced("permute heads->tokens", TraceCategory::elementwise, [&] {
    launch_permute({dt_, a.o, a.att, B, T, H, D, true}, s_);
  });
  a.x2 = act(N * C);
  gemm("attn out", false, true, N, C, C, a.att, w(L_.layer(l, PL::kWo)), a.x2, 0.0f);
  add_inplace("add residual", a.x2, x, N * C);
  a.h2 = act(N * C);
  a.rstd2 = actf(N);
  rmsnorm("rmsnorm ln2", a.x2, L_.layer(l, PL::kLn2), a.h2, a.rstd2);
  a.ab = act(N * 2 * F);
  gemm("mlp up w13", false, true, N, 2 * F, C, a.h2, w(L_.layer(l, PL::kW13)), a.ab, 0.0f);
  a.g = act(N * F);
  traced("swiglu", TraceCategory::elementwise, [&] { launch_swiglu({dt_, a.ab, a.g, N, F}, s_); });
  gemm("mlp down w2", false, true, N, C, F, a.g, w(L_.layer(l, PL::kW2)), x_out, 0.0f);
  add_inplace("add residual", x_out, a.x2, N * C);
  free_layer(a, keep_all);
}

// After a forward: drop what the recompute policy does not keep (keep_for_backward: the
// backward is about to run on these activations, keep everything it needs).
void Rank::free_layer(LayerActs& a, bool keep_for_backward) {
  auto drop = [&](auto*& p) {
    alloc_.free(p);
    p = nullptr;
  };
  const bool naive = o_.attention == model::AttentionImpl::naive;
  if (naive && a.o)
    drop(a.o); // naive backward needs P, not O
  if (keep_for_backward || o_.recompute == model::Recompute::none)
    return;
  if (o_.recompute == model::Recompute::selective) {
    if (a.scores)
      drop(a.scores);
    if (a.o)
      drop(a.o);
    if (a.lse)
      drop(a.lse);
    return;
  }
  for (void** p : {&a.h, &a.qkv_split, &a.o, &a.scores, &a.att, &a.x2, &a.h2, &a.ab, &a.g})
    if (*p)
      drop(*p);
  for (float** p : {&a.rstd1, &a.rstd2, &a.lse})
    if (*p)
      drop(*p);
}

void Rank::layer_backward(Index l, const void* x, LayerActs& a, void* dres, bool last) {
  const Index N = n_tokens_, C = L_.hidden_size, F = L_.ffn_hidden_size, B = o_.batch_size,
              T = o_.seq_len, H = L_.num_heads, D = L_.head_dim;
  const std::size_t base = 1 + static_cast<std::size_t>(l) * PL::kPerLayer;
  pass_ = Pass::recompute;
  if (o_.recompute == model::Recompute::full) {
    void* x_out = wsp(N * C);
    layer_forward(l, x, a, x_out, true);
    alloc_.free(x_out);
  } else if (o_.recompute == model::Recompute::selective) {
    attention_core_forward(a);
  }
  pass_ = Pass::bwd;
  // FFN: x3 = x2 + W2 swiglu(W13 h2)
  void* dg = wsp(N * F);
  gemm("mlp down w2 dW", true, false, C, F, N, dres, a.g, gr(L_.layer(l, PL::kW2)), 1.0f);
  grad_ready(base + PL::kW2, last);
  gemm("mlp down w2 dX", false, false, N, F, C, dres, w(L_.layer(l, PL::kW2)), dg, 0.0f);
  void* dab = wsp(N * 2 * F);
  traced("swiglu", TraceCategory::elementwise, [&] {
    launch_swiglu_backward({dt_, a.ab, dg, dab, N, F}, s_);
  });
  alloc_.free(dg);
  gemm("mlp up w13 dW", true, false, 2 * F, C, N, dab, a.h2, gr(L_.layer(l, PL::kW13)), 1.0f);
  grad_ready(base + PL::kW13, last);
  void* dh = wsp(N * C);
  gemm("mlp up w13 dX", false, false, N, C, 2 * F, dab, w(L_.layer(l, PL::kW13)), dh, 0.0f);
  alloc_.free(dab);
  rmsnorm_backward("rmsnorm ln2", a.x2, L_.layer(l, PL::kLn2), dh, a.rstd2, dres);
  grad_ready(base + PL::kLn2, last);
  // attention: x2 = x + Wo attn(rope(Wqkv h))
  gemm("attn out dW", true, false, C, C, N, dres, a.att, gr(L_.layer(l, PL::kWo)), 1.0f);
  grad_ready(base + PL::kWo, last);
  void* datt = wsp(N * C);
  gemm("attn out dX", false, false, N, C, C, dres, w(L_.layer(l, PL::kWo)), datt, 0.0f);
  void* dout = wsp(N * C);
  traced("permute tokens->heads", TraceCategory::elementwise, [&] {
    launch_permute({dt_, datt, dout, B, T, H, D, false}, s_);
  });
  alloc_.free(datt);
  const Index hd = N * C;
  void* dsplit = wsp(3 * hd);
  void *dq = dsplit, *dk = byte_offset(dsplit, hd), *dv = byte_offset(dsplit, 2 * hd);
  const void *q = a.qkv_split, *k = byte_offset(a.qkv_split, hd),
             *v = byte_offset(a.qkv_split, 2 * hd);
  if (o_.attention == model::AttentionImpl::flash) {
    float* dq_accum = alloc_.alloc_as<float>(static_cast<std::size_t>(hd), MemCategory::workspace);
    float* delta =
        alloc_.alloc_as<float>(static_cast<std::size_t>(B * H * T), MemCategory::workspace);
    kern::AttentionBackwardArgs f;
    f.dtype = dt_;
    f.q = q;
    f.k = k;
    f.v = v;
    f.o = a.o;
    f.dout = dout;
    f.lse = a.lse;
    f.dq = dq;
    f.dk = dk;
    f.dv = dv;
    f.dq_accum = dq_accum;
    f.delta = delta;
    f.batch = B;
    f.heads = H;
    f.seq_len = T;
    f.head_dim = D;
    f.causal = true;
    traced("flash attention", TraceCategory::attention_bwd,
           [&] { kern::launch_flash_attention_backward(f, s_); });
    alloc_.free(dq_accum);
    alloc_.free(delta);
  } else {
    const float scale = 1.0f / std::sqrt(static_cast<float>(D));
    void *dp = wsp(B * H * T * T), *ds = wsp(B * H * T * T);
    gemm_batched("dV = P^T dO", true, false, T, D, T, a.scores, T * T, dout, T * D, dv, T * D,
                 B * H, 1.0f);
    gemm_batched("dP = dO V^T", false, true, T, T, D, dout, T * D, v, T * D, dp, T * T, B * H,
                 1.0f);
    kern::SoftmaxBackwardArgs sb;
    sb.dtype = dt_;
    sb.y = a.scores;
    sb.dy = dp;
    sb.dx = ds;
    sb.rows = B * H * T;
    sb.cols = T;
    traced("softmax", TraceCategory::attention_bwd, [&] { kern::launch_softmax_backward(sb, s_); });
    alloc_.free(dp);
    gemm_batched("dQ = dS K", false, false, T, D, T, ds, T * T, k, T * D, dq, T * D, B * H, scale);
    gemm_batched("dK = dS^T Q", true, false, T, D, T, ds, T * T, q, T * D, dk, T * D, B * H, scale);
    alloc_.free(ds);
  }
  alloc_.free(dout);
  void* dqkv = wsp(3 * N * C);
  RopeBackwardArgs rb;
  rb.dtype = dt_;
  rb.dq = dq;
  rb.dk = dk;
  rb.dv = dv;
  rb.dqkv = dqkv;
  rb.batch = B;
  rb.seq_len = T;
  rb.heads = H;
  rb.head_dim = D;
  rb.theta = static_cast<float>(kRopeTheta);
  traced("rope+split", TraceCategory::elementwise, [&] { launch_rope_split_backward(rb, s_); });
  alloc_.free(dsplit);
  gemm("qkv dW", true, false, 3 * C, C, N, dqkv, a.h, gr(L_.layer(l, PL::kWqkv)), 1.0f);
  grad_ready(base + PL::kWqkv, last);
  gemm("qkv dX", false, false, N, C, 3 * C, dqkv, w(L_.layer(l, PL::kWqkv)), dh, 0.0f);
  alloc_.free(dqkv);
  rmsnorm_backward("rmsnorm ln1", x, L_.layer(l, PL::kLn1), dh, a.rstd1, dres);
  grad_ready(base + PL::kLn1, last);
  alloc_.free(dh);
  // This layer's activations are consumed.
  auto drop = [&](auto*& p) {
    if (p)
      alloc_.free(p);
    p = nullptr;
  };
  for (void** p : {&a.h, &a.qkv_split, &a.o, &a.scores, &a.att, &a.x2, &a.h2, &a.ab, &a.g})
    drop(*p);
  for (float** p : {&a.rstd1, &a.rstd2, &a.lse})
    drop(*p);
}

void Rank::grad_ready(std::size_t tensor, bool last) {
  if (!last)
    return;
  if (o_.zero_stage != 0 || (o_.ddp != DdpMode::overlapped && o_.ddp != DdpMode::bucketed))
    return;
#ifdef TRAINSIM_HAVE_NCCL
  while (next_bucket_ < buckets_.size() && buckets_[next_bucket_].first >= tensor) {
    const Bucket& b = buckets_[next_bucket_];
    kern::Event& e = bucket_events_[next_bucket_];
    CUDA_CHECK(cudaEventRecord(e.get(), s_));
    CUDA_CHECK(cudaStreamWaitEvent(comm_s_, e.get(), 0));
    NCCL_CHECK(ncclAllReduce(byte_offset(grads_, b.lo), byte_offset(grads_, b.lo),
                             static_cast<std::size_t>(b.hi - b.lo),
                             dt_ == Dtype::fp32 ? ncclFloat32 : ncclBfloat16, ncclSum,
                             static_cast<ncclComm_t>(nccl_), comm_s_));
    ++next_bucket_;
  }
#else
  static_cast<void>(tensor);
#endif
}

void Rank::sync_after_backward() {
#ifdef TRAINSIM_HAVE_NCCL
  const auto nt = dt_ == Dtype::fp32 ? ncclFloat32 : ncclBfloat16;
  auto comm = static_cast<ncclComm_t>(nccl_);
  const auto cat = TraceCategory::dp_comm;
  if (o_.zero_stage == 1) {
    traced("reduce-scatter gradients (ZeRO-1)", cat, [&] {
      NCCL_CHECK(ncclReduceScatter(grads_, byte_offset(grads_, rank_ * shard_),
                                   static_cast<std::size_t>(shard_), nt, ncclSum, comm, s_));
    });
    return;
  }
  switch (o_.ddp) {
  case DdpMode::none: return;
  case DdpMode::naive:
    for (const ParamTensor& t : L_.tensors)
      traced("all-reduce per tensor", cat, [&] {
        NCCL_CHECK(ncclAllReduce(gr(t), gr(t), static_cast<std::size_t>(t.num_elements()), nt,
                                 ncclSum, comm, s_));
      });
    return;
  case DdpMode::flat:
    traced("all-reduce flat", cat, [&] {
      NCCL_CHECK(
          ncclAllReduce(grads_, grads_, static_cast<std::size_t>(padded_), nt, ncclSum, comm, s_));
    });
    return;
  case DdpMode::overlapped:
  case DdpMode::bucketed:
    if (next_bucket_ != buckets_.size())
      throw std::logic_error("train: not every gradient bucket was launched");
    CUDA_CHECK(cudaEventRecord(comm_done_[0].get(), comm_s_));
    // The exposed part of the overlapped all-reduces (comm stream) on the compute stream.
    traced("wait for overlapped all-reduces", cat,
           [&] { CUDA_CHECK(cudaStreamWaitEvent(s_, comm_done_[0].get(), 0)); });
    return;
  }
#endif
}

void Rank::optimizer_step(Index t) {
  const bool zero = o_.zero_stage == 1, mixed = dt_ != Dtype::fp32;
  const Index off = zero ? rank_ * shard_ : 0;
  AdamWArgs a;
  a.dtype = dt_;
  a.master = zero && !mixed ? master_ + off : master_;
  a.grad = byte_offset(grads_, off);
  a.m = m_;
  a.v = v_;
  a.weight = mixed ? byte_offset(weights_, off) : nullptr;
  a.n = zero ? shard_ : padded_;
  a.lr = static_cast<float>(o_.adamw.lr);
  a.beta1 = static_cast<float>(o_.adamw.beta1);
  a.beta2 = static_cast<float>(o_.adamw.beta2);
  a.eps = static_cast<float>(o_.adamw.eps);
  a.weight_decay = static_cast<float>(o_.adamw.weight_decay);
  a.bias_correction1 = static_cast<float>(1 - std::pow(o_.adamw.beta1, static_cast<double>(t)));
  a.bias_correction2 = static_cast<float>(1 - std::pow(o_.adamw.beta2, static_cast<double>(t)));
  traced("adamw", TraceCategory::optimizer, [&] { launch_adamw(a, s_); });
#ifdef TRAINSIM_HAVE_NCCL
  // The simulator counts ZeRO-1's weight all-gather as dp_comm.
  if (zero)
    traced("all-gather weights (ZeRO-1)", TraceCategory::dp_comm, [&] {
      NCCL_CHECK(ncclAllGather(
          byte_offset(weights_, off), weights_, static_cast<std::size_t>(shard_),
          dt_ == Dtype::fp32 ? ncclFloat32 : ncclBfloat16, static_cast<ncclComm_t>(nccl_), s_));
    });
#endif
}

// Copies this rank's owned range [rank * shard, (rank + 1) * shard) of a full buffer (or of
// the master shard) into dst (host, fp32, length padded; other ranks fill the rest).
void Rank::copy_owned(const void* src, bool fp32, bool is_shard, std::vector<float>& dst) {
  CUDA_CHECK(cudaStreamSynchronize(s_));
  const Index off = rank_ * shard_;
  dst.resize(static_cast<std::size_t>(padded_));
  const void* from = is_shard ? src
                              : static_cast<const char*>(src) +
                                    off * static_cast<Index>(fp32 ? sizeof(float) : esz_);
  if (fp32) {
    CUDA_CHECK(cudaMemcpy(dst.data() + off, from, static_cast<std::size_t>(shard_) * sizeof(float),
                          cudaMemcpyDeviceToHost));
    return;
  }
  std::vector<std::uint16_t> tmp(static_cast<std::size_t>(shard_));
  CUDA_CHECK(cudaMemcpy(tmp.data(), from, tmp.size() * 2, cudaMemcpyDeviceToHost));
  for (std::size_t i = 0; i < tmp.size(); ++i)
    dst[static_cast<std::size_t>(off) + i] = bf16_to_float(tmp[i]);
}

// The fp32 master parameters: the master buffer (mixed; a shard under ZeRO-1) or the weights.
void Rank::copy_master(std::vector<float>& dst) {
  const bool mixed = dt_ != Dtype::fp32;
  copy_owned(mixed ? static_cast<const void*>(master_) : weights_, true,
             mixed && o_.zero_stage == 1, dst);
}

double Rank::step(Index t, StepEvents* ev, bool timeline, TrainResult* capture, StepTrace* trace) {
  CUDA_CHECK(cudaSetDevice(device_));
  const Index K = o_.grad_accumulation, N = n_tokens_, C = L_.hidden_size, V = L_.vocab_size;
  const bool mixed = dt_ != Dtype::fp32;
  // Data: micro-batch k of rank r holds global samples ((t K + k) dp + r) * batch + [0, batch).
  for (Index k = 0; k < K; ++k) {
    const TokenBatch b =
        synthetic_batch(o_.batch_size, o_.seq_len, L_.vocab_size, o_.seed,
                        ((t * K + k) * dp_ + rank_) * o_.batch_size, o_.data_period);
    CUDA_CHECK(cudaMemcpyAsync(tokens_ + k * N, b.inputs.data(), b.inputs.size() * 4,
                               cudaMemcpyHostToDevice, s_));
    CUDA_CHECK(cudaMemcpyAsync(targets_ + k * N, b.targets.data(), b.targets.size() * 4,
                               cudaMemcpyHostToDevice, s_));
  }
  CUDA_CHECK(cudaStreamSynchronize(s_));
  if (capture && t == 0 && o_.capture_params)
    copy_master(capture->initial_params);
  MemoryTracker& mt = alloc_.tracker();
  if (timeline)
    mt.start_timeline();
  if (ev)
    CUDA_CHECK(cudaEventRecord(ev->start.get(), s_));
  if (trace)
    tracer_.start(s_);
  pass_ = Pass::step;
  traced("zero gradients (memset)", TraceCategory::other, [&] {
    CUDA_CHECK(cudaMemsetAsync(grads_, 0, static_cast<std::size_t>(padded_) * esz_, s_));
  });
  next_bucket_ = 0;
  const float grad_scale = 1.0f / static_cast<float>(N * K * dp_);
  for (Index k = 0; k < K; ++k) {
    const bool last = k + 1 == K;
    // ---- forward ----
    mt.mark("forward");
    pass_ = Pass::fwd;
    if (ev)
      CUDA_CHECK(cudaEventRecord(ev->fwd_start[static_cast<std::size_t>(k)].get(), s_));
    std::vector<void*> xs(static_cast<std::size_t>(L_.num_layers + 1));
    std::vector<LayerActs> acts(static_cast<std::size_t>(L_.num_layers));
    xs[0] = act(N * C);
    traced("embedding", TraceCategory::embedding_loss, [&] {
      launch_embedding({dt_, tokens_ + k * N, w(L_.embedding()), xs[0], N, C}, s_);
    });
    for (Index l = 0; l < L_.num_layers; ++l) {
      xs[static_cast<std::size_t>(l + 1)] = act(N * C);
      layer_forward(l, xs[static_cast<std::size_t>(l)], acts[static_cast<std::size_t>(l)],
                    xs[static_cast<std::size_t>(l + 1)], false);
    }
    void* hf = act(N * C);
    float* rstdf = actf(N);
    void* x_last = xs.back();
    rmsnorm("rmsnorm final", x_last, L_.final_norm(), hf, rstdf);
    void* logits = act(N * V);
    gemm("lm head", false, true, N, V, C, hf, w(L_.lm_head()), logits, 0.0f);
    traced("cross-entropy (+ dlogits)", TraceCategory::embedding_loss, [&] {
      launch_cross_entropy({dt_, logits, targets_ + k * N, losses_ + k * N, N, V, grad_scale}, s_);
    });
    if (ev)
      CUDA_CHECK(cudaEventRecord(ev->fwd_end[static_cast<std::size_t>(k)].get(), s_));
    // ---- backward ----
    mt.mark("backward");
    pass_ = Pass::bwd;
    gemm("lm head dW", true, false, V, C, N, logits, hf, gr(L_.lm_head()), 1.0f);
    grad_ready(L_.tensors.size() - 1, last);
    void* dhf = wsp(N * C);
    gemm("lm head dX", false, false, N, C, V, logits, w(L_.lm_head()), dhf, 0.0f);
    alloc_.free(logits);
    void* dres = wsp(N * C);
    traced("zero residual grad (memset)", TraceCategory::other, [&] {
      CUDA_CHECK(cudaMemsetAsync(dres, 0, static_cast<std::size_t>(N * C) * esz_, s_));
    });
    rmsnorm_backward("rmsnorm final", x_last, L_.final_norm(), dhf, rstdf, dres);
    grad_ready(L_.tensors.size() - 2, last);
    alloc_.free(dhf);
    alloc_.free(hf);
    alloc_.free(rstdf);
    for (Index l = L_.num_layers - 1; l >= 0; --l) {
      alloc_.free(xs[static_cast<std::size_t>(l + 1)]);
      layer_backward(l, xs[static_cast<std::size_t>(l)], acts[static_cast<std::size_t>(l)], dres,
                     last);
    }
    alloc_.free(xs[0]);
    traced("embedding zero fp32 scratch (memset)", TraceCategory::embedding_loss, [&] {
      CUDA_CHECK(cudaMemsetAsync(emb_scratch_, 0,
                                 static_cast<std::size_t>(L_.embedding().num_elements()) * 4, s_));
    });
    traced("embedding scatter-add", TraceCategory::embedding_loss, [&] {
      launch_embedding_backward({dt_, tokens_ + k * N, dres, emb_scratch_, N, C}, s_);
    });
    traced("cast embedding grad", TraceCategory::elementwise, [&] {
      launch_cast({dt_, emb_scratch_, gr(L_.embedding()), L_.embedding().num_elements(), true}, s_);
    });
    grad_ready(0, last);
    alloc_.free(dres);
    if (ev)
      CUDA_CHECK(cudaEventRecord(ev->bwd_end[static_cast<std::size_t>(k)].get(), s_));
  }
  mt.mark("dp_comm");
  pass_ = Pass::dp_comm;
  sync_after_backward();
  if (ev)
    CUDA_CHECK(cudaEventRecord(ev->comm_end.get(), s_));
  if (capture && t == 0 && o_.capture_params)
    copy_owned(grads_, !mixed, false, capture->first_grads);
  mt.mark("optimizer");
  pass_ = Pass::optimizer;
  optimizer_step(t + 1);
  if (ev)
    CUDA_CHECK(cudaEventRecord(ev->opt_end.get(), s_));
  if (trace)
    *trace = tracer_.finish(s_);
  CUDA_CHECK(cudaStreamSynchronize(s_));
  if (timeline) {
    mt.mark("end");
    mt.stop_timeline();
  }
  std::vector<float> losses(static_cast<std::size_t>(N * K));
  CUDA_CHECK(cudaMemcpy(losses.data(), losses_, losses.size() * 4, cudaMemcpyDeviceToHost));
  double sum = 0;
  for (float x : losses)
    sum += x;
  if (capture && t + 1 == o_.warmup + o_.steps)
    copy_master(capture->final_params);
  return sum / static_cast<double>(N);
}

float elapsed_s(const kern::Event& a, const kern::Event& b) {
  float ms = 0;
  CUDA_CHECK(cudaEventElapsedTime(&ms, a.get(), b.get()));
  return ms * 1e-3f;
}

} // namespace

TrainResult run_train_step(const TrainOptions& o) {
  validate(o);
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0)
    throw DeviceError("train-step: no CUDA device is visible");
  if (o.num_gpus > count)
    throw DeviceError(fmt::format("train-step: --num-gpus = {} but {} CUDA devices are visible",
                                  o.num_gpus, count));
  const bool need_nccl = o.ddp != DdpMode::none || o.zero_stage != 0 || o.num_gpus > 1;
  std::vector<void*> comms(static_cast<std::size_t>(o.num_gpus), nullptr);
#ifdef TRAINSIM_HAVE_NCCL
  std::vector<ncclComm_t> nccl(static_cast<std::size_t>(o.num_gpus), nullptr);
  if (need_nccl) {
    setenv("NCCL_NVLS_ENABLE", "0", 0);
    std::vector<int> devs(static_cast<std::size_t>(o.num_gpus));
    for (int i = 0; i < static_cast<int>(o.num_gpus); ++i)
      devs[static_cast<std::size_t>(i)] = i;
    NCCL_CHECK(ncclCommInitAll(nccl.data(), static_cast<int>(o.num_gpus), devs.data()));
    for (std::size_t i = 0; i < nccl.size(); ++i)
      comms[i] = nccl[i];
  }
#else
  if (need_nccl)
    throw DeviceError("train-step: data parallelism / ZeRO needs NCCL: this build has none "
                      "(install libnccl-dev or set NCCL_HOME, then rebuild)");
#endif

  TrainResult res;
  res.num_gpus = o.num_gpus;
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  res.gpu_name = prop.name;
  int driver = 0, runtime = 0;
  CUDA_CHECK(cudaDriverGetVersion(&driver));
  CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
  res.versions = fmt::format("driver {}.{}, runtime {}.{}", driver / 1000, driver % 1000 / 10,
                             runtime / 1000, runtime % 1000 / 10);
#ifdef TRAINSIM_HAVE_NCCL
  int nccl_version = 0;
  if (ncclGetVersion(&nccl_version) == ncclSuccess)
    res.versions += fmt::format(", NCCL {}.{}.{}", nccl_version / 10000, nccl_version % 10000 / 100,
                                nccl_version % 100);
#endif
  const Index total = o.warmup + o.steps;
  std::vector<std::vector<double>> rank_losses(
      static_cast<std::size_t>(o.num_gpus), std::vector<double>(static_cast<std::size_t>(total)));
  std::vector<double> fwd, bwd, comm, opt, step;
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(o.num_gpus));
  std::vector<TrainResult> captures(static_cast<std::size_t>(o.num_gpus));

  std::atomic<int> first_failed{-1};
  [[maybe_unused]] std::atomic<bool> aborted{false};
  auto worker = [&](int r) {
    try {
      Rank rank(o, r, r, comms[static_cast<std::size_t>(r)]);
      if (r == 0)
        res.num_padded_params = make_layout(o.model, o.model.name).num_padded_params;
      StepEvents ev(o.grad_accumulation);
      TrainResult* cap =
          o.capture_params || o.capture_final ? &captures[static_cast<std::size_t>(r)] : nullptr;
      for (Index t = 0; t < total; ++t) {
        const bool measured = t >= o.warmup;
        const double loss = rank.step(t, r == 0 ? &ev : nullptr, r == 0 && t + 1 == total, cap);
        rank_losses[static_cast<std::size_t>(r)][static_cast<std::size_t>(t)] = loss;
        if (r != 0 || !measured)
          continue;
        double f = 0, b = 0;
        for (std::size_t k = 0; k < ev.fwd_start.size(); ++k) {
          f += elapsed_s(ev.fwd_start[k], ev.fwd_end[k]);
          b += elapsed_s(ev.fwd_end[k], ev.bwd_end[k]);
        }
        fwd.push_back(f);
        bwd.push_back(b);
        comm.push_back(elapsed_s(ev.bwd_end.back(), ev.comm_end));
        opt.push_back(elapsed_s(ev.comm_end, ev.opt_end));
        step.push_back(elapsed_s(ev.start, ev.opt_end));
      }
      if (r == 0) {
        const MemoryTracker& mt = rank.allocator().tracker();
        res.peak_bytes = mt.peak();
        res.at_peak_bytes = mt.at_peak_total();
        res.peak_total_bytes = mt.peak_total();
        res.timeline = mt.timeline();
        res.reserved_bytes = rank.allocator().reserved_bytes();
      }
      // --trace: one more step on every rank (collectives need them all), timed on rank 0
      // only, after the memory results and outside the measured statistics and losses.
      if (o.trace)
        rank.step(total, nullptr, false, nullptr, r == 0 ? &res.trace : nullptr);
    } catch (...) {
      errors[static_cast<std::size_t>(r)] = std::current_exception();
      int none = -1;
      first_failed.compare_exchange_strong(none, r);
#ifdef TRAINSIM_HAVE_NCCL
      // The other ranks would wait for this one forever: abort every communicator so their
      // collectives fail and their threads return (nccl-tests' habit on errors).
      if (!aborted.exchange(true))
        release_communicators(nccl, true);
#endif
    }
  };
  std::vector<std::thread> threads;
  for (int r = 1; r < static_cast<int>(o.num_gpus); ++r)
    threads.emplace_back(worker, r);
  worker(0);
  for (auto& th : threads)
    th.join();
#ifdef TRAINSIM_HAVE_NCCL
  if (!aborted)
    release_communicators(nccl, false);
#endif
  if (first_failed >= 0)
    std::rethrow_exception(errors[static_cast<std::size_t>(first_failed.load())]);
  for (auto& e : errors)
    if (e)
      std::rethrow_exception(e);

  res.losses.assign(static_cast<std::size_t>(total), 0.0);
  for (const auto& rl : rank_losses)
    for (std::size_t t = 0; t < rl.size(); ++t)
      res.losses[t] += rl[t] / static_cast<double>(o.num_gpus * o.grad_accumulation);
  res.forward = phase_stats(fwd);
  res.backward = phase_stats(bwd);
  res.dp_comm = phase_stats(comm);
  res.optimizer = phase_stats(opt);
  res.step = phase_stats(step);
  if (o.capture_params || o.capture_final) {
    // Each rank filled its owned range; merge them (rank 0's vector becomes the whole).
    auto merge = [&](std::vector<float> TrainResult::*field) {
      std::vector<float> out = std::move(captures[0].*field);
      if (out.empty())
        return out;
      const std::size_t shard = out.size() / static_cast<std::size_t>(o.num_gpus);
      for (std::size_t r = 1; r < captures.size(); ++r)
        std::copy_n((captures[r].*field).begin() + static_cast<std::ptrdiff_t>(r * shard), shard,
                    out.begin() + static_cast<std::ptrdiff_t>(r * shard));
      return out;
    };
    res.initial_params = merge(&TrainResult::initial_params);
    res.first_grads = merge(&TrainResult::first_grads);
    res.final_params = merge(&TrainResult::final_params);
  }
  return res;
}

} // namespace trainsim::val::train
