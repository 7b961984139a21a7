// overlap_probe: how much an NCCL all-reduce running on its own stream slows the compute beside
// it, and how much the compute slows the all-reduce. Overlapped data-parallel gradient sync
// (DDP's buckets) is not free: NCCL's kernels occupy SMs and move bytes through HBM while the
// backward pass runs. The step model needs the two rates this program measures:
//   r_compute = compute throughput while an all-reduce runs / alone
//   r_comm    = all-reduce throughput while compute runs / alone
// for compute-bound work (bf16 GEMM 8192^3 through cublasGemmEx, as validate/train issues them)
// and memory-bound work (a 1 GiB device-to-device copy), with one thread per local GPU and one
// NCCL communicator each (as validate/train runs data parallel). Each rate is measured with the
// other stream kept busy for the whole measured interval (its batch is made ~2x longer).
//
// Build: cmake --build build --target overlap_probe ; run: build/validate/comm/overlap_probe
// [FILE.json]. Uses every visible GPU (1 GPU: the all-reduce is a local copy, still a kernel).
// Exit 0 after printing, 1 on a CUDA/NCCL error, 77 without a GPU. Not built by default or in CI.
#include <algorithm>
#include <barrier>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <string>
#include <thread>
#include <vector>

#include <cuda_runtime.h>
#include <nccl.h>

#include "common/errors.hpp"
#include "kernels/check.hpp"
#include "kernels/device.hpp"
#include "kernels/elementwise.cuh"
#include "kernels/gemm.cuh"

