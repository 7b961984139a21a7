// GPU tests (ctest label "gpu"): every kernel on small, odd shapes through the benchmark cases,
// each checked against the float64 reference with poisoned outputs. Exits 77 (ctest SKIP)
// with a message when no CUDA device is visible.
#define DOCTEST_CONFIG_IMPLEMENT
#include <cuda_runtime.h>
#include <doctest/doctest.h>

#include <cstdio>

#include "common/errors.hpp"
#include "validate/bench/bench.hpp"

using namespace trainsim;
using namespace trainsim::val;

namespace {

Measurement run_one(const KernelShape& s) {
  BenchOptions o;
  o.cases = {s};
  o.warmup = 0;
  o.min_samples = 2;
  o.timeout_s = 0.01;
  auto r = run_kernel_benchmarks(o, {});
  return r.at(0);
}

void expect_pass(const KernelShape& s) {
  const Measurement m = run_one(s);
  INFO(m.name << ": " << m.check_note);
  CHECK(m.checked);
  CHECK(m.check_passed);
  CHECK(m.median_s > 0);
}

} // namespace

TEST_CASE("gemm: every dtype, odd shapes, cuBLASLt and cublasGemmEx") {
  for (Dtype d : {Dtype::fp32, Dtype::tf32, Dtype::fp16, Dtype::bf16})
    for (GemmImpl impl : {GemmImpl::cublaslt, GemmImpl::cublas}) {
      KernelShape s;
      s.op = BenchOp::gemm;
      s.dtype = d;
      s.m = 67;
      s.n = 48;
      s.k = 136;
      s.gemm_impl = impl;
      expect_pass(s);
    }
}

namespace {

/// cuBLASLt's e4m3 GEMMs need Ada (sm_89) or Hopper (sm_90) and later.
bool has_fp8() {
  const DeviceInfo d = query_device(0);
  return d.compute_capability_major * 10 + d.compute_capability_minor >= 89;
}

KernelShape fp8_gemm(std::int64_t m, std::int64_t n, std::int64_t k) {
  KernelShape s;
  s.op = BenchOp::gemm;
  s.dtype = Dtype::fp8;
  s.m = m;
  s.n = n;
  s.k = k;
  return s;
}

} // namespace

TEST_CASE("gemm fp8 (e4m3 in, bf16 out, B stored [n, k]) through cuBLASLt") {
  if (!has_fp8()) {
    MESSAGE("SKIP: fp8 GEMM needs compute capability 8.9 or later");
    return;
  }
  expect_pass(fp8_gemm(128, 256, 64));
  expect_pass(fp8_gemm(48, 80, 96)); // odd tile counts, every dimension a multiple of 16
  expect_pass(fp8_gemm(16, 16, 16));
}

TEST_CASE("gemm fp8: shapes not a multiple of 16 and cublasGemmEx are ConfigErrors") {
  if (!has_fp8()) { // older devices refuse every fp8 case with a clear message instead
    CHECK_THROWS_WITH_AS(static_cast<void>(run_one(fp8_gemm(64, 64, 64))),
                         doctest::Contains("compute capability 8.9"), ConfigError);
    return;
  }
  CHECK_THROWS_WITH_AS(static_cast<void>(run_one(fp8_gemm(40, 64, 64))),
                       doctest::Contains("must all be multiples of 16"), ConfigError);
  CHECK_THROWS_WITH_AS(static_cast<void>(run_one(fp8_gemm(64, 64, 72))),
                       doctest::Contains("k = 72"), ConfigError);
  KernelShape s = fp8_gemm(64, 64, 64);
  s.gemm_impl = GemmImpl::cublas;
  CHECK_THROWS_WITH_AS(static_cast<void>(run_one(s)), doctest::Contains("only through cuBLASLt"),
                       ConfigError);
}

TEST_CASE("element-wise ops with a tail and every float dtype") {
  for (BenchOp op : {BenchOp::relu, BenchOp::gelu, BenchOp::add, BenchOp::scale, BenchOp::copy})
    for (Dtype d : {Dtype::fp32, Dtype::fp16, Dtype::bf16}) {
      KernelShape s;
      s.op = op;
      s.dtype = d;
      s.num_elements = 100003;
      expect_pass(s);
    }
}

TEST_CASE("softmax, layernorm, rmsnorm forward and backward") {
  for (BenchOp op : {BenchOp::softmax, BenchOp::layernorm, BenchOp::rmsnorm})
    for (bool bwd : {false, true})
      for (Dtype d : {Dtype::fp32, Dtype::bf16})
        for (std::int64_t cols : {1000, 4096, 77, 8192, 20000}) {
          KernelShape s;
          s.op = op;
          s.dtype = d;
          s.rows = 96;
          s.cols = cols;
          s.backward = bwd;
          expect_pass(s);
        }
}

TEST_CASE("flash attention forward and backward; naive forward") {
  for (Dtype d : {Dtype::bf16, Dtype::fp16})
    for (std::int64_t hd : {std::int64_t{64}, std::int64_t{128}})
      for (bool causal : {false, true})
        for (bool bwd : {false, true}) {
          KernelShape s;
          s.op = BenchOp::attention;
          s.dtype = d;
          s.batch_size = 2;
          s.num_heads = 3;
          s.seq_len = 200; // not a multiple of the 64-row tile
          s.head_dim = hd;
          s.causal = causal;
          s.backward = bwd;
          expect_pass(s);
          if (!bwd) {
            s.block_m = 64;
            expect_pass(s);
          }
        }
  for (bool causal : {false, true}) {
    KernelShape s;
    s.op = BenchOp::attention;
    s.impl = AttentionImpl::naive;
    s.batch_size = 1;
    s.num_heads = 2;
    s.seq_len = 256;
    s.head_dim = 128;
    s.causal = causal;
    expect_pass(s);
  }
}

TEST_CASE("empty kernel runs and is timed") {
  KernelShape s;
  s.op = BenchOp::empty;
  const Measurement m = run_one(s);
  CHECK(m.median_s > 0);
  CHECK_FALSE(m.checked);
}

int main(int argc, char** argv) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::printf("SKIP: no CUDA device visible; GPU tests skipped\n");
    return 77;
  }
  doctest::Context ctx(argc, argv);
  return ctx.run();
}
