// Stand-in for nccl_runner.cpp in builds without CUDA/NCCL: the command exists but fails.
#include "common/errors.hpp"
#include "validate/comm/collectives.hpp"

namespace trainsim::val {

bool built_with_nccl() { return false; }

CollectiveReport run_collectives(const CollectiveBenchOptions& options) {
  validate(options);
  throw DeviceError("built without CUDA/NCCL; install the CUDA toolkit and NCCL and rebuild");
}

} // namespace trainsim::val
