// Built instead of bench_gpu.cpp when trainsim is configured without CUDA: every GPU entry
// point fails with the same message, so `trainsim bench kernels` exists but explains itself.
#include "common/errors.hpp"
#include "validate/bench/bench.hpp"

namespace trainsim::val {

namespace {
[[noreturn]] void no_cuda() {
  throw DeviceError("built without CUDA; install the CUDA toolkit and rebuild");
}
} // namespace

DeviceInfo query_device(int) { no_cuda(); }

std::vector<Measurement> run_kernel_benchmarks(const BenchOptions&, const ProgressFn&) {
  no_cuda();
}

} // namespace trainsim::val
