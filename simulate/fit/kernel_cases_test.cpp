// Tests of the flop and byte counts (kernel_cases.hpp), golden numbers computed by hand.
#include <doctest/doctest.h>

#include "common/errors.hpp"
#include "simulate/fit/kernel_cases.hpp"

using namespace trainsim;
using namespace trainsim::fitting;

TEST_CASE("gemm work: 2mnk flops, A + B read, C written") {
  KernelShape s;
  s.op = BenchOp::gemm;
  s.dtype = Dtype::bf16;
  s.m = 4096;
  s.n = 4096;
  s.k = 4096;
  const KernelWork w = kernel_work(s);
  CHECK(w.flops == 2.0 * 4096 * 4096 * 4096);   // 137,438,953,472
  CHECK(w.bytes_read == 2.0 * 2 * 4096 * 4096); // two bf16 [4096, 4096] = 67,108,864
  CHECK(w.bytes_written == 2.0 * 4096 * 4096);  // 33,554,432
  CHECK(case_name(s) == "gemm.cublaslt.bf16.m4096.n4096.k4096");
}

TEST_CASE("fp8 gemm work: 1-byte A and B read, 2-byte (bf16) C written") {
  KernelShape s;
  s.op = BenchOp::gemm;
  s.dtype = Dtype::fp8;
  s.m = 8192;
  s.n = 4096;
  s.k = 1024;
  const KernelWork w = kernel_work(s);
  CHECK(w.flops == 2.0 * 8192 * 4096 * 1024);           // 68,719,476,736
  CHECK(w.bytes_read == 8192.0 * 1024 + 4096.0 * 1024); // A + B = 12,582,912
  CHECK(w.bytes_written == 2.0 * 8192 * 4096);          // bf16 C = 67,108,864
  CHECK(gemm_output_dtype(Dtype::fp8) == Dtype::bf16);
  CHECK(gemm_output_dtype(Dtype::fp16) == Dtype::fp16);
  CHECK(case_name(s) == "gemm.cublaslt.fp8.m8192.n4096.k1024");
  const auto ops = kernel_ops(s); // the simulator times it at the fp8 peak
  REQUIRE(ops.size() == 1);
  CHECK(ops[0].op.dtype == Dtype::fp8);
  CHECK(ops[0].op.fwd_bytes == w.bytes_read + w.bytes_written);
}

TEST_CASE("relu on 2^28 bf16: reads 512 MiB, writes 512 MiB, intensity 0.25 flop/byte") {
  KernelShape s;
  s.op = BenchOp::relu;
  s.dtype = Dtype::bf16;
  s.num_elements = 1LL << 28;
  const KernelWork w = kernel_work(s);
  CHECK(w.bytes_read == 536870912.0);
  CHECK(w.bytes_written == 536870912.0);
  CHECK(w.flops / (w.bytes_read + w.bytes_written) == doctest::Approx(0.25));
  s.op = BenchOp::add;
  CHECK(kernel_work(s).bytes_read == 2.0 * 536870912.0);
}

TEST_CASE("attention work: FlashAttention-2 convention") {
  KernelShape s;
  s.op = BenchOp::attention;
  s.dtype = Dtype::bf16;
  s.batch_size = 2;
  s.num_heads = 16;
  s.seq_len = 4096;
  s.head_dim = 128;
  // 4 * 2 * 16 * 4096^2 * 128 = 2^2 * 2^5 * 2^24 * 2^7 = 2^38 = 274,877,906,944 flops
  CHECK(kernel_work(s).flops == 274877906944.0);
  s.causal = true;
  CHECK(kernel_work(s).flops == 274877906944.0 / 2);
  s.backward = true;
  CHECK(kernel_work(s).flops == 2.5 * 274877906944.0 / 2);
  // q, k, v read: 3 * 2*16*4096*128 * 2 bytes = 100,663,296
  s.backward = false;
  CHECK(kernel_work(s).bytes_read == 100663296.0);
  s.impl = AttentionImpl::naive; // computes the full square even when causal
  // Two GEMMs (2^38) plus the softmax's 5 flops per score: 5 * 2 * 16 * 4096^2 = 2,684,354,560.
  CHECK(kernel_work(s).flops == 274877906944.0 + 2684354560.0);
  CHECK(case_name(s) == "attention.naive.fwd.bf16.b2.h16.s4096.d128.causal");
}

TEST_CASE("norm work: the activation read and written (gamma and statistics not counted)") {
  KernelShape s;
  s.op = BenchOp::layernorm;
  s.dtype = Dtype::bf16;
  s.rows = 10;
  s.cols = 100;
  const KernelWork w = kernel_work(s);
  CHECK(w.bytes_read == 10 * 100 * 2);    // x = 2,000 (gamma, beta: 400 more, not counted)
  CHECK(w.bytes_written == 10 * 100 * 2); // y = 2,000 (fp32 mean, rstd: 80 more, not counted)
  s.backward = true;
  const KernelWork b = kernel_work(s);
  CHECK(b.bytes_read == 2 * 10 * 100 * 2); // x and dy
  CHECK(b.bytes_written == 10 * 100 * 2);  // dx
}
