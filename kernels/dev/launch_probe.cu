// launch_probe: what one kernel launch costs inside a stream of back-to-back launches (a
// training step) rather than alone (the kernel benchmark, which brackets one launch with two
// events and synchronises). For each op it prints, in microseconds per launch:
//   single - one launch between two events, synchronised each sample (the benchmark's way);
//   queued - 200 launches between two events, divided by 200: the GPU-side cost per launch
//            when the host keeps the queue full (kernel body + the gap between kernels);
//   host   - wall-clock time of the launch call on the host (driver, cuBLAS heuristics cache,
//            our launcher's own host code), measured over the same 200 launches;
//   gpu    - 200 launches queued behind ~4 ms of GEMMs (so the host has issued them all before
//            the GPU reaches them), between an event after the GEMMs and one after the 200:
//            the GPU-side cost per launch with a full queue (kernel body + the GPU's gap).
// A step of many short kernels runs at max(sum of queued, sum of host) per launch, not at the
// sum of single: this program measures the two constants the step model needs (the empty
// kernel's queued cost is the GPU's launch gap; the host cost of a cuBLAS GEMM and of one of
// our kernels bound how fast a host thread can issue work). Ops: the empty kernel, bf16 GEMMs at
// the cs336-small shapes (tokens 2048 = batch 4 x 512) through cublasGemmEx (what
// validate/train uses) and cuBLASLt, and our add / RMSNorm at 2048 x 768.
//
// Build: cmake --build build --target launch_probe ; run: build/kernels/launch_probe [FILE.json]
// Exit 0 after printing (and writing FILE.json when given), 1 on a CUDA error, 77 without a GPU.
// Not built by default or in CI.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "common/stats.hpp"
#include "kernels/check.hpp"
#include "kernels/device.hpp"
#include "kernels/elementwise.cuh"
#include "kernels/gemm.cuh"
#include "kernels/rmsnorm.cuh"

namespace {

using namespace trainsim;
using kern::DeviceBuffer;

struct Timing {
  double single_us, queued_us, host_us, gpu_us;
};

constexpr int kQueued = 200;

// Set by main: ~4 ms of work that fills the stream while the host queues the measured launches.
std::function<void()> g_cover;

template <class Launch> Timing time_three_ways(Launch&& launch, cudaStream_t s) {
  kern::Event e0, e1;
  for (int i = 0; i < 10; ++i)
    launch();
  CUDA_CHECK(cudaStreamSynchronize(s));
  std::vector<double> single;
  for (int i = 0; i < 50; ++i) {
    CUDA_CHECK(cudaEventRecord(e0.get(), s));
    launch();
    CUDA_CHECK(cudaEventRecord(e1.get(), s));
    CUDA_CHECK(cudaEventSynchronize(e1.get()));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, e0.get(), e1.get()));
    single.push_back(ms * 1e3);
  }
  std::vector<double> queued, host;
  for (int rep = 0; rep < 7; ++rep) {
    CUDA_CHECK(cudaEventRecord(e0.get(), s));
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < kQueued; ++i)
      launch();
    const auto t1 = std::chrono::steady_clock::now();
    CUDA_CHECK(cudaEventRecord(e1.get(), s));
    CUDA_CHECK(cudaEventSynchronize(e1.get()));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, e0.get(), e1.get()));
    queued.push_back(ms * 1e3 / kQueued);
    host.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / kQueued);
  }
  std::vector<double> gpu;
  for (int rep = 0; rep < 7; ++rep) {
    g_cover();
    CUDA_CHECK(cudaEventRecord(e0.get(), s));
    for (int i = 0; i < kQueued; ++i)
      launch();
    CUDA_CHECK(cudaEventRecord(e1.get(), s));
    CUDA_CHECK(cudaEventSynchronize(e1.get()));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, e0.get(), e1.get()));
    gpu.push_back(ms * 1e3 / kQueued);
  }
  return {median(single), median(queued), median(host), median(gpu)};
}

} // namespace

