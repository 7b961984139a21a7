// overlap_probe: how much an NCCL all-reduce running on its own stream slows the compute beside
// it, and how much the compute slows the all-reduce. Overlapped data-parallel gradient sync
// (DDP's buckets) is not free: NCCL's kernels occupy SMs and move bytes through HBM while the
// backward pass runs. The step model needs the two rates this program measures:
//   r_compute = compute throughput while an all-reduce runs / alone
//   r_comm    = all-reduce throughput while compute runs / alone
// for compute-bound work (bf16 GEMM 8192^3 through cublasGemmEx, as validate/train issues them)
// and memory-bound work (a 1 GiB device-to-device copy), with one thread per local GPU and one
// NCCL communicator each (as validate/train runs data parallel). Each rate is measured with the
// other stream kept busy for the whole measured interval (its batch is made ~2x longer). Two
// scenarios: "large" (8192^3 GEMMs, 1 GiB all-reduces: the steady state) and "step_like"
// (cs336-xl's 2048 x 12800 x 1600 GEMM, 25 MiB all-reduces: what a DDP backward overlaps).
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
#include <fmt/format.h>
#include <nccl.h>

#include "common/errors.hpp"
#include "kernels/check.hpp"
#include "kernels/device.hpp"
#include "kernels/elementwise.cuh"
#include "kernels/gemm.cuh"
#include "validate/nccl_check.hpp"