#define PROBE_NCCL_CHECK(call)                                                                     \
  do {                                                                                             \
    ncclResult_t probe_rc_ = (call);                                                               \
    if (probe_rc_ != ncclSuccess)                                                                  \
      throw ::trainsim::DeviceError(std::string(#call) + " failed: " +                            \
                                    ncclGetErrorString(probe_rc_));                                \
  } while (0)

namespace {

using namespace trainsim;

struct Result {
  double gemm_alone_us = 0, gemm_under_comm_us = 0, comm_alone_us = 0, comm_under_gemm_us = 0;
  double copy_alone_us = 0, copy_under_comm_us = 0, comm_under_copy_us = 0;
};

constexpr std::int64_t kGemmN = 8192;
constexpr std::size_t kCommBytes = std::size_t{1} << 30; // 1 GiB of bf16 gradients
constexpr std::size_t kCopyBytes = std::size_t{1} << 30;

float elapsed_us(cudaEvent_t a, cudaEvent_t b) {
  float ms = 0;
  CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
  return ms * 1e3f;
}

void rank_main(int dev, ncclComm_t comm, std::barrier<>& sync, Result& out) {
  CUDA_CHECK(cudaSetDevice(dev));
  kern::Stream compute, comm_stream;
  kern::CublasHandle cublas;
  kern::DeviceBuffer a(kGemmN * kGemmN * 2), b(kGemmN * kGemmN * 2), c(kGemmN * kGemmN * 2);
  kern::DeviceBuffer grad(kCommBytes), src(kCopyBytes), dst(kCopyBytes);
  for (auto* buf : {&a, &b}) { // random data: a GEMM of zeros draws less power and runs faster
    kern::FillRandomArgs f;
    f.dtype = Dtype::bf16;
    f.out = buf->get();
    f.num_elements = kGemmN * kGemmN;
    f.seed = static_cast<std::uint64_t>(buf == &a ? 1 + dev : 100 + dev);
    f.lo = -1;
    f.hi = 1;
    kern::launch_fill_random(f, compute.get());
  }
  CUDA_CHECK(cudaMemset(grad.get(), 0, kCommBytes));
  CUDA_CHECK(cudaMemset(src.get(), 0, kCopyBytes));
  kern::GemmArgs g;
  g.dtype = Dtype::bf16;
  g.m = g.n = g.k = kGemmN;
  g.a = a.get();
  g.b = b.get();
  g.c = c.get();
  g.cublas = cublas.get();
  auto gemm = [&](int n) {
    for (int i = 0; i < n; ++i)
      kern::launch_gemm_cublas(g, compute.get());
  };
  auto copy = [&](int n) {
    for (int i = 0; i < n; ++i)
      CUDA_CHECK(cudaMemcpyAsync(dst.get(), src.get(), kCopyBytes, cudaMemcpyDeviceToDevice,
                                 compute.get()));
  };
  auto allreduce = [&](int n) {
    for (int i = 0; i < n; ++i)
      PROBE_NCCL_CHECK(ncclAllReduce(grad.get(), grad.get(), kCommBytes / 2, ncclBfloat16, ncclSum, comm,
                               comm_stream.get()));
  };
  kern::Event c0, c1, m0, m1;
  // Times `work` on `s` (events c0/c1) while `other` runs on `o` (events m0/m1); returns the
  // per-item time of each, after every rank has finished.
  auto run = [&](auto&& work, int n_work, cudaStream_t s, auto&& other, int n_other,
                 cudaStream_t o) {
    sync.arrive_and_wait();
    if (n_other > 0) {
      CUDA_CHECK(cudaEventRecord(m0.get(), o));
      other(n_other);
      CUDA_CHECK(cudaEventRecord(m1.get(), o));
    }
    CUDA_CHECK(cudaEventRecord(c0.get(), s));
    work(n_work);
    CUDA_CHECK(cudaEventRecord(c1.get(), s));
    CUDA_CHECK(cudaDeviceSynchronize());
    sync.arrive_and_wait();
    const double w = elapsed_us(c0.get(), c1.get()) / n_work;
    const double x = n_other > 0 ? elapsed_us(m0.get(), m1.get()) / n_other : 0.0;
    return std::pair{w, x};
  };
  auto none = [](int) {};
  // Warm-up (cuBLAS heuristics, NCCL connections).
  run(gemm, 3, compute.get(), none, 0, comm_stream.get());
  run(allreduce, 3, comm_stream.get(), none, 0, compute.get());
  run(copy, 3, compute.get(), none, 0, comm_stream.get());
  const int n_gemm = 10;
  out.gemm_alone_us = run(gemm, n_gemm, compute.get(), none, 0, comm_stream.get()).first;
  out.comm_alone_us = run(allreduce, 5, comm_stream.get(), none, 0, compute.get()).first;
  out.copy_alone_us = run(copy, 10, compute.get(), none, 0, comm_stream.get()).first;
  // Enough of the other side to cover twice the measured batch, measured at its solo speed.
  auto cover = [](double measured_total_us, double other_each_us) {
    return std::max(2, static_cast<int>(2.0 * measured_total_us / other_each_us) + 1);
  };
  out.gemm_under_comm_us =
      run(gemm, n_gemm, compute.get(), allreduce,
          cover(n_gemm * out.gemm_alone_us, out.comm_alone_us), comm_stream.get())
          .first;
  const int n_comm = 5;
  out.comm_under_gemm_us = run(allreduce, n_comm, comm_stream.get(), gemm,
                               cover(n_comm * out.comm_alone_us, out.gemm_alone_us), compute.get())
                               .first;
  const int n_copy = 10;
  out.copy_under_comm_us =
      run(copy, n_copy, compute.get(), allreduce,
          cover(n_copy * out.copy_alone_us, out.comm_alone_us), comm_stream.get())
          .first;
  out.comm_under_copy_us = run(allreduce, n_comm, comm_stream.get(), copy,
                               cover(n_comm * out.comm_alone_us, out.copy_alone_us), compute.get())
                               .first;
}

} // namespace

int main(int argc, char** argv) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    std::printf("overlap_probe: no CUDA device found; skipping (exit 77)\n");
    return 77;
  }
  try {
    std::vector<ncclComm_t> comms(static_cast<std::size_t>(n));
    std::vector<int> devs(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i)
      devs[static_cast<std::size_t>(i)] = i;
    PROBE_NCCL_CHECK(ncclCommInitAll(comms.data(), n, devs.data()));
    std::vector<Result> results(static_cast<std::size_t>(n));
    std::vector<std::exception_ptr> errors(static_cast<std::size_t>(n));
    std::barrier<> sync(n);
    std::vector<std::thread> threads;
    for (int r = 0; r < n; ++r)
      threads.emplace_back([&, r] {
        try {
          rank_main(r, comms[static_cast<std::size_t>(r)], sync, results[static_cast<std::size_t>(r)]);
        } catch (...) {
          errors[static_cast<std::size_t>(r)] = std::current_exception();
          sync.arrive_and_drop();
        }
      });
    for (auto& t : threads)
      t.join();
    for (auto& e : errors)
      if (e)
        std::rethrow_exception(e);
    for (ncclComm_t c : comms)
      static_cast<void>(ncclCommDestroy(c));
    int nccl_version = 0;
    PROBE_NCCL_CHECK(ncclGetVersion(&nccl_version));
    const Result& r = results[0];
    const double r_gemm = r.gemm_alone_us / r.gemm_under_comm_us;
    const double r_comm_g = r.comm_alone_us / r.comm_under_gemm_us;
    const double r_copy = r.copy_alone_us / r.copy_under_comm_us;
    const double r_comm_c = r.comm_alone_us / r.comm_under_copy_us;
    std::printf("overlap_probe: %d GPU(s), NCCL %d, all-reduce %zu MiB bf16, GEMM bf16 %ld^3, copy "
                "%zu MiB (rank 0, us per item)\n",
                n, nccl_version, kCommBytes >> 20, static_cast<long>(kGemmN), kCopyBytes >> 20);
    std::printf("  gemm alone %.1f, under all-reduce %.1f: compute rate %.3f\n", r.gemm_alone_us,
                r.gemm_under_comm_us, r_gemm);
    std::printf("  all-reduce alone %.1f, under gemm %.1f: comm rate %.3f\n", r.comm_alone_us,
                r.comm_under_gemm_us, r_comm_g);
    std::printf("  copy alone %.1f, under all-reduce %.1f: copy rate %.3f\n", r.copy_alone_us,
                r.copy_under_comm_us, r_copy);
    std::printf("  all-reduce under copy %.1f: comm rate %.3f\n", r.comm_under_copy_us, r_comm_c);
    if (argc > 1) {
      FILE* f = std::fopen(argv[1], "w");
      if (!f) {
        std::printf("overlap_probe: cannot write %s\n", argv[1]);
        return 1;
      }
      cudaDeviceProp prop{};
      CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
      std::fprintf(f,
                   "{\"device\": \"%s\", \"num_gpus\": %d, \"nccl_version\": %d, "
                   "\"comm_bytes\": %zu, \"gemm_n\": %ld, \"copy_bytes\": %zu,\n"
                   " \"gemm_alone_us\": %.3f, \"gemm_under_comm_us\": %.3f, "
                   "\"comm_alone_us\": %.3f, \"comm_under_gemm_us\": %.3f,\n"
                   " \"copy_alone_us\": %.3f, \"copy_under_comm_us\": %.3f, "
                   "\"comm_under_copy_us\": %.3f,\n"
                   " \"compute_rate_gemm\": %.4f, \"comm_rate_gemm\": %.4f, "
                   "\"compute_rate_copy\": %.4f, \"comm_rate_copy\": %.4f}\n",
                   prop.name, n, nccl_version, kCommBytes, static_cast<long>(kGemmN), kCopyBytes,
                   r.gemm_alone_us, r.gemm_under_comm_us, r.comm_alone_us, r.comm_under_gemm_us,
                   r.copy_alone_us, r.copy_under_comm_us, r.comm_under_copy_us, r_gemm, r_comm_g,
                   r_copy, r_comm_c);
      std::fclose(f);
    }
    return 0;
  } catch (const std::exception& e) {
    std::printf("overlap_probe: error: %s\n", e.what());
    return 1;
  }
}