int main(int argc, char** argv) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::printf("launch_probe: no CUDA device found; skipping (exit 77)\n");
    return 77;
  }
  try {
    kern::Stream stream;
    cudaStream_t s = stream.get();
    kern::CublasHandle cublas;
    kern::CublasLtHandle lt;
    CUBLAS_CHECK(cublasSetStream(cublas.get(), s));
    const std::size_t ws_bytes = 32u << 20;
    DeviceBuffer ws(ws_bytes);
    struct Row {
      std::string name;
      Timing t;
    };
    // The cover: three bf16 GEMMs of 8192^3 (~1.4 ms each on an H200).
    const std::int64_t big = 8192;
    DeviceBuffer ba(big * big * 2), bb(big * big * 2), bc(big * big * 2);
    CUDA_CHECK(cudaMemsetAsync(ba.get(), 0, big * big * 2, s));
    CUDA_CHECK(cudaMemsetAsync(bb.get(), 0, big * big * 2, s));
    kern::GemmArgs cover;
    cover.dtype = Dtype::bf16;
    cover.m = cover.n = cover.k = big;
    cover.a = ba.get();
    cover.b = bb.get();
    cover.c = bc.get();
    cover.cublas = cublas.get();
    g_cover = [&] {
      for (int i = 0; i < 3; ++i)
        kern::launch_gemm_cublas(cover, s);
    };
    std::vector<Row> rows;
    rows.push_back({"empty", time_three_ways([&] { kern::launch_empty(s); }, s)});

    const std::int64_t tokens = 2048, d = 768, ffn = 2048;
    DeviceBuffer a(tokens * ffn * 2), b(ffn * 3 * d * 2),
        c(tokens * 3 * d * 2); // largest shape: n = 3d
    CUDA_CHECK(cudaMemsetAsync(a.get(), 0, tokens * ffn * 2, s));
    CUDA_CHECK(cudaMemsetAsync(b.get(), 0, ffn * 3 * d * 2, s));
    const std::int64_t shapes[][3] = {{tokens, d, d}, {tokens, 3 * d, d}, {tokens, ffn, d}};
    for (const auto& sh : shapes) {
      kern::GemmArgs g;
      g.dtype = Dtype::bf16;
      g.m = sh[0];
      g.n = sh[1];
      g.k = sh[2];
      g.a = a.get();
      g.b = b.get();
      g.c = c.get();
      g.cublas = cublas.get();
      g.lt = lt.get();
      g.workspace = ws.get();
      g.workspace_bytes = ws_bytes;
      const std::string shape =
          std::to_string(g.m) + "x" + std::to_string(g.n) + "x" + std::to_string(g.k);
      rows.push_back({"gemm.cublas.bf16." + shape,
                      time_three_ways([&] { kern::launch_gemm_cublas(g, s); }, s)});
      rows.push_back(
          {"gemm.cublaslt.bf16." + shape, time_three_ways([&] { kern::launch_gemm(g, s); }, s)});
    }
    const std::int64_t n = tokens * d;
    DeviceBuffer x(n * 2), y(n * 2), out(n * 2), gamma(d * 2), rstd(tokens * 4);
    CUDA_CHECK(cudaMemsetAsync(x.get(), 0, n * 2, s));
    CUDA_CHECK(cudaMemsetAsync(y.get(), 0, n * 2, s));
    CUDA_CHECK(cudaMemsetAsync(gamma.get(), 0, d * 2, s));
    rows.push_back({"add.bf16.2048x768", time_three_ways(
                                             [&] {
                                               kern::ElementwiseArgs ea;
                                               ea.op = kern::ElementwiseOp::add;
                                               ea.dtype = Dtype::bf16;
                                               ea.x = x.get();
                                               ea.y = y.get();
                                               ea.out = out.get();
                                               ea.num_elements = n;
                                               kern::launch_elementwise(ea, s);
                                             },
                                             s)});
    rows.push_back({"rmsnorm.fwd.bf16.2048x768", time_three_ways(
                                                     [&] {
                                                       kern::RmsNormArgs r;
                                                       r.x = x.get();
                                                       r.gamma = gamma.get();
                                                       r.y = out.get();
                                                       r.rstd = rstd.as<float>();
                                                       r.rows = tokens;
                                                       r.cols = d;
                                                       kern::launch_rmsnorm(r, s);
                                                     },
                                                     s)});
    std::printf("%-34s %10s %10s %10s %10s\n", "op", "single(us)", "queued(us)", "host(us)",
                "gpu(us)");
    for (const Row& r : rows)
      std::printf("%-34s %10.2f %10.2f %10.2f %10.2f\n", r.name.c_str(), r.t.single_us,
                  r.t.queued_us, r.t.host_us, r.t.gpu_us);
    if (argc > 1) {
      FILE* f = std::fopen(argv[1], "w");
      if (!f) {
        std::printf("launch_probe: cannot write %s\n", argv[1]);
        return 1;
      }
      cudaDeviceProp prop{};
      CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
      std::fprintf(f, "{\n  \"device\": \"%s\",\n  \"queued_launches\": %d,\n  \"ops\": [\n",
                   prop.name, kQueued);
      for (std::size_t i = 0; i < rows.size(); ++i)
        std::fprintf(f,
                     "    {\"name\": \"%s\", \"single_us\": %.3f, \"queued_us\": %.3f, "
                     "\"host_us\": %.3f, \"gpu_us\": %.3f}%s\n",
                     rows[i].name.c_str(), rows[i].t.single_us, rows[i].t.queued_us,
                     rows[i].t.host_us, rows[i].t.gpu_us, i + 1 < rows.size() ? "," : "");
      std::fprintf(f, "  ]\n}\n");
      std::fclose(f);
    }
    return 0;
  } catch (const std::exception& e) {
    std::printf("launch_probe: error: %s\n", e.what());
    return 1;
  }
}