namespace {

using namespace trainsim;

struct Result {
  double gemm_alone_us = 0, gemm_under_comm_us = 0, comm_alone_us = 0, comm_under_gemm_us = 0;
  double copy_alone_us = 0, copy_under_comm_us = 0, comm_under_copy_us = 0;
};

// A scenario: the compute kernels and the all-reduce calls that run beside each other.
struct Scenario {
  const char* name;
  std::int64_t m, n, k;     // bf16 GEMM [m,k] x [k,n]
  std::size_t comm_bytes;   // buffer all-reduced per call (bf16)
  std::size_t copy_bytes;   // device-to-device copy per call
  int gemms, comms, copies; // calls per measured batch
};
// large: the steady state (big kernels, one 1 GiB all-reduce); step_like: cs336-xl's shapes at
// batch 4 x 512 (2048 tokens; the fused SwiGLU up-projection 2048 x 12800 x 1600), gradients in
// 25 MiB buckets (PyTorch DDP's default), an activation-sized copy.
constexpr Scenario kLarge{"large", 8192, 8192, 8192, std::size_t{1} << 30, std::size_t{1} << 30,
                          10,      5,    10};
constexpr Scenario kStepLike{"step_like",           2048, 12800, 1600, std::size_t{25} << 20,
                             std::size_t{26} << 20, 200,  100,   200};

float elapsed_us(cudaEvent_t a, cudaEvent_t b) {
  float ms = 0;
  CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
  return ms * 1e3f;
}

void rank_main(int dev, ncclComm_t comm, std::barrier<>& sync, std::vector<int>& counts,
               const Scenario& sc, Result& out) {
  CUDA_CHECK(cudaSetDevice(dev));
  kern::Stream compute, comm_stream;
  kern::CublasHandle cublas;
  kern::DeviceBuffer a(sc.m * sc.k * 2), b(sc.k * sc.n * 2), c(sc.m * sc.n * 2);
  kern::DeviceBuffer grad(sc.comm_bytes), src(sc.copy_bytes), dst(sc.copy_bytes);
  for (auto* buf : {&a, &b}) { // random data: a GEMM of zeros draws less power and runs faster
    kern::FillRandomArgs f;
    f.dtype = Dtype::bf16;
    f.out = buf->get();
    f.num_elements = buf == &a ? sc.m * sc.k : sc.k * sc.n;
    f.seed = static_cast<std::uint64_t>(buf == &a ? 1 + dev : 100 + dev);
    f.lo = -1;
    f.hi = 1;
    kern::launch_fill_random(f, compute.get());
  }
  CUDA_CHECK(cudaMemset(grad.get(), 0, sc.comm_bytes));
  CUDA_CHECK(cudaMemset(src.get(), 0, sc.copy_bytes));
  kern::GemmArgs g;
  g.dtype = Dtype::bf16;
  g.m = sc.m;
  g.n = sc.n;
  g.k = sc.k;
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
      CUDA_CHECK(cudaMemcpyAsync(dst.get(), src.get(), sc.copy_bytes, cudaMemcpyDeviceToDevice,
                                 compute.get()));
  };
  auto allreduce = [&](int n) {
    for (int i = 0; i < n; ++i)
      NCCL_CHECK(ncclAllReduce(grad.get(), grad.get(), sc.comm_bytes / 2, ncclBfloat16, ncclSum,
                               comm, comm_stream.get()));
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
  const int n_gemm = sc.gemms, n_comm = sc.comms, n_copy = sc.copies;
  out.gemm_alone_us = run(gemm, n_gemm, compute.get(), none, 0, comm_stream.get()).first;
  out.comm_alone_us = run(allreduce, n_comm, comm_stream.get(), none, 0, compute.get()).first;
  out.copy_alone_us = run(copy, n_copy, compute.get(), none, 0, comm_stream.get()).first;
  // Enough of the other side to cover twice the measured batch, measured at its solo speed.
  // Every rank must issue the same number of all-reduces: each proposes a count from its own
  // timings and all use the largest (shared through `counts`, between two barriers).
  auto cover = [&](double measured_total_us, double other_each_us) {
    counts[static_cast<std::size_t>(dev)] =
        std::max(2, static_cast<int>(2.0 * measured_total_us / other_each_us) + 1);
    sync.arrive_and_wait();
    const int c = *std::max_element(counts.begin(), counts.end());
    sync.arrive_and_wait();
    return c;
  };
  out.gemm_under_comm_us =
      run(gemm, n_gemm, compute.get(), allreduce,
          cover(n_gemm * out.gemm_alone_us, out.comm_alone_us), comm_stream.get())
          .first;
  out.comm_under_gemm_us = run(allreduce, n_comm, comm_stream.get(), gemm,
                               cover(n_comm * out.comm_alone_us, out.gemm_alone_us), compute.get())
                               .first;
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
    NCCL_CHECK(ncclCommInitAll(comms.data(), n, devs.data()));
    int nccl_version = 0;
    NCCL_CHECK(ncclGetVersion(&nccl_version));
    cudaDeviceProp prop{};
    CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    std::string json = fmt::format("{{\"device\": \"{}\", \"num_gpus\": {}, \"nccl_version\": {}",
                                   prop.name, n, nccl_version);
    for (const Scenario* sc : {&kLarge, &kStepLike}) {
      std::vector<Result> results(static_cast<std::size_t>(n));
      std::vector<std::exception_ptr> errors(static_cast<std::size_t>(n));
      std::barrier<> sync(n);
      std::vector<int> counts(static_cast<std::size_t>(n), 0);
      std::vector<std::thread> threads;
      for (int r = 0; r < n; ++r)
        threads.emplace_back([&, r] {
          try {
            rank_main(r, comms[static_cast<std::size_t>(r)], sync, counts, *sc,
                      results[static_cast<std::size_t>(r)]);
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
      const Result& r = results[0];
      const double r_gemm = r.gemm_alone_us / r.gemm_under_comm_us;
      const double r_comm_g = r.comm_alone_us / r.comm_under_gemm_us;
      const double r_copy = r.copy_alone_us / r.copy_under_comm_us;
      const double r_comm_c = r.comm_alone_us / r.comm_under_copy_us;
      std::printf("overlap_probe %s: %d GPU(s), NCCL %d, all-reduce %zu MiB bf16, GEMM bf16 "
                  "%ldx%ldx%ld, copy %zu MiB (rank 0, us per call)\n",
                  sc->name, n, nccl_version, sc->comm_bytes >> 20, static_cast<long>(sc->m),
                  static_cast<long>(sc->n), static_cast<long>(sc->k), sc->copy_bytes >> 20);
      std::printf("  gemm alone %.1f, under all-reduce %.1f: compute rate %.3f\n", r.gemm_alone_us,
                  r.gemm_under_comm_us, r_gemm);
      std::printf("  all-reduce alone %.1f, under gemm %.1f: comm rate %.3f\n", r.comm_alone_us,
                  r.comm_under_gemm_us, r_comm_g);
      std::printf("  copy alone %.1f, under all-reduce %.1f: copy rate %.3f\n", r.copy_alone_us,
                  r.copy_under_comm_us, r_copy);
      std::printf("  all-reduce under copy %.1f: comm rate %.3f\n", r.comm_under_copy_us, r_comm_c);
      const std::string body = fmt::format(
          "\"comm_bytes\": {}, \"gemm_m\": {}, \"gemm_n\": {}, \"gemm_k\": {}, \"copy_bytes\": {}, "
          "\"gemm_alone_us\": {:.3f}, \"gemm_under_comm_us\": {:.3f}, \"comm_alone_us\": {:.3f}, "
          "\"comm_under_gemm_us\": {:.3f}, \"copy_alone_us\": {:.3f}, \"copy_under_comm_us\": "
          "{:.3f}, \"comm_under_copy_us\": {:.3f}, \"compute_rate_gemm\": {:.4f}, "
          "\"comm_rate_gemm\": {:.4f}, \"compute_rate_copy\": {:.4f}, \"comm_rate_copy\": {:.4f}",
          sc->comm_bytes, sc->m, sc->n, sc->k, sc->copy_bytes, r.gemm_alone_us,
          r.gemm_under_comm_us, r.comm_alone_us, r.comm_under_gemm_us, r.copy_alone_us,
          r.copy_under_comm_us, r.comm_under_copy_us, r_gemm, r_comm_g, r_copy, r_comm_c);
      // The large scenario's rates stay at the top level (the first format of this file).
      json += sc == &kLarge ? ",\n " + body : fmt::format(",\n \"{}\": {{{}}}", sc->name, body);
    }
    json += "}\n";
    trainsim::val::release_communicators(comms, false);
    if (argc > 1) {
      FILE* f = std::fopen(argv[1], "w");
      if (!f) {
        std::printf("overlap_probe: cannot write %s\n", argv[1]);
        return 1;
      }
      std::fputs(json.c_str(), f);
      std::fclose(f);
    }
    return 0;
  } catch (const std::exception& e) {
    std::printf("overlap_probe: error: %s\n", e.what());
    return 1;
  }
}
