// The named case lists behind --suite (bench.hpp). calibration and held-out use different
// shapes so a profile fitted on one can be scored on the other; perf holds the targets of
// issue "validate I" (sizes large enough to be several times the 60 MB L2 of an H200);
// fp8-shapes and fp8-held-out time FP8 GEMMs at the shapes FP8 training runs (docs/kernels.md).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <array>

#include "common/errors.hpp"
#include "validate/bench/bench.hpp"

namespace trainsim::val {

namespace {

KernelShape gemm(Dtype d, std::int64_t m, std::int64_t n, std::int64_t k,
                 GemmImpl impl = GemmImpl::cublaslt) {
  KernelShape s;
  s.op = BenchOp::gemm;
  s.dtype = d;
  s.m = m;
  s.n = n;
  s.k = k;
  s.gemm_impl = impl;
  return s;
}
KernelShape elementwise(BenchOp op, Dtype d, std::int64_t n) {
  KernelShape s;
  s.op = op;
  s.dtype = d;
  s.num_elements = n;
  return s;
}
KernelShape rowop(BenchOp op, Dtype d, std::int64_t rows, std::int64_t cols, bool bwd) {
  KernelShape s;
  s.op = op;
  s.dtype = d;
  s.rows = rows;
  s.cols = cols;
  s.backward = bwd;
  return s;
}
KernelShape attention(Dtype d, std::int64_t b, std::int64_t h, std::int64_t seq, std::int64_t hd,
                      bool causal, bool bwd, AttentionImpl impl = AttentionImpl::flash) {
  KernelShape s;
  s.op = BenchOp::attention;
  s.dtype = d;
  s.batch_size = b;
  s.num_heads = h;
  s.seq_len = seq;
  s.head_dim = hd;
  s.causal = causal;
  s.backward = bwd;
  s.impl = impl;
  return s;
}

void add_common(std::vector<KernelShape>& v) {
  KernelShape e;
  e.op = BenchOp::empty;
  v.push_back(e);
  v.push_back(elementwise(BenchOp::copy, Dtype::bf16, 1LL << 28));
}

} // namespace

std::vector<KernelShape> suite_cases(std::string_view suite) {
  std::vector<KernelShape> v;
  constexpr Dtype bf16 = Dtype::bf16, fp16 = Dtype::fp16, fp32 = Dtype::fp32, tf32 = Dtype::tf32;
  if (suite == "perf") {
    add_common(v);
    v.push_back(elementwise(BenchOp::relu, bf16, 1LL << 28));
    v.push_back(elementwise(BenchOp::add, bf16, 1LL << 28));
    v.push_back(elementwise(BenchOp::gelu, bf16, 1LL << 28));
    v.push_back(elementwise(BenchOp::scale, bf16, 1LL << 28));
    for (BenchOp op : {BenchOp::softmax, BenchOp::layernorm, BenchOp::rmsnorm})
      for (bool bwd : {false, true})
        v.push_back(rowop(op, bf16, 65536, 4096, bwd));
    for (Dtype d : {bf16, fp16, tf32, fp32})
      for (GemmImpl impl : {GemmImpl::cublaslt, GemmImpl::cublas})
        v.push_back(gemm(d, 8192, 8192, 8192, impl));
    v.push_back(gemm(Dtype::fp8, 8192, 8192, 8192)); // e4m3 in, bf16 out; cuBLASLt only
    for (GemmImpl impl : {GemmImpl::cublaslt, GemmImpl::cublas})
      v.push_back(gemm(bf16, 16384, 1024, 4096, impl));
    for (bool bwd : {false, true})
      for (bool causal : {false, true})
        v.push_back(attention(bf16, 2, 16, 4096, 128, causal, bwd));
    v.push_back(attention(bf16, 2, 16, 4096, 64, false, false));
    for (bool causal : {false, true}) { // the one-m-tile-per-warp variant, for comparison
      KernelShape bm64 = attention(bf16, 2, 16, 4096, 128, causal, false);
      bm64.block_m = 64;
      v.push_back(bm64);
    }
    v.push_back(attention(fp16, 2, 16, 4096, 128, false, false));
    // Memory growth with sequence length: flash (linear) against naive (quadratic).
    for (std::int64_t seq : {1024, 2048, 4096, 8192}) {
      v.push_back(attention(bf16, 2, 16, seq, 128, true, false));
      v.push_back(attention(bf16, 2, 16, seq, 128, true, false, AttentionImpl::naive));
    }
    return v;
  }
  if (suite == "calibration") {
    add_common(v);
    for (Dtype d : {bf16, fp16, tf32, fp32})
      for (std::int64_t n : {512, 1024, 2048, 4096, 8192})
        v.push_back(gemm(d, n, n, n));
    // fp8 (e4m3 in, bf16 out; cuBLASLt's layout, multiples of 16): its peak fraction.
    for (std::int64_t n : {2048, 4096, 8192})
      v.push_back(gemm(Dtype::fp8, n, n, n));
    v.push_back(gemm(Dtype::fp8, 16384, 4096, 4096));
    for (Dtype d : {bf16, fp16})
      for (auto [m, n, k] : {std::array<std::int64_t, 3>{16384, 4096, 4096},
                             {4096, 16384, 4096},
                             {8192, 1024, 8192},
                             {32768, 256, 4096},
                             {128, 8192, 8192},
                             {8192, 8192, 512}})
        v.push_back(gemm(d, m, n, k));
    for (BenchOp op : {BenchOp::relu, BenchOp::gelu, BenchOp::add, BenchOp::scale})
      for (std::int64_t n : {1LL << 20, 1LL << 24, 1LL << 27})
        v.push_back(elementwise(op, bf16, n));
    v.push_back(elementwise(BenchOp::relu, fp32, 1LL << 26));
    v.push_back(elementwise(BenchOp::copy, bf16, 1LL << 24));
    for (BenchOp op : {BenchOp::softmax, BenchOp::layernorm, BenchOp::rmsnorm})
      for (bool bwd : {false, true})
        for (auto [r, c] : {std::array<std::int64_t, 2>{8192, 1024}, {16384, 4096}, {4096, 8192}})
          v.push_back(rowop(op, bf16, r, c, bwd));
    for (std::int64_t seq : {512, 1024, 2048, 4096})
      for (bool causal : {false, true}) {
        v.push_back(attention(bf16, 4, 16, seq, 128, causal, false));
        v.push_back(attention(bf16, 4, 16, seq, 128, causal, true));
      }
    for (std::int64_t seq : {1024, 4096})
      v.push_back(attention(bf16, 4, 32, seq, 64, false, false));
    for (std::int64_t seq : {1024, 2048}) {
      v.push_back(attention(bf16, 4, 16, seq, 128, false, false, AttentionImpl::naive));
    }
    return v;
  }
  if (suite == "held-out") {
    add_common(v);
    for (auto [m, n, k] : {std::array<std::int64_t, 3>{3072, 3072, 3072},
                           {6144, 6144, 6144},
                           {12288, 4096, 1024},
                           {4096, 11008, 4096},
                           {2048, 32000, 4096},
                           {1536, 1536, 1536}})
      for (Dtype d : {bf16, fp16})
        v.push_back(gemm(d, m, n, k));
    v.push_back(gemm(tf32, 3072, 3072, 3072));
    v.push_back(gemm(fp32, 3072, 3072, 3072));
    v.push_back(gemm(Dtype::fp8, 6144, 6144, 6144));
    v.push_back(gemm(Dtype::fp8, 4096, 11008, 4096));
    for (BenchOp op : {BenchOp::relu, BenchOp::gelu, BenchOp::add, BenchOp::scale})
      for (std::int64_t n : {3LL << 21, 3LL << 25})
        v.push_back(elementwise(op, bf16, n));
    for (BenchOp op : {BenchOp::softmax, BenchOp::layernorm, BenchOp::rmsnorm})
      for (bool bwd : {false, true})
        for (auto [r, c] : {std::array<std::int64_t, 2>{12288, 2048}, {6144, 5120}})
          v.push_back(rowop(op, bf16, r, c, bwd));
    for (std::int64_t seq : {768, 3072})
      for (bool causal : {false, true}) {
        v.push_back(attention(bf16, 2, 24, seq, 128, causal, false));
        v.push_back(attention(bf16, 2, 24, seq, 128, causal, true));
      }
    v.push_back(attention(fp16, 8, 12, 2048, 64, true, false));
    v.push_back(attention(bf16, 2, 24, 1536, 128, false, false, AttentionImpl::naive));
    return v;
  }
  if (suite == "fp8-shapes") {
    // FP8 GEMMs (cuBLASLt, e4m3 in, bf16 out) at the linear layers' shapes of FP8 training:
    // forward (tokens x out x in), data gradient (tokens x in x out) and weight gradient (out x
    // in x tokens). In list order the 1st, 3rd, ... case is a fit shape, the 2nd, 4th, ... a
    // test shape (docs/frameworks.md, "Fit/test split").
    for (auto [m, n, k] :
         {std::array<std::int64_t, 3>{2048, 1536, 2048}, // Qwen3 30B-A3B expert fc1, 2048 rows
          {2048, 2048, 768},                             // its fc2
          {8192, 1536, 2048},                            // fc1 at 8192 rows
          {2048, 2048, 1536},                            // fc1's data gradient
          {1536, 2048, 2048},                            // fc1's weight gradient
          {768, 2048, 8192},                             // fc2's weight gradient, 8192 rows
          {2048, 3072, 4096},                            // Qwen3 235B-A22B expert fc1
          {2048, 4096, 1536},                            // its fc2
          {4096, 5760, 2880},                            // GPT-OSS 120B expert fc1
          {4096, 2880, 2880},                            // its fc2
          {4096, 6144, 4096},                            // Llama 3 8B qkv, 4096 tokens
          {4096, 28672, 4096},                           // its fc1
          {4096, 4096, 14336},                           // its fc2
          {8192, 2560, 8192},                            // Llama 3 70B qkv at tp 4
          {8192, 8192, 2048},                            // its out projection at tp 4
          {8192, 14336, 8192},                           // its fc1 at tp 4
          {8192, 8192, 7168},                            // its fc2 at tp 4
          {1024, 1024, 1024},
          {3072, 3072, 3072},
          {12288, 12288, 12288}})
      v.push_back(gemm(Dtype::fp8, m, n, k));
    return v;
  }
  if (suite == "fp8-held-out") {
    // FP8 GEMMs of models and layouts no other suite has: the judge of the second FP8 trial
    // (docs/frameworks.md, "Fit/test split").
    for (auto [m, n, k] :
         {std::array<std::int64_t, 3>{2048, 28672, 4096}, // Mixtral 8x7B expert fc1
          {2048, 4096, 14336},                            // its fc2
          {2048, 4096, 7168},                             // DeepSeek-V3 expert fc1
          {2048, 7168, 2048},                             // its fc2
          {4096, 7168, 2048},                             // its fc1 weight gradient
          {8192, 2304, 16384},                            // Llama 3.1 405B qkv at tp 8
          {8192, 16384, 2048},                            // its out projection at tp 8
          {8192, 13312, 16384},                           // its fc1 at tp 8
          {8192, 16384, 6656},                            // its fc2 at tp 8
          {16384, 6656, 8192},                            // its fc2 data gradient
          {4096, 2880, 5760},                             // GPT-OSS 120B expert fc1 gradient
          {3072, 4096, 2048}})                            // Qwen3 235B-A22B expert fc1 wgrad
      v.push_back(gemm(Dtype::fp8, m, n, k));
    return v;
  }
  throw ConfigError(
      fmt::format("--suite {}: unknown suite ({})", suite, fmt::join(suite_names(), ", ")));
}

const std::vector<std::string>& suite_names() {
  static const std::vector<std::string> names{"calibration", "held-out", "perf", "fp8-shapes",
                                              "fp8-held-out"};
  return names;
}

} // namespace trainsim::val
