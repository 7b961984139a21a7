// norm_bwd_probe: where the time of a short-row LayerNorm/RMSNorm backward goes. The kernel
// benchmark times one launch per sample (event, launch, event): when nothing is queued ahead,
// the host side of the launch is inside that interval. This probe times each shape three ways:
//   single  - one launch between two events, synchronised each sample (the benchmark's way);
//   queued  - 20 launches between two events, per launch (host work overlaps the GPU's);
//   host    - wall-clock time of the launch call itself on the host.
// If single >> queued, the host side dominates the benchmark's figure; if single ~ queued, the
// kernel itself is slow at that shape. Shapes: the training step's 2048 x 1600, the calibration
// and held-out suites' short rows, and the perf suite's 65536 x 4096; bf16.
//
// Build: cmake --build build --target norm_bwd_probe ; run: build/kernels/norm_bwd_probe
// Exit 0 after printing, 1 on a CUDA error, 77 without a GPU. Not built by default or in CI.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "common/stats.hpp"
#include "kernels/check.hpp"
#include "kernels/device.hpp"
#include "kernels/elementwise.cuh"
#include "kernels/layernorm.cuh"
#include "kernels/rmsnorm.cuh"

namespace {

using namespace trainsim;
using kern::DeviceBuffer;

void fill(void* p, Dtype dt, std::int64_t n, float lo, float hi, std::uint64_t seed,
          cudaStream_t s) {
  kern::FillRandomArgs f;
  f.dtype = dt;
  f.out = p;
  f.num_elements = n;
  f.seed = seed;
  f.lo = lo;
  f.hi = hi;
  kern::launch_fill_random(f, s);
}

struct Timing {
  double single_us, queued_us, host_us;
};

template <class Launch> Timing time_three_ways(Launch&& launch, cudaStream_t s) {
  kern::Event e0, e1;
  for (int i = 0; i < 3; ++i)
    launch();
  CUDA_CHECK(cudaStreamSynchronize(s));
  std::vector<double> single, host;
  for (int i = 0; i < 30; ++i) {
    CUDA_CHECK(cudaEventRecord(e0.get(), s));
    const auto t0 = std::chrono::steady_clock::now();
    launch();
    const auto t1 = std::chrono::steady_clock::now();
    CUDA_CHECK(cudaEventRecord(e1.get(), s));
    CUDA_CHECK(cudaEventSynchronize(e1.get()));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, e0.get(), e1.get()));
    single.push_back(ms * 1e3);
    host.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  std::vector<double> queued;
  for (int rep = 0; rep < 5; ++rep) {
    CUDA_CHECK(cudaEventRecord(e0.get(), s));
    for (int i = 0; i < 20; ++i)
      launch();
    CUDA_CHECK(cudaEventRecord(e1.get(), s));
    CUDA_CHECK(cudaEventSynchronize(e1.get()));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, e0.get(), e1.get()));
    queued.push_back(ms * 1e3 / 20);
  }
  return {median(single), median(queued), median(host)};
}

} // namespace

int main() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::printf("norm_bwd_probe: no CUDA device found; skipping (exit 77)\n");
    return 77;
  }
  try {
    kern::Stream stream;
    cudaStream_t s = stream.get();
    // Device-to-device copy of 2^28 bf16 elements: the bandwidth ceiling (read + write bytes).
    const std::int64_t copy_n = std::int64_t{1} << 28;
    DeviceBuffer a(copy_n * 2), b(copy_n * 2);
    const Timing copy = time_three_ways(
        [&] { CUDA_CHECK(cudaMemcpyAsync(b.get(), a.get(), copy_n * 2, cudaMemcpyDefault, s)); },
        s);
    const double copy_gbs = 2.0 * copy_n * 2 / (copy.queued_us * 1e-6) / 1e9;
    std::printf("copy 2^28 bf16: %.1f us queued, %.0f GB/s\n", copy.queued_us, copy_gbs);
    std::printf("%-10s %6s %5s  %10s %10s %8s  %12s\n", "op", "rows", "cols", "single(us)",
                "queued(us)", "host(us)", "queued %copy");
    const std::int64_t shapes[][2] = {{2048, 1600}, {8192, 1024},  {12288, 2048},
                                      {6144, 5120}, {16384, 4096}, {65536, 4096}};
    std::uint64_t seed = 1;
    for (const auto& shape : shapes) {
      const std::int64_t rows = shape[0], cols = shape[1], n = rows * cols;
      DeviceBuffer x(n * 2), dy(n * 2), dx(n * 2), gamma(cols * 2), mean(rows * 4), rstd(rows * 4),
          dgamma(cols * 4), dbeta(cols * 4);
      fill(x.get(), Dtype::bf16, n, -2, 2, seed++, s);
      fill(dy.get(), Dtype::bf16, n, -1, 1, seed++, s);
      fill(gamma.get(), Dtype::bf16, cols, 0.5f, 1.5f, seed++, s);
      fill(mean.get(), Dtype::fp32, rows, -0.1f, 0.1f, seed++, s);
      fill(rstd.get(), Dtype::fp32, rows, 0.5f, 1.5f, seed++, s);
      for (bool rms : {true, false}) {
        auto launch = [&] {
          if (rms) {
            kern::RmsNormBackwardArgs r;
            r.x = x.get();
            r.gamma = gamma.get();
            r.dy = dy.get();
            r.rstd = rstd.as<float>();
            r.dx = dx.get();
            r.dgamma = dgamma.as<float>();
            r.rows = rows;
            r.cols = cols;
            kern::launch_rmsnorm_backward(r, s);
          } else {
            kern::LayerNormBackwardArgs l;
            l.x = x.get();
            l.gamma = gamma.get();
            l.dy = dy.get();
            l.mean = mean.as<float>();
            l.rstd = rstd.as<float>();
            l.dx = dx.get();
            l.dgamma = dgamma.as<float>();
            l.dbeta = dbeta.as<float>();
            l.rows = rows;
            l.cols = cols;
            kern::launch_layernorm_backward(l, s);
          }
        };
        const Timing t = time_three_ways(launch, s);
        const double gbs = 3.0 * n * 2 / (t.queued_us * 1e-6) / 1e9; // x, dy read; dx written
        std::printf("%-10s %6ld %5ld  %10.2f %10.2f %8.2f  %11.1f%%\n",
                    rms ? "rmsnorm" : "layernorm", static_cast<long>(rows), static_cast<long>(cols),
                    t.single_us, t.queued_us, t.host_us, 100.0 * gbs / copy_gbs);
      }
    }
    return 0;
  } catch (const std::exception& e) {
    std::printf("norm_bwd_probe: error: %s\n", e.what());
    return 1;
  }
}
